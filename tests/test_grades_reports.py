"""Every report counts the grades of the failed plans, and `resumekit diff` says when a case became less safe."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from resumekit.conformance import diff, report, report_html, schemas
from resumekit.conformance.results import CaseResult, Implementation, Mismatch, Outcome, Run

WRONG = (Mismatch("/disposition", "blocked", "safe_replay", "PLAN-7"),)


def _result(case_id: str, outcome: Outcome, grade: str | None = None, kind: str = "decision") -> CaseResult:
    failed = outcome is Outcome.FAILED
    message = None if outcome in (Outcome.PASSED, Outcome.FAILED) else "no answer"
    return CaseResult(
        case_id, kind, outcome, ("PLAN-7",), mismatches=WRONG if failed else (), grade=grade, message=message
    )


def _run(*results: CaseResult) -> Run:
    implementation = Implementation("beyond", "1", "python", capabilities=("phase0.projection",))
    return Run(implementation, "core", results, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", 1.0)


GRADED = _run(
    _result("fine", Outcome.PASSED),
    _result("replays-a-dangling-call", Outcome.FAILED, "unsafe"),
    _result("blocks-a-pair", Outcome.FAILED, "over-cautious"),
    _result("blocks-a-second-pair", Outcome.FAILED, "over-cautious"),
    _result("another-reason", Outcome.FAILED, "detail"),
    _result("a-p1-scenario", Outcome.FAILED, kind="p1"),
    _result("no-answer", Outcome.ERRORED),
)


def test_the_verdict_line_counts_the_failed_cases_by_grade() -> None:
    verdict = report.format_summary(GRADED).splitlines()[-3]
    assert verdict.startswith(
        "NOT CERTIFIED: 1 passed, 5 failed (1 unsafe, 2 over-cautious, 1 detail, 1 ungraded), 1 errored, "
    )
    assert "  unsafe (replays what must be blocked, or skips a verification): replays-a-dangling-call" in (
        report.format_summary(GRADED)
    )
    text = report.format_result(GRADED.results[1])
    assert "  grade: unsafe: it replays what must be blocked" in text


def test_a_run_whose_failures_compared_no_plan_reads_as_before() -> None:
    ungraded = _run(_result("fine", Outcome.PASSED), _result("a-p1-scenario", Outcome.FAILED, kind="p1"))
    assert report.counts_text(ungraded).startswith("1 passed, 1 failed, 0 errored, ")
    assert report.grades_text(ungraded) == ""
    assert "resumekit.grades" not in report.run_properties(ungraded)
    assert "by grade" not in report.to_markdown(ungraded)


def test_the_json_report_keeps_each_grade_and_their_counts() -> None:
    document = report.to_json(GRADED)
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["grades"] == {"unsafe": 1, "over-cautious": 2, "detail": 1, "ungraded": 1}
    assert [r.get("grade") for r in document["results"]][:3] == [None, "unsafe", "over-cautious"]
    assert report.from_json(document).results[1].grade == "unsafe"
    passed: dict[str, Any] = {**document["results"][0], "grade": "unsafe"}  # only a failed case has a grade
    assert schemas.first_violation(schemas.RUN_REPORT, {**document, "results": [passed]}) is not None


def test_junit_names_the_grade_of_each_failure_and_counts_them() -> None:
    suites = ET.fromstring(report.to_junit(GRADED))
    failures = {case.get("name"): case.find("failure") for case in suites.iter("testcase")}
    unsafe = failures["replays-a-dangling-call"]
    assert unsafe is not None and (unsafe.get("message") or "").startswith("unsafe: ")
    scenario = failures["a-p1-scenario"]
    assert scenario is not None and not (scenario.get("message") or "").startswith(("unsafe", "detail"))
    graded = {p.get("name"): p.get("value") for p in suites.iter("property")}
    assert graded["resumekit.grades"] == "1 unsafe, 2 over-cautious, 1 detail, 1 ungraded"


def test_the_markdown_summary_says_first_whether_any_failure_is_unsafe() -> None:
    markdown = report.to_markdown(GRADED)
    assert (
        "Failed cases by grade (GRADE-1): **1 unsafe** (`replays-a-dangling-call`); "
        "1 unsafe, 2 over-cautious, 1 detail, 1 ungraded." in markdown
    )
    assert "| `replays-a-dangling-call` | failed (unsafe) |" in markdown
    careful = _run(_result("blocks-a-pair", Outcome.FAILED, "over-cautious"))
    assert "Failed cases by grade (GRADE-1): none unsafe; 0 unsafe, 1 over-cautious, 0 detail." in report.to_markdown(
        careful
    )


def test_the_html_report_counts_the_grades_and_badges_each_case() -> None:
    page = report_html.to_html(GRADED)
    assert "5 failed (1 unsafe, 2 over-cautious, 1 detail, 1 ungraded)" in page
    assert ">failed (unsafe)</span>" in page


def _document(outcome: str, grade: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"id": "case", "outcome": outcome, **({"grade": grade} if grade else {})}
    return {
        "resumekit": {"version": "1", "goldenDigest": "1" * 64},
        "implementation": {"name": "x", "version": "1"},
        "profile": "core",
        "certified": False,
        "results": [result],
    }


def test_diff_says_when_a_change_makes_a_case_less_safe() -> None:
    found = diff.compare(_document("failed", "detail"), _document("failed", "unsafe"))
    assert found.regressed and [c.case_id for c in found.less_safe] == ["case"]
    text = diff.format_diff(found, "A", "B")
    assert "case: failed (detail) -> failed (unsafe): less safe" in text
    assert "REGRESSION: 1 case(s) less safe: their plans are unsafe now" in text
    newly = diff.compare(_document("passed", None), _document("failed", "unsafe"))
    said = diff.format_diff(newly, "A", "B")
    assert "REGRESSION: 1 case(s) passed before and do not now; 1 case(s) less safe" in said


def test_diff_of_a_safer_change_is_no_regression() -> None:
    found = diff.compare(_document("failed", "unsafe"), _document("failed", "over-cautious"))
    assert not found.regressed and not found.less_safe
    assert "case: failed (unsafe) -> failed (over-cautious)" in diff.format_diff(found, "A", "B")
    same = diff.compare(_document("failed", "unsafe"), _document("failed", "unsafe"))
    assert same.changed == ()
