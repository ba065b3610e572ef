"""resumekit: a conformance kit for crash-safe agent runtimes."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("resumekit")
except metadata.PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

PROTOCOL_VERSION = 1
SPEC_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "SPEC_VERSION", "__version__"]
