"""The grade of a wrong plan (docs/spec/phase0.md, GRADE-1), branch by branch, on written plans."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from resumekit.conformance.phase0 import grades
from resumekit.conformance.phase0.grades import DETAIL, OVER_CAUTIOUS, UNSAFE
from resumekit.reference import build_resume_plan
from tests.support import minimal_event

USER = minimal_event(id="user", content={"kind": "text", "text": "go"})
CALL = minimal_event(
    id="call-1", role="model", author="agent", content={"kind": "function_call", "id": "t1", "name": "Bash", "args": {}}
)
RESPONSE = minimal_event(
    id="resp-1",
    role="tool",
    author="tool",
    content={"kind": "function_response", "id": "t1", "name": "Bash", "result": 0},
)
PAIR = [USER, CALL, RESPONSE]
DANGLING = [USER, CALL]


def _expectation(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The expectation a fixture would write for *events*: the reference's plan, its replay as ids."""
    plan = build_resume_plan(events, profile="core")
    expect = {key: plan[key] for key in ("disposition", "requiresVerification", "operations", "diagnostics")}
    return {
        **expect,
        "rejectionReasons": plan["rejectionReasons"],
        "replay": [e["id"] for e in plan["replayRuntimeEvents"]],
    }


def _answer(events: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    plan = copy.deepcopy(build_resume_plan(events, profile="core"))
    plan.update(changes)
    return plan


def _kinds(events: list[dict[str, Any]], plan: dict[str, Any]) -> list[str]:
    return [kind for kind, _ in grades.divergences(events, _expectation(events), plan)]


def test_the_expected_plan_has_no_divergence() -> None:
    for events in (PAIR, DANGLING):
        assert grades.divergences(events, _expectation(events), _answer(events)) == []


def test_safe_replay_where_blocked_is_expected_is_unsafe() -> None:
    plan = _answer(DANGLING, disposition="safe_replay")
    assert UNSAFE in _kinds(DANGLING, plan)
    assert ("unsafe", "safe_replay where blocked is expected") in grades.divergences(
        DANGLING, _expectation(DANGLING), plan
    )


def test_no_verification_where_one_is_required_is_unsafe() -> None:
    assert _kinds(DANGLING, _answer(DANGLING, requiresVerification=False)) == [UNSAFE]


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_an_indeterminate_operation_reported_settled_is_unsafe(status: str) -> None:
    plan = _answer(DANGLING)
    plan["operations"][0]["status"] = status
    assert _kinds(DANGLING, plan) == [UNSAFE]


def test_an_indeterminate_operation_left_out_is_unsafe() -> None:
    assert _kinds(DANGLING, _answer(DANGLING, operations=[])) == [UNSAFE]


def test_an_indeterminate_operation_with_a_status_outside_the_vocabulary_is_not_settled() -> None:
    plan = _answer(DANGLING)
    plan["operations"][0]["status"] = "corruption"
    assert _kinds(DANGLING, plan) == []


@pytest.mark.parametrize("replay", [[USER, CALL], [USER, CALL, RESPONSE, USER], [USER, CALL, {**RESPONSE, "ts": 2}]])
def test_a_safe_replay_that_replays_other_events_is_unsafe(replay: list[dict[str, Any]]) -> None:
    assert _kinds(PAIR, _answer(PAIR, replayRuntimeEvents=replay)) == [UNSAFE]


def test_a_blocked_answer_that_replays_other_events_is_no_safety_matter() -> None:
    plan = _answer(DANGLING, replayRuntimeEvents=[USER, CALL])
    assert _kinds(DANGLING, plan) == []


def test_blocked_where_safe_replay_is_expected_is_over_cautious() -> None:
    assert _kinds(PAIR, _answer(PAIR, disposition="blocked")) == [OVER_CAUTIOUS]


def test_verification_where_none_is_needed_is_over_cautious() -> None:
    assert _kinds(PAIR, _answer(PAIR, requiresVerification=True)) == [OVER_CAUTIOUS]


def test_a_settled_operation_reported_indeterminate_is_over_cautious() -> None:
    plan = _answer(PAIR)
    plan["operations"][0]["status"] = "indeterminate"
    assert _kinds(PAIR, plan) == [OVER_CAUTIOUS]


def test_the_grade_is_the_worst_divergence_of_any_answer_else_detail() -> None:
    expect = _expectation(PAIR)
    careful = _answer(PAIR, disposition="blocked")
    reckless = _answer(PAIR, replayRuntimeEvents=[USER])
    assert grades.grade(PAIR, expect, [careful]) == OVER_CAUTIOUS
    assert grades.grade(PAIR, expect, [careful, reckless]) == UNSAFE  # a second answer counts (PURE-2)
    assert grades.grade(PAIR, expect, [_answer(PAIR, rejectionReasons=["dangling_tool_state"])]) == DETAIL
    assert grades.grade(PAIR, expect, []) == DETAIL
