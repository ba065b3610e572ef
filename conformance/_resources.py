"""Find the kit's data: ``schemas/``, ``golden/`` and the spec.

Each folder is looked for in three places, and the first that applies wins:

1. the environment variable that names it: ``RESUMEKIT_SCHEMAS``, ``RESUMEKIT_GOLDEN``, ``RESUMEKIT_SPEC``;
2. the checkout, when the package runs from one (an editable install): the folder above the package holds a
   ``pyproject.toml`` naming resumekit, and ``schemas/``, ``golden/`` and ``docs/spec/``;
3. the copies the wheel carries inside the package, ``_data/``.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# Where each folder is in a checkout, relative to its root; the wheel's copy is `_data/<name>`.
IN_CHECKOUT = {"schemas": "schemas", "golden": "golden", "spec": "docs/spec"}
_NAMES_RESUMEKIT = re.compile(r"""^name\s*=\s*["']resumekit["']\s*$""", re.MULTILINE)


def checkout_root(package: Path = _PACKAGE) -> Path | None:
    """The checkout that *package* (the ``conformance/`` folder) runs from, or None when it is installed."""
    root = package.parent
    try:
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if _NAMES_RESUMEKIT.search(project) is None:
        return None
    return root if all((root / folder).is_dir() for folder in IN_CHECKOUT.values()) else None


@cache
def _checkout() -> Path | None:
    return checkout_root()


def _find(name: str, variable: str) -> Path:
    override = os.environ.get(variable)
    if override:
        return Path(override)
    root = _checkout()
    if root is not None:
        return root / IN_CHECKOUT[name]
    candidate = _PACKAGE / "_data" / name
    if candidate.is_dir():
        return candidate
    raise FileNotFoundError(
        f"resumekit cannot find its {name!r} directory (looked in {candidate}, and {_PACKAGE.parent} is not a "
        f"resumekit checkout); reinstall resumekit, or set {variable} to point at it"
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
