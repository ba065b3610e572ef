"""Mutations of the golden fixture files: bytes, lines, YAML values and whole trees.

Each operator takes a ``Draw`` (where its choices come from) and one golden file, and returns the
mutated tree as a ``Mutation``. The campaign draws with hypothesis; the default tests draw with a seeded
``random.Random``, so this module imports neither pytest nor hypothesis.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from tests.support import ROOT

T = TypeVar("T")

GOLDEN = ROOT / "golden"
# A small decision file that every mutated tree also holds, so a decision run has cases to run.
COMPANION = "phase0/decisions/purity.yaml"


class Draw(Protocol):
    def integer(self, low: int, high: int) -> int: ...

    def choice(self, options: Sequence[T]) -> T: ...


class RandomDraw:
    """Draws from a seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self._random.randint(low, high)

    def choice(self, options: Sequence[T]) -> T:
        return options[self._random.randrange(len(options))]


@dataclass
class Mutation:
    """A mutated golden tree: its files (relative path to bytes) and special entries."""

    operator: str
    target: str  # the relative path of the mutated file
    files: dict[str, bytes]
    # Entries that are not regular files: (relative path, "fifo" | "dev-zero" | "loop" | "directory").
    specials: list[tuple[str, str]] = field(default_factory=list)
    detail: str = ""

    def write_files(self, root: Path) -> None:
        """Write the regular files, and a note of the special entries, below *root*."""
        for name, data in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if self.specials:
            (root / "SPECIALS.txt").write_text("".join(f"{n}: {k}\n" for n, k in self.specials), encoding="utf-8")

    def write(self, root: Path) -> None:
        import os

        for name, data in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for name, kind in self.specials:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "dev-zero":
                path.symlink_to("/dev/zero")
            elif kind == "loop":
                path.symlink_to(path.name)
            elif kind == "directory":
                path.mkdir()

    def snippet(self, limit: int = 600) -> str:
        """A short, printable excerpt of the mutated file, for a report."""
        data = self.files.get(self.target, b"")
        text = data.decode("utf-8", "backslashreplace")
        return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2 :]


def golden_files() -> list[str]:
    return sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.yaml"))


# -- text and bytes -------------------------------------------------------------------------------

