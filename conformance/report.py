"""Reports of a Run: a JSON document, JUnit XML, and text for people. Formatters return strings."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from resumekit.conformance import PROTOCOL_VERSION, SPEC_VERSION
from resumekit.conformance.fixtures import Case
from resumekit.conformance.results import CaseResult, Mismatch, Outcome, Run

NO_MESSAGE_CHECKS = "off (--no-validate-messages): a message that breaks its schema was not caught as such"
_MARKS = {
    Outcome.PASSED: ".",
    Outcome.FAILED: "F",
    Outcome.ERRORED: "E",
    Outcome.SKIPPED: "s",
    Outcome.NOT_CLAIMED: "-",
}


def counts_by_kind(run: Run) -> dict[str, dict[Outcome, int]]:
    """How many results of each kind ended in each outcome, kinds in the order they ran."""
    kinds: dict[str, dict[Outcome, int]] = {}
    for result in run.results:
        kinds.setdefault(result.kind, dict.fromkeys(Outcome, 0))[result.outcome] += 1
    return kinds


def to_json(run: Run) -> dict[str, Any]:
    """The run as a document valid against schemas/report/run-report.json."""
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
        "certified": run.certified,
        "summary": run.counts,
        "results": [result.to_dict() for result in run.results],
        **({"gates": [dict(row) for row in run.gates]} if run.gates else {}),
    }


def to_junit(run: Run) -> str:
    """The run as JUnit XML: one testcase per case, grouped by kind."""
    suites = ET.Element("testsuites", name="resumekit")
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
            skipped=str(counts[Outcome.SKIPPED] + counts[Outcome.NOT_CLAIMED]),
            time=f"{sum(r.duration for r in results):.6f}",
        )
        for result in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"resumekit.{kind}",
                name=result.case_id,
                time=f"{result.duration:.6f}",
                file=result.source.file if result.source else "",
            )
            if result.source and result.source.line:
                case.set("line", str(result.source.line))
            text = format_result(result)
            if result.outcome is Outcome.FAILED:
                ET.SubElement(case, "failure", message=_first_line(result)).text = text
            elif result.outcome is Outcome.ERRORED:
                ET.SubElement(case, "error", message=_first_line(result)).text = text
            elif result.outcome in (Outcome.SKIPPED, Outcome.NOT_CLAIMED):
                ET.SubElement(case, "skipped", message=f"{result.outcome.value}: {result.message or ''}")
    if run.gates:
        _junit_gates(suites, run)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _junit_gates(suites: ET.Element, run: Run) -> None:
    """The P1 gate table as a suite of its own: a gate fails when a scenario of it failed."""
    verdicts = [row["verdict"] for row in run.gates]
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="resumekit.p1-gates",
        tests=str(len(run.gates)),
        failures=str(verdicts.count("failed")),
        errors="0",
        skipped=str(verdicts.count("not run")),
    )
    for row in run.gates:
        case = ET.SubElement(suite, "testcase", classname="resumekit.p1-gates", name=str(row["gate"]))
        properties = ET.SubElement(case, "properties")
        for name in ("scenarios", "passed", "clauses", "attested"):
            value = row[name]
            text = ", ".join(value) if isinstance(value, list) else str(value)
            ET.SubElement(properties, "property", name=name, value=text)
        if row["verdict"] == "failed":
            failed = ", ".join(row["failed"])
            ET.SubElement(case, "failure", message=f"failed scenarios: {failed}").text = failed
        elif row["verdict"] == "not run":
            ET.SubElement(case, "skipped", message="no scenario of this gate ran")


def _first_line(result: CaseResult) -> str:
    if result.message:
        return result.message.splitlines()[0]
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
    return f"{head}\n    expected: {_value(mismatch.expected)}\n    actual:   {_value(mismatch.actual)}"


def format_result(result: CaseResult) -> str:
    """Everything a person needs to see about one non-passing case."""
    where = f" ({result.source})" if result.source else ""
    lines = [f"{result.outcome.value.upper()} {result.case_id}{where}"]
    if result.clauses:
        lines.append(f"  clauses: {', '.join(result.clauses)}")
    if result.expectation and result.mismatches:
        lines.append(f"  compared with: the case's {result.expectation} expectation")
    if result.fault_model:
        lines.append(f"  fault model: {result.fault_model}")
    if result.message:
        lines.extend("  " + line for line in result.message.splitlines())
    for mismatch in result.mismatches:
        lines.extend("  " + line for line in format_mismatch(mismatch).splitlines())
    if result.replay:
        lines.append(f"  replay with: {result.replay}")
    if result.transcript:
        lines.append("  last messages (the JSON report has more):")
        lines.extend("    " + _clip(line, 160) for line in result.transcript[-4:])
    if result.stderr_tail:
        lines.append("  stderr (last lines):")
        lines.extend("    " + line for line in result.stderr_tail.splitlines())
    return "\n".join(lines)


def format_summary(run: Run) -> str:
    """The table at the end of a run."""
    info = run.implementation
    lines = [
        "",
        f"implementation: {info.name} {info.version} ({info.language or 'unknown language'}) via {info.adapter}",
        f"claims:         {', '.join(info.capabilities) or 'nothing'}; profiles {', '.join(info.profiles)}",
        f"profile run:    {run.profile}",
    ]
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
    if run.gates:
        lines += ["", *format_gates(run)]
    verdict = "CERTIFIED" if run.certified else "NOT CERTIFIED"
    lines += [
        "",
        f"{verdict}: {total['passed']} passed, {total['failed']} failed, {total['errored']} errored, "
        f"{total['skipped']} skipped, {total['not_claimed']} not claimed in {run.duration:.2f} s",
    ]
    return "\n".join(lines)


def format_gates(run: Run) -> list[str]:
    """The P1 gate table as text lines."""
    lines = [f"{'P1 gate':<44}{'verdict':>9}{'passed':>8}{'of':>4}  clauses", "-" * 100]
    for row in run.gates:
        clauses = ", ".join(row["clauses"])
        attested = f" (attested: {row['attested']})" if row["attested"] else ""
        counts = f"{row['verdict']:>9}{row['passed']:>8}{row['scenarios']:>4}"
        lines.append(f"{row['gate']:<44}{counts}  {_clip(clauses, 60)}{attested}")
    return lines


def to_markdown(run: Run) -> str:
    """The run as Markdown, for a CI job summary such as GitHub's."""
    info = run.implementation
    verdict = "certified" if run.certified else "**not certified**"
    lines = [
        f"## resumekit: {info.name} {info.version} is {verdict}",
        "",
        f"Profile `{run.profile}`; claims {', '.join(f'`{c}`' for c in info.capabilities) or 'nothing'}; "
        f"adapter `{info.adapter}`; {run.platform.get('system', '')} {run.platform.get('machine', '')}.",
    ]
    if run.fault_models:
        lines.append(f"Fault models: {'; '.join(run.fault_models)}.")
    if run.seed is not None:
        lines.append(f"Crash schedule seed: `{run.seed}`.")
    if not run.messages_validated:
        lines.append(f"Message checks: {NO_MESSAGE_CHECKS}.")
    lines += ["", "| kind | " + " | ".join(o.value for o in Outcome) + " |", "|---" * (len(Outcome) + 1) + "|"]
    for kind, row in counts_by_kind(run).items():
        lines.append(f"| {kind} | " + " | ".join(str(row[o]) for o in Outcome) + " |")
    if run.gates:
        lines += ["", "| P1 gate | verdict | passed | scenarios | clauses | attested |", "|---|---|---|---|---|---|"]
        for gate in run.gates:
            lines.append(
                f"| {gate['gate']} | {gate['verdict']} | {gate['passed']} | {gate['scenarios']} | "
                f"{', '.join(gate['clauses'])} | {gate['attested'] or 'none'} |"
            )
    bad = [r for r in run.results if r.outcome in (Outcome.FAILED, Outcome.ERRORED)]
    if bad:
        lines += ["", "| case | outcome | where | clauses | first problem |", "|---|---|---|---|---|"]
        for result in bad:
            problem = _first_line(result)
            if result.mismatches:
                first = result.mismatches[0]
                problem += f": {first.pointer or '(whole plan)'} [{first.clause}]" if first.clause else ""
            problem = problem.replace("|", "\\|")
            lines.append(
                f"| `{result.case_id}` | {result.outcome.value} | {result.source or ''} | "
                f"{', '.join(result.clauses)} | {problem} |"
            )
    return "\n".join(lines) + "\n"


def format_case_line(case: Case) -> str:
    """One line of ``resumekit list``."""
    return f"{case.id:<48} {case.kind:<13} {case.profile:<7} {','.join(case.clauses)}"


class ProgressReporter:
    """Prints one mark per case and, at the end of each kind, a count; writes through *write*."""

    def __init__(self, write: Callable[[str], Any], width: int = 60) -> None:
        self._write, self._width, self._column, self._kind = write, width, 0, ""

    def case_started(self, case: Case) -> None:
        if case.kind != self._kind:
            if self._column:
                self._write("\n")
            self._write(f"{case.kind:<13} ")
            self._kind, self._column = case.kind, 0

    def case_finished(self, result: CaseResult) -> None:
        self._write(_MARKS[result.outcome])
        self._column += 1
        if self._column >= self._width:
            self._write(f"\n{'':<13} ")
            self._column = 0

    def finish(self) -> None:
        if self._kind:
            self._write("\n")
