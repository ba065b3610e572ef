"""A third contract that lives only in the tests: proof that the kit names no contract of its own."""