CONTROL = ["\0", "\x01", "\x07", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe", "\t", "\r", "\x0c"]

WEIRD_SCALARS = [
    ".nan",
    ".inf",
    "-.inf",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!timestamp 2001-12-14t21:59:43.10-05:00",
    "2001-12-14",
    '"\\ud800"',
    '"\\udfff x"',
    "~",
    "null",
    "[x]",
    "{}",
    "{a: 1}",
    "1.0",
    "2.0",
    "-0",
    "0x1F",
    "0o17",
    "1_000",
    "1e400",
    "-1e400",
    "9" * 5000,
    "-" + "9" * 400,
    "yes",
    "on",
    "'yes'",
    "!!python/object/apply:os.system ['echo pwned']",
    "!!python/name:os.system",
    "!custom x",
    "*undefined",
    "&anchor value",
    "? complex",
    "!!float 1",
    "!!int 1.5",
    "!!str 1",
    "|\n  block",
    '"' + "x" * 200_000 + '"',
    "-1",
    "4294967297",
    str(2**64),
    "true",
    "False",
    "[1, [2, [3]]]",
    "{? [a, b] : c}",
    "{[a]: b}",
    "{1: one}",
    "{null: x}",
]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def byte_flip(draw: Draw, data: bytes) -> tuple[bytes, str]:
    buffer = bytearray(data)
    flips = draw.integer(1, 8)
    for _ in range(flips):
        if buffer:
            index = draw.integer(0, len(buffer) - 1)
            buffer[index] ^= 1 << draw.integer(0, 7)
    return bytes(buffer), f"{flips} bit(s) flipped"


def byte_set(draw: Draw, data: bytes) -> tuple[bytes, str]:
    buffer = bytearray(data)
    index = draw.integer(0, max(len(buffer) - 1, 0))
    value = draw.choice([0, 0xFF, 0x80, 0xC3, 0x0A, 0x0D, 0x3A, 0x22, 0x5B, 0x7B, 0x26, 0x2A, 0x21])
    if buffer:
        buffer[index] = value
    return bytes(buffer), f"byte {index} set to {value:#x}"


def truncate(draw: Draw, data: bytes) -> tuple[bytes, str]:
    at = draw.integer(0, len(data))
    return data[:at], f"cut at byte {at} of {len(data)}"


def delete_lines(draw: Draw, data: bytes) -> tuple[bytes, str]:
    lines = _lines(data)
    start = draw.integer(0, len(lines) - 1)
    count = draw.integer(1, 4)
    return b"".join(lines[:start] + lines[start + count :]), f"lines {start + 1}..{start + count} deleted"


def duplicate_lines(draw: Draw, data: bytes) -> tuple[bytes, str]:
    lines = _lines(data)
    start = draw.integer(0, len(lines) - 1)
    count = draw.integer(1, 6)
    block = lines[start : start + count]
    return b"".join(lines[: start + count] + block + lines[start + count :]), f"lines {start + 1}.. duplicated"


def swap_lines(draw: Draw, data: bytes) -> tuple[bytes, str]:
    lines = _lines(data)
    a, b = draw.integer(0, len(lines) - 1), draw.integer(0, len(lines) - 1)
    lines[a], lines[b] = lines[b], lines[a]
    return b"".join(lines), f"lines {a + 1} and {b + 1} swapped"


def indent_shift(draw: Draw, data: bytes) -> tuple[bytes, str]:
    lines = _lines(data)
    index = draw.integer(0, len(lines) - 1)
    how = draw.choice([b" ", b"  ", b"\t", b"-"])
    if draw.integer(0, 1) and lines[index].startswith(b" "):
        lines[index] = lines[index][1:]
        return b"".join(lines), f"line {index + 1} dedented"
    lines[index] = how + lines[index]
    return b"".join(lines), f"line {index + 1} prefixed with {how!r}"


def insert_control(draw: Draw, data: bytes) -> tuple[bytes, str]:
    char = draw.choice(CONTROL)
    at = draw.integer(0, len(data))
    return data[:at] + char.encode("utf-8", "surrogatepass") + data[at:], f"{char!r} inserted at byte {at}"


def reencode(draw: Draw, data: bytes) -> tuple[bytes, str]:
    how = draw.choice(["utf-16", "utf-16-le", "utf-32", "bom", "latin-1", "crlf", "cr", "lone-surrogate"])
    text = data.decode("utf-8")
    if how == "bom":
        return b"\xef\xbb\xbf" + data, how
    if how == "crlf":
        return data.replace(b"\n", b"\r\n"), how
    if how == "cr":
        return data.replace(b"\n", b"\r"), how
    if how == "latin-1":
        return text.replace("e", "\u00e9", 3).encode("latin-1", "replace"), how
    if how == "lone-surrogate":
        return data.replace(b"description: ", b"description: \xed\xa0\x80", 1), how
    return text.encode(how), how


def _value_lines(data: bytes) -> list[int]:
    return [i for i, line in enumerate(_lines(data)) if b": " in line and not line.lstrip().startswith(b"#")]


def weird_scalar(draw: Draw, data: bytes) -> tuple[bytes, str]:
    """Replaces the value after one ``key: `` (block or flow) with a value YAML allows but JSON does not."""
    lines = _lines(data)
    candidates = _value_lines(data) or [0]
    index = draw.choice(candidates)
    line = lines[index]
    positions = [i for i in range(len(line) - 1) if line[i : i + 2] == b": "]
    value = draw.choice(WEIRD_SCALARS).encode("utf-8")
    if not positions:
        return data, "no value to replace"
    at = draw.choice(positions) + 2
    end = len(line)
    for stop in (b",", b"}", b"\n"):
        found = line.find(stop, at)
        if found != -1:
            end = min(end, found)
    lines[index] = line[:at] + value + line[end:]
    return b"".join(lines), f"line {index + 1}: value replaced with {value[:60]!r}"


def alias_bomb(draw: Draw, data: bytes) -> tuple[bytes, str]:
    levels = draw.choice([3, 6, 9, 12])
    width = draw.choice([3, 9])
    head = [b"x0: &x0 [" + b", ".join([b'"lol"'] * width) + b"]\n"]
    for level in range(1, levels):
        items = b", ".join([b"*x%d" % (level - 1)] * width)
        head.append(b"x%d: &x%d [%s]\n" % (level, level, items))
    lines = _lines(data)
    # Put the anchors at the top and use the last one as a value further down.
    body = b"".join(lines).replace(b"description: ", b"description: *x%d #" % (levels - 1), 1)
    return b"".join(head) + body, f"alias bomb {width}^{levels}"


def recursive_alias(draw: Draw, data: bytes) -> tuple[bytes, str]:
    form = draw.choice([b"&a [*a]", b"&a {k: *a}", b"&a [1, [2, *a]]"])
    return data.replace(b"description: ", b"description: " + form + b" #", 1), f"recursive alias {form!r}"


def deep_nesting(draw: Draw, data: bytes) -> tuple[bytes, str]:
    depth = draw.choice([100, 999, 1001, 5000, 50_000])
    style = draw.choice(["flow-list", "flow-map", "block"])
    if style == "flow-list":
        value = b"[" * depth + b"]" * depth
    elif style == "flow-map":
        value = b"{a: " * depth + b"1" + b"}" * depth
    else:
        depth = min(depth, 5000)
        value = b"\n" + b"".join(b"  " * (i + 1) + b"k:\n" for i in range(depth)) + b"  " * (depth + 1) + b"v"
    key = draw.choice([b"description: ", b"args: ", b"events: "])
    return data.replace(key, key + value + b" #" if style != "block" else key + value + b"\n#", 1), (
        f"{style} nested {depth} deep at {key.decode().strip()}"
    )


def huge_line(draw: Draw, data: bytes) -> tuple[bytes, str]:
    size = draw.choice([1 << 16, 1 << 20, 8 << 20])
    return data.replace(b"description: ", b"description: " + b"y" * size + b" #", 1), f"a {size}-byte value"


def many_documents(draw: Draw, data: bytes) -> tuple[bytes, str]:
    how = draw.choice([b"---\n", b"...\n", b"--- |\n  text\n", b"%YAML 1.2\n---\n", b"%TAG ! tag:x,2000:\n---\n"])
    if draw.integer(0, 1):
        return how + data, f"{how!r} before"
    return data + b"\n" + how + data, f"{how!r} and the file again after"


def emptiness(draw: Draw, data: bytes) -> tuple[bytes, str]:
    value = draw.choice([b"", b"\n", b"# only a comment\n", b"null\n", b"[]\n", b"42\n", b'"text"\n', b"- a\n- b\n"])
    return value, f"whole file replaced with {value!r}"


TEXT_OPERATORS: dict[str, Callable[[Draw, bytes], tuple[bytes, str]]] = {
    "byte-flip": byte_flip,
    "byte-set": byte_set,
    "truncate": truncate,
    "delete-lines": delete_lines,
    "duplicate-lines": duplicate_lines,
    "swap-lines": swap_lines,
    "indent-shift": indent_shift,
    "control-char": insert_control,
    "reencode": reencode,
    "weird-scalar": weird_scalar,
    "alias-bomb": alias_bomb,
    "recursive-alias": recursive_alias,
    "deep-nesting": deep_nesting,
    "huge-line": huge_line,
    "documents": many_documents,
    "emptiness": emptiness,
}


# -- parsed YAML --------------------------------------------------------------------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(root, path[:-1])[path[-1]] = value
    return root


SWAPS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    7,
    1.0,
    2.5,
    float("nan"),
    float("inf"),
    10**30,
    2**63,
    10**400,
    "",
    "x",
    "../../../outside",
    "A" * 5000,
    "\u0000nul",
    "\x1b[31mred",
    "é",
    [],
    ["x"],
    [[[]]],
    {},
    {"unexpected": 1},
    {"kind": "text"},
    b"binary",
    {1, 2},
]


