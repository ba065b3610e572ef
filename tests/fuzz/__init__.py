"""The kit under hostile input: mutated fixtures, misbehaving adapters and an abused reference store.

``python -m tests.fuzz`` runs the campaign (the ``fuzz`` nox session); the default tests replay a few
fast cases of each kind through the same code (``tests/test_fuzz.py``).
"""
