"""Every report of a run with P1 scenarios carries the gate table, and a gate never reads better than its runs."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from resumekit.conformance import report, report_html, schemas
from resumekit.conformance.p1.contract import GATES as GATE_SUMMARY
from resumekit.conformance.p1.contract import gate_rows
from resumekit.conformance.p1.gates import ALWAYS_CHECKED, GATES, gate_table
from resumekit.conformance.results import CaseResult, Implementation, Mismatch, Outcome, Run, SummaryTable

GATES_OF = {
    "a": ("CHECKPOINT_DURABLE_WRITE", "LEASE_RENEWAL_RECOVERY"),
    "b": ("LEASE_RENEWAL_RECOVERY",),
    "c": ("WORKSPACE_CLEANUP_RECOVERY",),
}


def _result(case_id: str, outcome: Outcome) -> CaseResult:
    held = Mismatch("/leases/l-1", "released", "ACTIVE", "LEASE-5", "held")
    mismatches = (held,) if outcome is Outcome.FAILED else ()
    message = "not claimed" if outcome is Outcome.NOT_CLAIMED else None
    gates = GATES_OF[case_id]
    return CaseResult(case_id, "p1", outcome, mismatches=mismatches, message=message, counts_toward=gates)


def _run() -> Run:
    results = (_result("a", Outcome.PASSED), _result("b", Outcome.FAILED), _result("c", Outcome.NOT_CLAIMED))
    table = SummaryTable("p1", GATE_SUMMARY, gate_rows(results, "core"))
    implementation = Implementation(name="w", version="1", language="x", capabilities=("p1.worker",))
    return Run(implementation, "core", results, "start", "end", 1.0, summaries=(table,))


def test_the_gate_verdicts_follow_their_scenarios() -> None:
    rows = {row["name"]: row for row in _run().summaries[0].rows}
    assert list(rows) == list(GATES)
    assert rows["CHECKPOINT_DURABLE_WRITE"]["verdict"] == "passed"
    assert rows["LEASE_RENEWAL_RECOVERY"]["verdict"] == "failed"
    assert rows["LEASE_RENEWAL_RECOVERY"]["failed"] == ["b"]
    # A gate whose only scenario was not claimed is not claimed, and a gate with no scenario not run: never passed.
    assert rows["WORKSPACE_CLEANUP_RECOVERY"]["verdict"] == "not claimed"
    assert rows["RESUME_FROM_CHECKPOINT"]["verdict"] == "not run"
    assert "JNL-8" not in rows["CHECKPOINT_DURABLE_WRITE"]["clauses"]  # strict clauses only in strict runs


def test_the_json_report_carries_the_table_and_matches_its_schema() -> None:
    document = report.to_json(_run())
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    (table,) = document["summaries"]
    assert [row["name"] for row in table["rows"]] == list(GATES)


def test_junit_has_a_gate_suite_with_a_failure_and_skips() -> None:
    root = ET.fromstring(report.to_junit(_run()))
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "resumekit.p1-gates")
    assert suite.get("tests") == str(len(GATES))
    # LEASE-5 is a clause of two gates: the failure counts against both.
    assert suite.get("failures") == "2"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["LEASE_RENEWAL_RECOVERY"].find("failure") is not None
    skipped = {name: case.find("skipped") for name, case in cases.items()}
    assert skipped["RESUME_FROM_CHECKPOINT"].get("message") == "not run: none of its scenarios was selected"
    assert skipped["WORKSPACE_CLEANUP_RECOVERY"].get("message") == "not claimed: none of its scenarios is claimed"
    assert suite.get("skipped") == str(len(GATES) - 3)  # all but the passed gate and the two failed ones
    assert cases["CHECKPOINT_DURABLE_WRITE"].find("failure") is None
    assert cases["CRASH_RECOVERY_CONVERGENCE"].find("failure") is not None


def test_text_and_markdown_show_every_gate() -> None:
    text, markdown = report.format_summary(_run()), report.to_markdown(_run())
    for gate in GATES:
        assert gate in text and f"| {gate} |" in markdown
    assert "| LEASE_RENEWAL_RECOVERY | failed |" in markdown


def _failed(case_id: str, *mismatches: Mismatch) -> CaseResult:
    return CaseResult(case_id=case_id, kind="p1", outcome=Outcome.FAILED, mismatches=mismatches)


def test_a_failure_counts_against_every_gate_of_its_scenario_and_the_gates_of_its_clause() -> None:
    gates_of = {"cleanup": ("WORKSPACE_CLEANUP_RECOVERY",), "submit": ("RESULT_SUBMISSION_REPLAY_SAFE",)}
    # SUB-1 is checked on every scenario: breaking it in a cleanup scenario fails the gates of SUB-1.
    early = Mismatch("/tasks/t/attempts/1/submission", "result_pending", "claimed", "SUB-1", "too early")
    results = [_failed("cleanup", early), CaseResult(case_id="submit", kind="p1", outcome=Outcome.PASSED)]
    rows = {row.gate: row for row in gate_table(gates_of, results, profile="core")}
    assert rows["RESULT_SUBMISSION_REPLAY_SAFE"].verdict == "failed"
    assert rows["RESULT_SUBMISSION_REPLAY_SAFE"].failed == ("cleanup",)
    assert rows["CHECKPOINT_DURABLE_WRITE"].verdict == "failed"  # SUB-1 is one of its clauses too
    # A failed scenario proves nothing for the gates it names, whichever clause it failed on.
    assert rows["WORKSPACE_CLEANUP_RECOVERY"].verdict == "failed"
    assert rows["WORKSPACE_CLEANUP_RECOVERY"].failed == ("cleanup",)
    assert rows["LEASE_RENEWAL_RECOVERY"].verdict == "not run"  # no scenario of it, and SUB-1 is none of its clauses


def test_a_failed_expectation_counts_against_every_gate_its_scenario_names() -> None:
    gates_of = {"s": ("WORKSPACE_CLEANUP_RECOVERY", "LEASE_RENEWAL_RECOVERY")}
    wrong = Mismatch("/expect/capture/final", "result_submitted", "claimed", "FPT-4", "did not converge")
    rows = {row.gate: row for row in gate_table(gates_of, [_failed("s", wrong)], profile="core")}
    assert rows["WORKSPACE_CLEANUP_RECOVERY"].verdict == rows["LEASE_RENEWAL_RECOVERY"].verdict == "failed"
    assert rows["CRASH_RECOVERY_CONVERGENCE"].verdict == "not run"
    errored = CaseResult(case_id="s", kind="p1", outcome=Outcome.ERRORED, message="hung")
    rows = {row.gate: row for row in gate_table(gates_of, [errored], profile="core")}
    assert rows["WORKSPACE_CLEANUP_RECOVERY"].verdict == rows["LEASE_RENEWAL_RECOVERY"].verdict == "failed"


def test_the_certifying_guide_lists_every_clause_the_kit_checks_on_every_scenario() -> None:
    from tests.support import ROOT

    text = (ROOT / "docs" / "certifying.md").read_text(encoding="utf-8")
    start = text.index("Every scenario is checked for these clauses")
    paragraph = text[start : text.index("that is:", start)]
    listed = {word.strip(",.") for word in paragraph.split() if "-" in word and word[0].isupper()}
    assert listed == set(ALWAYS_CHECKED)


def test_a_step_the_kit_cannot_take_errors_that_scenario_and_the_run_goes_on(golden_copy: Path, tmp_path: Path) -> None:
    from tests.support import run_resumekit

    scope = golden_copy / "p1" / "scenarios" / "scope.yaml"
    text = scope.read_text(encoding="utf-8")
    assert "changes: {generation: 2}" in text
    scope.write_text(text.replace("changes: {generation: 2}", "changes: {generation: 0}"), encoding="utf-8")
    only = ("--only", "p1-scope-generation-differs-reuses-nothing", "--only", "p1-capture-completes")
    code, document, output = run_resumekit(tmp_path / "r.json", "--golden", str(golden_copy), *only)
    assert code == 1, output
    outcomes = {result["id"]: result for result in document["results"]}
    broken = outcomes["p1-scope-generation-differs-reuses-nothing"]
    assert broken["outcome"] == "errored" and "could not carry out this scenario" in broken["message"]
    assert "scope.yaml" in broken["message"] and "generation" in broken["message"]
    assert outcomes["p1-capture-completes"]["outcome"] == "passed"
    assert "Traceback" not in output


# -- a gate failed by a scenario it does not name (issue 39) ----------------------------------------------


def _counted_row(run: Run, gate: str) -> dict[str, object]:
    return dict(next(row for row in run.summaries[0].rows if row["name"] == gate))


def test_a_gate_failed_by_a_scenario_of_another_gate_names_it_and_why_in_every_report() -> None:
    # "b" names LEASE_RENEWAL_RECOVERY only and fails LEASE-5, a clause of CRASH_RECOVERY_CONVERGENCE too, which
    # no scenario of the run names: the gate fails with none of its own (the rule of docs/certifying.md).
    run = _run()
    row = _counted_row(run, "CRASH_RECOVERY_CONVERGENCE")
    assert (row["verdict"], row["cases"], row["failed"]) == ("failed", 0, ["b"])
    assert row["failedBy"] == [{"case": "b", "named": False, "clauses": ["LEASE-5"]}]
    assert _counted_row(run, "LEASE_RENEWAL_RECOVERY")["failedBy"] == [
        {"case": "b", "named": True, "clauses": ["LEASE-5"]}
    ]
    why = "b (not one of its scenarios: a failed check of LEASE-5)"
    text = report.format_summary(run).splitlines()
    at = next(i for i, line in enumerate(text) if line.startswith("CRASH_RECOVERY_CONVERGENCE"))
    assert text[at + 1].strip() == f"failed by: {why}"
    assert "one of its scenarios, failed on LEASE-5" in report.format_summary(run)
    markdown = report.to_markdown(run)
    assert "| CRASH_RECOVERY_CONVERGENCE | failed | - | - |" in markdown
    assert "`b` (not one of its scenarios: a failed check of LEASE-5) |" in markdown
    html = report_html.to_html(run)
    assert "failed by: <a href=" in html and "(not one of its scenarios: a failed check of LEASE-5)" in html
    root = ET.fromstring(report.to_junit(run))
    failure = next(c for c in root.iter("testcase") if c.get("name") == "CRASH_RECOVERY_CONVERGENCE").find("failure")
    assert failure is not None and why in (failure.get("message") or "")


def test_no_gate_reads_failed_0_of_0() -> None:
    run = _run()
    text = report.format_summary(run)
    for row in run.summaries[0].rows:
        line = next(line for line in text.splitlines() if line.startswith(str(row["name"])))
        assert not re.search(r"failed\s+0\s+0\s", line), line
    assert not re.search(r"\| failed \| 0 \| 0 \|", report.to_markdown(run))
    from resumekit.conformance.compare_html import to_compare_html

    page = to_compare_html([("one", run), ("two", run)])
    assert "0 of 0" not in page and "no scenarios of its own, 1 failing" in page


def test_a_report_read_back_names_the_failing_case_and_one_of_an_older_kit_names_it_alone() -> None:
    document = report.to_json(_run())
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    again = report.from_json(document)
    assert "failed by: b (not one of its scenarios" in report.format_summary(again)
    for table in document["summaries"]:
        for row in table["rows"]:
            del row["failedBy"]
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    older = report.format_summary(report.from_json(document)).splitlines()
    at = next(i for i, line in enumerate(older) if line.startswith("CRASH_RECOVERY_CONVERGENCE"))
    assert older[at + 1].strip() == "failed by: b"
