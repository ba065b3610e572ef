"""A run as one self-contained HTML page: the verdict and its scope, a table per kind, clause coverage,
the P1 gates, and each failing case with its events and the expected and actual values side by side.

The page loads nothing: the style is inline, there is no script, and a Content-Security-Policy forbids
every fetch, so it can be kept as a CI artifact and opened offline. Every value from the run or the
fixtures is escaped. Pure: a function of the Run (and, when given, the cases it ran) to a string.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resumekit.conformance import PROTOCOL_VERSION, SPEC_VERSION, report
from resumekit.conformance.fixtures import Case, DecisionCase
from resumekit.conformance.phase0.plan_checks import expected_operations
from resumekit.conformance.report import NO_MESSAGE_CHECKS, counts_by_kind, location
from resumekit.conformance.results import BAD, CaseResult, Mismatch, Outcome, Run

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

_STYLE = """
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
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _anchor(case_id: str) -> str:
    """An element id for a case: its id with anything outside [A-Za-z0-9_-] replaced."""
    return "case-" + re.sub(r"[^A-Za-z0-9_-]", "_", case_id)


def _outcome_badge(result: CaseResult) -> str:
    if result.expected_failure:
        return f'<span class="o o-expected">expected failure ({_e(result.outcome.value)})</span>'
    if result.unexpected_pass:
        return '<span class="o o-unexpected">unexpected pass</span>'
    value = result.outcome.value
    return f'<span class="o o-{_e(value)}">{_e(value.replace("_", " "))}</span>'


def _shown(result: CaseResult) -> bool:
    """Whether a result gets a section of its own: it fails the run or is a listed known failure."""
    return result.outcome in BAD or result.known_failure is not None


def _clause_key(clause: str) -> tuple[str, int, str]:
    match = re.match(r"^(.*?)-(\d+)$", clause)
    return (match.group(1), int(match.group(2)), "") if match else (clause, 0, clause)


# ---------------------------------------------------------------------------------------------- JSON


def _scalar(value: Any) -> str:
    return _e(json.dumps(value, ensure_ascii=False))


def _json_html(value: Any, marked: frozenset[tuple[Any, ...]] = frozenset(), path: tuple[Any, ...] = (),
               indent: int = 0) -> str:
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


