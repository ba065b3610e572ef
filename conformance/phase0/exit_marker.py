"""The positive control of CRASH-2: an orderly exit after ``phase0.crash.arm`` must write the marker.

A marker absent after a kill proves the kill was a crash only if the implementation's exit path
writes it; the cases that kill (crash, schedule) and ``resumekit doctor`` run this control first.
"""

from __future__ import annotations

import threading

from resumekit.conformance import _files
from resumekit.conformance.adapters import AdapterStartError
from resumekit.conformance.cases import Case
from resumekit.conformance.fault_models import PROCESS_CRASH
from resumekit.conformance.phase0.session import RUN_ID, SESSION_ID, Factory
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.conformance.runner import result_for

MARKER_NEVER_WRITTEN = "the exit path never wrote the marker, so a kill cannot be told from an orderly exit"
ORDERLY_EXITS = ("stop", "end of stdin")


def orderly_exit_problem(factory: Factory, timeout: float | None = None) -> str | None:
    """The positive control of CRASH-2: why an orderly exit after ``phase0.crash.arm`` left no marker, or None.

    Once with ``stop`` and once by closing stdin: start, open a store, arm a marker, exit in order, and
    require the marker. A marker absent after a kill means something only if the exit path writes it.
    None too when the control cannot get as far as the exit (the cases then meet the same failure).
    """
    scratch = _files.scratch("marker-control")
    try:
        for way in ORDERLY_EXITS:
            workspace, marker = scratch / way.replace(" ", "-"), scratch / f"{way.replace(' ', '-')}.marker"
            workspace.mkdir()
            adapter = factory()
            try:
                adapter.start()
            except AdapterStartError:
                return None
            grace = timeout if timeout is not None else adapter.timeout
            replies = [
                adapter.request("phase0.store.open", workspace=str(workspace), sessionId=SESSION_ID, runId=RUN_ID),
                adapter.request("phase0.crash.arm", marker=str(marker)),
            ]
            if any(reply.outcome != "result" for reply in replies) or adapter.process is None:
                adapter.kill()
                return None
            if way == "stop":
                adapter.close()  # `stop`, then up to the timeout to exit, then the kill
                code = None
            else:
                code = adapter.process.stop(grace=grace)
                adapter.process = None
            if not marker.exists():
                how = f"exit status {code}" if code is not None else "its exit"
                return f"no marker after an orderly exit by {way!r} ({how}) following phase0.crash.arm"
        return None
    finally:
        _files.remove(scratch)


class MarkerControl:
    """Runs the orderly-exit control once per run, before the first case that kills."""

    def __init__(self, factory: Factory) -> None:
        self.factory = factory
        self.checked = False
        self.problem: str | None = None
        self._lock = threading.Lock()  # with --jobs, cases of other threads wait for the one control

    def verdict(self, case: Case) -> CaseResult | None:
        """None when the control passed (running it first if no case has), else *case*'s errored result."""
        with self._lock:
            if not self.checked:
                self.problem = orderly_exit_problem(self.factory)
                self.checked = True
        if self.problem is None:
            return None
        return result_for(
            case,
            Outcome.ERRORED,
            message=f"{MARKER_NEVER_WRITTEN} ({self.problem}; CRASH-2)",
            fault_model=PROCESS_CRASH,
        )


__all__ = ["MARKER_NEVER_WRITTEN", "ORDERLY_EXITS", "MarkerControl", "orderly_exit_problem"]
