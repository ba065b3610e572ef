"""Read YAML the way fixture authors mean it: JSON values only, bounded, remembering the line of every value.

A fixture is JSON written as YAML. The value is built here straight from the parser's events, by a loop
rather than recursion, so nothing else ever sees a YAML value: every string is valid Unicode without lone
surrogates, every mapping key is a string given once, every integer fits a double exactly, every float is
finite, and no tag beyond the JSON ones (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``,
``!!map``, ``!!seq``) is accepted. Plain scalars resolve as YAML 1.2's core schema does, without YAML 1.1's
surprises: ``yes``, ``on`` and dates stay strings, ``0755`` is 755, ``1_000`` and ``1:30`` are strings.

Limits (docs/certifying.md): a file of at most ``MAX_BYTES``, values nested at most ``MAX_DEPTH`` deep, and
at most ``MAX_ALIAS_VALUES`` values added by aliases, so a file of a few hundred bytes cannot expand into
billions of values (an alias bomb). libyaml's parser is used where PyYAML has it; the pure-Python parser
gives the same events otherwise.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import yaml

MAX_BYTES = 16 * 1024 * 1024  # one fixture file; the bundled ones are a few kilobytes to a few hundred
MAX_DEPTH = 64  # mappings and lists inside each other; the bundled fixtures nest about ten deep
MAX_ALIAS_VALUES = 10_000  # values that aliases add, counting every value inside each aliased node
MAX_INTEGER = 2**53 - 1  # the largest integer every JSON reader (a double) holds exactly (RFC 7493)

# The parsers that yield YAML events, fastest first: libyaml's where PyYAML was built with it.
PARSERS: tuple[type[Any], ...] = (
    (yaml.CSafeLoader, yaml.SafeLoader) if getattr(yaml, "__with_libyaml__", False) else (yaml.SafeLoader,)
)

_STR, _INT, _FLOAT, _BOOL, _NULL = (f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_DECIMAL = re.compile(r"[-+]?[0-9]+")
_OCTAL = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_FIRST_OF_NUMBER = frozenset("-+.0123456789")
# YAML's printable characters (1.2, 5.1) less the byte order mark's use elsewhere; raw control characters,
# NUL first, are what a UTF-16 file or a binary read as UTF-8 shows.
_NOT_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


class YamlError(Exception):
    """Text that is not YAML, or YAML a fixture may not use."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


# The line of a value: an int for a scalar, (line, children) for a mapping or a list, where children maps
# each key, or holds each item, to the line of that member. A member's line is where it starts: its key's
# line in a mapping, its item's line in a list.
Lines: TypeAlias = "int | tuple[int, dict[str, Lines] | list[Lines]]"


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


@dataclass(frozen=True, slots=True)
class Document:
    """A loaded YAML document and the 1-based line of each value in it."""

    data: Any
    lines: Lines | None

    def line_of(self, pointer: str) -> int | None:
        """The line of the value at JSON *pointer*, or of its nearest ancestor that has one."""
        node = self.lines
        if node is None:
            return None
        for part in pointer.split("/")[1:] if pointer else ():
            if isinstance(node, int):
                return node
            line, children = node
            if isinstance(children, dict):
                child = children.get(_unescape(part))
            else:
                index = int(part) if part.isdigit() else -1
                child = children[index] if 0 <= index < len(children) else None
            if child is None:
                return line
            node = child
        return node if isinstance(node, int) else node[0]


def read(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file *path*, at most *limit* of them, or OSError saying why not.

    A FIFO, a device or a directory is refused before it is read: reading one can block forever or never
    end. On POSIX the file is opened without blocking and checked again, so a path swapped for a FIFO after
    the first look cannot block either.
    """
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise OSError(f"is not a regular file ({_file_type(before.st_mode)}); a fixture is a YAML file")
    if before.st_size > limit:
        raise OSError(f"is {before.st_size} bytes, more than the {limit} a fixture file may have")
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"is not a regular file ({_file_type(mode)}); a fixture is a YAML file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    if size > limit:
        raise OSError(f"grew past the {limit} bytes a fixture file may have while it was read")
    return b"".join(chunks)


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def decode(raw: bytes) -> str:
    """*raw* as UTF-8 text, or YamlError naming the line where it stops being UTF-8."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            raise YamlError(f"is {encoding} (it starts with a {encoding} byte order mark); save it as UTF-8", 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise YamlError(
            f"is not UTF-8: byte 0x{raw[error.start]:02x} at offset {error.start} ({error.reason}); save it as UTF-8",
            line,
        ) from None


