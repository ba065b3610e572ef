"""Reports of a Run: a JSON document, JUnit XML, and text for people. Formatters return strings.

Text from the implementation is ``_text.safe`` since it entered the kit; the formatters of text (JUnit, Markdown
and the terminal's) make it ``_text.printable`` as well, so that a control character it sends can neither
break the XML nor move a terminal's cursor.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import PROTOCOL_VERSION, SPEC_VERSION, _summary_rows, story
from resumekit.conformance._text import printable
from resumekit.conformance.cases import Case
from resumekit.conformance.results import (
    GRADE_MEANINGS,
    CaseResult,
    Implementation,
    Mismatch,
    Outcome,
    Run,
    Selection,
    Shard,
    Source,
    SummaryTable,
)

_MARKDOWN_FAILED = 5  # cases a summary row's "failed by" cell names in Markdown; the JSON report has every one
NO_MESSAGE_CHECKS = "off (--no-validate-messages): a message that breaks its schema was not caught as such"


def counts_by_kind(run: Run) -> dict[str, dict[Outcome, int]]:
    """How many results of each kind ended in each outcome, kinds in the order they ran."""
    kinds: dict[str, dict[Outcome, int]] = {}
    for result in run.results:
        kinds.setdefault(result.kind, dict.fromkeys(Outcome, 0))[result.outcome] += 1
    return kinds


def to_json(run: Run) -> dict[str, Any]:
    """The run as a document valid against schemas/report/run-report.json."""
    verdict = run.verdict
    return {
        "resumekit": {
            "version": run.kit_version,
            "specVersion": SPEC_VERSION,
            "protocolVersion": PROTOCOL_VERSION,
            "goldenDigest": run.golden_digest,
        },
        "implementation": run.implementation.to_dict(),
        "profile": run.profile,
        "platform": dict(run.platform),
        "started": run.started,
        "finished": run.finished,
        "durationSeconds": round(run.duration, 6),
        "seed": run.seed,
        "messagesValidated": run.messages_validated,
        "faultModels": list(run.fault_models),
        "certified": verdict.certified,
        "scope": verdict.scope,
        "interrupted": run.interrupted,
        "verdict": verdict.to_dict(),
        "selection": run.selection.to_dict() if run.selection is not None else None,
        "summary": run.counts,
        "grades": run.grades,
        "results": [result.to_dict() for result in run.results],
        "jobs": run.jobs,
        **({"summaries": [table.to_dict() for table in run.summaries]} if run.summaries else {}),
        **({"shard": run.shard.to_dict()} if run.shard is not None else {}),
    }


def result_from_dict(data: Mapping[str, Any]) -> CaseResult:
    """A case result back from its JSON form (``CaseResult.to_dict``)."""
    source = Source(data["file"], data.get("line")) if "file" in data else None
    mismatches = tuple(Mismatch.from_dict(m) for m in data["mismatches"])
    return CaseResult(
        case_id=data["id"],
        kind=data["kind"],
        outcome=Outcome(data["outcome"]),
        clauses=tuple(data["clauses"]),
        profile=data["profile"],
        source=source,
        duration=data["durationSeconds"],
        mismatches=mismatches,
        message=data.get("message"),
        fault_model=data.get("faultModel"),
        stderr_tail=data.get("stderrTail"),
        transcript=tuple(data.get("transcript", ())),
        replay=data.get("replay"),
        expectation=data.get("expectation"),
        counts_toward=tuple(data.get("countsToward", ())),
        readings=tuple(data.get("readings", ())),
        attested=tuple(data.get("attested", ())),
        history=tuple(data.get("history", ())),
        known_failure=(data.get("knownFailure") or {}).get("reason"),
        grade=data.get("grade"),
    )


def implementation_from_dict(info: Mapping[str, Any]) -> Implementation:
    """The implementation back from its JSON form (``Implementation.to_dict``)."""
    return Implementation(
        name=info["name"],
        version=info["version"],
        language=info["language"],
        homepage=info.get("homepage", ""),
        capabilities=tuple(info["capabilities"]),
        profiles=tuple(info["profiles"]),
        adapter=info["adapter"],
    )


def from_json(document: Mapping[str, Any]) -> Run:
    """A Run back from a document valid against schemas/report/run-report.json (a merged one, say)."""
    results = [result_from_dict(data) for data in document["results"]]
    shard = document.get("shard")
    return Run(
        implementation=implementation_from_dict(document["implementation"]),
        profile=document["profile"],
        results=tuple(results),
        started=document["started"],
        finished=document["finished"],
        duration=document["durationSeconds"],
        platform=dict(document["platform"]),
        kit_version=document["resumekit"]["version"],
        seed=document["seed"],
        golden_digest=document["resumekit"].get("goldenDigest", ""),
        summaries=tuple(SummaryTable.from_dict(table) for table in document.get("summaries", ())),
        jobs=document.get("jobs", 1),
        shard=Shard(shard["index"], shard["count"], tuple(shard["selection"]), shard["seed"]) if shard else None,
        selection=Selection.from_dict(document["selection"]) if document.get("selection") else None,
        interrupted=bool(document.get("interrupted", False)),
        selected=len(results),
        messages_validated=bool(document.get("messagesValidated", True)),
    )


def to_junit(run: Run) -> str:
    """The run as JUnit XML: one testcase per case, grouped by kind."""
    suites = ET.Element("testsuites", name="resumekit")
    properties = run_properties(run)
    by_kind: dict[str, list[CaseResult]] = {}
    for result in run.results:
        by_kind.setdefault(result.kind, []).append(result)
    for kind, results in by_kind.items():
        counts = {o: sum(1 for r in results if r.outcome is o) for o in Outcome}
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"resumekit.{kind}",
            tests=str(len(results)),
            failures=str(counts[Outcome.FAILED]),
            errors=str(counts[Outcome.ERRORED]),
            skipped=str(counts[Outcome.SKIPPED] + counts[Outcome.NOT_CLAIMED] + counts[Outcome.NOT_RUN]),
            time=f"{sum(r.duration for r in results):.6f}",
        )
        _junit_properties(suite, properties)
        for result in results:
            # The names the pytest plugin gives (``golden/<path inside the golden set>``), wherever the kit is
            # installed, so test history and annotations agree between the two.
            where = f"golden/{result.source.file}" if result.source else ""
            case = ET.SubElement(
                suite,
                "testcase",
                classname=where.replace("/", ".") if where else f"resumekit.{kind}",
                name=result.case_id,
                time=f"{result.duration:.6f}",
                file=where,
            )
            if result.source and result.source.line:
                case.set("line", str(result.source.line))
            text = format_result(result, run.golden_root)
            if result.expected_failure:
                reason = f"expected failure ({result.outcome.value}): {result.known_failure}"
                ET.SubElement(case, "skipped", message=reason).text = text
            elif result.unexpected_pass:
                message = f"unexpected pass: listed as a known failure ({result.known_failure}), and it passed"
                ET.SubElement(case, "failure", message=message).text = message
            elif result.outcome is Outcome.FAILED:
                graded = f"{result.grade}: " if result.grade else ""
                ET.SubElement(case, "failure", message=graded + _first_line(result)).text = text
            elif result.outcome is Outcome.ERRORED:
                ET.SubElement(case, "error", message=_first_line(result)).text = text
            elif result.outcome in (Outcome.SKIPPED, Outcome.NOT_CLAIMED, Outcome.NOT_RUN):
                ET.SubElement(case, "skipped", message=f"{result.outcome.value}: {result.message or ''}")
    for table in run.summaries:
        _junit_summary(suites, table)
    ET.indent(suites)
    return printable(ET.tostring(suites, encoding="unicode", xml_declaration=True)) + "\n"


def run_properties(run: Run) -> dict[str, str]:
    """What a run covered and its verdict, as name-value pairs (JUnit properties)."""
    verdict = run.verdict
    properties = {
        "resumekit.verdict": verdict.status,
        "resumekit.headline": verdict.headline,
        "resumekit.certified": str(verdict.certified).lower(),
        "resumekit.scope": verdict.scope,
        "resumekit.certifiedProfile": verdict.profile_text,
        "resumekit.reasons": "; ".join(verdict.reasons),
        "resumekit.kitVersion": run.kit_version,
        "resumekit.goldenDigest": run.golden_digest,
        "resumekit.seed": "" if run.seed is None else str(run.seed),
    }
    if grades_text(run):
        properties["resumekit.grades"] = grades_text(run)
    if run.selection is not None:
        properties["resumekit.selection"] = run.selection.describe(run.profile)
        for key, value in run.selection.to_dict().items():
            text = " ".join(value) if isinstance(value, list) else "" if value is None else str(value)
            properties[f"resumekit.selection.{key}"] = text
    return properties


def _junit_properties(suite: ET.Element, properties: dict[str, str]) -> None:
    holder = ET.SubElement(suite, "properties")
    for name, value in properties.items():
        ET.SubElement(holder, "property", name=name, value=value)


def _junit_summary(suites: ET.Element, table: SummaryTable) -> None:
    """A contract's summary table as a suite of its own: a row fails when a case counted against it."""
    name = f"resumekit.{table.contract}-{table.summary.key}"
    verdicts = [row["verdict"] for row in table.rows]
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(table.rows)),
        failures=str(verdicts.count("failed")),
        errors="0",
        skipped=str(sum(1 for verdict in verdicts if verdict in ("not run", "not claimed"))),
    )
    for row in table.rows:
        case = ET.SubElement(suite, "testcase", classname=name, name=str(row["name"]))
        properties = ET.SubElement(case, "properties")
        for key, label in (("cases", table.summary.case_label), ("passed", "passed"), ("clauses", "clauses")):
            value = row[key]
            text = ", ".join(value) if isinstance(value, list) else str(value)
            ET.SubElement(properties, "property", name=label, value=text)
        ET.SubElement(properties, "property", name="attested", value=str(row["attested"]))
        if row["verdict"] == "failed":
            failed = _summary_rows.failed_by_text(row, table.summary.case_label, shown=None)
            ET.SubElement(case, "failure", message=f"failed {table.summary.case_label}: {failed}").text = failed
        elif row["verdict"] in ("not run", "not claimed"):
            ET.SubElement(case, "skipped", message=_skip_reason(row, table.summary.case_label))


