"""The command line: exit codes, progress, the JSON report and the JUnit file."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from resumekit.conformance import schemas
from resumekit.conformance.cli import (
    COMMANDS,
    EXIT_CERTIFIED,
    EXIT_NOT_CERTIFIED,
    EXIT_SUBSET,
    EXIT_USAGE,
    _parser,
    main,
)

REFERENCE = "python:resumekit.reference:build_resume_plan"
BROKEN = "python:tests.broken.decisions:error_counts_as_success"


def _cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_run_certifies_the_reference_and_writes_valid_reports(tmp_path: Path) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code, out, _ = _cli("run", "--adapter", REFERENCE, "--report-json", str(report), "--junit", str(junit))
    assert code == EXIT_CERTIFIED
    assert "CERTIFIED: strict" in out and "NOT CERTIFIED" not in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["certified"] is True
    assert document["summary"]["passed"] >= 60
    assert len(document["resumekit"]["goldenDigest"]) == 64
    assert document["summary"]["failed"] == 0
    tree = ET.parse(junit)
    cases = tree.getroot().findall(".//testsuite[@name='resumekit.decision']/testcase")
    assert len(cases) == document["summary"]["passed"]
    assert not tree.getroot().findall(".//failure")


def test_run_fails_a_broken_implementation_and_reports_each_failure(tmp_path: Path) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code, out, _ = _cli("run", "--adapter", BROKEN, "--report-json", str(report), "--junit", str(junit))
    assert code == EXIT_NOT_CERTIFIED
    assert "NOT CERTIFIED" in out
    assert "[OP-3]" in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    failed = [r for r in document["results"] if r["outcome"] == "failed"]
    assert failed and all(r["mismatches"] and r["file"].endswith(".yaml") and r["line"] >= 1 for r in failed)
    assert len(ET.parse(junit).getroot().findall(".//failure")) == len(failed)


def test_only_selects_by_glob_and_an_empty_selection_is_a_usage_error() -> None:
    code, out, _ = _cli("run", "--adapter", REFERENCE, "--only", "prefix-after-*", "-q")
    assert code == EXIT_SUBSET
    assert "3 passed" in out
    code, _, err = _cli("run", "--adapter", REFERENCE, "--only", "no-such-case")
    assert code == EXIT_USAGE
    assert "no case matches" in err


def test_an_adapter_that_cannot_be_imported_is_a_usage_error() -> None:
    code, _, err = _cli("run", "--adapter", "python:no.such.module:thing")
    assert code == EXIT_USAGE
    assert "cannot import 'no.such.module'" in err


def test_a_broken_fixture_stops_the_run_with_its_location(golden_copy: Path) -> None:
    target = golden_copy / "phase0" / "failpoints.yaml"
    target.write_text(
        target.read_text(encoding="utf-8").replace("disposition: blocked", "disposition: stuck", 1), encoding="utf-8"
    )
    code, _, err = _cli("run", "--golden", str(golden_copy), "--adapter", REFERENCE)
    assert code == EXIT_USAGE
    assert (
        "phase0/failpoints.yaml:" in err
        and "'stuck'" in err
        and "/prefixes/after_function_call/expect/disposition" in err
    )
    assert "Traceback" not in err


def test_validate_passes_the_bundled_suite_and_flags_a_broken_copy(golden_copy: Path) -> None:
    code, out, _ = _cli("validate")
    assert code == EXIT_CERTIFIED
    assert "0 problem(s)" in out
    broken = golden_copy / "phase0" / "ledger-faults.yaml"
    broken.write_text(broken.read_text(encoding="utf-8").replace("line: 2", "line: two", 1), encoding="utf-8")
    code, out, err = _cli("validate", "--golden", str(golden_copy))
    assert code == EXIT_NOT_CERTIFIED
    assert "1 problem(s)" in out
    assert "phase0/ledger-faults.yaml:" in err


def test_list_shows_cases_and_every_clause_with_its_cases() -> None:
    code, out, _ = _cli("list", "--profile", "core")
    assert code == EXIT_CERTIFIED
    assert "prefix-after-function-call" in out and "DEC-2" in out
    code, out, _ = _cli("list", "--clauses")
    lines = [line for line in out.splitlines() if line.strip()]
    assert any(line.startswith("OFF-1 ") for line in lines)
    explained = ("(not covered yet:", "(binds the kit")
    bare = [line for line in lines if " 0 case(s)" in line and not any(why in line for why in explained)]
    assert not bare, "a clause no fixture cites"


def test_list_checks_shows_every_check_a_mismatch_can_name_with_its_clauses_and_when() -> None:
    from resumekit.conformance.p1.checks import rules

    code, out, _ = _cli("list", "--checks")
    lines = out.splitlines()
    assert code == EXIT_CERTIFIED and lines[-1] == f"{len(rules.listing())} check(s)"
    assert [line.split()[0] for line in lines[:-1]] == [name for name, _, _ in rules.listing()]
    settings = next(line for line in lines if line.startswith("journal.settings "))
    assert "ADP-1, JNL-5, JNL-6" in settings and "(at the end)" in settings
    assert "strict profile only" in next(line for line in lines if line.startswith("resume.superseded "))
    code, out, _ = _cli("list", "--checks", "--kind", "decision")  # Phase 0's results name no check
    assert code == EXIT_CERTIFIED and out == "0 check(s)\n"


def test_list_narrowed_to_kinds_shows_only_their_cases_and_clauses() -> None:
    code, out, _ = _cli("list", "--kind", "p1")
    cases = [line.split()[0] for line in out.splitlines()[:-1] if line.strip()]
    assert code == EXIT_CERTIFIED and cases and all(case.startswith("p1-") for case in cases)
    assert "p1-capture-completes" in cases and not any("soak" in case for case in cases)
    assert out.splitlines()[-1] == f"{len(cases)} case(s)"
    code, out, _ = _cli("list", "--kind", "p1-campaign")  # an opt-in kind is listed when named
    assert code == EXIT_CERTIFIED and "p1-soak-20-tasks" in out and "p1-capture-completes" not in out
    code, out, _ = _cli("list", "--clauses", "--kind", "decision")
    clauses = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert code == EXIT_CERTIFIED and "OFF-1" in clauses and not any(c.startswith(("JNL-", "LEASE-")) for c in clauses)
    from resumekit.conformance.cli import parse

    with pytest.raises(SystemExit) as stopped:
        parse(["list", "--kind", "no-such-kind"])
    assert stopped.value.code == EXIT_USAGE


def test_the_console_entry_point_and_module_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "list", "--only", "crash-p1*"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "crash-p1 " in done.stdout and "crash-p10" in done.stdout
    assert main(["list", "--only", "crash-p0"]) == EXIT_CERTIFIED


def test_a_markdown_summary_is_appended_for_ci(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    code, _, _ = _cli("run", "--adapter", BROKEN, "-q", "--summary-md", str(summary))
    assert code == EXIT_NOT_CERTIFIED
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n## resumekit:")
    assert "**not certified**" in text
    assert "| decision |" in text
    assert "[OP-3]" in text


def test_the_golden_digest_changes_with_any_fixture_byte(golden_copy: Path) -> None:
    from resumekit.conformance.fixtures import load_suite

    before = load_suite(golden_copy).digest
    target = golden_copy / "phase0" / "crash-schedule.yaml"
    target.write_bytes(target.read_bytes() + b"# one more comment\n")
    assert load_suite(golden_copy).digest != before
    assert load_suite().digest == load_suite().digest


def test_validate_names_every_problem_in_every_file_and_unknown_clauses(golden_copy: Path) -> None:
    decisions = golden_copy / "phase0" / "decisions"
    boundaries = decisions / "boundaries.yaml"
    text = boundaries.read_text(encoding="utf-8")
    # Two problems in one file, in different cases: a schema break and an unknown clause id.
    text = text.replace("disposition: safe_replay", "disposition: maybe", 1)
    text = text.replace("clauses: [DEC-3, OP-3]", "clauses: [DEC-3, OP-3, XX-1]", 1)
    boundaries.write_text(text, encoding="utf-8")
    offset = decisions / "offset.yaml"
    offset.write_text(
        offset.read_text(encoding="utf-8").replace(
            "sourceRuntimeEventHighWater: 3", "sourceRuntimeEventHighWater: 9", 1
        ),
        encoding="utf-8",
    )
    code, out, err = _cli("validate", "--golden", str(golden_copy))
    assert code == EXIT_NOT_CERTIFIED
    assert "3 problem(s)" in out
    assert "'maybe'" in err and "boundaries.yaml" in err
    assert "cites clause 'XX-1', which no spec document" in err
    assert "offset.yaml" in err and "PLAN-1" in err


def test_validate_warns_on_a_clause_no_case_cites(golden_copy: Path) -> None:
    for path in (golden_copy / "phase0").rglob("*.yaml"):
        path.write_text(re.sub(r",\s*PLAN-10\b", "", path.read_text(encoding="utf-8")), encoding="utf-8")
    code, out, err = _cli("validate", "--golden", str(golden_copy))
    assert code == EXIT_CERTIFIED, err
    assert "warning: no case cites clause PLAN-10" in err
    assert "1 uncited clause(s)" in out


def test_an_abbreviated_option_is_refused_with_the_commands_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 21, item 8: `--adapt` was taken for --adapter, and a mistyped option printed the top-level usage.

    from resumekit.conformance.cli import parse

    for argv, command, wrong in (
        (["run", "--adapt", "reference"], "run", "--adapt reference"),
        (["run", "--profil", "core"], "run", "--profil core"),
        (["list", "--onl", "x"], "list", "--onl x"),
        (["merge", "a.json", "-o", "m.json", "--jun", "j.xml"], "merge", "--jun j.xml"),
    ):
        with pytest.raises(SystemExit) as stopped:
            parse(argv)
        assert stopped.value.code == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"usage: resumekit {command} "), err
        assert err.rstrip().endswith(f"resumekit {command}: error: unrecognized arguments: {wrong}"), err
