"""WRK-3: a worker answered "no task" waits the answer's ``retry_after_ms`` in real time before it claims again.

Pure: the control plane's shell stamps each request with its arrival in real time (``arrived_ms``), the
harness lists the claims in order, and this module only judges the gaps.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.results import Mismatch

# A claim may come a little sooner than retry_after_ms after the empty answer's arrival: timers of some
# runtimes fire up to a millisecond early, and the answer's own latency is not the worker's to wait out.
TOLERANCE = 0.75


def pacing_checks(ev: Evidence) -> list[Mismatch]:
    """WRK-3 over every worker process's claims: after an empty one, the next comes no sooner than allowed."""
    by_worker: dict[str, list[Mapping[str, Any]]] = {}
    for claim in ev.claims:
        by_worker.setdefault(str(claim.get("worker")), []).append(claim)
    found: list[Mismatch] = []
    for worker, claims in sorted(by_worker.items()):
        found += _gaps(worker, claims, ev.retry_after_ms)
    return found


def _gaps(worker: str, claims: Sequence[Mapping[str, Any]], retry_after_ms: int) -> list[Mismatch]:
    """The WRK-3 finding for one worker process's claims, in order: one mismatch, however many early."""
    early: list[float] = []
    for earlier, later in itertools.pairwise(claims):
        if not earlier.get("empty"):
            continue
        before, after = earlier.get("arrived_ms"), later.get("arrived_ms")
        if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
            return [
                _m(
                    "WRK-3",
                    f"/workers/{worker}/claims",
                    "each claim's arrival time",
                    None,
                    "a claim's arrival went unrecorded",
                )
            ]
        if after - before < TOLERANCE * retry_after_ms:
            early.append(after - before)
    if not early:
        return []
    # Claims sent side by side are logged as they are answered, so one may have arrived before the one
    # logged ahead of it: no claim came sooner than at once.
    soonest = max(0.0, min(early))
    at_once = sum(gap <= 0 for gap in early)
    note = (
        f"{len(early)} claim(s) came sooner than retry_after_ms ({retry_after_ms} ms) after a claim answered "
        f"without a task, the soonest after {soonest:.1f} ms"
        + (f"; {at_once} of them while an earlier one was still being answered" if at_once else "")
    )
    return [_m("WRK-3", f"/workers/{worker}/claims", f">= {retry_after_ms} ms between claims", round(soonest, 1), note)]
