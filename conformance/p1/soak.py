"""The P1 soak: a seeded random schedule of kills and control-plane faults, then every task must converge.

Each round scripts a few faults that leave an outcome unknown or late, starts the worker armed at a random
hit of any failpoint and kills it there (or idle); after the rounds a worker runs undisturbed until it
settles. A failing soak says how to replay it, and bisects its rounds to the fewest that still fail.
"""

from __future__ import annotations

import dataclasses
import random
import shlex
import time
from typing import Any

from resumekit.conformance.p1.cases import SoakCase
from resumekit.conformance.p1.checks import campaigns
from resumekit.conformance.p1.scenario import run_steps
from resumekit.conformance.p1.worker import Factory, any_failpoint
from resumekit.conformance.results import CaseResult, Outcome

SHRINK_STEPS = 6  # reruns a failing soak may spend on bisecting its rounds

# The control-plane faults a soak draws from: each leaves the outcome unknown or late, never changes what
# the task must converge to (FPT-4): 5xx with and without the effect, and answers dropped.
SOAK_FAULTS: tuple[dict[str, Any], ...] = (
    *(
        {"fault": "Answer", "on": on, "status": 503, "effect": effect}
        for on in ("claim", "result", "renew", "receipt", "release")
        for effect in (False, True)
    ),
    *(
        {"fault": "Drop", "on": on, "effect": effect}
        for on in ("claim", "result", "renew", "receipt")
        for effect in (False, True)
    ),
)


def soak_steps(case: SoakCase, seed: int) -> list[dict[str, Any]]:
    """The whole schedule of a soak, drawn from *seed*: each round scripts a few control-plane faults,
    starts the worker armed at a random hit of any failpoint, and kills it there (or idle)."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for _ in range(case.rounds):
        for _ in range(rng.randint(0, case.faults_per_round)):
            steps.append({"fault": dict(rng.choice(SOAK_FAULTS))})
        steps += [{"start": {"failpoint": any_failpoint(rng.randint(1, case.max_hit))}}, {"crash_or_idle": {}}]
    return [*steps, {"start": {}}, {"settle": {}}]


def run_soak(case: SoakCase, factory: Factory, profile: str, seed: int, adapter_spec: str) -> CaseResult:
    """A seeded random soak: K tasks, random kills and HTTP faults, then every task must have converged."""
    started = time.monotonic()
    steps = soak_steps(case, seed)
    scripted = sum(1 for step in steps if "fault" in step)
    stats: dict[str, int] = {}
    blocked: list[str] = []  # the failpoints the worker blocked at, each followed by its round's kill
    result = run_steps(case, factory, profile, steps, blocked, stats)
    kills, fired = stats.get("kills", 0), scripted - stats.get("unfired", scripted)
    summary = (
        f"{len(case.issue)} tasks, seed {seed}: {kills} worker kills ({len(blocked)} at a failpoint) and {fired} "
        f"control-plane faults fired ({scripted} scripted), {kills + fired} faults in "
        f"{time.monotonic() - started:.0f} s"
    )
    replay = f"resumekit run --adapter {shlex.quote(adapter_spec)} --kind p1-campaign --only {case.id} --seed {seed}"
    if result.ok:
        result = _vacuous(result, case, len(blocked), kills, fired, scripted)
        if result.ok:
            return dataclasses.replace(result, message=summary)
        # Converged, but over nothing: a shorter prefix of the rounds would be as empty, so no bisecting.
        return dataclasses.replace(result, message=f"soak failed ({summary}): {result.message}", replay=replay)
    rounds = _shrink(case, factory, profile, seed, started + case.budget)
    shrunk = (
        f"; the first {rounds} of its {case.rounds} rounds already fail (set rounds: {rounds} in a copy of the "
        "soak's file and run that with --golden)"
        if rounds < case.rounds
        else ""
    )
    message = f"soak failed ({summary}): {result.message}{shrunk}"
    return dataclasses.replace(result, message=message, replay=replay)


def _vacuous(result: CaseResult, case: SoakCase, blocks: int, kills: int, fired: int, scripted: int) -> CaseResult:
    """A converged soak that crashed no worker at a failpoint (FPT-5) or fired no fault (FPT-4) proved
    nothing: failed, never passed."""
    mismatches = campaigns.soak_vacuous(case.rounds, blocks, kills, fired, scripted)
    if not mismatches:
        return result
    notes = "; ".join(f"{m.note} ({m.clause})" for m in mismatches)
    return dataclasses.replace(result, outcome=Outcome.FAILED, mismatches=tuple(mismatches), message=notes)


def _shrink(case: SoakCase, factory: Factory, profile: str, seed: int, deadline: float) -> int:
    """Bisect the rounds of a failing soak: the fewest leading rounds found to fail still, within
    SHRINK_STEPS reruns and the soak's budget. A schedule's first k rounds are the k-round schedule of
    the same seed, so a prefix is a soak of its own; timing may still make a rerun pass."""
    low, high = 0, case.rounds
    for _ in range(SHRINK_STEPS):
        if high - low <= 1 or time.monotonic() > deadline:
            break
        middle = (low + high) // 2
        shorter = dataclasses.replace(case, rounds=middle)
        if run_steps(shorter, factory, profile, soak_steps(shorter, seed), None).ok:
            low = middle
        else:
            high = middle
    return high
