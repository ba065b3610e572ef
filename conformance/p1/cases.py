"""The P1 cases: scenarios, and the campaigns (crash matrices, soaks) built on them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.cases import Case

# What a scenario waits on real time for, roughly, to order a run (``weight``): a worker's start, a backoff
# after each fault answered with an error or dropped, an answer held past the worker's request timeout (WRK-3).
_START_S = 0.3
_BACKOFF_S = 0.25
_REQUEST_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioCase(Case):
    """A P1 scenario: origins, tasks, scripted faults, the kit's steps, and what each task converges to."""

    gates: tuple[str, ...]
    repositories: Mapping[str, Any]
    tasks: Mapping[str, Mapping[str, Any]]
    issue: tuple[str, ...]
    faults: tuple[Mapping[str, Any], ...]
    steps: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Mapping[str, Any]]
    ttl_ms: int = 30_000
    # The clauses its file names for it, before ``clauses`` adds its gates' and those checked on every
    # scenario: the rules its expectations stand for (checks.convergence labels an outcome with one of them).
    cites: tuple[str, ...] = ()

    kind = "p1"

    @property
    def counts_toward(self) -> tuple[str, ...]:
        """The gates the scenario counts towards (docs/spec/p1.md, section 17)."""
        return self.gates

    @property
    def weight(self) -> float:
        """Its workers' starts, the backoffs its error answers cause, the answers it holds and the watches it
        keeps, in rough seconds (scheduling only: a long wait started last would be the run's tail)."""
        steps = [step.get("second_worker", step) for step in self.steps]
        starts = sum(1 for step in steps if "start" in step)
        tools = sum(float((step["start"].get("tool") or {}).get("seconds", 1.0)) for step in steps
                    if isinstance(step.get("start"), Mapping) and "tool" in step["start"])
        watches = sum(float(step["watch_root"].get("ms", 0)) / 1000 for step in steps
                      if isinstance(step.get("watch_root"), Mapping))
        held = sum(min(float(fault.get("seconds", 0)), _REQUEST_TIMEOUT_S) for fault in self.faults)
        failed = sum(1 for fault in self.faults if fault.get("fault") in ("Answer", "Drop"))
        return _START_S * starts + _BACKOFF_S * failed + held + tools + watches

    @property
    def deadline_s(self) -> float:
        """The kit's waits on the worker end within 120 s (``world.SCENARIO_BUDGET``); reading what it left,
        each file capped and each query under its own deadline, takes far less than the rest."""
        return 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixCase(ScenarioCase):
    """An exhaustive crash matrix (p1.md FPT-5): one task, killed at every failpoint site it reaches in turn.

    Each visited point is a run of its own in a fresh world; the case passes when every run converged.
    """

    task: str
    crashes: int
    first: tuple[str, ...] = ()
    kit_points: tuple[str, ...] = ()
    limit: int = 200
    tear: str | None = None  # a tear sweep of the cache after a kill at this failpoint (CACHE-4)

    kind = "p1-campaign"

    @property
    def deadline_s(self) -> float:
        """A run per point it may visit and per crash, each given far more than an honest one takes."""
        return 300.0 + 30.0 * self.limit * max(1, self.crashes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakCase(ScenarioCase):
    """A seeded random soak: many tasks at once, the worker killed at random points and the control plane
    answering with random faults, then every task must converge (FPT-4)."""

    seed: int
    rounds: int
    faults_per_round: int
    max_hit: int
    budget: float

    kind = "p1-campaign"

    @property
    def deadline_s(self) -> float:
        """Its own budget (the shrinking of a failure included), and a scenario's deadline beyond it."""
        return self.budget + 300.0