def _side_by_side(result: CaseResult, case: Case | None, profile: str) -> str:
    if not result.mismatches:
        return ""
    expectation = None
    if isinstance(case, DecisionCase) and result.outcome is Outcome.FAILED:
        # A failed decision compared the whole plan (an errored one never got that far), so every
        # field without a mismatch compared equal; defaulted operation args are filled in as compared.
        expectation = dict(case.expectation_for(profile))
        expectation["operations"] = expected_operations(case.events, expectation)
    if expectation is not None:
        rows = _plan_rows(expectation, result.mismatches)
        title = "Expected and actual plan"
        if result.expectation:
            title += f" (the case's {result.expectation} expectation)"
        note = (
            "Fields marked &ldquo;= expected&rdquo; compared equal; the differing values are "
            "highlighted on both sides."
        )
    else:
        rows = [_mismatch_row(mismatch) for mismatch in result.mismatches]
        title, note = "Expected and actual", "Each differing field, the differing values highlighted."
    return (
        f"<h4>{_e(title)}</h4><p class=\"note\">{note}</p>"
        '<div class="scroll"><table class="side"><thead><tr><th>field</th><th>expected</th><th>actual</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


# --------------------------------------------------------------------------------------- sections


def _event_text(content: Any) -> str:
    if not isinstance(content, Mapping):
        return json.dumps(content, ensure_ascii=False)
    rest = {key: value for key, value in content.items() if key != "kind"}
    text = json.dumps(rest, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= _EVENT_TEXT else text[: _EVENT_TEXT - 3] + "..."


def _events(case: Case | None) -> str:
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


def _failing_case(result: CaseResult, case: Case | None, run: Run) -> str:
    parts = [f'<section class="case{" expected" if result.expected_failure else ""}" id="{_anchor(result.case_id)}">']
    parts.append(f"<h3><code>{_e(result.case_id)}</code> {_outcome_badge(result)}</h3>")
    where = location(result, run.golden_root)
    line = f"{_e(result.kind)}, profile {_e(result.profile)}"
    if where:
        line += f" &middot; <code>{_e(where)}</code>"
    line += f" &middot; see it: <code>resumekit show {_e(result.case_id)}</code>"
    parts.append(f'<div class="where">{line}</div>')
    description = getattr(case, "description", "")
    if description:
        parts.append(f"<p>{_e(description)}</p>")
    facts = []
    if result.clauses:
        facts.append(("clauses", ", ".join(result.clauses)))
    if result.fault_model:
        facts.append(("fault model", result.fault_model))
    if result.known_failure is not None:
        facts.append(("known failure", result.known_failure))
    if result.unexpected_pass:
        facts.append(("it passes now", "take it off the expectations file (--expect)"))
    if result.replay:
        facts.append(("replay with", result.replay))
    if facts:
        parts.append('<dl class="facts">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts) + "</dl>")
    if result.message:
        parts.append(f'<h4>Message</h4><pre class="message">{_e(result.message)}</pre>')
    parts.append(_events(case))
    parts.append(_side_by_side(result, case, run.profile))
    if result.transcript:
        parts.append(f'<h4>Last messages</h4><pre class="message">{_e(chr(10).join(result.transcript))}</pre>')
    if result.stderr_tail:
        parts.append(f'<h4>stderr (last lines)</h4><pre class="message">{_e(result.stderr_tail)}</pre>')
    parts.append("</section>")
    return "".join(parts)


def _headline(run: Run) -> tuple[str, str]:
    """The verdict's words, exactly as the text report prints them, and its style."""
    verdict = run.verdict
    css = verdict.status
    if run.shard is not None:
        css = "shard"
    elif verdict.certified and verdict.known_failures:
        css = "known"
    return report.headline(run), css


def _verdict_block(run: Run) -> str:
    verdict = run.verdict
    headline, css = _headline(run)
    counts = report.counts_text(run)
    reasons = "".join(f"<li>{_e(reason)}</li>" for reason in verdict.reasons)
    return (
        f'<div class="verdict v-{_e(css)}" id="verdict"><p class="headline">{_e(headline)}</p>'
        f"<div>{_e(counts)}</div>{f'<ul>{reasons}</ul>' if reasons else ''}</div>"
    )


def _facts(run: Run) -> str:
    info = run.implementation
    verdict = run.verdict
    profile = report.profile_run(run)
    rows: list[tuple[str, str]] = [
        ("implementation", f"{info.name} {info.version} ({info.language or 'unknown language'}) via {info.adapter}"),
        ("claims", f"{', '.join(info.capabilities) or 'nothing'}; profiles {', '.join(info.profiles)}"),
        ("profile run", profile),
        ("certified profile", verdict.profile_text or "none"),
        ("kit", f"resumekit {run.kit_version}, spec {SPEC_VERSION}, protocol {PROTOCOL_VERSION}"),
        ("golden set", run.golden_digest or "unknown"),
    ]
    if run.selection is not None:
        rows.append(("selection", run.selection.describe()))
        if run.selection.expectations_digest:
            rows.append(("expectations", f"sha256 {run.selection.expectations_digest}"))
    else:
        rows.append(("selection", "not recorded (cases chosen by the caller)"))
    rows.append(("fault models", "; ".join(run.fault_models) or "none exercised"))
    if run.seed is not None:
        rows.append(("seed", str(run.seed)))
    if not run.messages_validated:
        rows.append(("message checks", NO_MESSAGE_CHECKS))
    if run.shard is not None:
        rows.append(("shard", f"{run.shard.index} of {run.shard.count}"))
    platform = " ".join(run.platform.get(key, "") for key in ("system", "release", "machine")).strip()
    if platform:
        python = run.platform.get("python")
        rows.append(("platform", platform + (f", Python {python}" if python else "")))
    rows.append(("when", f"{run.started} to {run.finished} ({run.duration:.2f} s, {run.jobs} job(s))"))
    return '<dl class="facts">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows) + "</dl>"


def _count_class(outcome: Outcome, count: int) -> str:
    if not count:
        return "n zero"
    return "n bad" if outcome in BAD else "n"


def _summary_table(run: Run) -> str:
    head = "".join(f'<th class="n">{_e(o.value.replace("_", " "))}</th>' for o in Outcome)
    rows = []
    for kind, row in counts_by_kind(run).items():
        cells = "".join(f'<td class="{_count_class(o, row[o])}">{row[o]}</td>' for o in Outcome)
        rows.append(f'<tr><td><a href="#kind-{_e(kind)}">{_e(kind)}</a></td>{cells}</tr>')
    total = run.counts
    cells = "".join(f'<td class="{_count_class(o, total[o.value])}">{total[o.value]}</td>' for o in Outcome)
    rows.append(f'<tr class="total"><td>total</td>{cells}</tr>')
    return (
        f'<div class="scroll"><table id="summary"><thead><tr><th>kind</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _kind_tables(run: Run, shown: set[str]) -> str:
    by_kind: dict[str, list[CaseResult]] = {}
    for result in run.results:
        by_kind.setdefault(result.kind, []).append(result)
    parts = []
    for kind, results in by_kind.items():
        bad = sum(1 for r in results if not r.acceptable)
        passed = sum(1 for r in results if r.ok)
        rows = []
        for result in results:
            name = f"<code>{_e(result.case_id)}</code>"
            if result.case_id in shown:
                name = f'<a href="#{_anchor(result.case_id)}">{name}</a>'
            where = str(result.source) if result.source else ""
            rows.append(
                f'<tr><td class="id first">{name}</td><td>{_outcome_badge(result)}</td>'
                f'<td data-label="profile">{_e(result.profile)}</td>'
                f'<td class="wide" data-label="clauses">{_e(", ".join(result.clauses))}</td>'
                f'<td class="mono wide" data-label="file">{_e(where)}</td>'
                f'<td class="n" data-label="seconds">{result.duration:.3f}</td></tr>'
            )
        opened = ""  # the failing cases have sections of their own, above
        label = f"{kind}: {passed} of {len(results)} passed" + (f", {bad} failing" if bad else "")
        parts.append(
            f'<details id="kind-{_e(kind)}" class="kind"{opened}><summary>{_e(label)}</summary>'
            '<div class="scroll"><table class="stack"><thead><tr><th>case</th><th>outcome</th><th>profile</th>'
            '<th>clauses</th><th>file</th><th class="n">seconds</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></details>'
        )
    return "".join(parts)


def _chip(result: CaseResult) -> str:
    """One square of the clause matrix; a passed one carries no class, as most do (the page stays small)."""
    if result.outcome is Outcome.PASSED and result.known_failure is None:
        return f'<i title="{_e(result.case_id)}"></i>'
    css = "expected" if result.expected_failure else "bad"
    return f'<i class="{css}" title="{_e(f"{result.case_id}: {result.outcome.value}")}"></i>'


def _clause_matrix(run: Run, shown: set[str]) -> str:
    """Clause by case: one square per claimed case citing the clause, clauses with a failure first."""
    cited: dict[str, list[CaseResult]] = {}
    for result in run.results:
        for clause in result.clauses:
            cited.setdefault(clause, []).append(result)
    any_expected = any(r.expected_failure for r in run.results)
    rows = []
    for clause in sorted(cited, key=lambda c: (all(r.acceptable for r in cited[c]), _clause_key(c))):
        results = cited[clause]
        claimed = [r for r in results if r.outcome is not Outcome.NOT_CLAIMED]
        passed = sum(1 for r in claimed if r.ok and r.known_failure is None)
        failed = sum(1 for r in claimed if not r.acceptable)
        expected = sum(1 for r in claimed if r.expected_failure)
        chips = []
        for result in claimed:
            chip = _chip(result)
            if result.case_id in shown:
                chip = f'<a href="#{_anchor(result.case_id)}">{chip}</a>'
            chips.append(chip)
        cases = f'<div class="chips">{"".join(chips)}</div>' if chips else '<span class="note">none claimed</span>'
        counts = [passed, failed, *([expected] if any_expected else []), len(results) - len(claimed)]
        cells = "".join(
            f'<td class="n{" bad" if index == 1 and value else ""}{" zero" if not value else ""}">{value}</td>'
            for index, value in enumerate(counts)
        )
        css = ' class="failing"' if failed else ""
        rows.append(f'<tr{css}><td class="clause"><code>{_e(clause)}</code></td>{cells}<td>{cases}</td></tr>')
    legend = (
        '<p class="legend note">One square per claimed case citing the clause (hover for its id; a red one links '
        'to its failure):<i class="chip"></i>passed<i class="chip bad"></i>failed, errored, skipped or '
        'unexpected pass' + ('<i class="chip expected"></i>expected failure' if any_expected else "") + "</p>"
    )
    expected_head = '<th class="n">expected failures</th>' if any_expected else ""
    return (
        f"{legend}"
        '<div class="scroll"><table id="clauses"><thead><tr><th>clause</th><th class="n">passed</th>'
        f'<th class="n">failed</th>{expected_head}<th class="n">not claimed</th><th>cases</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _gates_table(run: Run) -> str:
    rows = []
    for row in run.gates:
        verdict = str(row.get("verdict", ""))
        css = {"passed": "o-passed", "failed": "o-failed"}.get(verdict, "o-not_claimed")
        failed = row.get("failed") or []
        failed_html = ""
        if failed:
            links = ", ".join(f'<a href="#{_anchor(str(c))}"><code>{_e(c)}</code></a>' for c in failed)
            failed_html = f'<div class="note">failed: {links}</div>'
        clauses = row.get("clauses") or []
        rows.append(
            f'<tr><td class="first gate">{_e(row.get("gate", ""))}{failed_html}</td>'
            f'<td><span class="o {css}">{_e(verdict)}</span></td>'
            f'<td class="n" data-label="passed">{_e(row.get("passed", ""))}</td>'
            f'<td class="n" data-label="of">{_e(row.get("scenarios", ""))}</td>'
            f'<td class="wide" data-label="clauses">{_e(", ".join(map(str, clauses)))}</td>'
            f'<td class="wide" data-label="attested">{_e(row.get("attested") or "none")}</td></tr>'
        )
    return (
        '<div class="scroll"><table id="gates" class="stack"><thead><tr><th>P1 gate</th><th>verdict</th>'
        '<th class="n">passed</th><th class="n">of</th><th>clauses</th><th>attested</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _contents(run: Run, failing: Sequence[CaseResult]) -> str:
    bad = sum(1 for r in failing if not r.acceptable)
    links = [("by-kind", "cases by kind"), ("failures", f"failing cases ({bad})")]
    if run.gates:
        links.append(("p1-gates", "P1 gates"))
    links += [("clause-coverage", "clause coverage"), ("all-cases", "every case")]
    items = "".join(f'<a href="#{key}">{_e(text)}</a>' for key, text in links)
    return f'<nav class="contents">{items}</nav>'


def to_html(run: Run, cases: Iterable[Case] = ()) -> str:
    """The run as one self-contained HTML page.

    *cases* are the golden cases the run ran, when the caller has them: a failing case then shows its
    description, its events and the expected plan next to the answer. Without them (a report read back
    from JSON) each failure shows the differing fields alone.
    """
    by_id = {case.id: case for case in cases}
    info = run.implementation
    headline, _ = _headline(run)
    failing = [r for r in run.results if _shown(r)]
    shown = {r.case_id for r in failing}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing may be fetched: the page is complete as written.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_e(f'resumekit: {info.name} {info.version}: {headline}')}</title>",
        f"<style>{_STYLE}</style></head><body><main>",
        f"<h1>resumekit report: {_e(info.name)} {_e(info.version)}</h1>",
        _verdict_block(run),
        _facts(run),
        _contents(run, failing),
        '<h2 id="by-kind">Cases by kind</h2>',
        _summary_table(run),
    ]
    title = f"Failing cases ({sum(1 for r in failing if not r.acceptable)})"
    expected = sum(1 for r in failing if r.expected_failure)
    if expected:
        title += f" and expected failures ({expected})"
    parts.append(f'<h2 id="failures">{_e(title)}</h2>')
    if len(failing) > 1:
        links = "".join(
            f'<li><a href="#{_anchor(r.case_id)}"><code>{_e(r.case_id)}</code></a> {_outcome_badge(r)}</li>'
            for r in failing
        )
        parts.append(f'<ul class="index">{links}</ul>')
    if failing:
        parts.extend(_failing_case(result, by_id.get(result.case_id), run) for result in failing)
    else:
        parts.append('<p class="note">No case failed.</p>')
    if run.gates:
        parts += ['<h2 id="p1-gates">P1 gates</h2>', _gates_table(run)]
    parts += ['<h2 id="clause-coverage">Clause coverage</h2>', _clause_matrix(run, shown)]
    parts += ['<h2 id="all-cases">Every case, by kind</h2>', _kind_tables(run, shown)]
    parts.append(
        f"<footer>Written by resumekit {_e(run.kit_version)}. The JSON report (--report-json) holds every "
        "result in full.</footer></main></body></html>"
    )
    return "\n".join(part for part in parts if part) + "\n"