def _pointer(path: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(part) for part in path)


def type_swap(draw: Draw, data: Any) -> tuple[Any, str]:
    paths = _paths(data)
    path = draw.choice(paths)
    value = draw.choice(SWAPS)
    return _set(data, path, value), f"{_pointer(path)} set to {value!r}"[:200]


def delete_key(draw: Draw, data: Any) -> tuple[Any, str]:
    paths = [p for p in _paths(data) if p]
    if not paths:
        return data, "nothing to delete"
    path = draw.choice(paths)
    parent = _get(data, path[:-1])
    del parent[path[-1]]
    return data, f"{_pointer(path)} deleted"


def add_key(draw: Draw, data: Any) -> tuple[Any, str]:
    maps = [p for p in _paths(data) if isinstance(_get(data, p), dict)]
    if not maps:
        return data, "no mapping"
    path = draw.choice(maps)
    key = draw.choice(["unknown", "expect_core", "ID", "id ", "$schema", "<<", "clauses", "x" * 300])
    _get(data, path)[key] = draw.choice(SWAPS)
    return data, f"key {key[:40]!r} added at {_pointer(path)}"


def numbers(draw: Draw, data: Any) -> tuple[Any, str]:
    """Moves an integer a little or a lot: high-water marks, lines and counts that contradict the events."""
    paths = [p for p in _paths(data) if type(_get(data, p)) is int]
    if not paths:
        return data, "no integer"
    path = draw.choice(paths)
    old = _get(data, path)
    new = draw.choice([old + 1, old - 1, 0, -1, old * 1000, 2**31, 2**53 + 1, 10**19])
    return _set(data, path, new), f"{_pointer(path)}: {old} -> {new}"


