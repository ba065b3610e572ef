"""A run as one self-contained HTML page: the verdict and its scope, a table per kind, clause coverage,
each contract's summary table (P1's gates), and each failing case with its events and the expected and
actual values side by side.

The page loads nothing: the style is inline, there is no script, and a Content-Security-Policy forbids
every fetch, so it can be kept as a CI artifact and opened offline. Every value from the run or the
fixtures is escaped, its control characters too (``_text.printable``). Pure: a function of the Run (and,
when given, the cases it ran) to a string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from resumekit.conformance import PROTOCOL_VERSION, SPEC_VERSION, _summary_rows, report
from resumekit.conformance._html_parts import STYLE, events_table, side_by_side
from resumekit.conformance._html_parts import escape as _e
from resumekit.conformance._html_timeline import STYLE as TIMELINE_STYLE
from resumekit.conformance._html_timeline import timeline
from resumekit.conformance._text import printable
from resumekit.conformance.cases import Case
from resumekit.conformance.report import NO_MESSAGE_CHECKS, counts_by_kind, location
from resumekit.conformance.results import BAD, CaseResult, Outcome, Run, SummaryTable


def _anchor(case_id: str) -> str:
    """An element id for a case: its id with anything outside [A-Za-z0-9_-] replaced."""
    return "case-" + re.sub(r"[^A-Za-z0-9_-]", "_", case_id)


def _outcome_badge(result: CaseResult) -> str:
    if result.expected_failure:
        return f'<span class="o o-expected">expected failure ({_e(result.outcome.value)})</span>'
    if result.unexpected_pass:
        return '<span class="o o-unexpected">unexpected pass</span>'
    value = result.outcome.value
    graded = f" ({result.grade})" if result.grade else ""
    return f'<span class="o o-{_e(value)}">{_e(value.replace("_", " ") + graded)}</span>'


def _shown(result: CaseResult) -> bool:
    """Whether a result gets a section of its own: it fails the run or is a listed known failure."""
    return result.outcome in BAD or result.known_failure is not None


def _clause_key(clause: str) -> tuple[str, int, str]:
    match = re.match(r"^(.*?)-(\d+)$", clause)
    return (match.group(1), int(match.group(2)), "") if match else (clause, 0, clause)


# --------------------------------------------------------------------------------------- sections


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
    parts.append(events_table(case))
    parts.append(side_by_side(result, case, run.profile))
    parts.append(timeline(result, _anchor(result.case_id)))
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
        ("certified", verdict.scope_text or "nothing"),
        ("not claimed", report.not_claimed_text(run) or "nothing: every selected case was claimed"),
        ("kit", f"resumekit {run.kit_version}, spec {SPEC_VERSION}, protocol {PROTOCOL_VERSION}"),
        ("golden set", run.golden_digest or "unknown"),
    ]
    if run.selection is not None:
        rows.append(("selection", run.selection.describe(run.profile)))
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
            f"<tbody>{''.join(rows)}</tbody></table></div></details>"
        )
    return "".join(parts)


def _chip(result: CaseResult) -> str:
    """One square of the clause matrix; a passed one carries no class, as most do (the page stays small)."""
    if result.outcome is Outcome.PASSED and result.known_failure is None:
        return f'<i title="{_e(result.case_id)}"></i>'
    css = "expected" if result.expected_failure else "bad"
    return f'<i class="{css}" title="{_e(f"{result.case_id}: {result.outcome.value}")}"></i>'


def _coverage_key(clause: str, results: Sequence[CaseResult]) -> tuple[bool, bool, tuple[str, int, str]]:
    """Where a clause goes in the coverage table: failing first, then claimed, then cited by no claimed case."""
    unclaimed = all(r.outcome is Outcome.NOT_CLAIMED for r in results)
    return all(r.acceptable for r in results), unclaimed, _clause_key(clause)


def _clause_matrix(run: Run, shown: set[str]) -> str:
    """Clause by case: one square per claimed case citing the clause; clauses with a failure first, then those
    some claimed case cites, and last those only cases not claimed cite (what the run did not test)."""
    cited: dict[str, list[CaseResult]] = {}
    for result in run.results:
        for clause in result.clauses:
            cited.setdefault(clause, []).append(result)
    any_expected = any(r.expected_failure for r in run.results)
    rows = []
    for clause in sorted(cited, key=lambda c: _coverage_key(c, cited[c])):
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
        "unexpected pass" + ('<i class="chip expected"></i>expected failure' if any_expected else "") + "</p>"
    )
    expected_head = '<th class="n">expected failures</th>' if any_expected else ""
    return (
        f"{legend}"
        '<div class="scroll"><table id="clauses"><thead><tr><th>clause</th><th class="n">passed</th>'
        f'<th class="n">failed</th>{expected_head}<th class="n">not claimed</th><th>cases</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _summary_rows_table(table: SummaryTable) -> str:
    """A contract's summary table (P1: the gates), a row per line, stacked on narrow screens."""
    rows = []
    for row in table.rows:
        verdict = str(row.get("verdict", ""))
        css = {"passed": "o-passed", "failed": "o-failed"}.get(verdict, "o-not_claimed")
        failed = _summary_rows.failed_by(row, table.summary.case_label)
        failed_html = ""
        if failed:
            links = "; ".join(
                f'<a href="#{_anchor(case)}"><code>{_e(case)}</code></a>' + (f" ({_e(why)})" if why else "")
                for case, why in failed
            )
            failed_html = f'<div class="note">failed by: {links}</div>'
        clauses = row.get("clauses") or []
        passed, of = _summary_rows.counts(row)
        rows.append(
            f'<tr><td class="first gate">{_e(row.get("name", ""))}{failed_html}</td>'
            f'<td><span class="o {css}">{_e(verdict)}</span></td>'
            f'<td class="n" data-label="passed">{_e(passed)}</td>'
            f'<td class="n" data-label="of">{_e(of)}</td>'
            f'<td class="wide" data-label="clauses">{_e(", ".join(map(str, clauses)))}</td>'
            f'<td class="wide" data-label="attested">{_e(row.get("attested") or "none")}</td></tr>'
        )
    return (
        f'<div class="scroll"><table id="{_e(table.summary.key)}" class="stack"><thead><tr>'
        f"<th>{_e(table.summary.row_label)}</th><th>verdict</th>"
        '<th class="n">passed</th><th class="n">of</th><th>clauses</th><th>attested</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _summary_anchor(table: SummaryTable) -> str:
    return f"{table.contract}-{table.summary.key}"


def _contents(run: Run, failing: Sequence[CaseResult]) -> str:
    bad = sum(1 for r in failing if not r.acceptable)
    links = [("by-kind", "cases by kind"), ("failures", f"failing cases ({bad})")]
    links += [(_summary_anchor(table), table.summary.title) for table in run.summaries]
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
        f"<style>{STYLE}{TIMELINE_STYLE if any(r.history for r in failing) else ''}</style></head><body><main>",
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
    for table in run.summaries:
        parts += [f'<h2 id="{_e(_summary_anchor(table))}">{_e(table.summary.title)}</h2>', _summary_rows_table(table)]
    parts += ['<h2 id="clause-coverage">Clause coverage</h2>', _clause_matrix(run, shown)]
    parts += ['<h2 id="all-cases">Every case, by kind</h2>', _kind_tables(run, shown)]
    parts.append(
        f"<footer>Written by resumekit {_e(run.kit_version)}. The JSON report (--report-json) holds every "
        "result in full.</footer></main></body></html>"
    )
    # Markup escapes no control character, and HTML refuses most of them: written as escapes instead.
    return printable("\n".join(part for part in parts if part)) + "\n"
