"""Find the kit's data, ``schemas/``, ``golden/`` and the spec, which the wheel carries inside the package."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str, variable: str) -> Path:
    override = os.environ.get(variable)
    if override:
        return Path(override)
    candidate = _PACKAGE / "_data" / name
    if candidate.is_dir():
        return candidate
    raise FileNotFoundError(
        f"resumekit cannot find its {name!r} directory (looked in {candidate}); "
        f"reinstall resumekit, or set {variable} to point at it"
    )


@cache
def schemas_dir() -> Path:
    """The directory holding the JSON Schemas."""
    return _find("schemas", "RESUMEKIT_SCHEMAS")


@cache
def golden_dir() -> Path:
    """The directory holding the golden fixtures."""
    return _find("golden", "RESUMEKIT_GOLDEN")


@cache
def spec_dir() -> Path:
    """The directory holding the normative spec documents."""
    return _find("spec", "RESUMEKIT_SPEC")