def _check_printable(text: str) -> None:
    """Refuse a raw control character (escapes in quoted strings are fine), naming its line and column."""
    found = _NOT_PRINTABLE.search(text)
    if found is None:
        return
    start = found.start()
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    character = found.group()
    hint = "; a file full of NUL characters is often UTF-16: save it as UTF-8" if character == "\0" else ""
    raise YamlError(
        f"holds the control character U+{ord(character):04X} at line {line}, column {column}, which YAML "
        f"does not allow unescaped (write it as an escape in a double-quoted string){hint}",
        line,
    )


def load(text: str, parser: type[Any] | None = None) -> Document:
    """Parse one YAML document of JSON values; YamlError names the line of the first problem.

    *parser* is one of ``PARSERS`` (the fastest by default); each gives the same document.
    """
    _check_printable(text)
    loader = None
    try:
        loader = (parser or PARSERS[0])(text)
        return _Builder(loader.get_event).document()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlError(f"not valid YAML: {error.problem or error}", line) from None
    except yaml.YAMLError as error:
        raise YamlError(f"not valid YAML: {error}", None) from None
    finally:
        if loader is not None:
            loader.dispose()


_NO_KEY = object()


class _Open:
    """A mapping or list whose end has not come yet."""

    __slots__ = ("anchor", "children", "key", "key_line", "line", "size", "value")

    def __init__(self, value: dict[str, Any] | list[Any], children: dict[str, Lines] | list[Lines], line: int) -> None:
        self.value = value
        self.children = children
        self.line = line
        self.anchor: str | None = None
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.size = 1


class _Builder:
    """Turns parser events into one JSON value and its lines, with an explicit stack instead of recursion."""

    def __init__(self, next_event: Any) -> None:
        self.next_event = next_event
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[Any, Lines, int]] = {}
        self.opened: set[str] = set()
        self.alias_values = 0
        self.root: tuple[Any, Lines] | None = None

    def document(self) -> Document:
        self.next_event()  # StreamStartEvent
        if isinstance(self.next_event(), yaml.StreamEndEvent):  # else DocumentStartEvent
            return Document(None, None)
        while self.root is None:
            self.take(self.next_event())
        self.next_event()  # DocumentEndEvent
        event = self.next_event()
        if not isinstance(event, yaml.StreamEndEvent):
            raise YamlError("holds more than one YAML document; a fixture file is one document", _line(event))
        return Document(*self.root)

    def take(self, event: Any) -> None:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            value = _scalar(event)
            line = event.start_mark.line + 1
            if event.anchor is not None:
                self.anchors[event.anchor] = (value, line, 1)
            self.add(value, line, 1, plain=event.tag is None and event.implicit[0])
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            self.open(event, kind is yaml.MappingStartEvent)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            top = self.stack.pop()
            lines: Lines = (top.line, top.children)
            if top.anchor is not None:
                self.opened.discard(top.anchor)
                self.anchors[top.anchor] = (top.value, lines, top.size)
            self.add(top.value, lines, top.size)
        elif kind is yaml.AliasEvent:
            self.alias(event)
        else:  # pragma: no cover - the parser yields nothing else inside a document
            raise YamlError(f"unexpected YAML event {kind.__name__}", _line(event))

    def open(self, event: Any, mapping: bool) -> None:
        line = event.start_mark.line + 1
        top = self.stack[-1] if self.stack else None
        if top is not None and top.key is _NO_KEY and isinstance(top.value, dict):
            raise YamlError("a mapping key must be a string, not a mapping or a list", line)
        if len(self.stack) >= MAX_DEPTH:
            raise YamlError(f"nests values more than {MAX_DEPTH} deep, more than a fixture may", line)
        tag = event.tag
        if tag is not None and tag != "!" and tag != (_MAP if mapping else _SEQ):
            raise YamlError(_tag_message(tag), line)
        if top is not None and isinstance(top.value, dict):
            line = top.key_line  # a member starts at its key
        opened = _Open({}, {}, line) if mapping else _Open([], [], line)
        if event.anchor is not None:
            opened.anchor = event.anchor
            self.opened.add(event.anchor)
        self.stack.append(opened)

    def alias(self, event: Any) -> None:
        name = event.anchor
        line = event.start_mark.line + 1
        if name in self.opened:
            raise YamlError(f"the alias *{name} refers to a value that contains it (a recursive alias)", line)
        if name not in self.anchors:
            raise YamlError(f"the alias *{name} names no anchor defined before it", line)
        value, lines, size = self.anchors[name]
        self.alias_values += size
        if self.alias_values > MAX_ALIAS_VALUES:
            raise YamlError(
                f"aliases add more than {MAX_ALIAS_VALUES} values (at *{name}); a fixture may not expand that much",
                line,
            )
        if self.stack and self.stack[-1].key is _NO_KEY and isinstance(self.stack[-1].value, dict):
            self.add(value, line, size)  # an alias used as a key: the key is where the alias is
        elif isinstance(lines, int):
            self.add(value, line, size)
        else:
            self.add(value, (line, lines[1]), size)

    def add(self, value: Any, lines: Lines, size: int, *, plain: bool = False) -> None:
        """Place a finished value in the mapping or list around it (or make it the document)."""
        if not self.stack:
            self.root = (value, lines)
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
            top.children.append(lines)  # type: ignore[union-attr]
            return
        children: dict[str, Lines] = top.children  # type: ignore[assignment]
        if top.key is _NO_KEY:
            line = lines if isinstance(lines, int) else lines[0]
            if not isinstance(value, str):
                raise YamlError(f"a mapping key must be a string, not {_describe(value)}; quote it", line)
            if plain and value == "<<":
                raise YamlError("merge keys ('<<') are not allowed in fixtures; write the fields out", line)
            if value in top.value:
                first = children[value]
                first_line = first if isinstance(first, int) else first[0]
                where = _pointer(self.stack)
                raise YamlError(f"duplicate key {value!r} at {where or '/'} (first on line {first_line})", line)
            top.key, top.key_line = value, line
            return
        top.value[top.key] = value
        # A member's line is its key's; a mapping or list keeps its members' lines beside it.
        children[top.key] = top.key_line if isinstance(lines, int) else (top.key_line, lines[1])
        top.key = _NO_KEY


