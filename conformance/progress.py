"""Progress of a run for people: a status line on a terminal, and lines a CI log can follow elsewhere."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from resumekit.conformance._text import printable
from resumekit.conformance.cases import Case
from resumekit.conformance.results import BAD, CaseResult, Outcome


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


HEARTBEAT = 10.0  # seconds: the longest a log without a terminal goes without a line while cases run


class ProgressReporter:
    """Tells a person how far a run is, through *write*.

    On a terminal (*live*) one status line is rewritten in place: the case counter, the case, and inside
    the random crash schedule the kill counter. Elsewhere (a CI log, a file) output is line-based: a line
    when each kind ends, a line every quarter of the schedule's kills, and, whenever *heartbeat* seconds
    pass without a line, one that says how far the run is (cases done of how many, failures so far, time
    elapsed), so that a log never looks hung while a long case runs. The heartbeat has a thread of its
    own; every write holds one lock. Each line is ``printable``: no text of it can move the cursor.
    """

    def __init__(
        self,
        write: Callable[[str], Any],
        *,
        total: int = 0,
        live: bool = False,
        width: int = 79,
        heartbeat: float | None = HEARTBEAT,
    ) -> None:
        self._write, self._total, self._live, self._width = write, total, live, width
        self._kind, self._done, self._status = "", 0, ""
        self._counts: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        self._case = ""
        self._reported_kills = 0
        self._failures = 0
        self._lock = threading.Lock()
        self._begun = self._last = time.monotonic()
        self._heartbeat = None if live else heartbeat
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None

    def _counter(self) -> str:
        digits = len(str(self._total)) if self._total else 1
        return f"[{self._done:>{digits}}/{self._total}]" if self._total else f"[{self._done}]"

    def _show(self, text: str) -> None:
        """Rewrite the status line (live only)."""
        text = _clip(printable(text), self._width)
        pad = max(0, len(self._status) - len(text))
        self._write("\r" + text + " " * pad)
        self._status = text

    def _clear(self) -> None:
        if self._live and self._status:
            self._write("\r" + " " * len(self._status) + "\r")
            self._status = ""

    def _line(self, text: str) -> None:
        self._clear()
        self._write(printable(text) + "\n")
        self._last = time.monotonic()

    def _end_kind(self) -> None:
        if not self._kind:
            return
        counts = ", ".join(f"{n} {o.value.replace('_', ' ')}" for o, n in self._counts.items() if n)
        self._line(f"{self._kind:<13} {counts or 'nothing ran'}  {self._counter()}")
        self._counts = dict.fromkeys(Outcome, 0)

    def case_started(self, case: Case) -> None:
        with self._lock:
            if case.kind != self._kind:
                self._end_kind()
                self._kind = case.kind
            self._case, self._reported_kills = case.id, 0
            if self._live:
                self._show(f"{self._counter()} {case.kind:<13} {case.id}")
            if self._heartbeat is not None and self._beating is None:
                self._beating = threading.Thread(target=self._beat, name="resumekit-progress", daemon=True)
                self._beating.start()

    def case_finished(self, result: CaseResult) -> None:
        with self._lock:
            self._done += 1
            self._counts[result.outcome] += 1
            if result.outcome in BAD and result.known_failure is None:
                self._failures += 1
            if result.outcome in (Outcome.FAILED, Outcome.ERRORED) and result.known_failure is None:
                self._line(f"{result.outcome.value.upper()} {result.case_id} (details at the end)")
            if self._live:
                self._show(f"{self._counter()} {self._kind:<13} {result.case_id} {result.outcome.value}")

    def kill_progress(self, done: int, total: int) -> None:
        """Inside the random crash schedule: *done* of *total* kills."""
        with self._lock:
            if self._live:
                self._show(f"{self._counter()} {self._kind:<13} {self._case}: kill {done}/{total}")
            elif total and done * 4 // total > self._reported_kills * 4 // total:
                self._reported_kills = done
                self._line(f"{self._kind:<13} {self._case}: kill {done}/{total}")

    def _beat(self) -> None:
        """The heartbeat's thread: a line whenever the log has had none for *heartbeat* seconds, until finish."""
        interval = self._heartbeat or HEARTBEAT
        while True:
            with self._lock:
                due = self._last + interval - time.monotonic()
                if due <= 0:
                    elapsed = time.monotonic() - self._begun
                    self._line(
                        f"{self._kind:<13} {self._done}/{self._total or '?'} cases done, {self._failures} "
                        f"failed so far, {elapsed:.0f} s elapsed; at {self._case}"
                    )
                    due = interval
            if self._stop.wait(due):
                return

    def finish(self) -> None:
        """End the progress output: the last kind's line, the status line cleared, the heartbeat stopped."""
        self._stop.set()
        if self._beating is not None:
            self._beating.join()
        with self._lock:
            self._end_kind()
            self._kind = ""
            self._clear()