def _skip_reason(row: Mapping[str, Any], label: str) -> str:
    """Why a summary row neither passed nor failed: none of its cases claimed, or some not run (or none selected)."""
    if row["verdict"] == "not claimed":
        return f"not claimed: none of its {label} is claimed"
    if not row["cases"]:
        return f"not run: none of its {label} was selected"
    return f"not run: {row['notRun']} of its {row['cases']} {label} did not run"


def _first_line(result: CaseResult) -> str:
    if result.message:
        return printable(result.message).splitlines()[0]
    if result.mismatches:
        return f"{len(result.mismatches)} normative field(s) differ"
    return result.outcome.value


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 300 else text[:300] + "..."


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_mismatch(mismatch: Mismatch, line_of: Callable[[str], int | None] | None = None) -> str:
    """One differing field: where, which clause, expected and actual."""
    clause = f" [{mismatch.clause}]" if mismatch.clause else ""
    head = f"{mismatch.pointer or '(whole plan)'}{clause}"
    if mismatch.note:
        head += f": {mismatch.note}"
    seen = [f"check {mismatch.check}"] if mismatch.check else []
    if mismatch.event is not None:
        seen.append(f"seen at event {mismatch.event} of the story")
    seen_line = f"\n    {', '.join(seen)}" if seen else ""
    return f"{head}{seen_line}\n    expected: {_value(mismatch.expected)}\n    actual:   {_value(mismatch.actual)}"