def clauses(draw: Draw, data: Any) -> tuple[Any, str]:
    paths = [p for p in _paths(data) if p and p[-1] == "clauses"]
    if not paths:
        return data, "no clauses"
    path = draw.choice(paths)
    value = draw.choice(["XYZ-99", "OP-999", "op-1", "", "OP-1 ", "OP-1\n", 7, None, ["OP-1"]])
    clauses = _get(data, path)
    if isinstance(clauses, list):
        clauses.append(value)
    return data, f"{_pointer(path)} gets {value!r}"


def case_ids(draw: Draw, data: Any) -> tuple[Any, str]:
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not cases or not isinstance(cases[0], dict):
        return data, "no cases"
    index = draw.integer(0, len(cases) - 1)
    how = draw.choice(["duplicate", "same-id", "traversal", "empty", "long", "glob", "unicode", "many"])
    case = cases[index]
    if how == "duplicate":
        cases.append(case)
    elif how == "same-id" and len(cases) > 1:
        cases[(index + 1) % len(cases)]["id"] = case.get("id")
    elif how == "many":
        # 1,000 renamed copies: the loader must stay linear in the number of cases.
        for n in range(1000):
            copy = dict(case)
            copy["id"] = f"{case.get('id')}-copy-{n}"
            cases.append(copy)
    else:
        case["id"] = {
            "traversal": "../../../etc/passwd",
            "empty": "",
            "long": "c" * 10_000,
            "glob": "*",
            "unicode": "cas\u00e9-\u202e-\u0000",
        }.get(how, case.get("id"))
    return data, f"case {index}: {how}"


def kind_swap(draw: Draw, data: Any) -> tuple[Any, str]:
    if not isinstance(data, dict):
        return data, "not a mapping"
    field_name = draw.choice(["kind", "schema_version"])
    value = draw.choice(
        ["phase0/decisions", "phase0/failpoints", "phase0/ledger-faults", "phase0/crash-schedule", "p1/scenarios",
         "p1/failpoints", "phase1/unknown", 2, 1.0, None, ["phase0/decisions"], 0]
    )
    data[field_name] = value
    return data, f"{field_name} set to {value!r}"


STRUCTURE_OPERATORS: dict[str, Callable[[Draw, Any], tuple[Any, str]]] = {
    "type-swap": type_swap,
    "delete-key": delete_key,
    "add-key": add_key,
    "numbers": numbers,
    "clauses": clauses,
    "case-ids": case_ids,
    "kind-swap": kind_swap,
}


class _Dumper(yaml.SafeDumper):
    """Dumps bytes as YAML's own tag, so a mutation can put non-JSON values in a fixture; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.add_representer(
    bytes, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:binary", base64.b64encode(value).decode())
)


def _dump(data: Any) -> bytes:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096).encode("utf-8")


# -- whole trees --------------------------------------------------------------------------------

TREE_KINDS = ["fifo", "dev-zero", "loop", "directory", "copy", "empty-dir", "yml"]


def tree(draw: Draw, target: str, data: bytes) -> Mutation:
    how = draw.choice(TREE_KINDS)
    files = {target: data}
    specials: list[tuple[str, str]] = []
    if how in ("fifo", "dev-zero", "loop", "directory"):
        specials.append(("phase0/decisions/extra.yaml", how))
    elif how == "copy":
        files["phase0/decisions/copy-of-" + Path(target).name] = data  # every id twice
    elif how == "yml":
        files[target.replace(".yaml", ".yml")] = data
    return Mutation("tree", target, files, specials, how)


# -- one mutation -------------------------------------------------------------------------------

OPERATORS = [*TEXT_OPERATORS, *STRUCTURE_OPERATORS, "tree"]


def mutate(draw: Draw, target: str | None = None, operator: str | None = None) -> Mutation:
    """One mutation of one golden file (drawn unless given), in a tree with the companion decision file."""
    target = target or draw.choice(golden_files())
    operator = operator or draw.choice(OPERATORS)
    original = (GOLDEN / target).read_bytes()
    if operator in TEXT_OPERATORS:
        data, detail = TEXT_OPERATORS[operator](draw, original)
        mutation = Mutation(operator, target, {target: data}, detail=detail)
    elif operator in STRUCTURE_OPERATORS:
        parsed = yaml.safe_load(original)
        changed, detail = STRUCTURE_OPERATORS[operator](draw, parsed)
        mutation = Mutation(operator, target, {target: _dump(changed)}, detail=detail)
    else:
        mutation = tree(draw, target, original)
    if target != COMPANION:
        mutation.files.setdefault(COMPANION, (GOLDEN / COMPANION).read_bytes())
    return mutation
