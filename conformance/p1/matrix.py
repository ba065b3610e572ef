"""The P1 crash matrices and the cache tear sweep (docs/spec/p1.md, FPT-5, CACHE-4).

SQLite's crash loop applied to a worker: crash it at the 1st, 2nd, ... failpoint site it reaches, restart
it, require convergence, and advance the point until the task completes without reaching it. A two-crash
matrix crashes every point of the recovery path after each first crash; a tear sweep kills the worker at
one failpoint and tears its cache to every length short of the whole before the restart.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.cases import MatrixCase
from resumekit.conformance.p1.checks import campaigns
from resumekit.conformance.p1.scenario import run_steps
from resumekit.conformance.p1.worker import Factory, any_failpoint
from resumekit.conformance.p1.world import KILL_MODEL, Unreached
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.conformance.runner import result_for


def _crash(failpoint: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Start a worker armed at *failpoint*, kill it there, and let an unrecorded claim's lease expire."""
    return [{"start": {"failpoint": failpoint}}, {"wait": "blocked"}, {"kill": {}}, {"expire_unrecorded": {}}]


_CONVERGE: tuple[dict[str, Any], ...] = ({"start": {}}, {"wait": "idle"})


def _tear_steps(case: MatrixCase, length: int) -> list[dict[str, Any]]:
    """A kill at the sweep's failpoint, the cache torn to *length* bytes, then the restart (CACHE-4)."""
    tear = {"task": case.task, "how": "torn", "at": length, "sweep": True}
    return [*_crash({"name": case.tear, "hit": 1}), {"damage_cache": tear}, *_CONVERGE]


class _Matrix:
    """The runs of one crash matrix so far, and the first failed one."""

    def __init__(self, case: MatrixCase, factory: Factory, profile: str) -> None:
        self.case, self.factory, self.profile = case, factory, profile
        self.visited: list[tuple[str, ...]] = []  # the points each converged run crashed at
        self.blocks = 0  # failpoints the worker blocked at over every run, converged or not
        self.failed: CaseResult | None = None
        self.firsts = 0  # first crashes whose recovery path was crashed in turn

    def run(self, steps: Sequence[Mapping[str, Any]], label: str) -> tuple[str, ...] | None:
        """The points one run crashed at, None when its last armed point was not reached (or it failed)."""
        blocked: list[str] = []
        try:
            result = run_steps(self.case, self.factory, self.profile, steps, blocked)
        except Unreached:
            self.blocks += len(blocked)
            return (*blocked, "")  # "" marks the armed point that was never reached
        self.blocks += len(blocked)
        if not result.ok:
            where = " then ".join(blocked) or label
            note = f"crash matrix, run {len(self.visited) + 1} ({label}: {where}): {result.message}"
            self.failed = dataclasses.replace(result, message=note)
            return None
        self.visited.append(tuple(blocked) or (label,))
        return tuple(blocked)

    def summary(self, started: float) -> str:
        kind = self.case.tasks[self.case.task]["kind"]
        text = f"{len(self.visited)} crash points visited for the {kind} task"
        if self.case.tear:
            text = f"{len(self.visited)} tears of the {kind} task's cache visited, after a kill at {self.case.tear}"
        if self.case.crashes == 2:
            text += f" ({self.firsts} first crashes, each followed by a crash at every point of its recovery path)"
        return text + f", {len(self.visited)} runs in {time.monotonic() - started:.0f} s"


def run_matrix(case: Any, factory: Factory, profile: str) -> CaseResult:
    """SQLite's crash loop applied to a worker (p1.md FPT-5): crash at the 1st, 2nd, ... point it reaches,
    restart, require convergence, and advance the point until the task completes without reaching it."""
    assert isinstance(case, MatrixCase)
    started = time.monotonic()
    matrix = _Matrix(case, factory, profile)
    if case.tear:
        done = _loop(matrix, lambda n: _tear_steps(case, n - 1), "tear")
    elif case.crashes == 1:
        done = _loop(matrix, lambda n: [*_crash(any_failpoint(n)), *_CONVERGE], "first crash")
    else:
        done = _recovery_loops(matrix)
    if done and not matrix.visited:  # the loop ended with no crash point visited: it proved nothing
        return _visited_nothing(matrix)
    for point in case.kit_points if done else ():
        steps: list[dict[str, Any]] = [{"fault": {"fault": "KillPoint", "name": point}}, {"start": {}}]
        steps.append({"wait": "killed"})
        steps += [{"expire_unrecorded": {}}, *_CONVERGE]
        if matrix.run(steps, point) is None:
            break
    if matrix.failed is not None:
        return matrix.failed
    if not done:
        endless = campaigns.matrix_never_ends(case.limit)
        return result_for(case, Outcome.FAILED, message=endless.note, mismatches=(endless,))
    return result_for(case, Outcome.PASSED, message=matrix.summary(started), fault_model=KILL_MODEL)


def _visited_nothing(matrix: _Matrix) -> CaseResult:
    """FPT-5: a matrix whose loop ended without one converged run at a crash point fails, never passes empty."""
    case = matrix.case
    armed = repr(case.tear) if case.tear else "hit 1 of any failpoint ('*')"
    found = campaigns.matrix_visited_nothing(armed, matrix.blocks)
    message = f"{found.note} (FPT-5)"
    return result_for(case, Outcome.FAILED, message=message, mismatches=(found,), fault_model=KILL_MODEL)


def _loop(matrix: _Matrix, steps_for: Callable[[int], list[dict[str, Any]]], label: str) -> bool:
    """Advance the armed hit until a run ends without reaching it; False on a failure or at the limit."""
    for hit in range(1, matrix.case.limit + 1):
        crashed = matrix.run(steps_for(hit), f"{label} at hit {hit} of any failpoint")
        if crashed is None:
            return False
        if crashed and crashed[-1] == "":
            return True
    return False


def _recovery_loops(matrix: _Matrix) -> bool:
    """For each first crash, a crash at every point of the recovery path that follows it."""
    case = matrix.case
    firsts: list[dict[str, Any]] = [{"name": name, "hit": 1} for name in case.first]
    for number in range(1, case.limit + 1):
        if case.first and number > len(firsts):
            return True
        first = firsts[number - 1] if case.first else any_failpoint(number)
        matrix.firsts += 1
        for hit in range(1, case.limit + 1):
            steps = [*_crash(first), *_crash(any_failpoint(hit)), *_CONVERGE]
            crashed = matrix.run(steps, f"first crash at {first['name']} hit {first['hit']}, then hit {hit}")
            if crashed is None:
                return False
            if crashed and crashed[-1] == "":
                if len(crashed) == 1:  # the first crash itself was not reached
                    if case.first:
                        never = campaigns.first_never_reached(first["name"])
                        matrix.failed = result_for(case, Outcome.FAILED, message=never.note, mismatches=(never,))
                        return False
                    matrix.firsts -= 1
                    return True
                break
        else:
            return False
    return False