def location(result: CaseResult, golden_root: str = "") -> str:
    """Where a case is written: an absolute path and line a person can open, when the golden root is known."""
    if result.source is None:
        return ""
    if not golden_root:
        return str(result.source)
    path = Path(golden_root, result.source.file).resolve()
    return f"{path}:{result.source.line}" if result.source.line else str(path)


def format_result(result: CaseResult, golden_root: str = "") -> str:
    """Everything a person needs to see about one non-passing case."""
    where = f" ({result.source})" if result.source else ""
    head = result.outcome.value.upper()
    if result.expected_failure:
        head = f"EXPECTED FAILURE ({result.outcome.value})"
    elif result.unexpected_pass:
        head = "UNEXPECTED PASS"
    lines = [f"{head} {result.case_id}{where}"]
    if result.source is not None and golden_root:
        lines.append(f"  file: {location(result, golden_root)}")
    lines.append(f"  see it: resumekit show {result.case_id}")
    if result.known_failure is not None:
        lines.append(f"  listed as a known failure: {result.known_failure}")
    if result.unexpected_pass:
        lines.append("  it passes now: take it off the expectations file (--expect)")
    if result.clauses:
        lines.append(f"  clauses: {', '.join(result.clauses)}")
    if result.grade:
        lines.append(f"  grade: {result.grade}: {GRADE_MEANINGS.get(result.grade, '')}")
    if result.expectation and result.mismatches:
        lines.append(f"  compared with: the case's {result.expectation} expectation")
    if result.fault_model:
        lines.append(f"  fault model: {result.fault_model}")
    if result.message:  # split where it breaks lines once its controls (a VT, a CR) are escapes
        lines.extend("  " + line for line in printable(result.message).splitlines())
    for mismatch in result.mismatches:
        lines.extend("  " + line for line in format_mismatch(mismatch).splitlines())
    lines.extend("  " + line for line in story.story_lines(result, width=story.WIDTH - 2))
    if result.replay:
        lines.append(f"  replay with: {result.replay}")
    if result.transcript:
        lines.append("  last messages (the JSON report has more):")
        lines.extend("    " + _clip(line, 160) for line in result.transcript[-4:])
    if result.stderr_tail:
        lines.append("  stderr (last lines):")
        lines.extend("    " + line for line in result.stderr_tail.splitlines())
    return printable("\n".join(lines))


