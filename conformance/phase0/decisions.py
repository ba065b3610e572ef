"""The runner of Phase 0's decision cases: a pure function asked twice through the run's adapter."""

from __future__ import annotations

import dataclasses
from typing import Any

from resumekit.conformance import schemas
from resumekit.conformance.adapters import Adapter
from resumekit.conformance.canonical import canonical_json
from resumekit.conformance.phase0 import grades, plan_checks, vocabulary
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for

ALWAYS_CHECKED = ("PURE-1", "PURE-2")
PLAN_ENVELOPE = schemas.BASE + "adapter/results/plan-envelope.json"


def plan_problem(plan: Any) -> str | None:
    """Why the kit cannot read *plan* as a ResumePlan, or None.

    Only the envelope is required here (``results/plan-envelope.json``: the members and their JSON
    types), so that every difference of a plan the kit can read is judged; what the members hold,
    the contract's vocabulary included, is the answer (``vocabulary.outside``).
    """
    if not isinstance(plan, dict):
        return f"the plan is {type(plan).__name__}, not an object"
    violation = schemas.first_violation(PLAN_ENVELOPE, plan)
    return None if violation is None else f"the plan breaks schemas/adapter/results/plan-envelope.json {violation}"


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
        # An answer byte-identical to the first one was read with it.
        problem = None if answers[-1] == answers[0] and plans else plan_problem(plan)
        if problem or not isinstance(plan, dict):
            return result_for(case, Outcome.ERRORED, message=problem or "no plan", transcript=reply.transcript)
        plans.append(plan)
    expect = case.expectation_for(profile)
    mismatches = vocabulary.judge_plan(case.events, expect, plans[0])
    mismatches += plan_checks.compare_determinism(plans[0], plans[1])
    if canonical_json(fields["events"]) != before:
        mismatches.append(
            Mismatch("", "the input events unchanged", "changed", "PURE-1", "the implementation changed its input")
        )
    # PURE-1 and PURE-2 are checked on every decision case, so every decision result covers them.
    clauses = case.clauses + tuple(c for c in ALWAYS_CHECKED if c not in case.clauses)
    expectation = case.expectation_profile(profile)
    if mismatches:
        grade = grades.grade(case.events, expect, plans)
        failed = result_for(
            case, Outcome.FAILED, mismatches=tuple(mismatches), expectation=expectation, grade=grade
        )
        return dataclasses.replace(failed, clauses=clauses)
    return dataclasses.replace(result_for(case, Outcome.PASSED, expectation=expectation), clauses=clauses)
