"""Pure byte-level damage to a JSON Lines ledger, as a crash or a bad disk would leave it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

# Bytes that stand for "garbage": not JSON, not UTF-8 clean, no line feed.
GARBAGE = b"\x8f#garbage\xff{not json"


def rows(ledger: bytes) -> list[bytes]:
    """The rows of a ledger, each with its terminating line feed (the last may lack it)."""
    return ledger.splitlines(keepends=True)


def tear_last_row(ledger: bytes) -> Iterator[tuple[int, bytes]]:
    """Every way the last row's append can be cut short: (bytes kept of that row, damaged ledger).

    Keeping 0 bytes is the ledger before the append; keeping all but the line feed is a row whose
    commit marker never landed.
    """
    parts = rows(ledger)
    head, last = b"".join(parts[:-1]), parts[-1]
    for kept in range(len(last)):
        yield kept, head + last[:kept]


def _flip_first_bit(row: bytes) -> bytes:
    # The opening brace: a flip the format can detect. A flip inside a string would still be JSON,
    # and no JSON Lines ledger without checksums can see it.
    return bytes([row[0] ^ 0x01]) + row[1:]


def _duplicate_chunk(row: bytes) -> bytes:
    body = row.rstrip(b"\n")
    half = max(1, len(body) // 2)
    return body[:half] + body[:half] + body[half:] + b"\n"


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda row: GARBAGE + b"\n",
    "zeros": lambda row: b"\x00" * (len(row) - 1) + b"\n",
    "flip-bit": _flip_first_bit,
    "duplicate-chunk": _duplicate_chunk,
    "not-an-event": lambda row: b'{"note":"valid JSON, but not a RuntimeEvent"}\n',
    "not-an-object": lambda row: b'["a","list"]\n',
    "invalid-utf8": lambda row: row[:1] + b"\xc3\x28" + row[1:],
    "blank": lambda row: b"\n",
}


def damage_row(ledger: bytes, row: int, how: str) -> bytes:
    """The ledger with its 1-based *row* damaged in the way *how* names (a key of DAMAGE)."""
    parts = rows(ledger)
    parts[row - 1] = DAMAGE[how](parts[row - 1])
    return b"".join(parts)
