"""Canonical JSON (spec PURE-2): the byte form in which plans are compared for determinism."""

from __future__ import annotations

import json
from typing import Any


def _normalized(value: Any) -> Any:
    # JSON has one number type: 1.0 and 1 are the same value, and must print the same in every language.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalized(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalized(item) for item in value]
    return value


def canonical_json(value: Any) -> bytes:
    """UTF-8, sorted keys, no insignificant white space, non-ASCII unescaped, integral numbers as integers."""
    return json.dumps(
        _normalized(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def same_json(left: Any, right: Any) -> bool:
    """JSON equality: unlike Python's ``==``, ``true`` is not ``1``."""
    return canonical_json(left) == canonical_json(right)
