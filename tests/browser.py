"""The HTML report rendered in a real headless Chromium, at a desktop and a phone width.

Run with ``nox -s browser`` (Linux). It writes the HTML report of a failing run (a deliberately broken
projection) and of a passing run of the reference, renders the failing run again from its JSON report with
``resumekit report``, and sets three saved reports side by side (``--compare-html``: the two and a broken
P1 worker's). A saved report holding a failing P1 case's history is rendered too, and its timeline checked:
lanes labelled, events in order inside the viewport, the mismatch marked where it was seen. It opens each
page in Chromium through Playwright, checks the
rendered page (verdict, tables, the failing case's differing fields highlighted side by side, no
horizontal overflow, nothing fetched), and keeps a screenshot of each page at each width in the output
folder to look at. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import report
from resumekit.conformance.report import result_from_dict
from resumekit.conformance.results import CaseResult, Implementation, Outcome, Run
from resumekit.conformance.story import first_mismatch, lanes
from tests.story_history import CASE_ID, PUSH_AGAIN, failing_result
from tests.support import GUARD, ROOT

WIDTHS = {"desktop": (1280, 900), "narrow": (390, 844)}
BROKEN = "python:tests.broken.decisions:error_counts_as_success"  # OP-3: an isError response counts as success
# Chromium may reach nothing: the page must render from the file alone.
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass
class Checks:
    """Named checks and their results, printed as they come."""

    failed: list[str] = field(default_factory=list)
    passed: int = 0

    def __call__(self, name: str, ok: bool, detail: object = "") -> None:
        if ok:
            self.passed += 1
            print(f"  ok    {name}")
        else:
            self.failed.append(name)
            print(f"  FAIL  {name}: {detail}")


def write_report(out: Path, name: str, *args: str) -> Path:
    """Run ``resumekit run`` with *args*, writing the HTML, JSON and badge reports named *name*."""
    page = out / f"{name}.html"
    command = [
        sys.executable, "-m", "resumekit.conformance", "run", "-q",
        "--report-html", str(page), "--report-json", str(out / f"{name}.json"),
        "--badge", str(out / f"{name}-badge.json"),
        *args,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=GUARD)
    if not page.is_file():
        sys.exit(f"no HTML report from {' '.join(command)} (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    print(f"{name}: exit {done.returncode}, {page.stat().st_size} bytes of HTML ({page})")
    return page


def _no_overflow(page: Any) -> tuple[bool, str]:
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth, view: window.innerWidth})"
    )
    return widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], json.dumps(widths)


def _visible_box(page: Any, selector: str) -> dict[str, float] | None:
    element = page.query_selector(selector)
    return element.bounding_box() if element is not None and element.is_visible() else None


def _fits(page: Any, selector: str) -> bool:
    """Whether the table *selector* shows every column without scrolling sideways in its box."""
    fits: bool = page.eval_on_selector(selector, "t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
    return fits


def _verdict_on_first_screen(page: Any, check: Checks, width: str) -> None:
    box = _visible_box(page, "#verdict")
    ok = box is not None and box["y"] + box["height"] <= page.viewport_size["height"]
    check(f"{width}: the verdict is on the first screen", ok, box)


def check_failing(page: Any, check: Checks, width: str, case_id: str, events: bool = True) -> None:
    """The broken projection's page: NOT CERTIFIED, its failing case's differing fields side by side (and,
    written by the run itself rather than rendered again from JSON, its events)."""
    _verdict_on_first_screen(page, check, width)
    headline = page.inner_text("#verdict .headline")
    check(f"{width}: verdict says NOT CERTIFIED", headline == "NOT CERTIFIED", headline)
    for selector in ("#summary", "#clauses", "section.case table.side"):
        check(f"{width}: {selector} rendered", _visible_box(page, selector) is not None)
    check(f"{width}: the kinds table shows every column", _fits(page, "#summary"))
    section = f"section.case#case-{case_id}"
    check(f"{width}: the failing case {case_id} has a section", _visible_box(page, section) is not None)
    expected = page.query_selector(f"{section} tr.differs td.expected mark")
    actual = page.query_selector(f"{section} tr.differs td.actual mark")
    check(f"{width}: expected side highlights the field", expected is not None and expected.is_visible())
    check(f"{width}: actual side highlights the field", actual is not None and actual.is_visible())
    if expected is None or actual is None:
        return
    texts = (expected.inner_text().strip(), actual.inner_text().strip())
    check(f"{width}: highlighted values are the spec's and the answer's", texts == ('"failed"', '"succeeded"'), texts)
    colors = [m.evaluate("m => getComputedStyle(m).backgroundColor") for m in (expected, actual)]
    cells = [
        page.eval_on_selector(f"{section} tr.differs td.{side}", "td => getComputedStyle(td).backgroundColor")
        for side in ("expected", "actual")
    ]
    painted = all(c not in ("rgba(0, 0, 0, 0)", "transparent") for c in colors) and colors[0] != colors[1]
    check(f"{width}: highlights are painted, in two colours", painted and colors != cells, (colors, cells))
    one, two = expected.bounding_box(), actual.bounding_box()
    side_by_side = one is not None and two is not None and one["x"] + one["width"] <= two["x"]
    check(f"{width}: expected and actual side by side", side_by_side, (one, two))
    view = page.viewport_size["width"]
    inside = two is not None and two["x"] + two["width"] <= view
    check(f"{width}: the actual value is inside the viewport", inside, (two, view))
    fits = page.eval_on_selector(
        f"{section} table.side", "t => t.parentElement.scrollWidth <= t.parentElement.clientWidth"
    )
    check(f"{width}: the side-by-side table needs no sideways scrolling", fits)
    if events:
        rows = page.query_selector_all(f"{section} table.events tbody tr")
        check(f"{width}: the case's events are listed", len(rows) > 0, len(rows))


def check_story(page: Any, check: Checks, width: str, case_id: str, lane_names: list[str], hit: int) -> None:
    """A failing case's timeline: its lanes labelled (by name across the top, or on each card when narrow),
    the events in time order down the page, each readable inside the viewport, and the mismatch marked at
    the event it was seen at."""
    section = f"section.case#case-{case_id}"
    check(f"{width}: the case's timeline is drawn", _visible_box(page, f"{section} ol.tl") is not None)
    view = page.viewport_size["width"]
    cards = page.query_selector_all(f"{section} .tl-card")
    boxes = [card.bounding_box() for card in cards]
    inside = all(b is not None and b["x"] >= 0 and b["x"] + b["width"] <= view for b in boxes)
    check(f"{width}: every event's card is inside the viewport", bool(boxes) and inside, len(boxes))
    tops = [b["y"] for b in boxes if b is not None]
    check(f"{width}: the events go down the page in time order", tops == sorted(tops) and len(set(tops)) == len(tops))
    heads = page.query_selector_all(f"{section} .tl-head .tl-lane")
    names = [head.inner_text().strip() for head in heads if head.is_visible()]
    if width == "desktop":
        check(f"{width}: a lane per actor, labelled across the top", names == lane_names, names)
    else:
        labels = page.query_selector_all(f"{section} .tl-card .tl-a")
        shown = all(label.is_visible() and label.inner_text().strip() for label in labels)
        check(f"{width}: each event names its actor", len(labels) == len(cards) and shown, len(labels))
    marked = page.query_selector(f"{section} li.hit#case-{case_id}-e{hit}")
    mark = page.query_selector(f"{section} li.hit#case-{case_id}-e{hit} .tl-mark")
    box = mark.bounding_box() if mark is not None and mark.is_visible() else None
    check(f"{width}: the mismatch is marked at event {hit}", box is not None and box["x"] + box["width"] <= view, box)
    if marked is None:
        return
    text = marked.inner_text()
    check(f"{width}: the marked event shows its time, kind and facts", "+" in text and "#" + str(hit) in text, text)
    if width == "desktop":
        lane, actor = _lane_of(page, section, marked), (marked.query_selector(".tl-a") or marked).text_content()
        check(f"{width}: the marked event stands in its actor's lane", lane == actor and lane in lane_names, lane)
    marked.query_selector("summary").click()
    pre = marked.query_selector("pre")
    opened = pre.bounding_box() if pre is not None and pre.is_visible() else None
    fits = opened is not None and opened["x"] + opened["width"] <= view
    check(f"{width}: an opened event shows all its facts in the viewport", fits, opened)
    ok, detail = _no_overflow(page)
    check(f"{width}: no horizontal overflow with an event opened", ok, detail)


def _lane_of(page: Any, section: str, row: Any) -> str:
    """The name of the lane whose column the left edge of *row*'s card falls in (its card closed)."""
    card = row.query_selector(".tl-card").bounding_box()
    for head in page.query_selector_all(f"{section} .tl-head .tl-lane"):
        box = head.bounding_box()
        if box is not None and card is not None and box["x"] - 4 <= card["x"] < box["x"] + box["width"]:
            return str(head.inner_text().strip())
    return ""


