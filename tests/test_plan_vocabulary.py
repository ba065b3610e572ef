"""A plan outside the contract's vocabulary is a wrong answer, judged in full; a plan the kit cannot read is an error.

docs/adapter-protocol.md ("A broken message and a wrong answer") draws the line: the envelope of a plan
(``schemas/adapter/results/plan-envelope.json``) is the message, the values are the answer.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from resumekit.conformance.adapters import CheckedEvents, PythonAdapter, process_factory
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.phase0 import vocabulary
from resumekit.conformance.phase0.decisions import plan_problem, run_decision
from resumekit.conformance.phase0.grades import DETAIL, UNSAFE
from resumekit.conformance.results import Outcome
from resumekit.reference import build_resume_plan
from tests.support import python_command

DANGLING = "two-dangling-calls"  # two indeterminate operations, blocked, verification required
EARLY = "response-before-call-neither-replayed"


def _case(case_id: str) -> Any:
    [case] = load_suite().select("core", only=[case_id])
    return case


def _beyond(events: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
    """The reference's plan, its first operation ``parked`` and a diagnostic with a code of a later phase added."""
    plan = copy.deepcopy(build_resume_plan(events, profile="core"))
    plan["operations"][0]["status"] = "parked"
    plan["diagnostics"].append({"code": "tool_recovery_parked", "message": "parked", "eventId": events[0]["id"]})
    return plan


def test_an_unknown_status_and_code_fail_the_case_with_every_other_difference_listed() -> None:
    result = run_decision(_case(DANGLING), PythonAdapter(_beyond, name="beyond"), "core")
    assert result.outcome is Outcome.FAILED, result.message
    found = {(m.pointer, m.clause) for m in result.mismatches}
    # The places outside the vocabulary, each at its pointer under its field's clause ...
    assert ("/operations/0/status", "OP-3") in found
    vocabulary = [m for m in result.mismatches if "vocabulary" in (m.note or "")]
    assert {(m.pointer, m.actual) for m in vocabulary} == {
        ("/operations/0/status", "parked"),
        (f"/diagnostics/{len(_case(DANGLING).expect['diagnostics'])}/code", "tool_recovery_parked"),
    }
    assert all("schemas/phase0/resume-plan.json" in (m.note or "") for m in vocabulary)
    # ... beside the comparison with the expectation, which ran as for any plan.
    compared = [m for m in result.mismatches if m not in vocabulary]
    assert {(m.pointer, m.clause) for m in compared} == {("/operations/0/status", "OP-3"), ("/diagnostics", "PLAN-10")}
    # An unknown status is not a settled one, and verification is still asked: a detail (GRADE-1).
    assert result.grade == DETAIL


def test_the_vocabulary_check_is_empty_for_a_plan_within_it() -> None:
    events = list(_case(DANGLING).events)
    assert vocabulary.outside(build_resume_plan(events, profile="strict")) == []


def test_a_plan_the_kit_cannot_read_is_still_an_error() -> None:
    for plan, fragment in (
        ({"disposition": "blocked"}, "'operations' is a required property"),
        ({**build_resume_plan([], profile="core"), "disposition": 7}, "at /disposition"),
        ({**build_resume_plan([], profile="core"), "operations": ["corruption"]}, "at /operations/0"),
        ([], "not an object"),
    ):
        problem = plan_problem(plan)
        assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize("validate", [True, False])
def test_a_runtime_past_the_seed_is_failed_not_errored_over_the_protocol(validate: bool) -> None:
    """The reply crosses the protocol's message checks: its plan is readable, so the case judges it."""
    factory = process_factory(python_command("-m", "tests.broken.upstream"), validate_messages=validate)
    adapter = factory()
    adapter.start()
    try:
        result = run_decision(_case(EARLY), adapter, "core")
    finally:
        adapter.close()
    assert result.outcome is Outcome.FAILED, result.message
    pointers = {m.pointer for m in result.mismatches}
    assert {"/requiresVerification", "/operations/0/status", "/diagnostics", "/directive"} <= pointers
    assert any(m.actual == "corruption" and "vocabulary" in (m.note or "") for m in result.mismatches)
    assert result.grade == UNSAFE  # it drops the verification an early response requires


def test_a_plans_echoed_events_are_never_taken_as_checked_events() -> None:
    """The envelope checks only that echoed events are objects: passing it proves no event a RuntimeEvent."""
    checked = CheckedEvents()
    bogus = {"id": "x", "role": "robot"}
    result = {"plan": {"runtimeEvents": [bogus], "replayRuntimeEvents": [bogus]}}
    light, unchecked = checked.lighten(result)
    assert light is result and unchecked == []
    light, unchecked = checked.lighten({"status": "ok", "events": [bogus], "tornTail": None})
    assert light["events"] == [bogus] and unchecked == [bogus]  # a read of it is checked in full


def test_a_member_outside_the_vocabulary_is_shown_by_name_not_by_its_whole_operation() -> None:
    events = list(_case(DANGLING).events)
    plan = copy.deepcopy(build_resume_plan(events, profile="core"))
    plan["operations"][0]["args"] = {"blob": "x" * 100_000}
    plan["operations"][0]["attempt"] = 2  # a later phase's member: ToolOperation has no such member
    del plan["diagnostics"][0]["message"]
    found = {m.pointer: m for m in vocabulary.outside(plan)}
    assert found["/operations/0"].actual == {
        "members": ["args", "attempt", "callRuntimeEventId", "status", "toolCallId", "toolName"]
    }
    assert found["/operations/0"].expected == {"additionalProperties": False}
    assert found["/diagnostics/0"].actual == {"members": ["code", "eventId", "toolCallId", "toolName"]}
    assert found["/diagnostics/0"].clause == "PLAN-10" and found["/operations/0"].clause == "OP-1"


def test_a_plan_far_outside_the_vocabulary_lists_some_places_and_counts_the_rest() -> None:
    events = list(_case(DANGLING).events)
    plan = copy.deepcopy(build_resume_plan(events, profile="core"))
    plan["rejectionReasons"] = [f"reason-{n}" for n in range(50)]
    found = vocabulary.outside(plan)
    assert len(found) == vocabulary.SHOWN + 1
    assert found[-1].actual == f"{50 - vocabulary.SHOWN} more place(s) outside the vocabulary"


def test_a_place_keeps_a_bounded_note_however_long_the_value() -> None:
    events = list(_case(DANGLING).events)
    plan = copy.deepcopy(build_resume_plan(events, profile="core"))
    plan["diagnostics"][0]["code"] = "c" * 1_000_000
    [place] = vocabulary.outside(plan)
    assert place.pointer == "/diagnostics/0/code" and len(place.actual) == 1_000_000
    assert len(place.note or "") < vocabulary.NOTE + 100
