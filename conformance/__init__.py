"""resumekit: a conformance kit for crash-safe agent runtimes."""

from __future__ import annotations

# The single source of the version: the build reads it from here, so no metadata scan at import time.
__version__ = "0.1.0"

PROTOCOL_VERSION = 1
SPEC_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "SPEC_VERSION", "__version__"]
