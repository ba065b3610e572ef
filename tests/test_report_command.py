"""``resumekit report``: saved JSON reports rendered again in every format, several set side by side on one
page, and every unreadable or foreign file refused by name, with the file and the JSON pointer."""

from __future__ import annotations

import html.parser
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import saved_reports
from tests.support import ROOT, python_command, run_resumekit

BROKEN_DECISIONS = "python:tests.broken.decisions:error_counts_as_success"


def _report(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "report", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three saved reports: the reference and a broken projection on the decision cases, and the reference
    and a broken P1 worker on one P1 scenario each, whose gate tables differ."""
    out = tmp_path_factory.mktemp("reports")
    runs = {
        "reference": ("--adapter", "reference", "--kind", "decision", "--kind", "p1", "--only", "p1-capture-completes",
                      "--only", "offset-*"),
        "broken": ("--adapter", BROKEN_DECISIONS, "--kind", "decision", "--only", "offset-*"),
        "worker": ("--adapter", python_command("-m", "tests.broken.workers", "names-workspaces-freely"), "--kind",
                   "p1", "--only", "p1-capture-completes"),
    }  # fmt: skip
    paths = {}
    for name, args in runs.items():
        paths[name] = out / f"{name}.json"
        code, document, output = run_resumekit(paths[name], *args)
        assert document, (name, code, output)
    return paths


def test_one_report_renders_as_html_junit_markdown_and_a_badge_and_exits_by_its_verdict(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    outputs = {name: tmp_path / name for name in ("page.html", "junit.xml", "summary.md", "badge.json")}
    code, stdout, stderr = _report(
        str(saved["broken"]),
        "--report-html", str(outputs["page.html"]), "--junit", str(outputs["junit.xml"]),
        "--summary-md", str(outputs["summary.md"]), "--badge", str(outputs["badge.json"]),
    )  # fmt: skip
    assert code == 1, (stdout, stderr)  # the broken projection's subset run did not pass
    document = json.loads(saved["broken"].read_text(encoding="utf-8"))
    failed = [r["id"] for r in document["results"] if r["outcome"] == "failed"]
    assert failed and "did not all pass" in stdout
    page = outputs["page.html"].read_text(encoding="utf-8")
    assert all(case_id in page for case_id in failed)
    suites = ET.fromstring(outputs["junit.xml"].read_text(encoding="utf-8"))
    cases = suites.findall(".//testcase")
    assert len([c for c in cases if c.find("failure") is not None]) == len(failed)
    assert cases and all(str(c.get("file")).startswith("golden/phase0/decisions/") for c in cases)
    assert all(str(c.get("classname")) == str(c.get("file")).replace("/", ".") for c in cases)
    assert "**failed** (not a certification)" in outputs["summary.md"].read_text(encoding="utf-8")
    badge = json.loads(outputs["badge.json"].read_text(encoding="utf-8"))
    assert badge["color"] != "brightgreen", badge
    # A passing subset run exits 3, as `run` does: re-rendering never claims a certification.
    assert _report(str(saved["reference"]))[0] == 3


def test_three_reports_side_by_side_name_each_run_and_mark_the_cases_and_gates_that_differ(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    page_path = tmp_path / "side.html"
    code, stdout, stderr = _report(*(str(saved[n]) for n in ("reference", "broken", "worker")), "--compare-html",
                                   str(page_path))  # fmt: skip
    assert code == 1, (stdout, stderr)
    assert stdout.count("SUBSET") == 3, stdout
    page = page_path.read_text(encoding="utf-8")
    _well_formed(page)
    differing = page.split('id="differing"')[1].split('id="cases"')[0]
    broken = json.loads(saved["broken"].read_text(encoding="utf-8"))
    for result in broken["results"]:
        if result["outcome"] == "failed":
            assert result["id"] in differing  # passed in the reference's run, failed in the broken one
    assert "p1-capture-completes" in differing  # passed for the reference, failed for the broken worker
    gates = page.split('id="gates-table"')[1].split("</table>")[0]
    assert "RESUME_FROM_CHECKPOINT" in gates and 'class="differs"' in gates
    assert "PHASE-1" in page.split('id="clauses-table"')[1]
    assert "default-src 'none'" in page  # nothing is fetched


def test_several_reports_with_a_single_run_output_is_a_usage_error(saved: dict[str, Path], tmp_path: Path) -> None:
    code, _, stderr = _report(str(saved["reference"]), str(saved["broken"]), "--junit", str(tmp_path / "j.xml"))
    assert code == 2 and "--junit" in stderr and "--compare-html" in stderr
    assert not (tmp_path / "j.xml").exists()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"{not json", "not JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
        (b"\xff\xfe{}", "not UTF-8: byte 0"),
        (b"{}", "breaks its schema at /: 'resumekit' is a required property"),
        (b"[" * 100_000 + b"]" * 100_000, "not"),
    ],
)
def test_a_file_that_is_no_run_report_is_named_with_what_is_wrong(tmp_path: Path, content: bytes, said: str) -> None:
    path = _write(tmp_path / "foreign.json", content)
    code, _stdout, stderr = _report(str(path))
    assert code == 2 and "Traceback" not in stderr, stderr
    assert f"cannot read the report {path}: " in stderr and said in stderr, stderr


def test_a_schema_violation_deep_in_a_report_names_its_pointer(saved: dict[str, Path], tmp_path: Path) -> None:
    document: dict[str, Any] = json.loads(saved["broken"].read_text(encoding="utf-8"))
    document["results"][3]["outcome"] = "won"
    path = _write(tmp_path / "edited.json", json.dumps(document).encode())
    code, _, stderr = _report(str(path))
    assert code == 2 and "/results/3" in stderr, stderr


def test_only_a_regular_file_of_a_bounded_size_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(saved_reports.ReportError, match="not a regular file"):
        saved_reports.read_document(tmp_path)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(saved_reports.ReportError, match="not a regular file"):
            saved_reports.read_document(fifo)  # opened without blocking, refused before a read
    with pytest.raises(saved_reports.ReportError, match="cannot be opened"):
        saved_reports.read_document(tmp_path / "absent.json")
    monkeypatch.setattr(saved_reports, "MAX_REPORT", 10)
    with pytest.raises(saved_reports.ReportError, match="more than 10 bytes"):
        saved_reports.read_document(_write(tmp_path / "big.json", b" " * 11 + b"{}"))


def test_diff_and_merge_read_saved_reports_the_same_way(saved: dict[str, Path], tmp_path: Path) -> None:
    path = _write(tmp_path / "foreign.json", b"{}")
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "diff", str(saved["reference"]), str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and f"{path}: not a run report" in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "merge", str(path), "-o", str(tmp_path / "m.json")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and f"{path}: not a run report" in done.stderr, done.stderr


class _Balance(html.parser.HTMLParser):
    VOID = frozenset({"meta", "br", "img", "input", "link", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()


def _well_formed(page: str) -> None:
    parser = _Balance()
    parser.feed(page)
    assert parser.open == [], parser.open