def write_story(out: Path) -> Path:
    """A saved report holding the hand-written history of a failing P1 commit scenario, rendered again by
    ``resumekit report`` (until every P1 failure carries the history the harness records)."""
    passed = CaseResult("p1-capture-completes", "p1", Outcome.PASSED, ("WRK-1",))
    run = Run(Implementation("a broken worker", "0", "python", adapter="story"), "core", (passed, failing_result()),
              "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", 1.0)  # fmt: skip
    saved, page = out / "story.json", out / "story.html"
    saved.write_text(json.dumps(report.to_json(run), indent=2), encoding="utf-8")
    command = [sys.executable, "-m", "resumekit.conformance", "report", str(saved), "--report-html", str(page)]
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=GUARD)
    if not page.is_file():
        sys.exit(f"no HTML report from {' '.join(command)}")
    return page


def check_upstream(page: Any, check: Checks, width: str) -> None:
    """A runtime past the seed (tests/broken/upstream.py), its decision cases: not passed, its divergences graded,
    none of its decision cases errored, and the verdict saying how many were unsafe."""
    _verdict_on_first_screen(page, check, width)
    headline = page.inner_text("#verdict .headline")  # its decision cases only: a subset, never a certification
    check(f"{width}: verdict says the subset did not pass", headline.startswith("SUBSET: selected cases did not"),
          headline)
    verdict = page.inner_text("#verdict")
    check(f"{width}: the verdict counts the unsafe divergences", "unsafe" in verdict, verdict[:300])
    badges = [b.inner_text() for b in page.query_selector_all("span.o-failed")]
    check(f"{width}: a failing case's badge carries its grade", "failed (unsafe)" in badges, badges[:5])
    check(f"{width}: no decision case errored", page.query_selector("span.o-errored") is None)
    ok, detail = _no_overflow(page)
    check(f"{width}: no horizontal overflow", ok, detail)


