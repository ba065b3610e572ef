"""Text from the implementation made safe where it enters the kit, and text the kit writes made printable.

A Python string can hold what no UTF-8 file can: a lone surrogate, which a JSON escape such as ``\\ud800``
gives, and the bytes of a journal's TEXT, a log or a git ref name may not be UTF-8 at all. Every string that
comes from the implementation goes through ``safe`` (or ``decode`` for bytes, ``safe_value`` for a parsed
JSON value) where the kit first reads it, so that every report format can write it. The repair is visible and
lossless to a reader: a lone surrogate becomes the six characters of its escape, ``\\ud800``, and a byte that
is not part of a UTF-8 character the four of ``\\xff``. A string that holds neither is returned unchanged (the
same object), so values the checks compare stay comparable.

``printable`` is for the other end: it writes the characters that a terminal obeys, or that XML 1.0 and HTML
refuse (control characters but tab and line feed, DEL, the C1 controls, U+FFFE and U+FFFF), as escapes of
the same form, for the text reports and the terminal. JSON needs none of it: its encoder escapes controls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# In JSON text: an escape of a surrogate, paired or not. Without one, json.loads gives no surrogate at all.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def safe(text: str) -> str:
    """*text* with each lone surrogate written as its escape (``\\ud800``); unchanged if it holds none."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def decode(data: bytes) -> str:
    """*data* as UTF-8 text, each byte that is not part of a UTF-8 character written as its escape (``\\xff``).

    Surrogates encoded in UTF-8 (``\\xed\\xa0\\x80``) are not UTF-8 either, so the result is always ``safe``.
    """
    return data.decode("utf-8", "backslashreplace")


def safe_value(value: Any) -> Any:
    """A parsed JSON *value* with every string in it, object keys included, made ``safe``; lists and objects
    are mended in place, without recursion however deep they nest."""
    if isinstance(value, str):
        return safe(value)
    for holder in _containers(value):
        if isinstance(holder, dict) and any(isinstance(key, str) and safe(key) is not key for key in holder):
            pairs = [(safe(key) if isinstance(key, str) else key, item) for key, item in holder.items()]
            holder.clear()
            holder.update(pairs)
        places = holder.items() if isinstance(holder, dict) else enumerate(holder)
        mended = [(place, safe(item)) for place, item in places if isinstance(item, str) and not item.isascii()]
        for place, item in mended:
            holder[place] = item
    return value


def _containers(value: Any) -> Iterator[Any]:
    """Every list and dict in *value*, itself included, each once per place it appears."""
    stack = [value] if isinstance(value, (list, dict)) else []
    while stack:
        holder = stack.pop()
        yield holder
        items = holder.values() if isinstance(holder, dict) else holder
        stack.extend(item for item in items if isinstance(item, (list, dict)))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """*text* with every character a terminal obeys or XML 1.0 refuses written as its escape (``\\x1b``,
    ``\\ufffe``): the control characters but tab and line feed, DEL, the C1 controls, lone surrogates,
    U+FFFE and U+FFFF. Unchanged (the same object) when it holds none."""
    if _UNPRINTABLE.search(text) is None:
        return text
    return _UNPRINTABLE.sub(_escape, text)


def clip(text: str, limit: int) -> str:
    """*text* cut to its first *limit* characters, saying how long it was; unchanged if it is not longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters, the first {limit} kept)"
