"""Find the kit's data, ``schemas/`` and ``golden/``, in a wheel or a source checkout."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str, variable: str, checkout: str | None = None) -> Path:
    override = os.environ.get(variable)
    if override:
        return Path(override)
    # An installed wheel carries the data inside the package; a checkout has it beside the package.
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / (checkout or name)):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"resumekit cannot find its {name!r} directory (looked in {_PACKAGE / '_data'} and {_PACKAGE.parent}); "
        f"set {variable} to point at it"
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
    return _find("spec", "RESUMEKIT_SPEC", checkout="docs/spec")
