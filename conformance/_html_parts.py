"""The parts of the HTML report that stand on their own: the style sheet, JSON written as markup with the
differing values marked, the expected and actual values side by side, and a case's events.

Private to ``report_html``, which puts the page together. Pure, as that module is: every function maps
values to a string of HTML, and every value from the run or the fixtures is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.cases import Case
from resumekit.conformance.results import CaseResult, Mismatch, Outcome

# The plan fields of an expectation in the order the spec lists them, and the plan field each compares.
_PLAN_FIELDS = (
    "disposition",
    "requiresVerification",
    "sourceRuntimeEventHighWater",
    "rejectionReasons",
    "operations",
    "diagnostics",
    "replay",
)
_POINTER_FIELD = {"replayRuntimeEvents": "replay"}  # the plan's name -> the expectation's name
_NOT_AGAINST_EXPECTATION = ("PURE-1", "PURE-2")
_INLINE = 60  # a JSON container this short (written compactly) stays on one line
_EVENT_TEXT = 140  # characters of an event's content shown in the events table

STYLE = """
:root{--ok:#1a7f37;--ok-bg:#dafbe1;--bad:#cf222e;--bad-bg:#ffebe9;--warn:#9a6700;--warn-bg:#fff8c5;
--mute:#59636e;--line:#d1d9e0;--head:#f6f8fa;--ink:#1f2328;--sub:#0969da;--sub-bg:#ddf4ff}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;color:var(--ink);
background:#fff}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1,h2,h3,h4,p,li{overflow-wrap:anywhere}
h1{font-size:1.35rem;margin:0 0 4px}h3{font-size:1rem;margin:0}
h2{font-size:1.15rem;margin:32px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:.86em}
pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
a{color:var(--sub)}
.verdict{border-radius:8px;padding:14px 18px;margin:8px 0 16px;border:1px solid;overflow-wrap:anywhere}
.verdict .headline{font-size:1.3rem;font-weight:700;margin:0}
.verdict ul{margin:6px 0 0;padding-left:20px}
.v-certified{background:var(--ok-bg);border-color:var(--ok);color:#0b3d1c}
.v-known{background:var(--warn-bg);border-color:var(--warn);color:#4d3800}
.v-not-certified,.v-subset-failed{background:var(--bad-bg);border-color:var(--bad);color:#67060c}
.v-subset-passed,.v-interrupted,.v-shard{background:var(--sub-bg);border-color:var(--sub);color:#0a3069}
dl.facts{display:grid;grid-template-columns:minmax(9em,max-content) 1fr;gap:2px 16px;margin:0}
dl.facts dt{color:var(--mute)}dl.facts dd{margin:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0}
table{border-collapse:collapse;width:100%}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--head);font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:600;background:var(--head)}
.o{display:inline-block;border-radius:10px;padding:0 8px;font-size:.82em;font-weight:600;white-space:nowrap}
.o-passed{background:var(--ok-bg);color:var(--ok)}
.o-failed,.o-errored,.o-skipped,.o-unexpected{background:var(--bad-bg);color:var(--bad)}
.o-not_claimed{background:var(--head);color:var(--mute)}
.o-expected{background:var(--warn-bg);color:var(--warn)}
details{margin:6px 0}summary{cursor:pointer;font-weight:600;padding:4px 0}
.chips{display:flex;flex-wrap:wrap;gap:3px}
.chips i,i.chip{display:block;width:12px;height:12px;border-radius:2px;background:#2da44e}
.chips i.bad,i.chip.bad{background:var(--bad)}.chips i.expected,i.chip.expected{background:#d4a72c}
td.n.zero{color:#afb8c1}td.n.bad{color:var(--bad);font-weight:700}
tr.failing td.clause code{color:var(--bad);font-weight:700}
ul.index{display:flex;flex-wrap:wrap;gap:4px 14px;list-style:none;padding:0;margin:0 0 8px}
td.event code{white-space:nowrap}
.legend i.chip{display:inline-block;vertical-align:-2px;margin:0 4px 0 10px}
.case{border:1px solid var(--line);border-left:5px solid var(--bad);border-radius:6px;padding:12px 16px;margin:14px 0}
.case.expected{border-left-color:#d4a72c}
.case .where{color:var(--mute);overflow-wrap:anywhere;margin:2px 0 8px}
.case h4{margin:14px 0 4px;font-size:.95rem}
.message{background:var(--head);border-radius:4px;padding:6px 10px}
table.side{table-layout:fixed}
table.side th:first-child{width:22%}
table.side td.expected{background:#f6fff8}table.side td.actual{background:#fff8f7}
table.side tr.same td{color:var(--mute);background:#fff}
table.side tr.differs th{background:var(--bad-bg)}
mark{border-radius:2px;padding:0 1px}
td.expected mark{background:#aceebb;color:#0b3d1c}
td.actual mark{background:#ffcecb;color:#67060c;font-weight:600}
.note{color:var(--mute);font-size:.9em}
.clause{white-space:nowrap}
nav.contents{display:flex;flex-wrap:wrap;gap:4px 16px;margin:14px 0 0;padding:8px 0;border-top:1px solid var(--line)}
td.id code{white-space:nowrap}
@media (max-width:640px){td.id code{white-space:normal;overflow-wrap:anywhere}}
footer{margin-top:40px;color:var(--mute);font-size:.85em}
@media (max-width:640px){main{padding:12px 12px 32px}dl.facts{grid-template-columns:1fr}
dl.facts dd{margin-bottom:6px}dl.facts dt{font-size:.85em}th,td{padding:3px 5px}table{font-size:13px}
.case{padding:10px 10px}table.side pre{font-size:.8em}
table.side,table.side thead,table.side tbody{display:block}
table.side tr{display:grid;grid-template-columns:1fr 1fr}
table.side thead th:first-child{display:none}
table.side tbody th:first-child{grid-column:1/-1;width:auto}
table.events,table.events tbody{display:block}table.events thead{display:none}
table.events tr{display:grid;grid-template-columns:auto auto auto 1fr}
table.stack,table.stack tbody{display:block}table.stack thead{display:none}
table.stack tr{display:flex;flex-wrap:wrap;align-items:baseline;gap:0 10px;border-top:1px solid var(--line);
padding:4px 0}table.stack td{border:0;padding:1px 4px;text-align:left}table.stack td.wide{flex-basis:100%;order:2}
table.stack td.first{flex-basis:100%;order:0}table.stack td{order:1}
table.stack td[data-label]::before{content:attr(data-label) ": ";color:var(--mute);font-family:system-ui,sans-serif}
td.gate{font-weight:600;overflow-wrap:anywhere}
table.events td{border-width:1px 0 0 0}table.events td.mono{grid-column:1/-1;border-top:0;padding-left:24px}}
@media (max-width:640px){#summary{table-layout:fixed}#summary th:first-child{width:25%}
#summary th,#summary td{padding:2px 3px}#summary th.n{font-size:10.5px}#summary td:first-child{overflow-wrap:anywhere}}
"""


def escape(value: object) -> str:
    """*value* as text in HTML: markup and both kinds of quote escaped."""
    return html.escape(str(value), quote=True)


_e = escape  # short, as it wraps nearly every value in the markup


# ---------------------------------------------------------------------------------------------- JSON


def _scalar(value: Any) -> str:
    return _e(json.dumps(value, ensure_ascii=False))


def _json_html(
    value: Any, marked: frozenset[tuple[Any, ...]] = frozenset(), path: tuple[Any, ...] = (), indent: int = 0
) -> str:
    """*value* as indented JSON, escaped, with the values at the *marked* paths wrapped in <mark>."""
    inner = _json_inner(value, marked, path, indent)
    return f"<mark>{inner}</mark>" if path in marked else inner


def _json_inner(value: Any, marked: frozenset[tuple[Any, ...]], path: tuple[Any, ...], indent: int) -> str:
    if not isinstance(value, (dict, list)):
        return _scalar(value)
    deeper = any(len(p) > len(path) and p[: len(path)] == path for p in marked)
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if not deeper and len(compact) <= _INLINE:
        return _e(compact)
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    pad, inner_pad = "  " * indent, "  " * (indent + 1)
    items = value.items() if isinstance(value, dict) else enumerate(value)
    rows = []
    for key, item in items:
        label = f"{_scalar(key)}: " if isinstance(value, dict) else ""
        rows.append(f"{inner_pad}{label}{_json_html(item, marked, (*path, key), indent + 1)}")
    open_, close = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return open_ + "\n" + ",\n".join(rows) + "\n" + pad + close


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _differing(one: Any, other: Any) -> frozenset[tuple[Any, ...]]:
    """The paths inside *one* that differ from *other*: list items the other lacks, keys whose values differ."""
    if isinstance(one, list) and isinstance(other, list):
        remaining = [_canonical(item) for item in other]
        paths = set()
        for index, item in enumerate(one):
            text = _canonical(item)
            if text in remaining:
                remaining.remove(text)
            else:
                paths.add((index,))
        return frozenset(paths)
    if isinstance(one, dict) and isinstance(other, dict):
        return frozenset((key,) for key in one if key not in other or _canonical(one[key]) != _canonical(other[key]))
    return frozenset({()}) if _canonical(one) != _canonical(other) else frozenset()


def _pointer_tokens(pointer: str) -> list[Any]:
    """A JSON pointer's tokens, with array indexes as ints."""
    if not pointer.startswith("/"):
        return []
    tokens: list[Any] = []
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        tokens.append(int(token) if token.isdigit() else token)
    return tokens


def _substituted(value: Any, tokens: Sequence[Any], new: Any) -> tuple[Any, bool]:
    """*value* with the item at *tokens* replaced by *new* (a key absent from the answer is dropped)."""
    if not tokens:
        return new, True
    head, rest = tokens[0], tokens[1:]
    if isinstance(value, list) and isinstance(head, int) and 0 <= head < len(value):
        copy = list(value)
        copy[head], done = _substituted(value[head], rest, new)
        return copy, done
    if isinstance(value, dict) and isinstance(head, str) and (head in value or not rest):
        copy_d = dict(value)
        if not rest and new == "<absent>":
            copy_d.pop(head, None)
            return copy_d, True
        copy_d[head], done = _substituted(value.get(head), rest, new)
        return copy_d, done
    return value, False


# ---------------------------------------------------------------------------------- side by side


def _side_row(name: str, clause: str, expected: str, actual: str, *, differs: bool, note: str = "") -> str:
    clause_html = f' <span class="clause note">[{_e(clause)}]</span>' if clause else ""
    note_html = f'<div class="note">{_e(note)}</div>' if note else ""
    css = "differs" if differs else "same"
    return (
        f'<tr class="{css}"><th scope="row"><code>{_e(name)}</code>{clause_html}{note_html}</th>'
        f'<td class="expected"><pre>{expected}</pre></td><td class="actual"><pre>{actual}</pre></td></tr>'
    )


def _mismatch_row(mismatch: Mismatch) -> str:
    """One differing field as the comparison saw it: both values, the differing items marked."""
    return _side_row(
        mismatch.pointer or "(whole answer)",
        mismatch.clause or "",
        _json_html(mismatch.expected, _differing(mismatch.expected, mismatch.actual)),
        _json_html(mismatch.actual, _differing(mismatch.actual, mismatch.expected)),
        differs=True,
        note=mismatch.note or "",
    )


def _plan_rows(expectation: Mapping[str, Any], mismatches: Sequence[Mismatch]) -> list[str]:
    """The expected plan field by field next to the answer: equal fields dimmed, differing ones marked.

    The answer is known where it differs (the result keeps only the differing values); a field with no
    mismatch compared equal. A difference inside a field (``/operations/0/status``) is shown in place in
    the expected value; one about a whole field shows the values the comparison compared.
    """
    by_field: dict[str, list[Mismatch]] = {}
    loose: list[Mismatch] = []
    for mismatch in mismatches:
        tokens = _pointer_tokens(mismatch.pointer)
        name = _POINTER_FIELD.get(str(tokens[0]), str(tokens[0])) if tokens else ""
        # PURE-1 and PURE-2 compare two answers (or the input), not an answer with the expectation.
        if name in expectation and name in _PLAN_FIELDS and mismatch.clause not in _NOT_AGAINST_EXPECTATION:
            by_field.setdefault(name, []).append(mismatch)
        else:
            loose.append(mismatch)
    rows = []
    for name in _PLAN_FIELDS:
        if name not in expectation:
            continue
        expected = expectation[name]
        found = by_field.get(name, [])
        if not found:
            rows.append(_side_row(name, "", _json_html(expected), "= expected", differs=False))
            continue
        nested = [m for m in found if len(_pointer_tokens(m.pointer)) > 1]
        whole = [m for m in found if len(_pointer_tokens(m.pointer)) <= 1]
        if nested:
            actual, marks = expected, set()
            for mismatch in nested:
                tokens = _pointer_tokens(mismatch.pointer)[1:]
                actual, done = _substituted(actual, tokens, mismatch.actual)
                if done:
                    marks.add(tuple(tokens))
                else:
                    loose.append(mismatch)
            if marks:
                clauses = ", ".join(sorted({m.clause for m in nested if m.clause}))
                notes = "; ".join(m.note for m in nested if m.note)
                rows.append(
                    _side_row(
                        name,
                        clauses,
                        _json_html(expected, frozenset(marks)),
                        _json_html(actual, frozenset(marks)),
                        differs=True,
                        note=notes,
                    )
                )
        rows.extend(_mismatch_row(mismatch) for mismatch in whole)
    rows.extend(_mismatch_row(mismatch) for mismatch in loose)
    return rows


def side_by_side(result: CaseResult, case: Case | None, profile: str) -> str:
    """The differing fields of a failing *result*: the expected plan field by field next to the answer when
    *case* is known and the comparison failed, or else each differing field alone; empty without mismatches."""
    if not result.mismatches:
        return ""
    expectation = None
    if case is not None and result.outcome is Outcome.FAILED:
        # A failed comparison of a whole answer (an errored case never got that far): every field
        # without a mismatch compared equal.
        expectation = case.compared_expectation(profile)
    if expectation is not None and case is not None:
        rows = _plan_rows(expectation, result.mismatches)
        title = f"Expected and actual {case.answer_name}"
        if result.expectation:
            title += f" (the case's {result.expectation} expectation)"
        note = (
            "Fields marked &ldquo;= expected&rdquo; compared equal; the differing values are highlighted on both sides."
        )
    else:
        rows = [_mismatch_row(mismatch) for mismatch in result.mismatches]
        title, note = "Expected and actual", "Each differing field, the differing values highlighted."
    return (
        f'<h4>{_e(title)}</h4><p class="note">{note}</p>'
        '<div class="scroll"><table class="side"><thead><tr><th>field</th><th>expected</th><th>actual</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


# ---------------------------------------------------------------------------------------- events


def _event_text(content: Any) -> str:
    if not isinstance(content, Mapping):
        return json.dumps(content, ensure_ascii=False)
    rest = {key: value for key, value in content.items() if key != "kind"}
    text = json.dumps(rest, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= _EVENT_TEXT else text[: _EVENT_TEXT - 3] + "..."


def events_table(case: Case | None) -> str:
    """The events of *case* as a table, each event's content cut short; empty without events."""
    events = getattr(case, "events", None)
    if not events:
        return ""
    rows = []
    for number, event in enumerate(events, start=1):
        if not isinstance(event, Mapping):
            continue
        content = event.get("content")
        kind = content.get("kind", "") if isinstance(content, Mapping) else ""
        partial = " (partial)" if event.get("partial") else ""
        rows.append(
            f'<tr><td class="n">{number}</td><td class="event"><code>{_e(event.get("id", ""))}</code>{_e(partial)}</td>'
            f"<td>{_e(event.get('role', ''))}</td><td>{_e(kind)}</td>"
            f'<td class="mono">{_e(_event_text(content))}</td></tr>'
        )
    return (
        f"<h4>Events ({len(events)})</h4>"
        '<div class="scroll"><table class="events"><thead><tr><th class="n">#</th><th>id</th><th>role</th>'
        f"<th>content</th><th>details</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
