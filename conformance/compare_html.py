"""Several run reports on one HTML page, side by side: per implementation, per gate, per clause and per case.

For ``resumekit report --compare-html``: the reference, the Node.js example and a foreign runtime, say, each
certified in its own run, set next to each other so that a reader sees at once where they differ. Pure, as
``report_html`` is: every value comes from the reports and is escaped, and the page fetches nothing.

Runs of different golden sets or kit versions are still set side by side, under a warning: a case id can
mean another case in another golden set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from resumekit.conformance import _summary_rows, report
from resumekit.conformance._html_parts import STYLE
from resumekit.conformance._html_parts import escape as _e
from resumekit.conformance._text import printable
from resumekit.conformance.results import CaseResult, Outcome, Run

_EXTRA_STYLE = """
table.compare td.o-cell{text-align:center;white-space:nowrap}
table.compare th.impl{min-width:7em;overflow-wrap:anywhere}
#runs-table .o.verdict{white-space:normal;display:inline-block}
#runs-table td{overflow-wrap:anywhere}
tr.differs td:first-child{border-left:4px solid var(--warn)}
.o-not_run{background:var(--head);color:var(--mute)}
.warn{background:var(--warn-bg);border:1px solid var(--warn);border-radius:6px;padding:8px 12px;color:#4d3800}
"""
_ABSENT = '<span class="note">absent</span>'


def to_compare_html(named: Sequence[tuple[str, Run]]) -> str:
    """The runs of *named* (a label, usually the report's file name, and the run read back from it) on one page."""
    labels = _labels(named)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_e('resumekit: ' + ', '.join(labels) + ' side by side')}</title>",
        f"<style>{STYLE}{_EXTRA_STYLE}</style></head><body><main>",
        f"<h1>resumekit: {len(named)} runs side by side</h1>",
        _warnings(named),
        '<nav class="contents"><a href="#runs">the runs</a><a href="#gates">gates</a>'
        '<a href="#clauses">clauses</a><a href="#differing">cases that differ</a><a href="#cases">every case</a></nav>',
        '<h2 id="runs">The runs</h2>',
        _runs_table(named),
        '<h2 id="gates">Gates and other summary rows</h2>',
        _gates_table(named, labels),
        '<h2 id="clauses">Clauses</h2>',
        '<p class="note">Each cell: the claimed cases citing the clause that passed, of how many; a clause that '
        "no claimed case of a run cites shows a dash.</p>",
        _clauses_table(named, labels),
    ]
    differing, every = _case_rows(named)
    same = '<p class="note">Every case has one outcome in every run.</p>'
    parts += [
        f'<h2 id="differing">Cases whose outcome differs ({len(differing)})</h2>',
        _cases_table(labels, differing) if differing else same,
        f'<h2 id="cases">Every case ({len(every)})</h2>',
        f"<details><summary>show all {len(every)} cases</summary>{_cases_table(labels, every)}</details>",
        "<footer>Written by resumekit from saved JSON reports (--report-json); each run's own report holds every "
        "result in full.</footer></main></body></html>",
    ]
    return printable("\n".join(part for part in parts if part)) + "\n"


def _labels(named: Sequence[tuple[str, Run]]) -> list[str]:
    """A column head per run: the implementation, with its report's file name where two runs share a name."""
    bases = [f"{run.implementation.name} {run.implementation.version}".strip() for _, run in named]
    labels = [
        f"{base} ({PurePath(label).name})" if bases.count(base) > 1 else base
        for base, (label, _) in zip(bases, named, strict=True)
    ]
    return [f"{label} #{index}" if labels.count(label) > 1 else label for index, label in enumerate(labels, 1)]


def _warnings(named: Sequence[tuple[str, Run]]) -> str:
    problems = []
    for what, values in (
        ("golden sets", {run.golden_digest or "unknown" for _, run in named}),
        ("kit versions", {run.kit_version or "unknown" for _, run in named}),
        ("profiles", {run.profile for _, run in named}),
    ):
        if len(values) > 1:
            problems.append(f"the runs used different {what}: {', '.join(sorted(values))}")
    if not problems:
        return ""
    items = "".join(f"<li>{_e(problem)}</li>" for problem in problems)
    return f'<div class="warn"><strong>Compare with care</strong><ul>{items}</ul></div>'


def _impl_heads(labels: Sequence[str]) -> str:
    return "".join(f'<th class="impl">{_e(label)}</th>' for label in labels)


