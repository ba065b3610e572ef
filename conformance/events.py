"""The events of a case's history, as plain values, and the bounded copy of a history a report keeps.

An ``Event`` is one thing the harness did or saw: its place in the history (``seq``), when (``at_ms``,
milliseconds after the history began), who did it or where the kit saw it (``actor``: ``kit``, a worker
process such as ``w1``, ``control-plane``, ``origin``, ``journal``, ``watch``, ``tool``), what happened
(``kind``) and the plain JSON values that say how (``data``). ``schemas/report/history.json`` describes the
shape. Pure: the recorder is ``history``; the checks read these values only.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from resumekit.conformance._text import safe

REPORT_EVENTS = 400  # events a report keeps of one failing case's history
REPORT_BYTES = 192 * 1024  # bytes of JSON a report keeps of one failing case's history
_VALUE_CHARS = 2000  # characters of one string a report's copy keeps
_VALUE_ITEMS = 40  # items of one list or object a report's copy keeps
_VALUE_DEPTH = 8  # lists and objects nested in one another a report's copy keeps
_REPORT_INDENT = 8  # spaces before each line of an event in a report (indent 2, four levels deep)
CUT = "history-cut"


class Budget(Protocol):
    """What a report's histories may still take, shared by the cases of a run (``history.ReportBudget``)."""

    def take(self, wanted: int) -> int:
        """Take up to *wanted* bytes of what is left; how many were granted."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing the harness did or saw, at ``at_ms`` milliseconds after the history began."""

    seq: int
    at_ms: float
    actor: str
    kind: str
    data: Mapping[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        """A member of the event's data."""
        return self.data.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        """The event as a report keeps it."""
        return {"seq": self.seq, "atMs": self.at_ms, "actor": self.actor, "kind": self.kind, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        """An event back from a report."""
        return cls(data["seq"], data["atMs"], data["actor"], data["kind"], MappingProxyType(dict(data["data"])))


def for_report(
    events: Sequence[Event], cut: Mapping[str, int] | None = None, budget: Budget | None = None
) -> list[dict[str, Any]]:
    """A bounded copy of a history for a report: long values shortened, at most ``REPORT_EVENTS`` events and
    ``REPORT_BYTES`` bytes (and what *budget* still grants), keeping the story's start and its end, with a
    ``history-cut`` event in between that counts what was left out, by actor and kind.

    Bytes are counted as the report writes them (``report_size``): UTF-8, indented, at the depth an event
    stands in a report, so that what the budget grants is what the report file grows by.
    """
    sizes = _Sizes(events)
    wanted = _kept(sizes, REPORT_BYTES)
    allowed = sum(sizes[i] for i in wanted)
    if budget is not None:
        granted = budget.take(allowed)
        if granted < allowed:
            wanted = _kept(sizes, granted)
    kept = sorted(wanted)
    if len(kept) == len(events) and not cut:
        return [sizes.shown(i) for i in kept]
    left_out: Counter[str] = Counter()
    kept_set = set(kept)
    for index, event in enumerate(events):
        if index not in kept_set:
            left_out[f"{event.actor} {event.kind}"] += 1
    left_out.update(cut or {})
    first_gap = next((i for i, k in enumerate(kept) if i != k), len(kept))
    before = [sizes.shown(i) for i in kept[:first_gap]]
    marker = {
        "seq": events[first_gap].seq if first_gap < len(events) else len(events),
        "atMs": before[-1]["atMs"] if before else 0.0,
        "actor": "kit",
        "kind": CUT,
        "data": {"leftOut": _short(dict(sorted(left_out.items()))), "events": len(events) + sum((cut or {}).values())},
    }
    return [*before, marker, *(sizes.shown(i) for i in kept[first_gap:])]


class _Sizes:
    """The report's copy of each event and its size in a report, made only for the events asked about."""

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = events
        self._shown: dict[int, dict[str, Any]] = {}
        self._sizes: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._events)

    def shown(self, index: int) -> dict[str, Any]:
        if index not in self._shown:
            self._shown[index] = _shortened(self._events[index]).to_dict()
        return self._shown[index]

    def __getitem__(self, index: int) -> int:
        if index not in self._sizes:
            self._sizes[index] = report_size(self.shown(index))
        return self._sizes[index]


def report_size(item: Any) -> int:
    """The bytes *item* (an event of a history) takes in a JSON report written with ``indent=2``: its UTF-8,
    every line indented to where an event stands (``results[i].history[j]``), and the separator after it.

    Counted from its compact form (json's fast encoder; an indented dump runs json's slow one) and its
    layout: ``indent=2`` adds a space after each key's colon, and a line break and indentation before each
    member of a container that is not empty and before its closing bracket."""
    compact = json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str)
    keys, breaks, spaces = _layout(item, 0)
    size = len(compact.encode("utf-8", "backslashreplace")) + keys + breaks + spaces
    return size + _REPORT_INDENT * (breaks + 1) + 2


