"""Canonical JSON of P1 (spec TASK-2), exact, and the strict JSON reading the control plane applies to bodies.

P1 bodies hold no floating-point numbers, so unlike Phase 0's ``canonical_json`` this one refuses a float
instead of normalising it. Python's encoder with ``ensure_ascii=False`` writes strings exactly as TASK-2
says: ``"`` and ``\\`` escaped, ``\\b \\t \\n \\f \\r`` named, every other control character as ``\\u00xx``
in lowercase hex, everything else (``/`` and non-ASCII included) as itself.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from resumekit.conformance._text import SURROGATE_ESCAPE, safe_value


class NotCanonical(ValueError):
    """The value has no P1 canonical JSON (a float, a non-string key, a lone surrogate, ...)."""


def _check(value: Any) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        raise NotCanonical("P1 bodies contain no floating-point numbers")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotCanonical(f"object key {key!r} is not a string")
            _check(item)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check(item)
        return
    raise NotCanonical(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of *value* (TASK-2)."""
    _check(value)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise NotCanonical("a string holds a lone surrogate, which UTF-8 cannot encode") from error


def result_hash(body: Any) -> str:
    """The result hash: lowercase hex SHA-256 of the canonical JSON."""
    return hashlib.sha256(canonical_json(body)).hexdigest()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in pairs:
        if key in out:
            raise NotCanonical(f"member {key!r} appears twice")
        out[key] = item
    return out


def _no_float(text: str) -> Any:
    raise NotCanonical(f"number {text} is not an integer")


def _no_constant(text: str) -> Any:
    raise NotCanonical(f"{text} is not JSON")


def parse_json(data: bytes) -> Any:
    """Read a UTF-8 JSON body strictly: no duplicate members, no fractions or exponents, no NaN.

    The body is the worker's (or a hook's, or a tool's, which the worker can forge): a lone surrogate in it,
    a valid JSON escape that no UTF-8 text can carry, is written as its escape (``_text.safe``), so that the
    control plane's log and the reports can hold every string it keeps."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotCanonical("the body is not UTF-8") from error
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_float=_no_float, parse_constant=_no_constant
        )
    except (json.JSONDecodeError, RecursionError) as error:
        raise NotCanonical(f"the body is not JSON: {error}") from error
    return safe_value(value) if SURROGATE_ESCAPE.search(data) else value
