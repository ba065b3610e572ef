"""The story of a failing case wherever a person reads results: carried by the JSON report (and read back),
bounded so that a report in which every case fails stays small, told in the terminal and the text reports
as the few events before the first mismatch, and drawn in the HTML report as a timeline, also when a saved
report is rendered again. The history is hand-written (``tests/story_history.py``)."""

from __future__ import annotations

import dataclasses
import html.parser
import io
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from resumekit.conformance import events, history, report, report_html, schemas, story
from resumekit.conformance.cli import COMMANDS, EXIT_NOT_CERTIFIED, _parser
from resumekit.conformance.results import CaseResult, Implementation, Mismatch, Outcome, Run
from tests import story_history
from tests.story_history import PUSH_AGAIN, failing_result
from tests.support import GUARD, ROOT

REPORT = schemas.BASE + "report/run-report.json"
MiB = 1024 * 1024


def _run(*results: CaseResult) -> Run:
    passed = CaseResult("p1-capture-completes", "p1", Outcome.PASSED, ("WRK-1",))
    return Run(Implementation("impl", "1.0", "python", adapter="x"), "core", (passed, *results), "s", "f", 1.0)


def _written(run: Run) -> bytes:
    """The JSON report as ``resumekit run --report-json`` writes it."""
    return (json.dumps(report.to_json(run), indent=2, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


# ------------------------------------------------------------------------------------- the JSON report


def test_a_failing_result_carries_its_history_and_each_mismatch_its_check_and_event_through_a_saved_report() -> None:
    document = json.loads(_written(_run(failing_result())))
    assert schemas.first_violation(REPORT, document) is None
    saved = document["results"][1]
    assert saved["history"] == story_history.history()
    assert [(m["check"], m["event"]) for m in saved["mismatches"]] == [
        ("commit.pushed_once", PUSH_AGAIN),
        ("commit.adopts_after_crash", 25),
    ]
    again = report.from_json(document).results[1]
    assert again.history == tuple(story_history.history())
    assert again.mismatches == failing_result().mismatches


def test_a_result_without_a_history_and_a_mismatch_without_check_or_event_keep_the_old_shape() -> None:
    plain = failing_result(history=(), mismatches=(Mismatch("/x", 1, 2, "WRK-1"),))
    saved = plain.to_dict()
    assert "history" not in saved
    assert saved["mismatches"] == [{"pointer": "/x", "expected": 1, "actual": 2, "clause": "WRK-1"}]
    assert schemas.first_violation(REPORT, json.loads(_written(_run(plain)))) is None


def test_the_schema_refuses_an_event_without_its_envelope_or_a_negative_event() -> None:
    document = json.loads(_written(_run(failing_result())))
    del document["results"][1]["history"][3]["actor"]
    assert schemas.first_violation(REPORT, document) is not None
    document = json.loads(_written(_run(failing_result())))
    document["results"][1]["mismatches"][0]["event"] = -1
    assert schemas.first_violation(REPORT, document) is not None


def _maximal_history() -> list[events.Event]:
    """A history built to be as large in a report as it can: strings just longer than a report keeps, of
    four-byte characters and of control characters (six bytes each once escaped), objects nested as deep and
    as wide as a report keeps (indentation grows with depth), and many small events."""
    big = "\U0001f600" * 2001
    controls = "\x01" * 2001
    deep: Any = "leaf"
    for _ in range(12):
        deep = {"d": deep, "e": [1, 2]}
    wide = {f"k{n}": "x" * 60 for n in range(41)}
    shapes = ({"s": big, "c": controls}, {"deep": deep}, wide, {"rows": [wide] * 41}, {"n": 1})
    return [events.Event(n, float(n), f"w{n % 7}", "request", shapes[n % 5]) for n in range(3000)]


def _apart(check: str) -> None:
    """Run *check* of this module in a process of its own: a report of 400 failing cases takes a hundred MiB
    to build and read back, which this process would keep, and every later process it starts would count
    as its own peak (a child's maximum resident size starts at its parent's)."""
    done = subprocess.run(
        [sys.executable, "-c", f"from tests.test_story import {check}; {check}()"],
        cwd=ROOT, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_report_of_400_failing_cases_with_maximal_histories_stays_under_16_mib() -> None:
    _apart("four_hundred_maximal_stories")


def four_hundred_maximal_stories() -> None:
    maximal = _maximal_history()
    budget = history.ReportBudget()
    results = [
        failing_result(case_id=f"p1-case-{n}", history=tuple(events.for_report(maximal, {"w1 request": 10**6}, budget)))
        for n in range(400)
    ]
    written = _written(_run(*results))
    assert len(written) < 16 * MiB, len(written)
    document = json.loads(written)
    assert schemas.first_violation(REPORT, document) is None
    kept = [r["history"] for r in document["results"][1:]]
    assert all(any(e["kind"] == events.CUT for e in h) for h in kept)  # each says what it left out
    assert sum(len(h) for h in kept) > 400  # the budget kept stories, not only the cuts


def test_replies_nested_deep_or_not_json_cannot_grow_a_report_past_what_its_budget_counts() -> None:
    _apart("four_hundred_deep_replies")


def four_hundred_deep_replies() -> None:
    nested: Any = "leaf"
    for _ in range(400):  # a worker's reply to p1.worker.wait, recorded whole
        nested = [nested]
    strange = {"blob": b"\x00\xff", "path": Path("/x"), "nan": float("nan"), 7: "a key that is no string"}
    recorded = [events.Event(n, 0.0, "w1", "state", {"answer": nested, **strange}) for n in range(400)]
    budget = history.ReportBudget()
    results = [
        failing_result(case_id=f"p1-{n}", history=tuple(events.for_report(recorded, None, budget))) for n in range(400)
    ]
    written = _written(_run(*results))  # json.dumps as the run writes it: no value it cannot write
    assert len(written) < 16 * MiB, len(written)
    assert schemas.first_violation(REPORT, json.loads(written)) is None


def test_the_bytes_a_history_is_counted_as_are_the_bytes_it_adds_to_the_report() -> None:
    some = _maximal_history()[:5] + _maximal_history()[-3:]
    kept = events.for_report(some)
    plain = len(_written(_run(failing_result(history=()))))
    grown = len(_written(_run(failing_result(history=tuple(kept))))) - plain
    counted = sum(events.report_size(event) for event in kept)
    for event in kept:  # each counted exactly as json writes it, indented where an event stands
        text = json.dumps(event, indent=2, ensure_ascii=False)
        assert events.report_size(event) == len(text.encode("utf-8")) + 8 * (text.count("\n") + 1) + 2
    assert 0 <= grown - counted <= 40, (grown, counted)  # the member's name and brackets


def test_a_spent_budget_leaves_only_the_cut_saying_what_was_left_out() -> None:
    kept = events.for_report(_maximal_history()[:10], budget=history.ReportBudget(0))
    assert [e["kind"] for e in kept] == [events.CUT]
    assert kept[0]["data"]["events"] == 10
    assert sum(kept[0]["data"]["leftOut"].values()) == 10


# ---------------------------------------------------------------------------------------- in text


def test_the_terminal_shows_the_eight_events_up_to_the_first_mismatch_marking_it() -> None:
    lines = story.story_lines(failing_result())
    assert "first mismatch (event 20, COMMIT-3, check commit.pushed_once)" in lines[0]
    seqs = [int(line[2:7]) for line in lines[1:]]
    assert seqs == list(range(PUSH_AGAIN - 7, PUSH_AGAIN + 1))
    assert [line[:2] for line in lines[1:]] == ["  "] * 7 + [">>"]
    assert "killed" in lines[2] and "signal=SIGKILL" in lines[2]
    assert "accepted=false" in lines[-1]
    assert all(len(line) <= story.WIDTH for line in lines)


def test_without_a_mismatch_at_an_event_the_terminal_shows_the_last_events() -> None:
    result = failing_result(outcome=Outcome.ERRORED, mismatches=(), message="the kit could not carry out a step")
    lines = story.story_lines(result)
    assert lines[0] == "story, the last 8 of its 27 event(s):"
    assert "stopped" in lines[-1]
    assert story.story_lines(dataclasses.replace(result, history=())) == []


def test_hostile_values_stay_on_one_bounded_line() -> None:
    event = {"seq": 0, "atMs": 1.0, "actor": "w1\nFAKE", "kind": "x\r\x1b[2J", "data": {"path": "a\nb" * 10_000}}
    lines = story.story_lines(failing_result(history=(event, {"seq": "1", "data": None}), mismatches=()))
    assert len(lines) == 3 and all("\n" not in line and len(line) <= story.WIDTH for line in lines)
    text = report.format_result(failing_result(history=(event,), mismatches=()))
    assert "\x1b" not in text and "FAKE" in text  # the escape written out, the line kept whole


def test_a_failing_case_printed_after_a_run_and_in_junit_carries_its_story() -> None:
    text = report.format_result(failing_result())
    assert "check commit.pushed_once, seen at event 20 of the story" in text
    assert ">>   20" in text
    junit = ET.fromstring(report.to_junit(_run(failing_result())))
    failure = junit.find(".//testcase[@name='p1-commit-crash-after-push']/failure")
    assert failure is not None and failure.text is not None and ">>   20" in failure.text


def test_the_markdown_summary_tells_each_failing_story_in_a_fence_no_line_can_close() -> None:
    event = {"seq": 0, "atMs": 1.0, "actor": "w1", "kind": "request", "data": {"path": "````` and more"}}
    text = report.to_markdown(_run(failing_result(), failing_result(case_id="p1-other", history=(event,))))
    assert "`p1-commit-crash-after-push`:" in text and ">>   20" in text
    fence = re.search(r"^(`{6,})text$", text, re.MULTILINE)
    assert fence is not None  # longer than the five backticks the story holds
    assert text.count(fence.group(1)) == 2


# ----------------------------------------------------------------------------------------- in HTML


class _Page(html.parser.HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def classed(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if name in (attrs.get("class") or "").split()]


def test_the_html_report_draws_a_lane_per_actor_and_marks_the_events_of_the_mismatches() -> None:
    page = report_html.to_html(_run(failing_result()))
    parsed = _Page(page)
    lanes = re.findall(r'<span class="tl-lane c\d+ k\d+">([^<]*)</span>', page)
    assert lanes == ["kit", "w1", "w2", "control-plane", "origin", "journal"]
    hits = [attrs.get("id") for attrs in parsed.classed("hit")]
    assert hits == ["case-p1-commit-crash-after-push-e20", "case-p1-commit-crash-after-push-e25"]
    assert len(parsed.classed("tl-card")) == 27
    assert 'href="#case-p1-commit-crash-after-push-e20"' in page  # the list of mismatches links to the event
    assert "&#x2717; [COMMIT-3] check commit.pushed_once" in page
    assert "<script" not in page


def test_a_passing_run_or_a_result_without_history_draws_no_timeline() -> None:
    assert 'class="tl"' not in report_html.to_html(_run())
    assert 'class="tl"' not in report_html.to_html(_run(failing_result(history=())))
    assert ".tl>li" not in report_html.to_html(_run())  # nor carries its style


def test_the_timeline_escapes_what_the_implementation_put_in_an_event() -> None:
    event = {"seq": 0, "atMs": 1.0, "actor": "w1<b>", "kind": "<img src=x onerror=1>", "data": {"p": "</pre><script>"}}
    page = report_html.to_html(_run(failing_result(history=(event,), mismatches=())))
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;img src=x onerror=1&gt;" in page


def test_a_mismatch_seen_at_an_event_the_report_left_out_is_marked_at_the_cut_standing_for_it() -> None:
    recorded = history.History()
    for n in range(1000):
        recorded.record("w1", "request", n=n, path="/v1/claim " * 20)
    kept = events.for_report(recorded.events())
    cut = next(e for e in kept if e["kind"] == events.CUT)
    hidden = cut["seq"] + 5
    result = failing_result(history=tuple(kept), mismatches=(Mismatch("/x", 1, 2, "WRK-3", event=hidden),))
    page = report_html.to_html(_run(result))
    marked = _Page(page).classed("hit")
    assert [attrs.get("id") for attrs in marked] == [f"case-p1-commit-crash-after-push-e{cut['seq']}"]
    assert "event(s) left out of the report here" in page
    assert f"{len(kept) - 1} of its 1000 events kept in the report" in page


def test_more_actors_than_lanes_share_the_last_lane_each_card_naming_its_own() -> None:
    started = [{"seq": n, "atMs": n, "actor": f"w{n}", "kind": "started", "data": {}} for n in range(1, 15)]
    page = report_html.to_html(_run(failing_result(history=tuple(started), mismatches=())))
    lanes = re.findall(r'<span class="tl-lane c\d+ k\d+">([^<]*)</span>', page)
    assert len(lanes) == 10 and lanes[-1] == "others"
    assert len(_Page(page).classed("tl-other")) == 14 - 9


# --------------------------------------------------------------------------------- a saved report again


def test_resumekit_report_draws_the_timelines_again_from_a_saved_report(tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    saved.write_bytes(_written(_run(failing_result())))
    page, junit, summary = tmp_path / "page.html", tmp_path / "junit.xml", tmp_path / "summary.md"
    out, err = io.StringIO(), io.StringIO()
    argv = ["report", str(saved), "--report-html", str(page), "--junit", str(junit), "--summary-md", str(summary)]
    arguments = _parser().parse_args(argv)
    assert COMMANDS["report"](arguments, out, err) == EXIT_NOT_CERTIFIED, err.getvalue()
    text = page.read_text(encoding="utf-8")
    assert len(_Page(text).classed("tl-card")) == 27 and 'id="case-p1-commit-crash-after-push-e20"' in text
    failure = ET.parse(junit).find(".//testcase[@name='p1-commit-crash-after-push']/failure")
    assert failure is not None and failure.text is not None and ">>   20" in failure.text
    assert ">>   20" in summary.read_text(encoding="utf-8")