def profile_run(run: Run) -> str:
    """The profile the run asked for, and whether the implementation claims it."""
    not_claimed = run.verdict.not_claimed_profile
    return run.profile + (f" ({not_claimed} asked for, not claimed)" if not_claimed else "")


def headline(run: Run) -> str:
    """The verdict's first words; one shard certifies nothing alone, so a shard says only how it went."""
    if run.shard is None:
        return run.verdict.headline
    how = "FAILED" if shard_failed(run) else "PASSED"
    return f"SHARD {run.shard.index}/{run.shard.count} {how} (a subset run: merge every shard for the verdict)"


def shard_failed(run: Run) -> bool:
    """Whether a shard fails: a case it ran did not pass (a shard's own exit status says the same)."""
    return any(not r.ok and r.outcome is not Outcome.NOT_CLAIMED for r in run.results)


def grades_text(run: Run) -> str:
    """How the failed cases' plans depart, in words (``2 unsafe, 7 over-cautious, 3 detail``); ``""`` when none
    was graded, so that a run whose failures compared no plan reads as it always did."""
    grades = run.grades
    if not any(grades[name] for name in ("unsafe", "over-cautious", "detail")):
        return ""
    return ", ".join(f"{count} {name}" for name, count in grades.items() if count or name != "ungraded")


UNSAFE_NAMED = 10  # unsafe cases the summaries name; the reports list every one


def unsafe_ids(run: Run, quote: str = "") -> str:
    """The ids of the failed cases graded unsafe, the first ``UNSAFE_NAMED`` of them, ``""`` when none."""
    unsafe = [r.case_id for r in run.results if r.outcome is Outcome.FAILED and r.grade == "unsafe"]
    named = ", ".join(f"{quote}{case_id}{quote}" for case_id in unsafe[:UNSAFE_NAMED])
    return named + (f" and {len(unsafe) - UNSAFE_NAMED} more" if len(unsafe) > UNSAFE_NAMED else "")


