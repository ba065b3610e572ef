"""Find the kit's data, ``schemas/``, ``golden/`` and the spec, which the wheel carries inside the package."""

from __future__ import annotations

import os
import sys
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


def cache_dir() -> Path | None:
    """Where resumekit keeps what it can rebuild, or None when caching is off (``RESUMEKIT_NO_CACHE``).

    ``RESUMEKIT_CACHE_DIR`` names the folder; otherwise it is the platform's user cache folder:
    ``%LOCALAPPDATA%\\resumekit\\Cache`` on Windows, ``~/Library/Caches/resumekit`` on macOS, and
    ``$XDG_CACHE_HOME/resumekit`` (``~/.cache/resumekit``) elsewhere. Not cached: the folder may change
    between calls (tests move it).
    """
    if os.environ.get("RESUMEKIT_NO_CACHE"):
        return None
    override = os.environ.get("RESUMEKIT_CACHE_DIR")
    if override:
        return Path(override)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return Path(base, "resumekit", "Cache") if base else None
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "resumekit"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache", "resumekit")
