"""Pure byte-level damage to a JSON Lines ledger, as a crash or a bad disk would leave it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# Bytes that stand for "garbage": not JSON, not UTF-8 clean, no line feed.
GARBAGE = b"\x8f#garbage\xff{not json"


def rows(ledger: bytes) -> list[bytes]:
    """The rows of a ledger, each with its terminating line feed (the last may lack it)."""
    return ledger.splitlines(keepends=True)


def tear_last_row(ledger: bytes) -> Iterator[tuple[int, bytes]]:
    """Every way the last row's append can be cut short inside the row: (bytes kept of it, damaged ledger).

    Keeping 0 bytes is the ledger before the append. The whole row without its line feed, a row whose
    commit marker never landed, is not among them: the spec lets core read it either way (STORE-4), so
    it is the ``unterminated-row`` tail of its own case.
    """
    parts = rows(ledger)
    head, last = b"".join(parts[:-1]), parts[-1]
    for kept in range(len(last) - 1):
        yield kept, head + last[:kept]


# Bytes that replace the last row and end the file without a line feed.
TAILS: dict[str, Callable[[bytes], bytes]] = {
    "unterminated-row": lambda row: row.rstrip(b"\n"),
    "invalid-prefix": lambda row: b'{"id":]',  # no JSON text starts this way
    "garbage": lambda row: GARBAGE,
    "not-an-event": lambda row: b"{}",  # complete JSON, no RuntimeEvent
}


def replace_tail(ledger: bytes, how: str) -> bytes:
    """The ledger with its last row replaced by the unterminated bytes *how* names (a key of TAILS)."""
    parts = rows(ledger)
    return b"".join(parts[:-1]) + TAILS[how](parts[-1])


# The damages that move a row to another session or run, and the field each changes.
REHOMED = {"other-session": "sessionId", "other-run": "runId"}


def rehome(event: Mapping[str, Any], field: str) -> dict[str, Any]:
    """*event* as a valid RuntimeEvent of another session or run: what a store shared by two runs holds."""
    return {**event, field: f"{event[field]}-other"}


def _rehome(row: bytes, field: str) -> bytes:
    event = rehome(json.loads(row), field)
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _flip_first_bit(row: bytes) -> bytes:
    # The opening brace: a flip the format can detect. A flip inside a string would still be JSON,
    # and no JSON Lines ledger without checksums can see it.
    return bytes([row[0] ^ 0x01]) + row[1:]


def _duplicate_chunk(row: bytes) -> bytes:
    body = row.rstrip(b"\n")
    half = max(1, len(body) // 2)
    return body[:half] + body[:half] + body[half:] + b"\n"


# The opening quote of a text content's string, however the implementation spaced its JSON.
_TEXT_VALUE = re.compile(rb'"text"\s*:\s*"')


def _invalid_utf8_in_text(row: bytes) -> bytes:
    # c3 28 just inside the text string: the rest of the row stays valid JSON, so only a strict UTF-8
    # decode sees the damage; a decoder with replacement reads a text that starts with U+FFFD (STORE-5).
    found = _TEXT_VALUE.search(row)
    if found is None:
        raise ValueError("the row holds no text content to damage (invalid-utf8-in-string)")
    return row[: found.end()] + b"\xc3\x28" + row[found.end() :]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda row: GARBAGE + b"\n",
    "zeros": lambda row: b"\x00" * (len(row) - 1) + b"\n",
    "flip-bit": _flip_first_bit,
    "duplicate-chunk": _duplicate_chunk,
    "not-an-event": lambda row: b'{"note":"valid JSON, but not a RuntimeEvent"}\n',
    "not-an-object": lambda row: b'["a","list"]\n',
    "invalid-utf8": lambda row: row[:1] + b"\xc3\x28" + row[1:],
    "invalid-utf8-in-string": _invalid_utf8_in_text,
    "blank": lambda row: b"\n",
    "other-session": lambda row: _rehome(row, "sessionId"),
    "other-run": lambda row: _rehome(row, "runId"),
}


def damage_row(ledger: bytes, row: int, how: str) -> bytes:
    """The ledger with its 1-based *row* damaged in the way *how* names (a key of DAMAGE)."""
    parts = rows(ledger)
    parts[row - 1] = DAMAGE[how](parts[row - 1])
    return b"".join(parts)
