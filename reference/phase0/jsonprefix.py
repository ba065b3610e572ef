"""Whether bytes can be the start of a JSON object row: the test that tells a torn row from garbage.

An append writes a whole row, ``{...}`` and its line feed, with one write. A crash can leave any
prefix of it behind, and nothing else: so bytes after the last line feed are provably the trace of an
interrupted append only if they are a proper prefix of some JSON object, or a complete one missing
its line feed (docs/spec/phase0.md, STORE-9). Pure: no I/O.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["COMPLETE", "INCOMPLETE", "INVALID", "object_prefix_state"]

COMPLETE, INCOMPLETE, INVALID = "complete", "incomplete", "invalid"
_WHITE = " \t\r\n"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# What a number may look like when the text ends inside it: any prefix of _NUMBER.
_NUMBER_PREFIX = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:(?<=[0-9])[eE][+-]?[0-9]*)?)?")
_ESCAPES = frozenset('"\\/bfnrtu')
_HEX = frozenset("0123456789abcdefABCDEF")


def object_prefix_state(data: bytes) -> str:
    """COMPLETE if *data* is one JSON object (white space around it aside), INCOMPLETE if it is a
    proper prefix of one, INVALID if no bytes appended to it can make it one.

    COMPLETE says only that the brackets and tokens close; whether the object is valid JSON in every
    detail (a key given twice, a number out of range) is for the full decoder to say.
    """
    try:  # a multi-byte character cut at the end is a prefix; a bad byte anywhere is not
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return INVALID
    return _scan(text)


def _scan(text: str) -> str:  # one state machine reads best in one place
    length = len(text)
    i = 0
    while i < length and text[i] in _WHITE:
        i += 1
    if i == length:
        return INCOMPLETE
    if text[i] != "{":
        return INVALID
    stack: list[str] = []  # "{" or "["
    expect = "value"  # value | key-or-close | key | colon | comma-or-close | end
    while i < length:
        char = text[i]
        if char in _WHITE:
            i += 1
            continue
        if expect == "end":
            return INVALID
        if expect in ("key", "key-or-close"):
            if char == "}" and expect == "key-or-close":
                stack.pop()
                expect = "comma-or-close" if stack else "end"
                i += 1
                continue
            if char != '"':
                return INVALID
            i = _string_end(text, i)
            if i < 0:
                return INVALID if i == -1 else INCOMPLETE
            expect = "colon"
            continue
        if expect == "colon":
            if char != ":":
                return INVALID
            expect = "value"
            i += 1
            continue
        if expect == "comma-or-close":
            closer = "}" if stack[-1] == "{" else "]"
            if char == ",":
                expect = "key" if stack[-1] == "{" else "value"
            elif char == closer:
                stack.pop()
                expect = "comma-or-close" if stack else "end"
            else:
                return INVALID
            i += 1
            continue
        # expect == "value" (or the first value of an array, which may instead close it)
        if char in "{[":
            stack.append(char)
            expect = "key-or-close" if char == "{" else "value-or-close"
            i += 1
            if expect == "value-or-close":
                while i < length and text[i] in _WHITE:
                    i += 1
                if i < length and text[i] == "]":
                    stack.pop()
                    i += 1
                    expect = "comma-or-close" if stack else "end"
                else:
                    expect = "value"
            continue
        if char == '"':
            i = _string_end(text, i)
            if i < 0:
                return INVALID if i == -1 else INCOMPLETE
        elif char in "tfn":
            word = {"t": "true", "f": "false", "n": "null"}[char]
            piece = text[i : i + len(word)]
            if not word.startswith(piece):
                return INVALID
            if len(piece) < len(word):
                return INCOMPLETE
            i += len(word)
        elif char == "-" or char.isdigit():
            end = i
            while end < length and text[end] in "+-.eE0123456789":
                end += 1
            token = text[i:end]
            if end == length:
                return INCOMPLETE if _NUMBER_PREFIX.fullmatch(token) else INVALID
            if not _NUMBER.fullmatch(token):
                return INVALID
            i = end
        else:
            return INVALID
        expect = "comma-or-close"
    return COMPLETE if expect == "end" else INCOMPLETE


def _string_end(text: str, start: int) -> int:
    """The index after the string that opens at *start*; -2 if the text ends inside it, -1 if invalid."""
    i, length = start + 1, len(text)
    while i < length:
        char = text[i]
        if char == '"':
            return i + 1
        if char == "\\":
            if i + 1 == length:
                return -2
            escape = text[i + 1]
            if escape not in _ESCAPES:
                return -1
            if escape == "u":
                digits = text[i + 2 : i + 6]
                if not all(d in _HEX for d in digits):
                    return -1
                if len(digits) < 4:
                    return -2
                i += 6
                continue
            i += 2
            continue
        if ord(char) < 0x20:
            return -1
        i += 1
    return -2
