"""Runs selected cases against an adapter and folds the verdicts into a Run."""

from __future__ import annotations

import dataclasses
import datetime
import platform
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from resumekit.conformance import __version__, _process, schemas
from resumekit.conformance.adapters import Adapter, AdapterStartError, Reply
from resumekit.conformance.canonical import canonical_json
from resumekit.conformance.fixtures import Case, DecisionCase, ScenarioCase
from resumekit.conformance.p1.gates import gate_table
from resumekit.conformance.phase0 import plan_checks
from resumekit.conformance.results import CaseResult, Mismatch, Outcome, Run, Selection, Shard

# What each kind of case needs the implementation to claim.
REQUIRED_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "decision": ("phase0.projection",),
    "crash": ("phase0.store", "phase0.crash", "phase0.projection"),
    "ledger-fault": ("phase0.store", "phase0.ledger-file"),
    "schedule": ("phase0.store", "phase0.crash"),
    "p1": ("p1.worker",),
    "p1-campaign": ("p1.worker", "p1.failpoint-any"),
}


class Reporter(Protocol):
    """Told about each case as the run goes."""

    def case_started(self, case: Case) -> None: ...

    def case_finished(self, result: CaseResult) -> None: ...


class _Silent:
    def case_started(self, case: Case) -> None:
        pass

    def case_finished(self, result: CaseResult) -> None:
        pass


def result_for(case: Case, outcome: Outcome, **fields: Any) -> CaseResult:
    """A result carrying the case's identity."""
    return CaseResult(
        case_id=case.id,
        kind=case.kind,
        outcome=outcome,
        clauses=case.clauses,
        profile=case.profile,
        source=case.source,
        gates=case.gates if isinstance(case, ScenarioCase) else (),
        **fields,
    )


def start_failed(case: Case, error: AdapterStartError, **fields: Any) -> CaseResult:
    """The result of a case whose implementation process could not be started."""
    return result_for(
        case,
        Outcome.ERRORED,
        message=f"cannot start the implementation: {error.message}",
        stderr_tail=error.stderr_tail or None,
        **fields,
    )


def errored(case: Case, reply: Reply, what: str) -> CaseResult:
    """The result for a reply that gave no usable answer."""
    return result_for(
        case,
        Outcome.ERRORED,
        message=f"{what}: {reply.message}",
        stderr_tail=reply.stderr_tail or None,
        transcript=reply.transcript,
    )


_ECHOED = ("runtimeEvents", "replayRuntimeEvents")
ALWAYS_CHECKED = ("PURE-1", "PURE-2")


def plan_problem(plan: Any) -> str | None:
    """Why *plan* is not a ResumePlan, or None.

    The echoed event lists are only checked to hold objects: the comparison then requires each to
    equal a committed event, which is valid already, so validating them again would only cost time
    (it was three quarters of the runner's own time).
    """
    if not isinstance(plan, dict):
        return f"the plan is {type(plan).__name__}, not an object"
    light = dict(plan)
    for key in _ECHOED:
        value = plan.get(key)
        if isinstance(value, list) and all(isinstance(event, dict) for event in value):
            light[key] = []
    violation = schemas.first_violation(schemas.RESUME_PLAN, light)
    return None if violation is None else f"the plan breaks schemas/phase0/resume-plan.json {violation}"


