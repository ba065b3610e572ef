"""Headlines from the scope (issue 21, item 4): a certification of fewer capabilities than the selection
has cases for names what it claims in the verdict line, the badge and every summary, and a passing shard
exits as the subset run it is."""

from __future__ import annotations

import io
import json
from pathlib import Path

from resumekit.conformance import badge, contracts, report, schemas
from resumekit.conformance.cli import COMMANDS, EXIT_CERTIFIED, EXIT_CODES, EXIT_SUBSET, _parser
from resumekit.conformance.results import CaseResult, Implementation, Outcome, Run, Selection, capability_words

PROJECTION_ONLY = "python:tests.core_only:core_only"


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    return COMMANDS[arguments.command](arguments, out, err), out.getvalue() + err.getvalue()


def test_a_projection_only_implementation_is_certified_for_its_scope_in_every_report(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("r.json", "b.json", "s.md", "r.html")}
    options = ["--report-json", str(files["r.json"]), "--badge", str(files["b.json"])]
    options += ["--summary-md", str(files["s.md"]), "--report-html", str(files["r.html"])]
    code, out = _cli("run", "-q", "--adapter", PROJECTION_ONLY, *options)
    assert code == EXIT_CERTIFIED, out
    assert "\nCERTIFIED: core (strict not claimed), Phase 0 projection only: " in out, out[-2000:]
    assert "\nnot claimed:    " in out and "(crash 12, ledger-fault 27, schedule 1, p1 " in out
    document = json.loads(files["r.json"].read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["verdict"]["claimedOnly"] == "Phase 0 projection"
    shield = json.loads(files["b.json"].read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.BASE + "report/badge.json", shield) is None
    passed = document["summary"]["passed"]
    assert shield["message"] == f"core {passed}/{passed}, Phase 0 projection only" and shield["color"] == "green"
    markdown = files["s.md"].read_text(encoding="utf-8")
    assert "certified: core (strict not claimed), Phase 0 projection only" in markdown
    assert "Not claimed: " in markdown and "| CHECKPOINT_DURABLE_WRITE | not claimed |" in markdown
    page = files["r.html"].read_text(encoding="utf-8")
    assert "Phase 0 projection only" in page and "not claimed" in page


def _run(*outcomes: Outcome, capabilities: tuple[str, ...] = ("phase0.projection",)) -> Run:
    results = tuple(CaseResult(f"case-{n}", "decision", outcome) for n, outcome in enumerate(outcomes))
    info = Implementation("x", "1", "python", capabilities=capabilities, profiles=("core", "strict"))
    return Run(info, "strict", results, "", "", 0.0, selection=Selection(), selected=len(results))


def test_a_certification_of_every_selected_case_names_no_scope() -> None:
    whole = _run(Outcome.PASSED, Outcome.PASSED)
    assert whole.verdict.headline == "CERTIFIED: strict" and whole.verdict.claimed_only == ""
    assert badge.to_badge(whole)["color"] == "brightgreen" and report.not_claimed_text(whole) == ""
    part = _run(Outcome.PASSED, Outcome.NOT_CLAIMED)
    assert part.verdict.headline == "CERTIFIED: strict, Phase 0 projection only"
    assert badge.message(part) == ("strict 1/1, Phase 0 projection only", "claimed-only")


def test_capabilities_in_words_are_grouped_by_contract() -> None:
    contracts.registered()  # the registry names each contract's title as it registers it
    words = capability_words(("phase0.projection", "phase0.ledger-file", "p1.worker", "acme.thing", "odd"))
    assert words == "Phase 0 projection, ledger file; P1 worker; acme.thing; odd"
    assert capability_words(()) == "nothing"


def test_a_passing_shard_exits_as_a_subset_run() -> None:
    code, out = _cli(
        "run", "-q", "--adapter", "python:resumekit.reference:build_resume_plan", "--shard", "1/2", "--seed", "5"
    )
    assert code == EXIT_SUBSET, out[-2000:]
    assert "\nSHARD 1/2 PASSED (a subset run: merge every shard for the verdict): " in out
    assert "--shard" in EXIT_CODES.split(" 3 ")[1].split(" 130 ")[0]  # `run --help` says a shard exits 3


def test_the_selection_line_of_a_core_run_says_core() -> None:
    # Issue 21, item 8: `selection: profile strict` was printed for a run compared in core.
    code, out = _cli("run", "-q", "--adapter", PROJECTION_ONLY)
    assert code == EXIT_CERTIFIED, out
    lines = [line for line in out.splitlines() if line.startswith("selection:")]
    assert len(lines) == 2, out  # the header's and the summary's
    assert all(line.split(None, 1)[1].startswith("profile core (strict asked for, not claimed), ") for line in lines)
    code, out = _cli("run", "-q", "--adapter", PROJECTION_ONLY, "--profile", "core")
    assert "selection:      profile core, every case" in out


def test_clause_coverage_lists_the_claimed_clauses_before_the_unclaimed(tmp_path: Path) -> None:
    # Issue 21, item 8: for a projection-only implementation the unclaimed P1 clauses led the table.
    page = tmp_path / "r.html"
    code, out = _cli("run", "-q", "--adapter", PROJECTION_ONLY, "--report-html", str(page))
    assert code == EXIT_CERTIFIED, out
    table = page.read_text(encoding="utf-8").split('<table id="clauses">')[1].split("</table>")[0]
    rows = table.split("<tr")[2:]  # past the head
    unclaimed = ['<span class="note">none claimed</span>' in row for row in rows]
    assert unclaimed.count(False) > 10 and unclaimed.count(True) > 10
    first = unclaimed.index(True)
    assert all(unclaimed[first:]), "a claimed clause comes after an unclaimed one"
    assert "<code>PLAN-1</code>" in "".join(rows[:first])
