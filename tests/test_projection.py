"""Unit tests of the reference projection, written clause by clause from docs/spec/phase0.md.

The golden fixtures cover the decisions exhaustively; these tests pin the building blocks.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

from resumekit.reference import (
    INDETERMINATE_TOOL_RESULT_DIRECTIVE,
    build_resume_plan,
    canonical_json,
    is_partial_event,
    is_terminal_event,
    project_tool_operations,
)
from resumekit.reference.phase0.projection import STRICT_DIAGNOSTIC_CODES

ENVELOPE: dict[str, Any] = {
    "invocationId": "inv-1",
    "runId": "run-1",
    "sessionId": "session-1",
    "turnId": "turn-1",
    "ts": 1767225600000,
    "partial": False,
}


def event(event_id: str, role: str = "system", author: str = "system", **fields: Any) -> dict[str, Any]:
    return {**ENVELOPE, "id": event_id, "role": role, "author": author, **fields}


def user(event_id: str = "evt-user", text: str = "list the files") -> dict[str, Any]:
    return event(event_id, "user", "user", content={"kind": "text", "text": text})


def call(event_id: str, call_id: str = "tool-1", name: str = "Bash", args: Any = None, **fields: Any) -> dict[str, Any]:
    args = {"command": "ls"} if args is None else args
    content = {"kind": "function_call", "id": call_id, "name": name, "args": args}
    return event(event_id, "model", "agent", content=content, **fields)


def response(
    event_id: str, call_id: str = "tool-1", name: str = "Bash", *, is_error: bool | None = None, **fields: Any
) -> dict[str, Any]:
    content: dict[str, Any] = {
        "kind": "function_response",
        "id": call_id,
        "name": name,
        "result": {"ok": True},
    }
    if is_error is not None:
        content["isError"] = is_error
    return event(event_id, "tool", "tool", content=content, **fields)


def terminal(event_id: str = "evt-terminal") -> dict[str, Any]:
    return event(event_id, status="failed", actions={"endInvocation": True})


def ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in events]


def codes(plan: dict[str, Any]) -> Counter[tuple[str, str | None, str | None]]:
    return Counter((d["code"], d.get("eventId"), d.get("toolCallId")) for d in plan["diagnostics"])


# --- EVT-3 and EVT-4 --------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["completed", "failed", "aborted", "cancelled"])
def test_terminal_status_is_terminal(status: str) -> None:
    assert is_terminal_event(event("e", status=status)) is True


def test_end_invocation_alone_is_terminal() -> None:
    assert is_terminal_event(event("e", actions={"endInvocation": True})) is True


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"status": "streaming"},
        {"actions": {"endInvocation": False}},
        {"status": "streaming", "actions": {"endInvocation": False}},
        {"actions": {}},
    ],
)
def test_non_terminal_events(fields: dict[str, Any]) -> None:
    assert is_terminal_event(event("e", **fields)) is False


def test_partial_helper() -> None:
    assert is_partial_event({**user(), "partial": True}) is True
    assert is_partial_event(user()) is False


def test_partial_events_are_never_facts_but_count_and_stay() -> None:
    # EVT-4: a partial call creates nothing, is not replayed, counts toward the high-water.
    partial_call = {**call("evt-partial"), "partial": True}
    plan = build_resume_plan([user(), partial_call])
    assert plan["operations"] == []
    assert plan["diagnostics"] == []
    assert plan["disposition"] == "safe_replay"
    assert plan["sourceRuntimeEventHighWater"] == 2
    assert ids(plan["runtimeEvents"]) == ["evt-user", "evt-partial"]
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user"]


def test_partial_response_settles_nothing() -> None:
    partial_response = {**response("evt-partial"), "partial": True}
    plan = build_resume_plan([user(), call("evt-call"), partial_response])
    assert [op["status"] for op in plan["operations"]] == ["indeterminate"]
    assert codes(plan) == Counter({("pending_tool_result", "evt-call", "tool-1"): 1})


# --- OP-1 to OP-5 -----------------------------------------------------------------------------


def test_op1_call_creates_indeterminate_operation() -> None:
    assert project_tool_operations([user(), call("evt-call", args={"command": "ls"})]) == [
        {
            "toolCallId": "tool-1",
            "toolName": "Bash",
            "args": {"command": "ls"},
            "status": "indeterminate",
            "callRuntimeEventId": "evt-call",
        }
    ]


def test_op1_null_args_are_kept() -> None:
    events = [call("evt-call")]
    events[0]["content"]["args"] = None
    assert project_tool_operations(events)[0]["args"] is None


def test_op1_first_call_wins_and_order_follows_calls() -> None:
    operations = project_tool_operations(
        [
            call("c-b", "tool-b", "Read"),
            call("c-a", "tool-a", "Bash"),
            call("c-b2", "tool-b", "Write", args={"other": 1}),
        ]
    )
    assert [op["toolCallId"] for op in operations] == ["tool-b", "tool-a"]
    assert operations[0]["toolName"] == "Read"
    assert operations[0]["callRuntimeEventId"] == "c-b"
    assert operations[0]["args"] == {"command": "ls"}


def test_op2_response_before_call_settles_nothing() -> None:
    operations = project_tool_operations([response("evt-response"), call("evt-call")])
    assert len(operations) == 1
    assert operations[0]["status"] == "indeterminate"
    assert "responseRuntimeEventId" not in operations[0]
    assert "responseIsError" not in operations[0]


def test_op3_settles_succeeded() -> None:
    [operation] = project_tool_operations([call("evt-call"), response("evt-response")])
    assert operation["status"] == "succeeded"
    assert operation["responseRuntimeEventId"] == "evt-response"
    assert operation["responseIsError"] is False


def test_op3_is_error_false_is_succeeded() -> None:
    [operation] = project_tool_operations([call("evt-call"), response("evt-response", is_error=False)])
    assert (operation["status"], operation["responseIsError"]) == ("succeeded", False)


def test_op3_error_response_is_failed_not_indeterminate() -> None:
    events = [call("evt-call"), response("evt-response", is_error=True)]
    [operation] = project_tool_operations(events)
    assert (operation["status"], operation["responseIsError"]) == ("failed", True)
    plan = build_resume_plan(events)
    assert plan["disposition"] == "safe_replay"
    assert plan["requiresVerification"] is False


def test_op3_second_response_changes_nothing() -> None:
    [operation] = project_tool_operations([call("evt-call"), response("r-1"), response("r-2", is_error=True)])
    assert operation["responseRuntimeEventId"] == "r-1"
    assert operation["status"] == "succeeded"


def test_op4_name_mismatch_still_settles_but_blocks() -> None:
    events = [user(), call("evt-call", name="Bash"), response("evt-response", name="Read")]
    [operation] = project_tool_operations(events)
    assert operation["status"] == "succeeded"
    assert operation["toolName"] == "Bash"
    plan = build_resume_plan(events, profile="core")
    assert plan["disposition"] == "blocked"
    assert plan["rejectionReasons"] == ["dangling_tool_state"]
    [diagnostic] = plan["diagnostics"]
    assert diagnostic["code"] == "tool_name_mismatch"
    assert (diagnostic["eventId"], diagnostic["toolCallId"]) == ("evt-response", "tool-1")
    assert diagnostic["detail"] == {"callToolName": "Bash", "responseToolName": "Read"}
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user"]  # PLAN-9: not paired


def test_op5_unanswered_call_stays_indeterminate() -> None:
    operations = project_tool_operations([call("c-1", "tool-1"), call("c-2", "tool-2"), response("r-1", "tool-1")])
    assert [op["status"] for op in operations] == ["succeeded", "indeterminate"]
    assert "responseRuntimeEventId" not in operations[1]


# --- PLAN clauses, DEC, OFF -------------------------------------------------------------------


def test_empty_prefix_is_safe() -> None:
    plan = build_resume_plan([])
    assert plan == {
        "disposition": "safe_replay",
        "operations": [],
        "diagnostics": [],
        "rejectionReasons": [],
        "requiresVerification": False,
        "sourceRuntimeEventHighWater": 0,
        "runtimeEvents": [],
        "replayRuntimeEvents": [],
    }


def test_dec2_pending_call_blocks_with_directive() -> None:
    plan = build_resume_plan([user(), call("evt-call")])
    assert plan["disposition"] == "blocked"
    assert plan["requiresVerification"] is True
    assert plan["directive"] == INDETERMINATE_TOOL_RESULT_DIRECTIVE
    assert "retry" in plan["directive"]
    assert plan["rejectionReasons"] == ["dangling_tool_state"]
    assert codes(plan) == Counter({("pending_tool_result", "evt-call", "tool-1"): 1})
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user"]


def test_directive_absent_without_indeterminate_operation() -> None:
    # PLAN-6: blocked but nothing to verify (an unmatched response) -> no directive.
    plan = build_resume_plan([user(), response("evt-response")])
    assert plan["disposition"] == "blocked"
    assert plan["requiresVerification"] is False
    assert "directive" not in plan
    assert codes(plan) == Counter({("unmatched_tool_result", "evt-response", "tool-1"): 1})
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user"]


def test_dec3_dec4_paired_call_and_terminal_are_replayed() -> None:
    events = [user(), call("evt-call"), response("evt-response"), terminal()]
    plan = build_resume_plan(events)
    assert plan["disposition"] == "safe_replay"
    assert "directive" not in plan
    assert plan["sourceRuntimeEventHighWater"] == 4
    assert plan["runtimeEvents"] == events
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user", "evt-call", "evt-response", "evt-terminal"]


def test_plan9_latest_call_is_compared() -> None:
    # Two calls of one id: the response pairs against the latest call seen so far.
    events = [call("c-1", name="Read"), call("c-2", name="Bash"), response("r-1", name="Bash")]
    plan = build_resume_plan(events, profile="core")
    assert ids(plan["replayRuntimeEvents"]) == ["c-1", "c-2", "r-1"]
    assert plan["operations"][0]["toolName"] == "Read"  # OP-1: first call wins
    assert codes(plan) == Counter({("tool_name_mismatch", "r-1", "tool-1"): 1})


def test_plan9_response_before_call_is_not_paired() -> None:
    plan = build_resume_plan([user(), response("r-1"), call("c-1")], profile="core")
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user"]
    # PLAN-3: the response matches an operation of the whole prefix, so it is not unmatched.
    assert codes(plan) == Counter({("pending_tool_result", "c-1", "tool-1"): 1})


@pytest.mark.parametrize("expected", [0, 2, 4, 100])
def test_off1_offset_mismatch_blocks(expected: int) -> None:
    events = [user(), call("evt-call"), response("evt-response")]
    plan = build_resume_plan(events, expected_high_water=expected)
    assert plan["disposition"] == "blocked"
    assert plan["rejectionReasons"] == ["runtime_offset_mismatch"]
    [diagnostic] = plan["diagnostics"]
    assert diagnostic["code"] == "runtime_offset_mismatch"
    assert "eventId" not in diagnostic
    assert diagnostic["detail"] == {
        "expectedRuntimeEventHighWater": expected,
        "actualRuntimeEventHighWater": 3,
    }
    assert plan["operations"][0]["status"] == "succeeded"
    assert ids(plan["replayRuntimeEvents"]) == ["evt-user", "evt-call", "evt-response"]


def test_off1_matching_offset_changes_nothing() -> None:
    events = [user(), call("evt-call"), response("evt-response")]
    assert build_resume_plan(events, expected_high_water=3) == build_resume_plan(events)


def test_diagnostic_order_and_reason_dedup() -> None:
    events = [
        user(),
        call("c-1", "tool-1"),
        call("c-2", "tool-2"),
        response("r-x", "tool-x"),
        response("r-2", "tool-2", name="Read"),
    ]
    plan = build_resume_plan(events, expected_high_water=9, profile="core")
    assert [(d["code"], d.get("eventId")) for d in plan["diagnostics"]] == [
        ("runtime_offset_mismatch", None),
        ("pending_tool_result", "c-1"),
        ("unmatched_tool_result", "r-x"),
        ("tool_name_mismatch", "r-2"),
    ]
    assert plan["rejectionReasons"] == ["runtime_offset_mismatch", "dangling_tool_state"]
    assert all(isinstance(d["message"], str) and d["message"] for d in plan["diagnostics"])


# --- Profiles (STRICT) ------------------------------------------------------------------------


def test_core_and_strict_differ_on_duplicate_call() -> None:
    events = [user(), call("c-1"), call("c-2"), response("r-1")]
    core = build_resume_plan(events, profile="core")
    strict = build_resume_plan(events, profile="strict")
    assert core["disposition"] == "safe_replay"
    assert core["diagnostics"] == []
    assert strict["disposition"] == "blocked"
    assert strict["rejectionReasons"] == ["ledger_integrity_violation"]
    assert codes(strict) == Counter({("duplicate_tool_call", "c-2", "tool-1"): 1})
    # Strict changes neither the operations nor the replay.
    assert strict["operations"] == core["operations"]
    assert strict["replayRuntimeEvents"] == core["replayRuntimeEvents"]


def test_default_profile_is_strict() -> None:
    events = [user(), call("c-1"), call("c-2"), response("r-1")]
    assert build_resume_plan(events) == build_resume_plan(events, profile="strict")


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        pytest.param([user("e-1"), user("e-1")], {("duplicate_event_id", "e-1", None): 1}, id="STRICT-1"),
        pytest.param(
            [call("c-1"), response("r-1"), response("r-2")],
            {("duplicate_tool_result", "r-2", "tool-1"): 1},
            id="STRICT-3",
        ),
        pytest.param(
            [response("r-1"), call("c-1")],
            {("tool_result_before_call", "r-1", "tool-1"): 1, ("pending_tool_result", "c-1", "tool-1"): 1},
            id="STRICT-4",
        ),
        pytest.param(
            [user("e-1"), {**user("e-2"), "runId": "run-2"}],
            {("run_identity_conflict", "e-2", None): 1},
            id="STRICT-5",
        ),
        pytest.param(
            [call("c-1"), terminal("t-1"), response("r-1")],
            {("tool_fact_after_terminal", "r-1", "tool-1"): 1},
            id="STRICT-6",
        ),
    ],
)
def test_strict_clauses(events: list[dict[str, Any]], expected: dict[tuple[str, str, str | None], int]) -> None:
    plan = build_resume_plan(events, profile="strict")
    assert codes(plan) == Counter(expected)
    assert "ledger_integrity_violation" in plan["rejectionReasons"]
    assert plan["disposition"] == "blocked"
    core = build_resume_plan(events, profile="core")
    assert "ledger_integrity_violation" not in core["rejectionReasons"]
    assert not [d for d in core["diagnostics"] if d["code"] in STRICT_DIAGNOSTIC_CODES]


def test_strict_ignores_partial_events() -> None:
    events = [user("e-1"), {**user("e-1"), "partial": True, "runId": "run-other"}]
    plan = build_resume_plan(events, profile="strict")
    assert plan["diagnostics"] == []
    assert plan["disposition"] == "safe_replay"


def test_unknown_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="profile"):
        build_resume_plan([], profile="lenient")  # type: ignore[arg-type]


# --- PURE-1: the input is never changed or shared ----------------------------------------------


def test_input_is_not_mutated() -> None:
    events = [
        user(),
        call("evt-call", args={"nested": {"list": [1, 2]}}),
        response("evt-response"),
        {**call("evt-partial", "tool-2"), "partial": True},
        call("evt-call-2", "tool-3"),
        terminal(),
    ]
    before = copy.deepcopy(events)
    build_resume_plan(events, expected_high_water=1)
    project_tool_operations(events)
    assert events == before


def test_returned_events_are_copies_when_asked() -> None:
    events = [user(), call("evt-call"), response("evt-response"), terminal()]
    plan = build_resume_plan(events, copy_events=True)
    assert plan["runtimeEvents"] == events
    for original, returned in zip(events, plan["runtimeEvents"], strict=True):
        assert returned is not original
        assert returned.get("content") is None or returned["content"] is not original["content"]
    for original, replayed in zip(events, plan["replayRuntimeEvents"], strict=True):
        assert replayed == original
        assert replayed is not original
    plan["runtimeEvents"][1]["content"]["args"]["command"] = "rm -rf /"
    plan["replayRuntimeEvents"][1]["content"]["args"]["command"] = "rm -rf /"
    assert events[1]["content"]["args"] == {"command": "ls"}


def test_by_default_the_plan_holds_the_inputs_own_objects() -> None:
    # Planning reads the prefix and never copies it (the plan is a view, as a slice of a list is).
    events = [user(), call("evt-call", args={"paths": ["a", "b"]}), response("evt-response"), terminal()]
    plan = build_resume_plan(events)
    assert all(a is b for a, b in zip(plan["runtimeEvents"], events, strict=True))
    assert all(a is b for a, b in zip(plan["replayRuntimeEvents"], events, strict=True))
    assert plan["operations"][0]["args"] is events[1]["content"]["args"]
    assert project_tool_operations(events)[0]["args"] is events[1]["content"]["args"]


def test_operation_args_and_details_are_copies_when_asked() -> None:
    events = [
        call("evt-call", args={"paths": ["a", "b"]}),
        {**call("evt-call-2", "tool-2"), "runId": "another-run"},
    ]
    plan = build_resume_plan(events, copy_events=True)
    assert plan["operations"][0]["args"] == {"paths": ["a", "b"]}
    assert plan["operations"][0]["args"] is not events[0]["content"]["args"]
    plan["operations"][0]["args"]["paths"].append("c")
    assert events[0]["content"]["args"] == {"paths": ["a", "b"]}
    [conflict] = [d for d in plan["diagnostics"] if d["code"] == "run_identity_conflict"]
    assert conflict["detail"]["actual"]["runId"] == "another-run"


# --- PURE-2: canonical JSON ---------------------------------------------------------------------


def test_canonical_json_is_deterministic_and_sorted() -> None:
    events = [user(text="naïve ✓"), call("evt-call"), response("evt-response")]
    first = canonical_json(build_resume_plan(events))
    second = canonical_json(build_resume_plan(copy.deepcopy(events)))
    assert first == second
    assert canonical_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"a":{"c":3,"d":2},"b":1}'
    assert canonical_json({"a": {"c": 3, "d": 2}, "b": 1}) == canonical_json({"b": 1, "a": {"d": 2, "c": 3}})


def test_canonical_json_form() -> None:
    data = canonical_json({"text": "naïve ✓", "list": [1, "x", None, True]})
    assert data == '{"list":[1,"x",null,true],"text":"naïve ✓"}'.encode()
    assert json.loads(data) == {"text": "naïve ✓", "list": [1, "x", None, True]}


def test_canonical_json_integral_floats() -> None:
    assert canonical_json({"ts": 1767225600000.0, "x": 1.0, "y": -0.0, "z": [2.0]}) == (
        b'{"ts":1767225600000,"x":1,"y":0,"z":[2]}'
    )
    assert canonical_json(1.5) == b"1.5"
    assert canonical_json(True) == b"true"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_canonical_json_rejects_non_json_numbers(value: Any) -> None:
    with pytest.raises(ValueError, match="JSON"):
        canonical_json(value)


def test_sharing_events_gives_the_same_plan_and_leaves_the_input_alone() -> None:
    from resumekit.conformance.fixtures import load_suite

    for case in load_suite().select("strict", kinds=["decision"]):
        events = copy.deepcopy(list(case.events))
        before = canonical_json(events)
        shared = build_resume_plan(events, expected_high_water=case.expected_high_water)
        copied = build_resume_plan(events, expected_high_water=case.expected_high_water, copy_events=True)
        assert canonical_json(shared) == canonical_json(copied), case.id
        assert canonical_json(events) == before, case.id
        assert all(a is b for a, b in zip(shared["runtimeEvents"], events, strict=True)), case.id
        assert not any(a is b for a, b in zip(copied["runtimeEvents"], events, strict=True)), case.id


def test_a_pure_2_failure_names_the_first_differing_pointer_with_both_values() -> None:
    from resumekit.conformance.phase0.plan_checks import compare_determinism

    first = {"disposition": "blocked", "diagnostics": [{"code": "x", "message": "call 1"}], "z": 1}
    second = {"disposition": "blocked", "diagnostics": [{"code": "x", "message": "call 2"}], "z": 2}
    [mismatch] = compare_determinism(first, second)
    assert (mismatch.pointer, mismatch.expected, mismatch.actual, mismatch.clause) == (
        "/diagnostics/0/message",
        "call 1",
        "call 2",
        "PURE-2",
    )
    assert "/diagnostics/0/message" in (mismatch.note or "")
    [extra] = compare_determinism({"a/b": [1]}, {"a/b": [1, 2]})
    assert (extra.pointer, extra.expected, extra.actual) == ("/a~1b/1", "<absent>", 2)
    assert compare_determinism(first, dict(first)) == []


def test_events_of_other_mapping_types_are_copied_too() -> None:
    # The fast copy takes plain dicts only; any other Mapping goes through the general copy.
    import types

    events = [user(), call("evt-call"), response("evt-response")]
    frozen = [types.MappingProxyType(event) for event in events]
    plan = build_resume_plan(frozen, copy_events=True)
    assert canonical_json(plan) == canonical_json(build_resume_plan(events))
    assert all(type(event) is dict for event in plan["runtimeEvents"])
    assert plan["replayRuntimeEvents"][1] is plan["runtimeEvents"][1]  # one copy serves both lists