def counts_text(run: Run) -> str:
    """The run's counts and duration, as the verdict line states them, the failed cases' grades with them."""
    total = run.counts
    graded = grades_text(run)
    return (
        f"{total['passed']} passed, {total['failed']} failed{f' ({graded})' if graded else ''}, "
        f"{total['errored']} errored, "
        f"{total['skipped']} skipped, {total['not_claimed']} not claimed"
        + (f", {total['not_run']} not run" if total.get("not_run") else "")
        + f" in {run.duration:.2f} s"
    )


def format_summary(run: Run) -> str:
    """The table at the end of a run."""
    info = run.implementation
    verdict = run.verdict
    profile = profile_run(run)
    lines = [
        "",
        f"implementation: {info.name} {info.version} ({info.language or 'unknown language'}) via {info.adapter}",
        f"claims:         {', '.join(info.capabilities) or 'nothing'}; profiles {', '.join(info.profiles)}",
        f"profile run:    {profile}",
        f"kit:            resumekit {run.kit_version}, golden set {run.golden_digest[:16] or 'unknown'}",
    ]
    if run.selection is not None:
        lines.append(f"selection:      {run.selection.describe(run.profile)}")
        if run.selection.expectations_digest:
            lines.append(f"expectations:   sha256 {run.selection.expectations_digest[:16]}")
    if run.fault_models:
        lines.append(f"fault models:   {'; '.join(run.fault_models)}")
    if run.seed is not None:
        lines.append(f"seed:           {run.seed}")
    if not run.messages_validated:
        lines.append(f"message checks: {NO_MESSAGE_CHECKS}")
    header = f"{'kind':<14}" + "".join(f"{o.value:>13}" for o in Outcome)
    lines += ["", header, "-" * len(header)]
    for kind, row in counts_by_kind(run).items():
        lines.append(f"{kind:<14}" + "".join(f"{row[o]:>13}" for o in Outcome))
    total = run.counts
    lines.append(f"{'total':<14}" + "".join(f"{total[o.value]:>13}" for o in Outcome))
    unclaimed = not_claimed_text(run)
    if unclaimed:
        lines.append(f"not claimed:    {unclaimed}")
    for table in run.summaries:
        lines += ["", *format_summary_table(table)]
    # A passed campaign's message is its coverage (the crash points it visited), worth a line each.
    campaigns = [r for r in run.results if _is_campaign(r.kind) and r.ok and r.message]
    if campaigns:
        lines += ["", "campaigns:", *(f"  {r.case_id}: {r.message}" for r in campaigns)]
    if verdict.known_failures:
        lines.append(f"expected failures (listed in the expectations file): {', '.join(verdict.known_failures)}")
    if verdict.unexpected_passes:
        lines.append(f"unexpected passes (listed as failing, passed): {', '.join(verdict.unexpected_passes)}")
    lines += ["", f"{headline(run)}: {counts_text(run)}"]
    lines += [f"  {reason}" for reason in verdict.reasons]
    if unsafe_ids(run):
        lines.append(f"  unsafe (replays what must be blocked, or skips a verification): {unsafe_ids(run)}")
    not_run = [r for r in run.results if r.outcome is Outcome.NOT_RUN]
    if not_run and not any("not run" in reason for reason in verdict.reasons):
        lines.append(f"  {len(not_run)} case(s) not run on this machine: {not_run[0].message}")
    return printable("\n".join(lines))


def not_claimed_text(run: Run) -> str:
    """What the run did not test for want of a claim, in words; ``""`` when every case was claimed."""
    counts: dict[str, int] = {}
    for result in run.results:
        if result.outcome is Outcome.NOT_CLAIMED:
            counts[result.kind] = counts.get(result.kind, 0) + 1
    if not counts:
        return ""
    kinds = ", ".join(f"{kind} {count}" for kind, count in counts.items())
    claims = run.implementation.capabilities
    return f"{sum(counts.values())} case(s) ({kinds}); the implementation claims {', '.join(claims) or 'nothing'}"


