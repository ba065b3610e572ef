"""``python -m conformance`` is the ``resumekit`` command."""

from resumekit.conformance.cli import main

raise SystemExit(main())
