"""A failing case's history drawn as a timeline in the HTML report: a lane per actor, time down the page.

Each event is one row: its time on the left, and a card in its actor's lane (the kit, each worker process,
the control plane, the origin, the journal, ...) that names its kind and its key facts (``story.summary``);
opening a card shows every fact of the event across the whole width. The events at which a check saw a
mismatch are marked, with the clause and the check, and listed above the timeline with a link to each. On
a narrow screen the lanes fold into one column and every card names its actor.

Private to ``report_html``. Pure: a result in, a string of HTML out, every value escaped; no script, and
the style is the page's inline sheet (``STYLE`` here, added to the page's).
"""

from __future__ import annotations

import bisect
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance import story
from resumekit.conformance._html_parts import escape as _e
from resumekit.conformance.events import CUT
from resumekit.conformance.results import CaseResult, Mismatch

MAX_LANES = 10  # lanes drawn side by side; the actors after them share the last lane, each card naming its own
_DETAILS = 4000  # characters of an event's facts shown when its card is opened (the JSON report has them all)
_SUMMARY = 120  # characters of an event's key facts on its card
_TIME = "6.2em"  # the width of the time column
# One colour per lane, in turn: the card's edge and the lane's name.
_COLOURS = ("#0969da", "#8250df", "#1a7f37", "#bc4c00", "#0550ae", "#9a6700", "#cf222e", "#1b7c83")


def _lane_css() -> str:
    columns = "".join(f".tl .c{n}{{grid-column:{n + 1}}}" for n in range(1, MAX_LANES + 1))
    colours = "".join(f".tl .k{n}{{--lane:{_COLOURS[(n - 1) % len(_COLOURS)]}}}" for n in range(1, MAX_LANES + 1))
    return columns + colours


STYLE = (
    """
.tl{list-style:none;margin:8px 0;padding:0;font-size:.9em}
.tl>li{display:grid;grid-template-columns:@TIME repeat(var(--lanes),minmax(0,1fr));align-items:start;padding:1px 0;
background-image:repeating-linear-gradient(to right,var(--line) 0 1px,transparent 1px calc(100%/var(--lanes)));
background-position:@TIME 0;background-size:calc(100% - @TIME) 100%;background-repeat:no-repeat}
.tl>li.tl-head{position:sticky;top:0;background-color:#fff;z-index:1;border-bottom:1px solid var(--line)}
.tl-lane{font-weight:700;color:var(--lane);overflow-wrap:anywhere;padding:2px 6px}
.tl-t{color:var(--mute);font-variant-numeric:tabular-nums;text-align:right;padding:3px 6px 0 0;white-space:nowrap;
font-size:.92em}
.tl-card{min-width:0;margin:0 6px 0 3px;border:1px solid var(--line);border-left:4px solid var(--lane);
border-radius:4px;background:#fff;padding:1px 6px;overflow-wrap:anywhere}
.tl-card summary{font-weight:400;padding:1px 0;list-style:none}
.tl-card summary::-webkit-details-marker{display:none}
.tl-card[open]{grid-column:2/-1}
.tl-card pre{margin:4px 0;font-size:.82em;max-height:28em;overflow:auto}
.tl-a{display:none;color:var(--lane);font-weight:700;margin-right:4px}
.tl-k{font-weight:700}
.tl-d{color:var(--ink);font-size:.9em;display:block}
.tl .hit .tl-card{background:var(--bad-bg);border-color:var(--bad);border-left-color:var(--bad)}
.tl-mark{display:block;color:var(--bad);font-weight:700;font-size:.9em}
.tl>li.tl-cut{display:block;color:var(--mute);font-style:italic;text-align:center;background:var(--head);
border-radius:4px;margin:2px 0;padding:2px 6px}
.tl>li.tl-cut.hit{color:var(--bad);font-style:normal;font-weight:700;background:var(--bad-bg)}
ul.tl-hits{margin:4px 0;padding-left:20px}
.tl-other .tl-a{display:inline}
@media (max-width:640px){.tl>li{grid-template-columns:4.6em minmax(0,1fr);background-image:none;
border-top:1px solid var(--line)}.tl>li.tl-head{display:none}.tl-card{grid-column:2!important}
.tl-a{display:inline}.tl-t{font-size:.85em}}
""".replace("@TIME", _TIME)
    + _lane_css()
)


def timeline(result: CaseResult, anchor: str) -> str:
    """The story of *result* as a timeline, element ids starting with *anchor*; empty without a history."""
    history = story.events(result)
    if not history:
        return ""
    actors = story.lanes(history)
    lanes = {actor: min(index, MAX_LANES) for index, actor in enumerate(actors, start=1)}
    shared = len(actors) > MAX_LANES
    hits, unplaced = _places(history, result.mismatches)
    count = min(len(actors), MAX_LANES)
    names = [*actors[: MAX_LANES - 1], "others"] if shared else actors
    head = "".join(f'<span class="tl-lane c{n} k{n}">{_e(name)}</span>' for n, name in enumerate(names, start=1))
    rows = [f'<li class="tl-head" aria-hidden="true"><span class="tl-t">time</span>{head}</li>']
    for event in history:
        seq = story.seq_of(event)
        lane = lanes[story.actor_of(event)]
        marks = hits.get(seq, []) if seq is not None else []
        rows.append(_row(event, lane, marks, anchor, shared and lane == MAX_LANES))
    return (
        f"<h4>Story ({_e(_counted(history))})</h4>"
        + _intro(result, hits, unplaced, anchor)
        + f'<ol class="tl" style="--lanes:{count}" aria-label="the case\'s history, one lane per actor">'
        + "".join(rows)
        + "</ol>"
    )