def _is_campaign(kind_name: str) -> bool:
    from resumekit.conformance import contracts

    kind = contracts.kind(kind_name)
    return kind is not None and kind.campaign


def format_summary_table(table: SummaryTable) -> list[str]:
    """A contract's summary table (P1: the gates) as text lines."""
    label = table.summary.row_label
    lines = [f"{label:<44}{'verdict':>12}{'passed':>8}{'of':>4}  clauses", "-" * 103]
    for row in table.rows:
        clauses = ", ".join(row["clauses"])
        attested = f" (attested: {row['attested']})" if row["attested"] else ""
        passed, of = _summary_rows.counts(row)
        lines.append(f"{row['name']:<44}{row['verdict']:>12}{passed:>8}{of:>4}  {_clip(clauses, 60)}{attested}")
        if row.get("failed"):
            lines.append(f"    failed by: {printable(_summary_rows.failed_by_text(row, table.summary.case_label))}")
    return lines


def to_markdown(run: Run) -> str:
    """The run as Markdown, for a CI job summary such as GitHub's."""
    info = run.implementation
    verdict = run.verdict
    lines = [
        f"## resumekit: {info.name} {info.version} is {_markdown_verdict(run)}",
        "",
        f"Profile `{run.profile}`; claims {', '.join(f'`{c}`' for c in info.capabilities) or 'nothing'}; "
        f"adapter `{info.adapter}`; {run.platform.get('system', '')} {run.platform.get('machine', '')}.",
        f"Kit `resumekit {run.kit_version}`; golden set `{run.golden_digest[:16] or 'unknown'}`.",
    ]
    if run.selection is not None:
        lines.append(f"Selection: {run.selection.describe(run.profile)}.")
    if verdict.reasons:
        lines.append("Why: " + "; ".join(verdict.reasons) + ".")
    lines += _markdown_grades(run)
    unclaimed = not_claimed_text(run)
    if unclaimed:
        lines.append(f"Not claimed: {unclaimed}.")
    if run.fault_models:
        lines.append(f"Fault models: {'; '.join(run.fault_models)}.")
    if run.seed is not None:
        lines.append(f"Seed: `{run.seed}`.")
    if not run.messages_validated:
        lines.append(f"Message checks: {NO_MESSAGE_CHECKS}.")
    lines += ["", "| kind | " + " | ".join(o.value for o in Outcome) + " |", "|---" * (len(Outcome) + 1) + "|"]
    for kind, row in counts_by_kind(run).items():
        lines.append(f"| {kind} | " + " | ".join(str(row[o]) for o in Outcome) + " |")
    lines += _markdown_summaries(run)
    known = [r for r in run.results if r.known_failure is not None]
    if known:
        lines += ["", "| known failure | verdict | reason |", "|---|---|---|"]
        for result in known:
            state = "expected failure" if result.expected_failure else "**unexpected pass**"
            reason = (result.known_failure or "").replace("|", "\\|")
            lines.append(f"| `{result.case_id}` | {state} | {reason} |")
    bad = [r for r in run.results if r.outcome in (Outcome.FAILED, Outcome.ERRORED) and r.known_failure is None]
    if bad:
        lines += ["", "| case | outcome | where | clauses | first problem |", "|---|---|---|---|---|"]
        for result in bad:
            problem = _first_line(result)
            if result.mismatches:
                first = result.mismatches[0]
                problem += f": {first.pointer or '(whole plan)'} [{first.clause}]" if first.clause else ""
            problem = problem.replace("|", "\\|")
            outcome = result.outcome.value + (f" ({result.grade})" if result.grade else "")
            lines.append(
                f"| `{result.case_id}` | {outcome} | {result.source or ''} | "
                f"{', '.join(result.clauses)} | {problem} |"
            )
        lines += _markdown_stories(bad)
    return printable("\n".join(lines)) + "\n"