def _layout(value: Any, depth: int) -> tuple[int, int, int]:
    """What ``indent=2`` adds to *value* at *depth*: the keys (a space each), line breaks and indentation."""
    if not isinstance(value, (dict, list)) or not value:
        return 0, 0, 0
    items = list(value.values()) if isinstance(value, dict) else value
    keys = len(value) if isinstance(value, dict) else 0
    breaks, spaces = len(items) + 1, len(items) * 2 * (depth + 1) + 2 * depth
    for item in items:
        more = _layout(item, depth + 1)
        keys, breaks, spaces = keys + more[0], breaks + more[1], spaces + more[2]
    return keys, breaks, spaces


def _kept(sizes: _Sizes, allowed: int) -> set[int]:
    """The positions kept: every one when they fit, else as many from the start as a third of the room takes,
    and the rest from the end."""
    if len(sizes) <= REPORT_EVENTS and sum(sizes[i] for i in range(len(sizes))) <= allowed:
        return set(range(len(sizes)))
    room, count = allowed, REPORT_EVENTS
    head: list[int] = []
    for index in range(len(sizes)):
        if sizes[index] > room // 3 or len(head) >= count // 3:
            break
        head.append(index)
        room -= sizes[index]
    tail: list[int] = []
    for index in range(len(sizes) - 1, len(head) - 1, -1):
        if sizes[index] > room or len(head) + len(tail) >= count:
            break
        tail.append(index)
        room -= sizes[index]
    return set(head) | set(tail)


def _shortened(event: Event) -> Event:
    data = _short(dict(event.data))
    return Event(event.seq, event.at_ms, safe(event.actor), safe(event.kind), MappingProxyType(data))


def _short(value: Any, depth: int = 0) -> Any:
    """*value* as plain JSON with every long string, list and object cut, saying how much was left out: nested
    at most ``_VALUE_DEPTH`` deep, each string made ``safe``, and a value JSON has no form for as its text."""
    if isinstance(value, str):
        value = safe(value)
        return value if len(value) <= _VALUE_CHARS else value[:_VALUE_CHARS] + f"... ({len(value)} characters)"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= _VALUE_DEPTH:
        return f"... ({type(value).__name__} of {len(value)} items nested deeper than {_VALUE_DEPTH})"
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = {safe(str(key)): _short(item, depth + 1) for key, item in items[:_VALUE_ITEMS]}
        if len(items) > _VALUE_ITEMS:
            shown["..."] = f"{len(items) - _VALUE_ITEMS} more members"
        return shown
    if isinstance(value, (list, tuple)):
        # The end of a list is what a reader of a story wants most: the last rows, the latest requests.
        if len(value) > _VALUE_ITEMS:
            later = [_short(item, depth + 1) for item in value[-_VALUE_ITEMS:]]
            return [f"... {len(value) - _VALUE_ITEMS} earlier items", *later]
        return [_short(item, depth + 1) for item in value]
    return _short(str(value), depth)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
