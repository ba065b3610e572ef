"""The story of one case: everything the harness did and saw, in order, as one append-only history.

A crash scenario is a story, and the kit keeps it as Jepsen keeps the history of a test: the harness
records each step it takes and each thing it sees (a process started, killed or exited, a request and its
answer, a journal read, a push, a change in the workspace root) as a typed, timestamped ``Event``, and the
checks judge the history once the case is over. The harness never judges; a check never reads a file.

An event names its ``actor`` (who did it or where the kit saw it: ``kit``, a worker process such as ``w1``,
``control-plane``, ``origin``, ``journal``, ``watch``), its ``kind`` (what happened) and its ``data`` (plain
JSON values). ``schemas/report/history.json`` describes the shape, and ``docs/certifying.md`` the kinds.

A history is bounded while it is recorded: at most ``MAX_EVENTS`` events and ``MAX_BYTES`` bytes of their
JSON per case, so a worker that floods the kit cannot grow it without end. The first event past either cap
is replaced by one ``history-cut`` event, and every later one is only counted, by kind; ``cut`` says what
was left out. A report keeps a smaller copy of a failing case's history (``for_report``), bounded per case
and across the run by a ``ReportBudget``, so that a report in which every case fails stays small.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

MAX_EVENTS = 200_000  # events one case's history holds at most
MAX_BYTES = 64 * 1024 * 1024  # bytes of their JSON
REPORT_EVENTS = 400  # events a report keeps of one failing case's history
REPORT_BYTES = 192 * 1024  # bytes of JSON a report keeps of one failing case's history
REPORT_RUN_BYTES = 12 * 1024 * 1024  # bytes of JSON a report keeps of every history together
_VALUE_CHARS = 2000  # characters of one string a report's copy keeps
_VALUE_ITEMS = 40  # items of one list or object a report's copy keeps
CUT = "history-cut"


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


class History:
    """The append-only history of one case; safe to record into from several threads."""

    def __init__(self, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._began = time.monotonic()
        self._max_events, self._max_bytes = max_events, max_bytes
        self._bytes = 0
        self._cut: Counter[str] = Counter()

    def record(self, actor: str, kind: str, /, **data: Any) -> Event | None:
        """Append one event; None when the history is full and the event was only counted."""
        size = len(_dumps(data)) + len(actor) + len(kind) + 48
        with self._lock:
            if self._cut or len(self._events) + 1 >= self._max_events or self._bytes + size > self._max_bytes:
                if not self._cut:
                    self._append("kit", CUT, {"events": len(self._events), "bytes": self._bytes,
                                              "maxEvents": self._max_events, "maxBytes": self._max_bytes})
                self._cut[f"{actor} {kind}"] += 1
                return None
            self._bytes += size
            return self._append(actor, kind, data)

    def _append(self, actor: str, kind: str, data: Mapping[str, Any]) -> Event:
        at_ms = round((time.monotonic() - self._began) * 1000, 1)
        event = Event(len(self._events), at_ms, actor, kind, MappingProxyType(dict(data)))
        self._events.append(event)
        return event

    @property
    def cut(self) -> Mapping[str, int]:
        """What was left out once the history was full: ``"<actor> <kind>"`` -> how many events."""
        with self._lock:
            return dict(self._cut)

    def events(self) -> tuple[Event, ...]:
        """Every event recorded so far, in order."""
        with self._lock:
            return tuple(self._events)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def since(self, seq: int) -> tuple[Event, ...]:
        """The events recorded at or after position *seq*."""
        with self._lock:
            return tuple(self._events[seq:])


class ReportBudget:
    """The bytes of history a whole report may still keep, shared by the cases of a run (thread-safe)."""

    def __init__(self, total: int = REPORT_RUN_BYTES) -> None:
        self._left = total
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Take up to *wanted* bytes of what is left; how many were granted."""
        with self._lock:
            granted = max(0, min(wanted, self._left))
            self._left -= granted
            return granted


def for_report(
    events: Sequence[Event], cut: Mapping[str, int] | None = None, budget: ReportBudget | None = None
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
