"""Phase 0's crash schedule and ledger faults earn their verdicts (issue 19): no pass without evidence.

The schedule used to pass its final check with no plan at all, never looked at the row counts of its
acknowledgements nor at the workspace, and a ledger-fault case passed whenever the undamaged ledger met
one of its readings, so a store that read another file than the one it named passed it. Each broken
store here is caught by the clause it breaks; each was passed before.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import process_factory
from resumekit.conformance.cases import Case
from resumekit.conformance.fixtures import load_file
from resumekit.conformance.phase0 import crash, ledger_damage, plan_checks
from resumekit.conformance.phase0.cases import LedgerFaultCase, ScheduleCase
from resumekit.conformance.results import Outcome
from tests.support import minimal_event, python_command, run_resumekit

# -- compare_determinism and the schedule's expectation (pure) -----------------------------------------


def test_two_missing_plans_are_not_alike() -> None:
    plan = {"disposition": "safe_replay"}
    for first, second in ((None, None), (plan, None), (None, plan)):
        [mismatch] = plan_checks.compare_determinism(first, second)
        assert mismatch.clause == "PURE-2"
        assert "carried no plan" in (mismatch.note or "")
    assert "the first and the second answer" in (plan_checks.compare_determinism(None, None)[0].note or "")
    assert plan_checks.compare_determinism(plan, dict(plan)) == []


def _text(event_id: str, **fields: Any) -> dict[str, Any]:
    return minimal_event(id=event_id, content={"kind": "text", "text": "a row"}, **fields)


def test_a_prefix_without_tool_facts_has_the_plan_the_spec_gives() -> None:
    events = [_text("a"), _text("b", partial=True), _text("c")]
    assert plan_checks.plain_prefix_expectation(events) == {
        "disposition": "safe_replay",
        "requiresVerification": False,
        "sourceRuntimeEventHighWater": 3,  # partial events count (PLAN-1)
        "rejectionReasons": [],
        "operations": [],
        "diagnostics": [],
        "replay": ["a", "c"],  # and are not replayed (PLAN-9)
    }
    assert plan_checks.plain_prefix_expectation([]) is not None


@pytest.mark.parametrize(
    "events",
    [
        [minimal_event(id="call", content={"kind": "function_call", "id": "t", "name": "Bash", "args": {}})],
        [minimal_event(id="r", content={"kind": "function_response", "id": "t", "name": "Bash", "result": {}})],
        [_text("a"), _text("a")],  # strict would add duplicate_event_id
        [_text("a"), _text("b", turnId="another")],  # strict would add run_identity_conflict
    ],
)
def test_a_prefix_the_spec_plans_otherwise_has_no_plain_expectation(events: list[dict[str, Any]]) -> None:
    assert plan_checks.plain_prefix_expectation(events) is None


def test_a_plan_of_the_wrong_high_water_is_caught_by_plan_1() -> None:
    events = [_text("a"), _text("b")]
    expect = plan_checks.plain_prefix_expectation(events)
    assert expect is not None
    plan = {
        "disposition": "safe_replay",
        "operations": [],
        "diagnostics": [],
        "rejectionReasons": [],
        "requiresVerification": False,
        "sourceRuntimeEventHighWater": 2,
        "runtimeEvents": events,
        "replayRuntimeEvents": events,
    }
    assert plan_checks.compare_plan(events, expect, plan) == []
    [mismatch] = plan_checks.compare_plan(events, expect, {**plan, "sourceRuntimeEventHighWater": 3})
    assert (mismatch.pointer, mismatch.expected, mismatch.actual, mismatch.clause) == (
        "/sourceRuntimeEventHighWater",
        2,
        3,
        "PLAN-1",
    )


# -- the harnesses in process -------------------------------------------------------------------------


def _cases() -> dict[str, Case]:
    root = golden_dir()
    files = ("phase0/crash-schedule.yaml", "phase0/ledger-faults.yaml")
    return {case.id: case for name in files for case in load_file(root / name, root)}


def _broken(mode: str) -> crash.Factory:
    return process_factory(python_command("-m", "tests.broken.adapters", mode))  # type: ignore[return-value]


def test_the_final_check_runs_without_a_kill() -> None:
    case = _cases()["random-crash-schedule"]
    assert isinstance(case, ScheduleCase)
    reference = process_factory("reference")
    passed = crash.run_schedule(case, reference, "strict", seed=1, kills=0, replay="")  # type: ignore[arg-type]
    assert passed.outcome is Outcome.PASSED, passed.message
    failed = crash.run_schedule(case, _broken("plans-nothing"), "strict", seed=1, kills=0, replay="")
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "phase0.store.plan gave no plan of the 0 row(s) its read returned" in (failed.message or "")
    assert [m.clause for m in failed.mismatches] == ["CRASH-3"]


def test_a_schedule_whose_rows_hold_tool_facts_errors_before_any_kill() -> None:
    case = _cases()["random-crash-schedule"]
    assert isinstance(case, ScheduleCase)
    call = {"role": "model", "author": "agent", "content": {"kind": "function_call", "id": "t", "name": "Bash"}}
    tools = dataclasses.replace(case, template={**case.template, **call})

    def never() -> Any:
        raise AssertionError("no implementation may start for a schedule the kit cannot judge")

    result = crash.run_schedule(tools, never, "strict", seed=1, kills=3, replay="")
    assert result.outcome is Outcome.ERRORED
    assert "'random-crash-schedule' makes rows with tool facts" in (result.message or "")


def test_a_damage_that_leaves_the_bytes_errors_the_case(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before issue 19 the undamaged ledger met the core reading "committed" of this case, and it passed.
    case = _cases()["unterminated-complete-row"]
    assert isinstance(case, LedgerFaultCase)
    monkeypatch.setitem(ledger_damage.TAILS, "unterminated-row", lambda row: row)
    result = crash.run_ledger_fault(case, process_factory("reference"), "core")  # type: ignore[arg-type]
    assert result.outcome is Outcome.ERRORED, result.message
    assert "the damage 'last row replaced by the unterminated-row tail' left the" in (result.message or "")
    assert "bytes of the ledger as they were" in (result.message or "")


# -- broken stores through the command -----------------------------------------------------------------

SCHEDULE = ("--kind", "schedule", "--kills", "8", "--seed", "7")
UNDAMAGED_READINGS = (  # cases with a reading the undamaged ledger meets too
    "--profile",
    "core",
    "--only",
    "unterminated-complete-row",
    "--only",
    "unterminated-complete-row-then-append",
    "--only",
    "append-of-another-run",
)
CUT_READINGS = ("--profile", "core", "--only", "torn-last-row-then-append", "--only", "invalid-tail-then-append")

# mode: (the selection, the clause, a fragment of each failed case's message)
CAUGHT = {
    "plans-nothing": (SCHEDULE, "CRASH-3", "phase0.store.plan gave no plan of the"),
    "plans-one-too-high": (SCHEDULE, "PLAN-1", "are not the plan its rows demand"),
    "counts-own-appends": (SCHEDULE, "STORE-1", "counts 1 row(s)"),
    "caches-long-plans": (SCHEDULE, "STORE-6", "plan-cache.json created"),
    "creates-on-first-read": (SCHEDULE, "STORE-6", "the reopened ledger's read changed the workspace"),
    "locates-a-copy": (UNDAMAGED_READINGS, "STORE-1", "a read does not return the rows of the ledger file"),
    "refreshes-located-copy": (UNDAMAGED_READINGS, "STORE-1", "no longer holds the"),
    "cuts-torn-tail-at-open": (CUT_READINGS, "STORE-1", "no longer holds the"),
}


@pytest.mark.parametrize("mode", sorted(CAUGHT))
def test_a_store_that_passed_without_evidence_is_caught_by_the_clause_it_breaks(mode: str, tmp_path: Path) -> None:
    selection, clause, fragment = CAUGHT[mode]
    adapter = python_command("-m", "tests.broken.adapters", mode)
    code, document, output = run_resumekit(tmp_path / "report.json", "--adapter", adapter, *selection)
    assert code == 1, output
    results = document["results"]
    assert results, output
    for result in results:
        assert result["outcome"] == "failed", result
        assert clause in {m.get("clause") for m in result["mismatches"]}, result
        assert clause in result["clauses"], "the failing case cites the clause it caught"
        assert fragment in result["message"], result
        if selection is SCHEDULE:
            assert "--seed 7 --kills 8" in result["replay"]
