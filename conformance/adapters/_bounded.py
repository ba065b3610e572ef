"""One protocol line read as JSON in bounded memory: its budget counted before it is parsed, its text kept narrow.

A line may be 64 MiB (docs/adapter-protocol.md), and Python's JSON parser makes an object of every value
and a string of every character: 64 MiB of ``[],`` made 22 million lists and 3 GB. So before a line is
parsed, its values are counted (``MAX_VALUES``) and the text inside its strings is measured
(``MAX_STRING_BYTES``), cheaply, on the bytes. The text a line decodes to costs up to four bytes a character
(one character beyond U+FFFF in a line makes them all four bytes wide), so a long line that is not ASCII is
decoded piece by piece into ASCII text with its other characters as JSON escapes (``ascii_text``), which
parse to the same value.
"""

from __future__ import annotations

import codecs

# JSON values in one message, object keys included: the largest message of a certification holds about
# 13,000, and a value costs Python up to about 100 bytes, so this bounds what one line can make at ~100 MB.
MAX_VALUES = 1_000_000
# Bytes of text inside the strings of one message, as the line writes them (an escape counts its six
# bytes): the largest certification message has about 100 KiB of them. Its characters decode to at most
# 64 MB, even all four bytes wide.
MAX_STRING_BYTES = 16 * 1024 * 1024
# Lines up to this long are decoded whole: their text is at most four times as large.
NARROW_LINE = 16 * 1024 * 1024

_MARKS = (b",", b":", b"[", b"{")  # every value but the first follows one of these
_PIECE = 1 << 20
_SCAN_PIECE = 1 << 18  # bytes of a line measured at a time: their split into strings stays small
_ESCAPES = "resumekit-json-escapes"


def _marks(data: bytes) -> int:
    return sum(data.count(mark) for mark in _MARKS)


def measure(raw: bytes) -> tuple[int, int]:
    """(at most how many JSON values *raw* holds, how many bytes its strings hold at most).

    The values are one more than the commas, colons and opening brackets, counted first in the whole
    line, which is fast and exact enough for every message the protocol needs. Only a line over a budget
    is measured again outside its strings (``_scan``), since a comma in a string is no value.
    """
    marks = 1 + _marks(raw)
    if marks <= MAX_VALUES and len(raw) <= MAX_STRING_BYTES:
        return marks, len(raw)
    outside, inside = _scan(raw)
    return 1 + outside, inside


def _scan(raw: bytes) -> tuple[int, int]:
    """(the marks outside the strings of *raw*, the bytes inside them), in pieces of ``_SCAN_PIECE`` bytes.

    In each piece escaped backslashes and escaped quotes are replaced by two plain bytes, which leaves
    each quote a string's start or end; its split at the quotes then alternates outside and inside. No
    regular expression: one over millions of strings, or over a string of millions of escapes, costs
    gigabytes in Python's engine.
    """
    outside = inside = 0
    in_string = escaped = False
    for start in range(0, len(raw), _SCAN_PIECE):
        piece = raw[start : start + _SCAN_PIECE]
        if escaped:  # the previous piece ended on the backslash of an escape
            piece = b"_" + piece[1:]
        piece = piece.replace(b"\\\\", b"__")
        escaped = piece.endswith(b"\\")
        parts = piece.replace(b'\\"', b"__").split(b'"')
        outer, inner = (parts[1::2], parts[0::2]) if in_string else (parts[0::2], parts[1::2])
        outside += _marks(b"".join(outer))
        inside += sum(map(len, inner))
        in_string ^= len(parts) % 2 == 0  # an odd number of quotes in the piece
    return outside, inside


def text(raw: bytes) -> str:
    """*raw* decoded as strict UTF-8 (UnicodeDecodeError if it is not), as text no wider than it must be:
    a line longer than ``NARROW_LINE`` that is not ASCII comes back as ASCII, its other characters as
    JSON escapes."""
    if len(raw) <= NARROW_LINE or raw.isascii():
        return raw.decode("utf-8")
    return ascii_text(raw)


def ascii_text(raw: bytes) -> str:
    """*raw*, strict UTF-8, as ASCII text with every other character as its JSON escape (``\\u00e9``, a
    surrogate pair beyond U+FFFF): the same JSON value where the characters are in strings, and still no
    JSON where they are not. Decoded a piece at a time, so no wide copy of the whole line is ever made."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    pieces = []
    for start in range(0, len(raw), _PIECE):
        try:
            piece = decoder.decode(view[start : start + _PIECE], final=start + _PIECE >= len(raw))
        except UnicodeDecodeError as error:
            raise UnicodeDecodeError(
                "utf-8", raw, start + error.start, start + error.end, error.reason
            ) from None
        pieces.append(piece.encode("ascii", _ESCAPES).decode("ascii"))
    return "".join(pieces)


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(map(_escape, error.object[error.start : error.end])), error.end


codecs.register_error(_ESCAPES, _json_escapes)
