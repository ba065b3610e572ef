"""``python -m conformance`` is the ``resumekit`` command."""

from conformance.cli import main

raise SystemExit(main())
