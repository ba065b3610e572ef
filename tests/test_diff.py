"""`resumekit diff` names what changed between two runs and fails on a regression."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import diff
from resumekit.conformance.cli import COMMANDS, EXIT_CERTIFIED, EXIT_NOT_CERTIFIED, EXIT_USAGE, _parser

REFERENCE = "python:resumekit.reference:build_resume_plan"
BROKEN = "python:tests.broken.decisions:last_duplicate_call_wins"
SELECTION = ("--kind", "decision", "--only", "duplicate-call-*", "--only", "prefix-*", "--profile", "core")


def _cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("diff")
    good, bad = folder / "good.json", folder / "bad.json"
    _cli("run", "-q", "--adapter", REFERENCE, *SELECTION, "--report-json", str(good))
    _cli("run", "-q", "--adapter", BROKEN, *SELECTION, "--report-json", str(bad))
    return good, bad, json.loads(bad.read_text(encoding="utf-8"))


def test_a_regression_names_the_failing_case_and_fails(reports: tuple[Path, Path, dict[str, Any]]) -> None:
    good, bad, broken = reports
    failing = sorted(r["id"] for r in broken["results"] if r["outcome"] != "passed")
    assert failing, "the broken implementation should fail some duplicate-call case"
    code, out, _ = _cli("diff", str(good), str(bad))
    assert code == EXIT_NOT_CERTIFIED
    assert "REGRESSION" in out
    for case_id in failing:
        assert f"{case_id}: passed -> failed" in out
    assert "implementation changed" in out


def test_the_fix_is_a_change_but_no_regression(reports: tuple[Path, Path, dict[str, Any]]) -> None:
    good, bad, _ = reports
    code, out, _ = _cli("diff", str(bad), str(good))
    assert code == EXIT_CERTIFIED
    assert "other changes" in out and "no regression" in out


def test_new_and_removed_cases_and_a_changed_golden_set_are_called_out() -> None:
    def document(ids: dict[str, str], digest: str, version: str = "1") -> dict[str, Any]:
        return {
            "resumekit": {"version": version, "goldenDigest": digest},
            "implementation": {"name": "x", "version": "1"},
            "profile": "strict",
            "certified": False,
            "results": [{"id": case_id, "outcome": outcome} for case_id, outcome in ids.items()],
        }

    found = diff.compare(
        document({"a": "passed", "b": "passed"}, "1" * 64), document({"b": "passed", "c": "failed"}, "2" * 64, "2")
    )
    assert found.added == ("c",) and found.removed == ("a",) and not found.regressed
    text = diff.format_diff(found, "A", "B")
    assert "golden digest changed" in text and "kit version changed" in text
    assert "new cases (1): c" in text and "removed cases (1): a" in text


def test_a_file_that_is_not_a_run_report_is_a_usage_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"results": []}', encoding="utf-8")
    code, _, err = _cli("diff", str(junk), str(junk))
    assert code == EXIT_USAGE and "junk.json: not a run report" in err