def run_decision(case: DecisionCase, adapter: Adapter, profile: str) -> CaseResult:
    """Ask for the plan twice and compare it with the case's expectation."""
    fields: dict[str, Any] = {"case": case.id, "profile": profile, "events": [dict(e) for e in case.events]}
    if case.expected_high_water is not None:
        fields["expectedRuntimeEventHighWater"] = case.expected_high_water
    before = canonical_json(fields["events"])
    plans: list[dict[str, Any]] = []
    answers: list[bytes] = []
    for attempt in ("first", "second"):
        reply = adapter.request("phase0.plan", **fields)
        if reply.outcome == "skipped":
            return result_for(case, Outcome.SKIPPED, message=reply.message)
        if reply.outcome != "result":
            return errored(case, reply, f"phase0.plan ({attempt} request)")
        plan = reply.value.get("plan") if isinstance(reply.value, dict) else None
        answers.append(canonical_json(plan))
        # An answer byte-identical to the first one was validated with it.
        problem = None if answers[-1] == answers[0] and plans else plan_problem(plan)
        if problem or not isinstance(plan, dict):
            return result_for(case, Outcome.ERRORED, message=problem or "no plan", transcript=reply.transcript)
        plans.append(plan)
    mismatches = plan_checks.compare_plan(case.events, case.expectation_for(profile), plans[0])
    mismatches += plan_checks.compare_determinism(plans[0], plans[1])
    if canonical_json(fields["events"]) != before:
        mismatches.append(
            Mismatch("", "the input events unchanged", "changed", "PURE-1", "the implementation changed its input")
        )
    # PURE-1 and PURE-2 are checked on every decision case, so every decision result covers them.
    clauses = case.clauses + tuple(c for c in ALWAYS_CHECKED if c not in case.clauses)
    expectation = case.expectation_profile(profile)
    if mismatches:
        failed = result_for(case, Outcome.FAILED, mismatches=tuple(mismatches), expectation=expectation)
        return dataclasses.replace(failed, clauses=clauses)
    return dataclasses.replace(result_for(case, Outcome.PASSED, expectation=expectation), clauses=clauses)


CaseRunner = Callable[[Case], CaseResult]


def _step_capabilities(case: Case) -> tuple[str, ...]:
    """Capabilities a scenario needs beyond its kind's, for what its steps ask of the worker."""
    if not isinstance(case, ScenarioCase):
        return ()
    starts = [step["start"] for step in case.steps if "start" in step]
    needed = (("diskFault", "p1.disk-faults"), ("tool", "p1.tools"))
    return tuple(capability for name, capability in needed if any(name in start for start in starts))


def missing_claims(case: Case, capabilities: Sequence[str], profiles: Sequence[str]) -> str | None:
    """Why the implementation's claims do not cover *case*, or None."""
    needed = REQUIRED_CAPABILITIES.get(case.kind, ()) + _step_capabilities(case)
    missing = [c for c in needed if c not in capabilities]
    if missing:
        return f"needs capabilities {missing}, which the implementation does not claim"
    if case.profile not in profiles:
        return f"belongs to the {case.profile!r} profile, which the implementation does not claim"
    return None