def check_compare(page: Any, check: Checks, width: str, runs: int, case_id: str) -> None:
    """The side-by-side page of several saved reports: a row per run, the gates, and the differing cases."""
    rows = page.query_selector_all("#runs-table tbody tr")
    check(f"{width}: one row per run", len(rows) == runs, len(rows))
    for selector in ("#gates-table", "#clauses-table", "#differing"):
        check(f"{width}: {selector} rendered", _visible_box(page, selector) is not None)
    heads = page.query_selector_all("#gates-table thead th.impl")
    check(f"{width}: the gate table has a column per run", len(heads) == runs, len(heads))
    differing = page.inner_text("#differing + div")
    check(f"{width}: the failing case is among those that differ", case_id in differing, differing[:200])
    marked = page.query_selector_all("#gates-table tr.differs")
    check(f"{width}: a gate that differs is marked", len(marked) > 0, len(marked))


def check_passing(page: Any, check: Checks, width: str, headline_start: str) -> None:
    _verdict_on_first_screen(page, check, width)
    headline = page.inner_text("#verdict .headline")
    check(f"{width}: verdict starts {headline_start!r}", headline.startswith(headline_start), headline)
    for selector in ("#summary", "#clauses"):
        check(f"{width}: {selector} rendered", _visible_box(page, selector) is not None)
    check(f"{width}: the kinds table shows every column", _fits(page, "#summary"))
    check(f"{width}: no failing case section", page.query_selector("section.case") is None)
    if page.query_selector("#gates") is not None:
        rows = page.query_selector_all("#gates tbody tr")
        check(f"{width}: P1 gate table has rows", len(rows) > 0, len(rows))