def _runs_table(named: Sequence[tuple[str, Run]]) -> str:
    rows = []
    for label, run in named:
        info = run.implementation
        rows.append(
            f'<tr><td class="first"><strong>{_e(info.name)} {_e(info.version)}</strong>'
            f'<div class="note mono">{_e(label)}</div>'
            f'<div class="note">{_e(info.language or "language unknown")}</div></td>'
            f'<td class="wide" data-label="verdict"><span class="o verdict {_verdict_css(run)}">'
            f'{_e(report.headline(run))}</span><div class="note">{_e(report.counts_text(run))}</div></td>'
            f'<td class="wide" data-label="not claimed">{_e(report.not_claimed_text(run) or "nothing")}</td>'
            f'<td class="wide" data-label="fault models">{_e("; ".join(run.fault_models) or "none")}</td></tr>'
        )
    return (
        '<div class="scroll"><table class="stack" id="runs-table"><thead><tr><th>implementation</th><th>verdict</th>'
        f"<th>not claimed</th><th>fault models</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _verdict_css(run: Run) -> str:
    # A subset that passed is no certification, but no failure either: it gets the neutral colour.
    if run.verdict.certified:
        return "o-passed"
    return "o-not_claimed" if run.verdict.passed and not report.shard_failed(run) else "o-failed"


def _gates_table(named: Sequence[tuple[str, Run]], labels: Sequence[str]) -> str:
    """One row per summary row (P1's gates) of any run, its verdict and passed count in each."""
    order: list[tuple[str, str]] = []
    cells: dict[tuple[str, str], dict[int, str]] = {}
    for index, (_, run) in enumerate(named):
        for table in run.summaries:
            for row in table.rows:
                key = (table.summary.title, str(row.get("name", "")))
                if key not in cells:
                    order.append(key)
                    cells[key] = {}
                verdict = str(row.get("verdict", ""))
                css = {"passed": "o-passed", "failed": "o-failed"}.get(verdict, "o-not_claimed")
                failed = row.get("failed")
                # A gate fails by its clauses too, in cases tagged with another gate: those are counted apart.
                failing = f", {len(failed)} failing" if isinstance(failed, list) and failed else ""
                passed, of = _summary_rows.counts(row)
                own = f"no {_e(table.summary.case_label)} of its own"
                passed = f"{_e(passed)} of {_e(of)}" if of != _summary_rows.NO_CASES else own
                counted = f'<div class="note">{passed}{_e(failing)}</div>'
                cells[key][index] = f'<span class="o {css}">{_e(verdict)}</span>{counted}'
    if not order:
        return '<p class="note">No run selected a contract with a summary table.</p>'
    rows = []
    for key in order:
        found = cells[key]
        texts = {found.get(i, "") for i in range(len(named))}
        css = ' class="differs"' if len(texts) > 1 else ""
        body = "".join(f'<td class="o-cell">{found.get(i, _ABSENT)}</td>' for i in range(len(named)))
        rows.append(f'<tr{css}><td class="gate">{_e(key[1])}<div class="note">{_e(key[0])}</div></td>{body}</tr>')
    return (
        f'<div class="scroll"><table class="compare" id="gates-table"><thead><tr><th>row</th>{_impl_heads(labels)}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _clauses_table(named: Sequence[tuple[str, Run]], labels: Sequence[str]) -> str:
    cited: dict[str, dict[int, list[CaseResult]]] = {}
    for index, (_, run) in enumerate(named):
        for result in run.results:
            if result.outcome is Outcome.NOT_CLAIMED:
                continue
            for clause in result.clauses:
                cited.setdefault(clause, {}).setdefault(index, []).append(result)
    if not cited:
        return '<p class="note">No claimed case cites a clause.</p>'
    rows = []
    for clause in sorted(cited, key=_clause_order):
        counts = []
        for index in range(len(named)):
            results = cited[clause].get(index, [])
            passed = sum(1 for r in results if r.ok and r.known_failure is None)
            counts.append((passed, len(results)))
        css = ' class="differs"' if len(set(counts)) > 1 else ""
        body = "".join(
            f'<td class="n{" bad" if passed < total else ""}">{f"{passed} of {total}" if total else "–"}</td>'
            for passed, total in counts
        )
        rows.append(f'<tr{css}><td class="clause"><code>{_e(clause)}</code></td>{body}</tr>')
    return (
        f'<div class="scroll"><table class="compare" id="clauses-table"><thead><tr><th>clause</th>'
        f"{_impl_heads(labels)}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _clause_order(clause: str) -> tuple[str, int, str]:
    prefix, _, number = clause.rpartition("-")
    return (prefix, int(number), clause) if number.isdigit() else (clause, 0, clause)


def _case_rows(named: Sequence[tuple[str, Run]]) -> tuple[list[str], list[str]]:
    """The rows of the cases whose outcomes differ between the runs, and of every case, in first-seen order."""
    order: list[str] = []
    outcomes: dict[str, dict[int, CaseResult]] = {}
    for index, (_, run) in enumerate(named):
        for result in run.results:
            if result.case_id not in outcomes:
                order.append(result.case_id)
                outcomes[result.case_id] = {}
            outcomes[result.case_id][index] = result
    differing, every = [], []
    for case_id in order:
        found = outcomes[case_id]
        words = [_outcome_word(found.get(i)) for i in range(len(named))]
        kind = next(iter(found.values())).kind
        body = "".join(f'<td class="o-cell">{_outcome_cell(found.get(i))}</td>' for i in range(len(named)))
        differs = len(set(words)) > 1
        css = ' class="differs"' if differs else ""
        row = f'<tr{css}><td class="id"><code>{_e(case_id)}</code><div class="note">{_e(kind)}</div></td>{body}</tr>'

        every.append(row)
        if differs:
            differing.append(row)
    return differing, every


def _outcome_word(result: CaseResult | None) -> str:
    if result is None:
        return "absent"
    return "expected failure" if result.expected_failure else result.outcome.value


def _outcome_cell(result: CaseResult | None) -> str:
    if result is None:
        return _ABSENT
    word = _outcome_word(result)
    css = "o-expected" if result.expected_failure else f"o-{result.outcome.value}"
    title = (result.message or "").splitlines()[0][:200] if result.message else ""
    return f'<span class="o {_e(css)}" title="{_e(title)}">{_e(word)}</span>'


def _cases_table(labels: Sequence[str], rows: Sequence[str]) -> str:
    return (
        f'<div class="scroll"><table class="compare"><thead><tr><th>case</th>{_impl_heads(labels)}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
