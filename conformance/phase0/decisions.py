"""The runner of Phase 0's decision cases: a pure function asked twice through the run's adapter."""

from __future__ import annotations

import dataclasses
from typing import Any

from resumekit.conformance import schemas
from resumekit.conformance.adapters import Adapter
from resumekit.conformance.canonical import canonical_json
from resumekit.conformance.phase0 import plan_checks
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for

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