def platform_facts() -> dict[str, str]:
    """The machine a run happened on."""
    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run(
    cases: Iterable[Case],
    adapter: Adapter,
    *,
    profile: str,
    reporter: Reporter | None = None,
    runners: Mapping[str, CaseRunner] | None = None,
    seed: int | None = None,
    golden_digest: str = "",
    selection: Selection | None = None,
    known_failures: Mapping[str, str] | None = None,
    golden_root: str = "",
    jobs: int = 1,
    shard: Shard | None = None,
) -> Run:
    """Run every case, each by the runner for its kind; decisions go through *adapter*.

    *profile* is the profile answers are compared in; *selection* records what was asked for (the
    verdict reads its scope from it). *known_failures* maps case ids to the reason they are expected
    to fail (``--expect``). A KeyboardInterrupt ends the run early: every process the kit started is
    killed, and the Run holds what finished, marked interrupted.

    With *jobs* above 1 the cases run on that many threads at once. Every process kind makes its own
    scratch workspace and implementation processes, so those cases run side by side; the decision cases
    all go, one after another, through *adapter* on one thread, so each determinism check (the same
    question asked twice in a row) is exactly what it is with one job. Whatever order cases finish in,
    the reporter hears of them, and the Run lists them, in the order of *cases*.
    """
    reporter = reporter or _Silent()
    by_kind: dict[str, CaseRunner] = {"decision": lambda case: run_decision(case, adapter, profile)}  # type: ignore[arg-type]
    by_kind.update(runners or {})
    info = adapter.implementation
    started, clock = _now(), time.perf_counter()
    chosen = list(cases)

    def one(case: Case) -> CaseResult:
        result = _run_one(case, by_kind, info.capabilities, info.profiles)
        if known_failures and case.id in known_failures:
            result = dataclasses.replace(result, known_failure=known_failures[case.id])
        return result

    results: list[CaseResult] = []
    interrupted = False
    futures = _in_parallel(chosen, one, jobs) if jobs > 1 else []
    try:
        for index, case in enumerate(chosen):
            reporter.case_started(case)
            result = futures[index].result() if futures else one(case)
            results.append(result)
            reporter.case_finished(result)
    except KeyboardInterrupt:
        interrupted = True
        _process.kill_all()
    finally:  # interrupted, or a runner raised: start no further case
        for future in futures:
            future.cancel()
    gates_of = {case.id: case.gates for case in chosen if isinstance(case, ScenarioCase)}
    table = tuple(row.to_dict() for row in gate_table(gates_of, results, profile=profile)) if gates_of else ()
    return Run(
        implementation=info,
        profile=profile,
        results=tuple(results),
        gates=table,
        started=started,
        finished=_now(),
        duration=time.perf_counter() - clock,
        platform=platform_facts(),
        kit_version=__version__,
        seed=seed,
        golden_digest=golden_digest,
        selection=selection,
        interrupted=interrupted,
        selected=len(chosen),
        golden_root=golden_root,
        jobs=max(1, jobs),
        shard=shard,
    )


def _run_one(
    case: Case, by_kind: Mapping[str, CaseRunner], capabilities: Sequence[str], profiles: Sequence[str]
) -> CaseResult:
    begun = time.perf_counter()
    reason = missing_claims(case, capabilities, profiles)
    if reason is not None:
        result = result_for(case, Outcome.NOT_CLAIMED, message=reason)
    elif case.kind not in by_kind:
        result = result_for(case, Outcome.NOT_CLAIMED, message=f"this adapter cannot run {case.kind!r} cases")
    else:
        result = by_kind[case.kind](case)
    return _timed(result, time.perf_counter() - begun)


# Kinds whose single cases take longest start first, so that the run does not end waiting on one.
_FIRST = ("schedule",)


def _in_parallel(chosen: Sequence[Case], one: Callable[[Case], CaseResult], jobs: int) -> list[Future[CaseResult]]:
    """Start *chosen* on up to *jobs* daemon threads; one future per case, in the order of *chosen*.

    The decision cases form one unit, run in order on one thread; every other case is a unit of its
    own. A unit's exception fails its own future, which the caller meets in order.
    """
    futures: list[Future[CaseResult]] = [Future() for _ in chosen]
    decisions = [index for index, case in enumerate(chosen) if case.kind == "decision"]
    rest = [index for index, case in enumerate(chosen) if case.kind != "decision"]
    rest.sort(key=lambda index: 0 if chosen[index].kind in _FIRST else 1)  # stable: selection order within
    units: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
    for unit in ([decisions] if decisions else []) + [[index] for index in rest]:
        units.put(unit)
    workers = min(jobs, len(rest) + (1 if decisions else 0))

    def work() -> None:
        while True:
            try:
                unit = units.get_nowait()
            except queue.Empty:
                return
            for index in unit:
                future = futures[index]
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(one(chosen[index]))
                except BaseException as error:  # handed to the caller, who meets it in order
                    future.set_exception(error)

    for number in range(workers):
        threading.Thread(target=work, name=f"resumekit-job-{number + 1}", daemon=True).start()
    return futures


def _timed(result: CaseResult, seconds: float) -> CaseResult:
    return dataclasses.replace(result, duration=seconds)
