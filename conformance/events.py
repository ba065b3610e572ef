"""The events of a case's history, as plain values, and the bounded copy of a history a report keeps.

An ``Event`` is one thing the harness did or saw: its place in the history (``seq``), when (``at_ms``,
milliseconds after the history began), who did it or where the kit saw it (``actor``: ``kit``, a worker
process such as ``w1``, ``control-plane``, ``origin``, ``journal``, ``watch``, ``tool``), what happened
(``kind``) and the plain JSON values that say how (``data``). ``schemas/report/history.json`` describes the
shape. Pure: the recorder is ``history``; the checks read these values only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

REPORT_EVENTS = 400  # events a report keeps of one failing case's history
REPORT_BYTES = 192 * 1024  # bytes of JSON a report keeps of one failing case's history
_VALUE_CHARS = 2000  # characters of one string a report's copy keeps
_VALUE_ITEMS = 40  # items of one list or object a report's copy keeps
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
    ``history-cut`` event in between that counts what was left out, by actor and kind."""
    shown = [_shortened(event).to_dict() for event in events]
    sizes = [len(_dumps(item)) + 1 for item in shown]
    allowed = min(REPORT_BYTES, sum(sizes))
    if budget is not None:
        allowed = budget.take(allowed)
    kept = _kept(sizes, allowed)
    if len(kept) == len(shown) and not cut:
        return shown
    left_out = Counter(f"{events[i].actor} {events[i].kind}" for i in range(len(events)) if i not in kept)
    left_out.update(cut or {})
    first_gap = next((i for i in range(len(shown)) if i not in kept), len(shown))
    total = len(events) + sum((cut or {}).values())
    marker = {"seq": first_gap, "atMs": shown[first_gap - 1]["atMs"] if first_gap else 0.0, "actor": "kit",
              "kind": CUT, "data": {"leftOut": dict(sorted(left_out.items())), "events": total}}
    ordered = [shown[i] for i in sorted(kept) if i < first_gap]
    ordered.append(marker)
    ordered += [shown[i] for i in sorted(kept) if i >= first_gap]
    return ordered


def _kept(sizes: Sequence[int], allowed: int) -> set[int]:
    """The positions kept: as many from the start as a third of the room takes, the rest from the end."""
    if len(sizes) <= REPORT_EVENTS and sum(sizes) <= allowed:
        return set(range(len(sizes)))
    room, count = allowed, REPORT_EVENTS
    head: list[int] = []
    for index, size in enumerate(sizes):
        if size > room // 3 or len(head) >= count // 3:
            break
        head.append(index)
        room -= size
    tail: list[int] = []
    for index in range(len(sizes) - 1, len(head) - 1, -1):
        if sizes[index] > room or len(head) + len(tail) >= count:
            break
        tail.append(index)
        room -= sizes[index]
    return set(head) | set(tail)


def _shortened(event: Event) -> Event:
    return Event(event.seq, event.at_ms, event.actor, event.kind, MappingProxyType(_short(dict(event.data))))


def _short(value: Any) -> Any:
    """*value* with every long string, list and object cut, saying how much was left out."""
    if isinstance(value, str):
        return value if len(value) <= _VALUE_CHARS else value[:_VALUE_CHARS] + f"... ({len(value)} characters)"
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = {str(key): _short(item) for key, item in items[:_VALUE_ITEMS]}
        if len(items) > _VALUE_ITEMS:
            shown["..."] = f"{len(items) - _VALUE_ITEMS} more members"
        return shown
    if isinstance(value, (list, tuple)):
        # The end of a list is what a reader of a story wants most: the last rows, the latest requests.
        if len(value) > _VALUE_ITEMS:
            return [f"... {len(value) - _VALUE_ITEMS} earlier items", *(_short(item) for item in value[-_VALUE_ITEMS:])]
        return [_short(item) for item in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
