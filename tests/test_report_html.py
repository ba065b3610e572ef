"""The HTML report and the badge, without a browser: structure, escaping, self-containment, honest wording.

The rendered page is checked in headless Chromium by ``nox -s browser`` (tests/browser.py).
"""

from __future__ import annotations

import html.parser
import io
import json
import re
from pathlib import Path

import pytest

from resumekit.conformance import badge, report, report_html, schemas
from resumekit.conformance.adapters import PythonAdapter
from resumekit.conformance.cli import COMMANDS, EXIT_NOT_CERTIFIED, EXIT_SUBSET, EXIT_USAGE, _parser
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.results import (
    CaseResult,
    Implementation,
    Mismatch,
    Outcome,
    Run,
    Selection,
    Shard,
    Source,
)
from resumekit.conformance.runner import run
from tests.broken.decisions import last_duplicate_call_wins, not_deterministic

REFERENCE = "python:resumekit.reference:build_resume_plan"
BROKEN = "python:tests.broken.decisions:error_counts_as_success"  # OP-3: isError responses succeed
CORE_ONLY = "python:tests.core_only:core_only"
BADGE = "https://resumekit.dev/schemas/report/badge.json"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, out, err)
    return code, out.getvalue(), err.getvalue()


class _Page(html.parser.HTMLParser):
    """The page's elements as (tag, attributes), its text, and whether every element is closed in order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.feed(text)
        self.close()
        if self.stack:
            self.problems.append(f"unclosed {self.stack}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def ids(self) -> set[str]:
        return {attrs["id"] or "" for _, attrs in self.elements if "id" in attrs}

    def by_class(self, name: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(tag, attrs) for tag, attrs in self.elements if name in (attrs.get("class") or "").split()]


def _self_contained(text: str) -> None:
    """Nothing on the page can make a browser fetch anything."""
    page = _Page(text)
    assert not page.problems, page.problems[:5]
    assert not re.search(r"https?:", text, re.IGNORECASE)
    tags = {tag for tag, _ in page.elements}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    for tag, attrs in page.elements:
        assert "src" not in attrs, tag
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        href = attrs.get("href")
        if href is not None:
            assert href.startswith("#") and href[1:] in page.ids(), href
    assert "url(" not in text and "@import" not in text


def _run(tmp_path: Path, *argv: str) -> tuple[int, str, str, dict[str, object]]:
    page, shield = tmp_path / "out" / "r.html", tmp_path / "out" / "badge.json"
    document = tmp_path / "out" / "r.json"
    code, out, _ = _cli(
        "run", "-q", "--report-html", str(page), "--badge", str(shield), "--report-json", str(document), *argv
    )
    return code, out, page.read_text(encoding="utf-8"), json.loads(shield.read_text(encoding="utf-8"))


def test_a_failing_run_shows_each_failure_with_its_events_and_the_differing_fields(tmp_path: Path) -> None:
    code, out, text, shield = _run(tmp_path, "--adapter", BROKEN)
    assert code == EXIT_NOT_CERTIFIED
    _self_contained(text)
    page = _Page(text)
    assert {"verdict", "summary", "clauses", "failures", "all-cases"} <= page.ids()
    headline = out.strip().splitlines()[-2].split(":")[0]  # the text report's verdict line
    assert headline == "NOT CERTIFIED"
    assert '<p class="headline">NOT CERTIFIED</p>' in text
    failing = [line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")]
    sections = {attrs["id"] for _, attrs in page.by_class("case")}
    assert sections == {f"case-{case_id}" for case_id in failing} and len(failing) == 15
    # The first failure: the spec's "failed" next to the answer's "succeeded", both marked (OP-3).
    first = text[text.index(f'id="case-{failing[0]}"') :]
    first = first[: first.index("</section>")]
    assert 'class="events"' in first and "function_response" in first
    assert '<td class="expected"><pre>' in first and '<td class="actual"><pre>' in first
    assert "<mark>&quot;failed&quot;</mark>" in first and "<mark>&quot;succeeded&quot;</mark>" in first
    assert '<tr class="differs"><th scope="row"><code>operations</code>' in first
    assert '<tr class="same"><th scope="row"><code>disposition</code>' in first
    # Every kind has a table, and the clause matrix marks OP-3 as failing.
    assert {f"kind-{kind}" for kind in ("decision", "crash", "ledger-fault", "schedule", "p1")} <= page.ids()
    assert re.search(r'<tr class="failing"><td class="clause"><code>OP-3</code></td><td class="n">\d+</td>'
                     r'<td class="n bad">15</td>', text)
    # The badge counts what the JSON report counts: passed of the claimed cases.
    results = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))["results"]
    claimed = [r for r in results if r["outcome"] != "not_claimed"]
    passed = sum(r["outcome"] == "passed" for r in claimed)
    assert passed == len(claimed) - 15
    message = f"not certified {passed}/{len(claimed)}"
    assert shield == {"schemaVersion": 1, "label": "resumekit", "message": message, "color": "red"}
    assert schemas.first_violation(BADGE, shield) is None
    # Read back from JSON (as `merge --report-html` does) there are no cases: the differing fields alone.
    again = report_html.to_html(report.from_json(json.loads((tmp_path / "out" / "r.json").read_text("utf-8"))))
    _self_contained(again)
    assert "<mark>&quot;succeeded&quot;</mark>" in again and "<code>/operations/0/status</code>" in again
    assert 'class="events"' not in again and '<p class="headline">NOT CERTIFIED</p>' in again


def test_a_subset_run_says_subset_as_the_text_report_does(tmp_path: Path) -> None:
    code, out, text, shield = _run(tmp_path, "--adapter", REFERENCE, "--kind", "decision")
    assert code == EXIT_SUBSET
    assert "SUBSET: selected cases passed (not a certification)" in out
    assert '<p class="headline">SUBSET: selected cases passed (not a certification)</p>' in text
    assert "<li>--kind decision</li>" in text and "profile strict, every case, --kind decision, kills 200" in text
    assert "No case failed." in text and 'class="case' not in text
    assert re.fullmatch(r"subset (\d+)/\1 passed, not certified", shield["message"]) and shield["color"] == "blue"
    _self_contained(text)


def test_a_core_only_implementation_is_certified_for_core_nowhere_strict(tmp_path: Path) -> None:
    code, out, text, shield = _run(tmp_path, "--adapter", CORE_ONLY)
    assert code == 0, out
    # In-process, it claims the decisions alone, and every report says so (issue 21, item 4).
    assert '<p class="headline">CERTIFIED: core (strict not claimed), Phase 0 projection only</p>' in text
    assert "<dd>core (strict not claimed), Phase 0 projection only</dd>" in text
    assert "strict asked for, not claimed" in text
    assert str(shield["message"]).startswith("core ") and "strict" not in str(shield["message"])
    assert str(shield["message"]).endswith(", Phase 0 projection only") and shield["color"] == "green"


def test_output_files_are_checked_before_the_first_case(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    code, out, err = _cli("run", "-q", "--adapter", BROKEN, "--report-html", str(folder))
    assert code == EXIT_USAGE and f"resumekit: --report-html {folder}: is a directory" in err
    assert out == ""  # refused before the header, so before any case
    page = tmp_path / "new-folder" / "page.html"
    code, out, err = _cli("run", "-q", "--adapter", BROKEN, "--report-html", str(page), "--badge", str(page))
    assert code == EXIT_USAGE and "--badge" in err and "the same file as --report-html" in err and out == ""
    assert page.parent.is_dir() and not page.exists()  # its folder made, nothing written


def test_help_names_both_options() -> None:
    text = _parser()._subparsers._group_actions[0].choices["run"].format_help()  # type: ignore[union-attr]
    assert "--report-html FILE" in text and "--badge FILE" in text and "shields.io" in text


def _result(case_id: str, outcome: Outcome, **fields: object) -> CaseResult:
    return CaseResult(case_id, "decision", outcome, clauses=("OP-3",), source=Source("d.yaml", 3), **fields)  # type: ignore[arg-type]


def _made_run(*results: CaseResult, **fields: object) -> Run:
    info = Implementation("impl", "1.0", "python", capabilities=("phase0.projection",), profiles=("core", "strict"))
    fields.setdefault("selection", Selection())
    return Run(info, "strict", results, "t0", "t1", 1.0, kit_version="0.1.0", **fields)  # type: ignore[arg-type]


def test_everything_from_the_run_and_the_implementation_is_escaped() -> None:
    hostile = "<script>alert(1)</script>\"'&"
    result = _result(
        "odd<id>&\"'",
        Outcome.FAILED,
        message=f"message {hostile}",
        mismatches=(
            Mismatch(f"/x{hostile}", f"</pre>{hostile}", {"k<": f"<img src=x onerror=y>{hostile}"}, "C-1", hostile),
        ),
        transcript=(f"-> {hostile}",),
        stderr_tail=hostile,
    )
    run = _made_run(_result("ok", Outcome.PASSED), result)
    run = Run(
        Implementation(f"name{hostile}", hostile, hostile, adapter=hostile),
        run.profile, run.results, hostile, hostile, 1.0, platform={"system": hostile},
        selection=Selection(only=(hostile,)), kit_version=hostile, golden_digest=hostile,
    )  # fmt: skip
    text = report_html.to_html(run)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;" in text
    page = _Page(text)
    assert not page.problems
    assert "case-odd_id____" in page.ids()  # an element id a URL fragment can name
    _self_contained(text)


def test_known_failures_and_unexpected_passes_are_told_apart() -> None:
    differs = (Mismatch("/disposition", "a", "b", "PLAN-7"),)
    known = _result("known", Outcome.FAILED, known_failure="bug 12", mismatches=differs)
    run = _made_run(_result("ok", Outcome.PASSED), known)
    text = report_html.to_html(run)
    assert run.verdict.headline in text and "CERTIFIED WITH 1 KNOWN FAILURE(S)" in text
    assert "expected failure (failed)" in text and "bug 12" in text and "expected failures" in text
    assert badge.to_badge(run) == {
        "schemaVersion": 1, "label": "resumekit", "message": "strict 1/2, 1 known failure(s)", "color": "yellowgreen",
    }  # fmt: skip
    stale = _made_run(_result("ok", Outcome.PASSED), _result("fixed", Outcome.PASSED, known_failure="bug 13"))
    text = report_html.to_html(stale)
    assert "NOT CERTIFIED" in text and "unexpected pass" in text and "take it off the expectations file" in text
    assert badge.to_badge(stale)["message"] == "not certified 1/2"


@pytest.mark.parametrize(
    ("fields", "message", "color"),
    [
        ({}, "strict 1/1, Phase 0 projection only", "green"),  # a case not claimed: the scope is named
        ({"selection": Selection(kills=0)}, "subset 1/1 passed, not certified", "blue"),
        ({"interrupted": True, "selected": 3}, "interrupted 1/1, not certified", "lightgrey"),
        ({"shard": Shard(2, 3, ("ok",), 7)}, "shard 2/3, not certified", "lightgrey"),
    ],
)
def test_the_badge_claims_no_more_than_the_verdict(fields: dict[str, object], message: str, color: str) -> None:
    run = _made_run(_result("ok", Outcome.PASSED), _result("nc", Outcome.NOT_CLAIMED), **fields)
    document = badge.to_badge(run)
    assert document == {"schemaVersion": 1, "label": "resumekit", "message": message, "color": color}
    assert schemas.first_violation(BADGE, document) is None
    headline, _ = report_html._headline(run)
    assert f"\n{headline}: " in report.format_summary(run)  # the words the text report uses
    assert f'<p class="headline">{headline}</p>' in report_html.to_html(run)


@pytest.fixture(scope="module")
def decisions() -> list[DecisionCase]:
    return [case for case in load_suite().select("strict", kinds=["decision"]) if isinstance(case, DecisionCase)]


def _section(text: str, case_id: str) -> str:
    start = text.index(f'id="case-{case_id}"')
    return text[start : text.index("</section>", start)]


def test_an_answer_compared_with_itself_is_not_shown_as_the_expected_plan(decisions: list[DecisionCase]) -> None:
    """PURE-2 compares two answers: its values stay in a row of their own, the plan's fields compared equal."""
    finished = run(decisions, PythonAdapter(not_deterministic, name="nd"), profile="strict")
    failed = [r for r in finished.results if r.outcome is Outcome.FAILED]
    assert failed and all({m.clause for m in r.mismatches} == {"PURE-2"} for r in failed)
    text = report_html.to_html(finished, decisions)
    section = _section(text, failed[0].case_id)
    assert '<tr class="same"><th scope="row"><code>diagnostics</code>' in section
    assert re.search(r'<tr class="differs"><th scope="row"><code>/diagnostics/\d+/message</code>', section)
    assert section.count('<tr class="differs">') == 1


def test_defaulted_args_are_shown_as_compared(decisions: list[DecisionCase]) -> None:
    """OP-1: an expectation may leave ``args`` out (it defaults to the call's); the page shows the default."""
    finished = run(decisions, PythonAdapter(last_duplicate_call_wins, name="ld"), profile="strict")
    failed = next(r for r in finished.results if any(m.pointer.endswith("/args") for m in r.mismatches))
    case = next(c for c in decisions if c.id == failed.case_id)
    section = _section(report_html.to_html(finished, decisions), failed.case_id)
    expected = section[section.index('<td class="expected">', section.index("<code>operations</code>")) :]
    expected = expected[: expected.index("</td>")]
    assert "&quot;args&quot;: <mark>" in expected, expected
    assert all("args" not in operation for operation in case.expectation_for("strict")["operations"])
