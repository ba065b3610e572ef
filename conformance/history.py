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
was left out. A report keeps a smaller copy of a failing case's history (``events.for_report``), bounded per
case and across the run by a ``ReportBudget``, so that a report in which every case fails stays small.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from resumekit.conformance.events import CUT, Event

MAX_EVENTS = 200_000  # events one case's history holds at most
MAX_BYTES = 64 * 1024 * 1024  # bytes of their JSON
REPORT_RUN_BYTES = 12 * 1024 * 1024  # bytes of JSON a report keeps of every history together


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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
