"""A runtime that has moved past the seed (tests/broken/upstream.py) gets a readable verdict grading its divergences.

It answers as the upstream runtime's newer main is observed to. Every decision case it fails is failed,
not errored, with its differences listed, and graded as the observed behaviour of its group implies
(docs/spec/phase0.md, section 0.2 and GRADE-1): blocking what the seed settles is over-cautious, a
different operation status or extra diagnostics in a plan the seed blocks too is a detail, and
dropping the verification an early response requires, or replaying a tool fact after the terminal
event that strict blocks, is unsafe.
"""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.adapters.factory import open_adapter
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.phase0.grades import DETAIL, OVER_CAUTIOUS, UNSAFE
from resumekit.conformance.report import format_summary
from resumekit.conformance.results import Outcome, Run
from resumekit.conformance.runner import run
from tests.support import python_command

# The groups of observed divergences with example cases, and the grade each group's behaviour implies.
CORE_GROUPS = {
    "A orphan response (an extra diagnostic)": (
        DETAIL,
        ["unmatched-response-without-call", "response-id-differs-from-call-id", "duplicate-unmatched-responses"],
    ),
    "B name mismatch (corruption, blocked as expected)": (
        DETAIL,
        ["name-mismatch-settles-and-blocks", "name-mismatch-by-letter-case", "name-mismatch-with-is-error"],
    ),
    "C partial tool events block": (OVER_CAUTIOUS, ["partial-call-only", "partial-events-only"]),
    "D lane envelope blocks": (
        OVER_CAUTIOUS,
        ["response-with-user-role-still-settles", "later-phase-fields-are-not-read", "terminal-call-event-itself"],
    ),
    "E duplicate call blocks": (
        OVER_CAUTIOUS,
        ["duplicate-call-latest-name-differs", "call-repeated-after-answer-stays-paired"],
    ),
    "F duplicate response blocks": (
        OVER_CAUTIOUS,
        ["duplicate-response-same-result", "duplicate-response-error-then-success"],
    ),
    "G response before its call: corruption, no verification": (UNSAFE, ["response-before-call-neither-replayed"]),
    "H duplicate event id blocks": (OVER_CAUTIOUS, ["duplicate-event-id-text", "duplicate-event-id-three-times"]),
    "I run identity blocks": (
        OVER_CAUTIOUS,
        ["foreign-run-id", "each-identity-field-differs", "identity-from-first-non-partial-event"],
    ),
}
STRICT_GROUPS = {
    "H duplicate event id: another reason": (DETAIL, ["duplicate-event-id-text", "duplicate-event-id-three-times"]),
    "I run identity: another code": (DETAIL, ["foreign-run-id", "each-identity-field-differs"]),
    "K a tool fact after the terminal event is not flagged": (
        UNSAFE,
        ["call-after-status-completed", "response-after-status-aborted", "first-terminal-counts"],
    ),
}


@pytest.fixture(scope="module", params=["core", "strict"])
def finished(request: Any) -> Run:
    profile = request.param
    adapter = open_adapter(python_command("-m", "tests.broken.upstream"))
    try:
        return run(load_suite().select(profile, kinds=["decision"]), adapter, profile=profile)
    finally:
        adapter.close()


def test_no_decision_case_errs_and_every_failure_lists_its_differences_and_grade(finished: Run) -> None:
    assert finished.counts["errored"] == 0
    failed = [r for r in finished.results if r.outcome is Outcome.FAILED]
    assert len(failed) >= 50
    for result in failed:
        assert result.grade in (UNSAFE, OVER_CAUTIOUS, DETAIL), result.case_id
        assert any(m.note is None or "vocabulary" not in m.note for m in result.mismatches), result.case_id


def test_each_group_is_graded_as_its_observed_behaviour_implies(finished: Run) -> None:
    groups = CORE_GROUPS if finished.profile == "core" else STRICT_GROUPS
    by_id = {r.case_id: r for r in finished.results}
    for group, (grade, case_ids) in groups.items():
        for case_id in case_ids:
            result = by_id[case_id]
            assert result.outcome is Outcome.FAILED, (group, case_id)
            assert result.grade == grade, (group, case_id, result.grade)


def test_only_a_dropped_verification_or_a_fact_after_the_terminal_event_is_unsafe(finished: Run) -> None:
    unsafe = [r for r in finished.results if r.grade == UNSAFE]
    assert unsafe
    for result in unsafe:
        found = [(m.pointer, m.expected, m.actual) for m in result.mismatches]
        # An operation whose response came first (or never) requires a verification the answer drops ...
        dropped = ("/requiresVerification", True, False) in found
        # ... or (strict, group K) a tool fact after the terminal event is replayed where strict blocks.
        replayed = ("/disposition", "blocked", "safe_replay") in found and "STRICT-6" in result.clauses
        assert dropped or (replayed and finished.profile == "strict"), result.case_id


def test_the_verdict_line_says_how_many_failures_are_unsafe(finished: Run) -> None:
    grades = finished.grades
    summary = format_summary(finished).splitlines()
    [verdict] = [line for line in summary if line.startswith("NOT CERTIFIED: ")]
    expected = f"{grades['unsafe']} unsafe, {grades['over-cautious']} over-cautious, {grades['detail']} detail"
    assert f"{finished.counts['failed']} failed ({expected})" in verdict
    named = summary[-1]  # a reader of the summary alone sees which cases replay what they must not
    assert named.startswith("  unsafe (replays what must be blocked, or skips a verification): ")
    assert "response-before-call-neither-replayed" in named