def _counted(history: Sequence[Mapping[str, Any]]) -> str:
    cut = [event for event in history if story.kind_of(event) == CUT]
    shown = len(history) - len(cut)
    whole = [story.data_of(event).get("events") for event in cut]
    total = next((n for n in whole if isinstance(n, int) and not isinstance(n, bool)), None)
    if total is not None and total > shown:
        return f"{shown} of its {total} events kept in the report"
    return f"{shown} events"


def _places(
    history: Sequence[Mapping[str, Any]], mismatches: Sequence[Mismatch]
) -> tuple[dict[int, list[Mismatch]], list[Mismatch]]:
    """Each shown event's seq -> the mismatches seen at it; a mismatch seen at an event the report left out
    goes to the cut that stands for it, and one that names no shown event or cut is unplaced."""
    shown = sorted(
        (seq, story.kind_of(event) == CUT) for event in history if (seq := story.seq_of(event)) is not None
    )
    seqs = [seq for seq, _ in shown]
    hits: dict[int, list[Mismatch]] = {}
    unplaced: list[Mismatch] = []
    for mismatch in mismatches:
        at = mismatch.event
        if not isinstance(at, int):
            continue
        index = bisect.bisect_right(seqs, at) - 1  # the last shown event at or before it
        if index >= 0 and (seqs[index] == at or shown[index][1]):  # it, or the cut standing for it
            hits.setdefault(seqs[index], []).append(mismatch)
        else:
            unplaced.append(mismatch)
    return hits, unplaced


def _intro(result: CaseResult, hits: Mapping[int, list[Mismatch]], unplaced: Sequence[Mismatch], anchor: str) -> str:
    items = []
    for seq in sorted(hits):
        for mismatch in hits[seq]:
            items.append(f'<li><a href="#{_e(anchor)}-e{seq}">event {seq}</a>: {_e(_mark_text(mismatch))}</li>')
    items += [f"<li>event {m.event}, not in the report's copy: {_e(_mark_text(m))}</li>" for m in unplaced]
    untied = sum(1 for m in result.mismatches if not isinstance(m.event, int))
    note = "One lane per actor, time down the page; open an event to see all its facts. " + (
        f"{untied} mismatch(es) name no event of the story. " if untied and items else ""
    )
    listing = f'<ul class="tl-hits">{"".join(items)}</ul>' if items else ""
    return f'<p class="note">{_e(note.strip())}</p>{listing}'


def _mark_text(mismatch: Mismatch, *, short: bool = False) -> str:
    """A mismatch in words: its clause and check, and (unless *short*) its note or pointer."""
    parts = [f"[{mismatch.clause}]" if mismatch.clause else "", f"check {mismatch.check}" if mismatch.check else ""]
    words = " ".join(part for part in parts if part) or "mismatch"
    if short:
        return words
    return f"{words}: {mismatch.note}" if mismatch.note else f"{words} at {mismatch.pointer or '(whole answer)'}"


def _row(event: Mapping[str, Any], lane: int, marks: Sequence[Mismatch], anchor: str, other: bool) -> str:
    seq = story.seq_of(event)
    ident = f' id="{_e(anchor)}-e{seq}"' if seq is not None else ""
    hit = " hit" if marks else ""
    mark = "".join(f'<span class="tl-mark">&#x2717; {_e(_mark_text(m, short=True))}</span>' for m in marks)
    if story.kind_of(event) == CUT:
        return f'<li class="tl-cut{hit}"{ident}>{_e(_cut_text(event))}{mark}</li>'
    facts = html.escape(_facts(story.data_of(event)), quote=False)
    css = f"k{lane}{hit}" + (" tl-other" if other else "")
    return (
        f'<li class="{css}"{ident}><span class="tl-t">{_e(story.time_text(event))}</span>'
        f'<details class="tl-card c{lane}"><summary><span class="tl-a">{_e(story.actor_of(event))}</span>'
        f'<span class="tl-k">{_e(story.kind_of(event))}</span> <span class="note">#{_e(seq)}</span>'
        f'<span class="tl-d">{_e(story.summary(event, _SUMMARY))}</span>{mark}</summary>'
        f"<pre>{facts}</pre></details></li>"
    )


def _cut_text(event: Mapping[str, Any]) -> str:
    """What a ``history-cut`` event says was left out, in words."""
    left = story.data_of(event).get("leftOut")
    if isinstance(left, Mapping) and left:
        counted = [(str(name), n) for name, n in left.items() if isinstance(n, int) and not isinstance(n, bool)]
        total = sum(n for _, n in counted)
        detail = ", ".join(f"{n} {name}" for name, n in counted[:6]) + (", ..." if len(counted) > 6 else "")
        return f"{total} event(s) left out of the report here ({detail})"
    return "events left out of the report here"


def _facts(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, indent=1, ensure_ascii=False, default=str)
    if len(text) <= _DETAILS:
        return text
    return text[:_DETAILS] + f"\n... ({len(text)} characters; the JSON report has them all)"
