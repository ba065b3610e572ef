"""A failing case's history told to a person: its lanes, each event in a few words, and the events that led
to its first mismatch.

Every reporter that shows a failing case's story reads it through here: the terminal and the text reports
print the few events before the first mismatch (``story_lines``), the HTML report draws a lane per actor
(``_html_timeline``), both with the same words for an event (``summary``). The history is the one a result
carries (``CaseResult.history``: event dicts as ``history.for_report`` makes them, or as a saved report
holds them), so everything here reads plain values defensively: a member of any JSON type, or missing,
is shown, never trusted. Pure: values in, strings out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resumekit.conformance.results import CaseResult, Mismatch

LEAD_UP = 8  # events shown before (and at) the first mismatch
WIDTH = 120  # characters of one line of the story in text
# The actors that are no worker process, in the order their lanes stand after the workers'.
_PLACES = ("control-plane", "origin", "journal", "watch", "tool")
# The members of an event's data that tell most about it, in the order they are shown; the rest follow.
_FIRST = (
    "index", "verb", "argument", "worker", "endpoint", "status", "answer", "method", "path", "check", "ok",
    "problems", "why", "rows", "task_id", "attempt", "phase", "wanted", "state", "failpoint", "pid", "signal",
    "at", "by", "exitCode", "marker", "repository", "ref", "accepted", "reason", "old", "new", "event", "from",
    "to", "cause", "how", "name", "leftOut", "events",
)  # fmt: skip
# Members that only repeat what the event's envelope or another member says.
_QUIET = frozenset({"seq", "request", "now_ms", "body_sha256", "lease_id", "idempotency_key"})
_VALUE = 48  # characters of one member's value in a summary


def events(result: CaseResult) -> list[Mapping[str, Any]]:
    """The result's history, each event a mapping (anything else a saved report may hold is left out)."""
    return [event for event in result.history if isinstance(event, Mapping)]


def lanes(history: Iterable[Mapping[str, Any]]) -> list[str]:
    """The actors of *history*, one lane each: the kit, the worker processes as they first appear, then the
    control plane, the origin, the journal, the watch and the tool, and any other actor last."""
    seen = list(dict.fromkeys(actor_of(event) for event in history))
    workers = [actor for actor in seen if actor != "kit" and actor not in _PLACES and _worker_name(actor)]
    others = [actor for actor in seen if actor != "kit" and actor not in _PLACES and not _worker_name(actor)]
    return [*(["kit"] if "kit" in seen else []), *workers, *(a for a in _PLACES if a in seen), *others]


def _worker_name(actor: str) -> bool:
    """Whether *actor* names a worker process: a letter and a number (``w1``, ``b2``)."""
    return len(actor) >= 2 and actor[0].isalpha() and actor[1:].isdigit()


def actor_of(event: Mapping[str, Any]) -> str:
    """Who did it, on one line."""
    return " ".join(str(event.get("actor", "")).split()) or "?"


def kind_of(event: Mapping[str, Any]) -> str:
    """What happened, on one line."""
    return " ".join(str(event.get("kind", "")).split()) or "?"


def seq_of(event: Mapping[str, Any]) -> int | None:
    """The event's position in the case's history, or None when it has none."""
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def time_text(event: Mapping[str, Any]) -> str:
    """When the event came, in seconds since the case began: ``+1.234s``."""
    at = event.get("atMs")
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return "?"
    return f"+{at / 1000:.3f}s"


def data_of(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event's facts (empty when it has none)."""
    data = event.get("data")
    return data if isinstance(data, Mapping) else {}


def summary(event: Mapping[str, Any], limit: int = 200) -> str:
    """The event's key facts in a line: ``endpoint=claim status=200 answer=answer``, at most *limit* characters."""
    data = data_of(event)
    names = [name for name in _FIRST if name in data]
    names += [name for name in data if name not in _FIRST and name not in _QUIET]
    parts: list[str] = []
    used = 0
    for name in names:
        part = f"{name}={_value_text(str(name), data[name])}"
        if used + len(part) > limit and parts:
            parts.append(f"(+{len(names) - len(parts)} more)")
            break
        parts.append(part)
        used += len(part) + 1
    return _clip(" ".join(parts), limit)


def _value_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        if len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value):
            return value[:10]  # a git object id: its first characters tell one from another
        return _clip(value, _VALUE)
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return _list_text(name, value)
    if isinstance(value, Mapping):
        return _clip(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str), _VALUE)
    return _clip(str(value), _VALUE)


def _list_text(name: str, items: Sequence[Any]) -> str:
    """A list in a few words: a journal's rows by their count and the last row's phase, a short list as it is."""
    if items and all(isinstance(item, Mapping) for item in items):
        last = items[-1]
        where = "/".join(str(last[key]) for key in ("task_id", "attempt") if key in last)
        phase = f" {last['phase']}" if "phase" in last else ""
        tail = f", last {where}{phase}".rstrip() if where or phase else ""
        count = str(len(items)) if name == "rows" else f"{len(items)} items"
        return _clip(f"{count}{tail}", _VALUE)
    return _clip(json.dumps(list(items), ensure_ascii=False, separators=(",", ":"), default=str), _VALUE)


def _clip(text: str, width: int) -> str:
    """*text* on one line (whatever it held), cut to *width* characters."""
    return _cut(" ".join(text.split()), width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def first_mismatch(result: CaseResult) -> Mismatch | None:
    """The mismatch seen earliest in the history (by its event), or None when none names an event."""
    placed = [m for m in result.mismatches if isinstance(m.event, int)]
    return min(placed, key=lambda m: m.event or 0) if placed else None


def marked(result: CaseResult) -> dict[int, list[Mismatch]]:
    """Each event's ``seq`` -> the mismatches seen at it."""
    found: dict[int, list[Mismatch]] = {}
    for mismatch in result.mismatches:
        if isinstance(mismatch.event, int):
            found.setdefault(mismatch.event, []).append(mismatch)
    return found


def lead_up(result: CaseResult, count: int = LEAD_UP) -> list[Mapping[str, Any]]:
    """The *count* events up to and including the one the first mismatch was seen at; without such a mismatch
    (an errored case, or checks that name no event), the last *count* events of the history."""
    history = events(result)
    first = first_mismatch(result)
    if first is not None:
        at = first.event or 0
        history = [event for event in history if (seq_of(event) or 0) <= at]
    return history[-count:] if count > 0 else []


def story_lines(result: CaseResult, count: int = LEAD_UP, width: int = WIDTH) -> list[str]:
    """The few events before the first mismatch, one line each of at most *width* characters, with a line
    that says what they are; empty when the result carries no history."""
    shown = lead_up(result, count)
    if not shown:
        return []
    first = first_mismatch(result)
    total = len(events(result))
    if first is not None:
        named = ", ".join(part for part in (first.clause, f"check {first.check}" if first.check else "") if part)
        head = f"story up to its first mismatch (event {first.event}{', ' + named if named else ''}):"
    else:
        head = f"story, the last {len(shown)} of its {total} event(s):"
    lines = [_cut(head, width)]
    hits = marked(result)
    for event in shown:
        flag = ">>" if seq_of(event) in hits else "  "
        seq = seq_of(event)
        line = f"{flag} {'?' if seq is None else seq:>4} {time_text(event):>9} {actor_of(event):<13.13} "
        line += f"{kind_of(event):<16.16} {summary(event, width)}"
        lines.append(_cut(line, width))
    return lines
