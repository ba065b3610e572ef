"""Canonical JSON (PURE-2): the byte form in which two plans are the same plan.

UTF-8, keys sorted, no insignificant white space, non-ASCII characters unescaped, and numbers that
are integral written as integers (``1.0`` becomes ``1``), so that a value a JavaScript runtime
round-trips through ``JSON.parse`` serialises to the same bytes here. ``NaN`` and the infinities
are not JSON and raise ``ValueError``; object keys must be strings (``TypeError`` otherwise).

Non-integral floats are written in Python's shortest round-trip form (``repr``), which agrees with
ECMAScript's for the values Phase 0 documents carry; this module does not implement the exponent
spelling of RFC 8785 for very large or very small magnitudes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["canonical_json"]


def _normalise(value: Any) -> Any:
    """A copy of `value` with integral floats turned into ints and tuples into lists."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value  # also -0.0 -> 0; NaN/inf stay floats
    if isinstance(value, Mapping):
        normalised: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"canonical JSON object keys must be strings, not {key!r}")
            normalised[key] = _normalise(item)
        return normalised
    if isinstance(value, (list, tuple)):
        return [_normalise(item) for item in value]
    return value


def canonical_json(value: Any) -> bytes:
    """Serialise `value` to canonical JSON bytes (PURE-2)."""
    text = json.dumps(
        _normalise(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return text.encode("utf-8")