def _pointer(stack: list[_Open]) -> str:
    """The JSON pointer of the innermost open value."""
    parts = [
        str(outer.key).replace("~", "~0").replace("/", "~1") if isinstance(outer.value, dict) else str(len(outer.value))
        for outer in stack[:-1]
    ]
    return "".join("/" + part for part in parts)


def _line(event: Any) -> int | None:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return "a mapping" if isinstance(value, dict) else "a list"


def _tag_message(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    shown = "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag
    return (
        f"the tag {shown} is not allowed: a fixture holds JSON values only "
        "(strings, numbers, true, false, null, mappings and lists)"
    )


def _scalar(event: Any) -> Any:
    value: str = event.value
    line = event.start_mark.line + 1
    if _SURROGATE.search(value):
        raise YamlError("holds a lone surrogate (an escape such as \\ud800 alone), which is not Unicode text", line)
    tag = event.tag
    if tag is None:
        return _plain(value, line) if event.implicit[0] else value
    if tag == "!" or tag == _STR:
        return value
    if tag in (_INT, _FLOAT, _BOOL, _NULL):
        resolved = _plain(value, line)
        wanted = {_INT: int, _FLOAT: float, _BOOL: bool, _NULL: type(None)}[tag]
        if tag == _FLOAT and type(resolved) is int:
            return float(resolved)
        if type(resolved) is not wanted:
            raise YamlError(f"{value!r} is not what its tag !!{tag.rsplit(':', 1)[1]} says", line)
        return resolved
    raise YamlError(_tag_message(tag), line)


def _plain(value: str, line: int) -> Any:
    """A plain scalar resolved by YAML 1.2's core schema, refused where JSON cannot carry it."""
    if value in _NULLS:
        return None
    if value in _BOOLS:
        return _BOOLS[value]
    if value[0] not in _FIRST_OF_NUMBER:
        return value
    if _DECIMAL.fullmatch(value):
        return _integer(value, value.lstrip("+-"), 10, line)
    if _OCTAL.fullmatch(value):
        return _integer(value, value[2:], 8, line)
    if _HEX.fullmatch(value):
        return _integer(value, value[2:], 16, line)
    if _FLOAT_RE.fullmatch(value):
        number = float(value)
        if not math.isfinite(number):
            raise YamlError(f"the number {_preview(value)} is beyond a double's range, which JSON cannot carry", line)
        return number
    if _SPECIAL_FLOAT.fullmatch(value):
        raise YamlError(f"{value} is not a JSON number (JSON has no NaN or infinity); quote it for a string", line)
    return value


def _integer(text: str, digits: str, base: int, line: int) -> int:
    # Refuse on length before converting: int() of thousands of digits is slow, and refused past 4,300.
    if len(digits.lstrip("0")) > {10: 16, 8: 18, 16: 14}[base]:
        raise _too_big(text, line)
    number = int(text, 0) if base != 10 else int(text, 10)
    if abs(number) > MAX_INTEGER:
        raise _too_big(text, line)
    return number


def _too_big(text: str, line: int) -> YamlError:
    return YamlError(
        f"the integer {_preview(text)} is outside +-(2**53 - 1), the integers every JSON reader holds exactly",
        line,
    )


def _preview(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