def render(
    chromium_path: str, pages: dict[str, tuple[Path, Callable[[Any, Checks, str], None]]], out: Path, check: Checks
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="resumekit-chromium-") as profile:
        for width, (w, h) in WIDTHS.items():
            context = playwright.chromium.launch_persistent_context(
                profile + "-" + width,
                executable_path=chromium_path,
                headless=True,
                args=list(FLAGS),
                viewport={"width": w, "height": h},
                device_scale_factor=1,
            )
            try:
                for name, (path, checks) in pages.items():
                    page = context.new_page()
                    fetched: list[str] = []
                    page.on("request", lambda request, seen=fetched: seen.append(request.url))
                    page.goto(path.resolve().as_uri())
                    page.wait_for_load_state("load")
                    print(f"{name} at {width} ({w} px):")
                    elsewhere = [url for url in fetched if not url.startswith("file:")]
                    check(f"{width}: nothing fetched beyond the file", not elsewhere, elsewhere)
                    ok, detail = _no_overflow(page)
                    check(f"{width}: no horizontal overflow", ok, detail)
                    checks(page, check, width)
                    shot = out / f"{name}-{width}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    first = page.query_selector("section.case")
                    if first is not None:
                        first.screenshot(path=str(out / f"{name}-{width}-first-failure.png"))
                    height = page.evaluate("() => document.documentElement.scrollHeight")
                    print(f"  screenshot {shot} ({w} x {height} px)")
                    page.close()
            finally:
                context.close()


def _worker_stories(out: Path) -> dict[str, tuple[Path, Callable[[Any, Checks, str], None]]]:
    """The broken worker's own page checked as a story too, once its failing case carries a history with a
    mismatch seen at an event."""
    for data in json.loads((out / "worker.json").read_text(encoding="utf-8"))["results"]:
        result = result_from_dict(data)
        first = first_mismatch(result)
        if result.history and first is not None and first.event is not None:
            checks = functools.partial(
                check_story, case_id=result.case_id, lane_names=lanes(result.history)[:10], hit=first.event
            )
            return {"worker": (out / "worker.html", checks)}
    return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.browser", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "browser-check", help="where reports and screenshots go")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium binary")
    parser.add_argument(
        "--full", action="store_true", help="make the passing page from a full certification (minutes), not a subset"
    )
    arguments = parser.parse_args(argv)
    out: Path = arguments.out
    out.mkdir(parents=True, exist_ok=True)
    failing = write_report(out, "failing", "--adapter", BROKEN)
    first = next(r["id"] for r in json.loads((out / "failing.json").read_text())["results"] if r["outcome"] == "failed")
    if arguments.full:
        passing = write_report(out, "passing", "--adapter", "reference", "--jobs", "auto")
        headline = "CERTIFIED"
    else:
        passing = write_report(
            out, "passing", "--adapter", "reference", "--kind", "decision", "--kind", "ledger-fault",
            "--kind", "p1", "--only", "[!p]*", "--only", "p[!1]*", "--only", "p1-crash-capture-before-claimed-row",
        )  # fmt: skip
        headline = "SUBSET: selected cases passed"
    write_report(
        out, "worker", "--adapter", f"{sys.executable} -m tests.broken.workers names-workspaces-freely",
        "--kind", "p1", "--only", "p1-capture-completes", "--only", "p1-crash-capture-before-claimed-row",
    )  # fmt: skip
    upstream = write_report(
        out, "upstream", "--adapter", f"{sys.executable} -m tests.broken.upstream", "--kind", "decision"
    )
    rerendered, side = out / "rerendered.html", out / "side-by-side.html"
    saved = [str(out / f"{name}.json") for name in ("passing", "failing", "worker")]
    kit = [sys.executable, "-m", "resumekit.conformance", "report"]
    for command in ([*kit, saved[1], "--report-html", str(rerendered)], [*kit, *saved, "--compare-html", str(side)]):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=GUARD)
        print(f"{' '.join(command[3:])}: exit {done.returncode}\n{done.stdout}{done.stderr}", end="")
    story = write_story(out)
    story_lanes = lanes(failing_result().history)
    check = Checks()
    pages: dict[str, tuple[Path, Callable[[Any, Checks, str], None]]] = {
        "failing": (failing, lambda page, c, width: check_failing(page, c, width, first)),
        "passing": (passing, lambda page, c, width: check_passing(page, c, width, headline)),
        "rerendered": (rerendered, lambda page, c, width: check_failing(page, c, width, first, events=False)),
        "side-by-side": (side, lambda page, c, width: check_compare(page, c, width, 3, first)),
        "upstream": (upstream, check_upstream),
        "story": (story, lambda page, c, width: check_story(page, c, width, CASE_ID, story_lanes, PUSH_AGAIN)),
    }
    pages.update(_worker_stories(out))
    render(arguments.chromium, pages, out, check)
    print(f"\n{check.passed} check(s) passed, {len(check.failed)} failed; screenshots in {out}")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
