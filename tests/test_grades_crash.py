"""A crash case and the crash schedule grade the plan of the reopened ledger as a decision case does (GRADE-1)."""

from __future__ import annotations

from resumekit.conformance.adapters import process_factory
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.phase0 import crash
from resumekit.conformance.phase0.cases import CrashCase, ScheduleCase
from resumekit.conformance.results import Outcome
from tests.support import python_command


def _broken(mode: str) -> crash.Factory:
    return process_factory(python_command("-m", "tests.broken.adapters", mode))  # type: ignore[return-value]


def _crash_cases() -> list[CrashCase]:
    return [case for case in load_suite().select("strict", kinds=["crash"]) if isinstance(case, CrashCase)]


def test_a_reopened_run_planned_safe_where_it_must_block_is_unsafe() -> None:
    cases = _crash_cases()
    blocked = next(case for case in cases if case.expect["disposition"] == "blocked")
    safe = next(case for case in cases if case.expect["disposition"] == "safe_replay")
    failed = crash.run_crash(blocked, _broken("replays-after-crash"), "strict")
    assert failed.outcome is Outcome.FAILED, failed.message
    assert failed.grade == "unsafe"
    assert {"/disposition", "/requiresVerification"} <= {m.pointer for m in failed.mismatches}
    passed = crash.run_crash(safe, _broken("replays-after-crash"), "strict")
    assert passed.outcome is Outcome.PASSED and passed.grade is None


def test_a_crash_case_and_the_schedule_with_a_wrong_high_water_are_a_detail() -> None:
    failed = crash.run_crash(_crash_cases()[0], _broken("plans-one-too-high"), "strict")
    assert failed.outcome is Outcome.FAILED and failed.grade == "detail", failed.message
    [schedule] = [case for case in load_suite().select("strict", kinds=["schedule"]) if isinstance(case, ScheduleCase)]
    stream = crash.run_schedule(schedule, _broken("plans-one-too-high"), "strict", seed=1, kills=0, replay="")
    assert stream.outcome is Outcome.FAILED and stream.grade == "detail", stream.message