def _markdown_summaries(run: Run) -> list[str]:
    """Each summary table (P1's gates) in Markdown, naming the cases that failed each row."""
    lines: list[str] = []
    for table in run.summaries:
        summary = table.summary
        lines += [
            "",
            f"| {summary.row_label} | verdict | passed | {summary.case_label} | clauses | attested | failed by |",
        ]
        lines.append("|---|---|---|---|---|---|---|")
        for line in table.rows:
            passed, of = _summary_rows.counts(line)
            failed = _summary_rows.failed_by(line, summary.case_label)
            shown = [f"`{case}`" + (f" ({why})" if why else "") for case, why in failed[:_MARKDOWN_FAILED]]
            more = len(failed) - len(shown)
            by = printable("; ".join(shown) + (f"; and {more} more" if more else "")).replace("|", "\\|")
            lines.append(
                f"| {line['name']} | {line['verdict']} | {passed} | {of} | "
                f"{', '.join(line['clauses'])} | {line['attested'] or 'none'} | {by} |"
            )
    return lines


def _markdown_grades(run: Run) -> list[str]:
    """The failed cases' grades in a sentence that says first whether any replays what it must not."""
    graded = grades_text(run)
    if not graded:
        return []
    unsafe = run.grades["unsafe"]
    lead = f"**{unsafe} unsafe** ({unsafe_ids(run, '`')})" if unsafe else "none unsafe"
    return [f"Failed cases by grade (GRADE-1): {lead}; {graded}."]


MARKDOWN_STORIES = 20  # failing cases whose story the Markdown summary tells; the JSON report has every one


def _markdown_stories(bad: Sequence[CaseResult]) -> list[str]:
    """The story lines of each failing case that has a history, as a fenced block under its id."""
    told = [result for result in bad if result.history]
    lines: list[str] = []
    for result in told[:MARKDOWN_STORIES]:
        story_lines = story.story_lines(result)
        longest = max((len(run) for line in story_lines for run in re.findall("`+", line)), default=0)
        fence = "`" * max(3, longest + 1)  # longer than any run of backticks in the lines
        lines += ["", f"`{result.case_id}`:", "", f"{fence}text", *story_lines, fence]
    if len(told) > MARKDOWN_STORIES:
        lines += ["", f"The stories of {len(told) - MARKDOWN_STORIES} more failing case(s) are in the JSON report."]
    return lines


def _markdown_verdict(run: Run) -> str:
    verdict = run.verdict
    if verdict.scope == "interrupted":
        return "**interrupted** (not a certification)"
    if verdict.scope == "subset":
        state = "passed" if verdict.passed else "**failed**"
        return f"SUBSET: the selected cases {state} (not a certification)"
    if not verdict.certified:
        return "**not certified**"
    if verdict.known_failures:
        return f"certified: {verdict.scope_text}, with {len(verdict.known_failures)} known failure(s)"
    return f"certified: {verdict.scope_text}"


def format_case_line(case: Case) -> str:
    """One line of ``resumekit list``."""
    return f"{case.id:<48} {case.kind:<13} {case.profile:<7} {','.join(case.clauses)}"


def format_header(
    run_info: Implementation, selection: Selection, *, kit_version: str, golden_digest: str, selected: int
) -> str:
    """What a run is about to do, printed before the first case: kit, implementation, profile, selection, seed."""
    seed = ""
    if selection.seed is not None:
        seed = f"seed:           {selection.seed} (replay the schedule with --seed {selection.seed})\n"
    # As the run compares: in the profile asked for if the implementation claims it, otherwise in core.
    compared = selection.profile if selection.profile in run_info.profiles else "core"
    return printable(
        f"resumekit {kit_version}, golden set {golden_digest[:16] or 'unknown'}\n"
        f"implementation: {run_info.name} {run_info.version} via {run_info.adapter}; "
        f"claims {', '.join(run_info.capabilities) or 'nothing'}; profiles {', '.join(run_info.profiles)}\n"
        f"selection:      {selection.describe(compared)}\n"
        f"{seed}"
        f"cases:          {selected} selected\n"
    )
