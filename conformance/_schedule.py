"""Cases on daemon threads, each under a deadline for everything the kit does for it.

Every wait inside a case has its own deadline already (a reply, a worker's state, a query of its journal);
this is the backstop over all of them together. A case whose thread is still busy when its deadline
(``Case.deadline_s``) has passed is abandoned: it gets an errored result that says so, the processes its
thread started are ended, and another thread takes its place, so that one case the kit cannot finish costs
that case and never the run. An abandoned thread is a daemon: whatever it still does ends with the run,
and anything it returns later is dropped.
"""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from resumekit.conformance import _process, contracts
from resumekit.conformance.cases import Case
from resumekit.conformance.results import CaseResult, Outcome

__all__ = ["Schedule"]

_TICK = 0.5  # seconds between looks at the running cases' deadlines while waiting for one


@dataclass
class _Unit:
    """Cases one thread runs in order: a serial kind's, or one case of any other kind."""

    left: collections.deque[int]
    abandoned: bool = False


@dataclass
class _Running:
    """A case a thread has begun: when, on which thread, in which unit."""

    began: float
    thread: int
    unit: _Unit


@dataclass
class Schedule:
    """*chosen* run on up to *jobs* threads by *one*; ``result(i)`` waits for the i-th, in any order.

    The cases of serial kinds form one unit, run in order on one thread; every other case is a unit of its
    own, those of kinds whose single cases take longest (``Kind.first``) started first, then the heaviest
    (``Case.weight``), so that the run does not end waiting on one. A unit's exception fails its own future,
    which ``result`` raises.
    """

    chosen: Sequence[Case]
    one: Callable[[Case], CaseResult]
    jobs: int
    errored: Callable[..., CaseResult]  # result_for: (case, outcome, message=...) -> CaseResult
    futures: list[Future[CaseResult]] = field(init=False)
    _units: queue.SimpleQueue[_Unit] = field(init=False, default_factory=queue.SimpleQueue)
    _running: dict[int, _Running] = field(init=False, default_factory=dict)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.futures = [Future() for _ in self.chosen]
        kinds = {case.kind: contracts.kind(case.kind) for case in self.chosen}
        serial = {name for name, kind in kinds.items() if kind is not None and kind.serial}
        first = {name for name, kind in kinds.items() if kind is not None and kind.first}
        in_order = [index for index, case in enumerate(self.chosen) if case.kind in serial]
        rest = [index for index, case in enumerate(self.chosen) if case.kind not in serial]
        # stable: selection order among equals
        rest.sort(key=lambda index: (0 if self.chosen[index].kind in first else 1, -self.chosen[index].weight))
        for indices in ([in_order] if in_order else []) + [[index] for index in rest]:
            self._units.put(_Unit(collections.deque(indices)))
        for _ in range(min(max(1, self.jobs), len(rest) + (1 if in_order else 0))):
            self._spawn()

    def result(self, index: int) -> CaseResult:
        """The i-th case's result, once it is done or abandoned; meanwhile, every overdue case is abandoned."""
        future = self.futures[index]
        while True:
            try:
                return future.result(timeout=_TICK)
            except TimeoutError:
                self._abandon_overdue()

    def cancel(self) -> None:
        """Start no further case (Ctrl-C, or a runner that raised)."""
        for future in self.futures:
            future.cancel()

    def threads(self) -> list[threading.Thread]:
        """Every thread that has run cases."""
        return list(self._threads)

    def interrupt(self, grace: float) -> list[threading.Thread]:
        """Ctrl-C, once every process is killed: start no further case, wait up to *grace* seconds for the
        running ones to end (each removes its own scratch folder as it ends), and name every thread."""
        self.cancel()
        with self._lock:
            running = [self.futures[index] for index in self._running]
        concurrent.futures.wait(running, timeout=grace)
        return list(self._threads)

    def _spawn(self) -> None:
        thread = threading.Thread(target=self._work, name=f"resumekit-job-{len(self._threads) + 1}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            try:
                unit = self._units.get_nowait()
            except queue.Empty:
                return
            while True:
                with self._lock:
                    if unit.abandoned or not unit.left:
                        break
                    index = unit.left.popleft()
                    future = self.futures[index]
                    if not future.set_running_or_notify_cancel():
                        continue
                    self._running[index] = _Running(time.monotonic(), threading.get_ident(), unit)
                self._finish(index, future)
            with self._lock:
                if unit.abandoned:
                    return  # a thread took this one's place

    def _finish(self, index: int, future: Future[CaseResult]) -> None:
        try:
            outcome: CaseResult | BaseException = self.one(self.chosen[index])
        except BaseException as error:  # handed to the caller, who meets it in order
            outcome = error
        with self._lock:
            self._running.pop(index, None)
            if future.done():
                return  # abandoned meanwhile: its result was given
            try:
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
            except InvalidStateError:  # pragma: no cover - set only under the lock
                pass

    def _abandon_overdue(self) -> None:
        now = time.monotonic()
        with self._lock:
            overdue = [
                (index, running)
                for index, running in self._running.items()
                if now - running.began > self.chosen[index].deadline_s
            ]
            for index, running in overdue:
                self._abandon(index, running)

    def _abandon(self, index: int, running: _Running) -> None:
        """Give the case its errored result, end its processes, and put a new thread in its thread's place."""
        case = self.chosen[index]
        del self._running[index]
        self.futures[index].set_result(
            self.errored(
                case,
                Outcome.ERRORED,
                message=f"the kit's work on this case did not end within its deadline of {case.deadline_s:g} s: "
                "the case was abandoned and the processes it started were ended",
            )
        )
        running.unit.abandoned = True
        for later in running.unit.left:  # the rest of a serial kind's unit: never run, and said so
            if self.futures[later].set_running_or_notify_cancel():
                self.futures[later].set_result(
                    self.errored(
                        self.chosen[later],
                        Outcome.ERRORED,
                        message=f"not run: {case.id!r}, before it on the same thread of its serial kind, "
                        "was abandoned at its deadline",
                    )
                )
        running.unit.left.clear()
        _process.kill_all(owner=running.thread)
        self._spawn()
