"""The clause-by-clause audit of docs/spec/p1.md, generated: ``python -m tests.audit_p1`` writes docs/audit-p1.md.

For each clause of the binding P1 spec (and each clause of another document that a P1 check names) the table
gives its observable (the clause's first sentence), the checks that name it when it is broken (the table of
rules and the campaigns' checks), the golden scenarios that cite it in their own ``clauses``, and the broken
workers of tests/broken whose tests expect a mismatch of it. Nothing in the table is written by hand but the
reasons in tests/audit_p1_reasons.yaml, each a sentence of the clause quoted from the spec that says why the
kit cannot see it; tests/test_audit_p1.py keeps the file equal to what this module makes and lists the gaps.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from resumekit.conformance import contracts
from resumekit.conformance._cmd_golden import clause_texts
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.checks import rules
from resumekit.conformance.p1.gates import ALWAYS_CHECKED, GATE_CLAUSES

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "audit-p1.md"
REASONS = Path(__file__).resolve().parent / "audit_p1_reasons.yaml"
# A reason may only quote a sentence in which the spec says the kit does not see the clause.
REASON_MARKS = re.compile(r"attested|power loss|not observed|not checked|the kit never", re.IGNORECASE)
_CLAUSE = re.compile(r"^\*\*([A-Z0-9]+-\d+)\*\* \((core|strict)\)\. ", re.MULTILINE)
# The check that names a clause when a scenario's expected outcome differs: no check of the clause's own.
OUTCOMES = "convergence.outcomes"
_LONGEST = 200  # characters of an observable before it is cut at a word
_SHOWN = 4  # scenario ids a cell names before it counts the rest


@dataclass(frozen=True)
class Row:
    """One clause of the audit: what the spec says of it and what the kit holds against it."""

    clause: str
    profile: str
    observable: str
    checks: tuple[str, ...]
    scenarios: tuple[str, ...]
    workers: tuple[str, ...]
    reason: str  # why the clause has no check: a generated one, or a sentence quoted from the spec

    @property
    def own_checks(self) -> tuple[str, ...]:
        """The checks that name the clause for what they see themselves, not for an expected outcome."""
        return tuple(name for name in self.checks if name != OUTCOMES)

    @property
    def gap(self) -> bool:
        """No check of its own names the clause, and nothing says why."""
        return not self.own_checks and not self.reason


def spec_text() -> str:
    """The binding P1 spec."""
    (path,) = _p1().spec_paths(kit_side=False)
    return path.read_text(encoding="utf-8")


def _p1() -> contracts.Contract:
    contract = contracts.contract_of("p1")
    assert contract is not None
    return contract


def plain(text: str) -> str:
    """*text* without its markdown: links as their words, code and emphasis marks gone, spaces single."""
    text = re.sub(r"```.*?```", " (...) ", text, flags=re.DOTALL)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))  # tables
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(?<![\w)\]])\*\*?([^*\s][^*]*?)\*\*?(?![\w(])", r"\1", text.replace("`", ""))
    return re.sub(r"\s+", " ", text).strip()


def first_sentence(text: str) -> str:
    """The clause's first sentence, its id and profile left out: the observable the table names."""
    body = re.sub(r"^\*[^*]+\.\* ", "", _CLAUSE.sub("", text, count=1))  # a title such as *Convergence check.*
    body = plain(body)
    match = re.search(r"(?<![ (]e\.g)(?<!i\.e)(?<! )\.(\s|$)", body)
    sentence = body[: match.start() + 1] if match else body
    if len(sentence) <= _LONGEST:
        return sentence
    return sentence[: sentence.rfind(" ", 0, _LONGEST)] + " ..."


def clause_checks() -> dict[str | None, list[str]]:
    """Each clause -> the checks that may name it (rules, the campaigns' checks, the table's own)."""
    named: dict[str | None, list[str]] = {}
    for name, clauses, _ in rules.listing():
        for clause in clauses:
            named.setdefault(clause, []).append(name)
    return named


def clause_scenarios(cases: Iterable[object]) -> dict[str, list[str]]:
    """Each clause -> the P1 cases whose own ``clauses`` (their file's, not their gates') cite it."""
    cited: dict[str, list[str]] = {}
    for case in cases:
        if isinstance(case, ScenarioCase):
            for clause in case.cites:
                cited.setdefault(clause, []).append(case.id)
    return cited


def _clauses_in(text: str) -> list[str]:
    return re.findall(r"\b([A-Z]+-\d+)\b", text)


def worker_expectations() -> dict[str, frozenset[str]]:
    """Each broken worker of tests/broken -> the clauses its test expects a mismatch of; where no test names
    them in a table (a campaign's bug), the clauses its registration names."""
    from tests import test_attack, test_broken_workers
    from tests.broken.workers import ATTACK_BUGS, BUGS, CAMPAIGN_BUGS

    expected: dict[str, frozenset[str]] = {}
    for registry in (BUGS, ATTACK_BUGS, CAMPAIGN_BUGS):
        for bug, (_, what) in registry.items():
            expected[bug] = frozenset(_clauses_in(what))
    for bug, entry in test_broken_workers.EXPECTED.items():
        expected[bug] = frozenset(entry[-1])
    for bug, (_, _, clauses) in test_attack.STATIC.items():
        expected[bug] = clauses
    return expected


def clause_workers(expected: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    """Each clause -> the broken workers whose tests expect a mismatch of it."""
    caught: dict[str, list[str]] = {}
    for bug in sorted(expected):
        for clause in sorted(expected[bug]):
            caught.setdefault(clause, []).append(bug)
    return caught


def load_reasons(path: Path = REASONS) -> dict[str, str]:
    """The hand-kept reasons: clause -> the sentence of its text, quoted, that says the kit cannot see it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(clause): str(entry["quote"]) for clause, entry in data.items()}


def reason_problems(reasons: Mapping[str, str], texts: Mapping[str, str]) -> list[str]:
    """Each reason that does not quote a sentence of its own clause, or one that marks no unseen evidence."""
    problems = []
    for clause, quote in reasons.items():
        if clause not in texts:
            problems.append(f"{clause}: no such clause in the spec")
        elif plain(quote) not in plain(texts[clause]):
            problems.append(f"{clause}: {quote!r} is not a sentence of the clause")
        elif not REASON_MARKS.search(quote):
            problems.append(f"{clause}: {quote!r} says nothing of attested, power-loss-only or unobserved evidence")
    return problems


def _generated_reason(clause: str) -> str:
    p1 = _p1()
    if clause in p1.kit_clauses:
        return "binds the kit, not the worker (the P1 contract's kit_clauses)"
    if clause in GATE_CLAUSES.values():
        return "a gate's definition: the gate table judges it from the other clauses' findings"
    return ""


def audit_rows() -> list[Row]:
    """The audit: a row per clause of the binding spec, then per other clause a P1 check names."""
    text = spec_text()
    ids = [(match.group(1), match.group(2)) for match in _CLAUSE.finditer(text)]
    checks = clause_checks()
    extra = sorted(c for c in checks if c is not None and c not in {clause for clause, _ in ids})
    texts = {clause: "\n".join(lines) for clause, (_, _, lines) in clause_texts([c for c, _ in ids] + extra).items()}
    for clause in extra:
        match = _CLAUSE.match(texts.get(clause, ""))
        ids.append((clause, match.group(2) if match else "?"))
    scenarios = clause_scenarios(load_suite().cases)
    workers = clause_workers(worker_expectations())
    reasons = load_reasons()
    return [
        Row(
            clause=clause,
            profile=profile,
            observable=first_sentence(texts.get(clause, "")),
            checks=tuple(checks.get(clause, ())),
            scenarios=tuple(scenarios.get(clause, ())),
            workers=tuple(workers.get(clause, ())),
            reason=reasons.get(clause) or _generated_reason(clause),
        )
        for clause, profile in ids
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _scenario_cell(row: Row) -> str:
    shown = ", ".join(row.scenarios[:_SHOWN]) + (f" and {len(row.scenarios) - _SHOWN} more" if
                                                  len(row.scenarios) > _SHOWN else "")
    every = "every scenario checks it; " if row.clause in ALWAYS_CHECKED else ""
    return f"{every}{len(row.scenarios)}: {shown}" if row.scenarios else f"{every}none cites it"


def _worker_cell(row: Row) -> str:
    """The broken workers caught by the clause; with no check to name it, those that break it are caught by
    another of their expected clauses, and the cell says so."""
    if not row.workers:
        return "none"
    if row.checks:
        return ", ".join(row.workers)
    return f"none caught by it; broken by {', '.join(row.workers)}, caught under another of their clauses"


def _status(row: Row) -> str:
    if row.gap:
        return "**gap: only an expected outcome names it**" if row.checks else "**gap: no check**"
    if not row.checks:
        return f"no check: {row.reason}"
    if not row.scenarios and row.clause not in ALWAYS_CHECKED:
        return "no scenario cites it"
    return "checked"


def render(rows: Sequence[Row]) -> str:
    """The audit as the markdown file docs/audit-p1.md holds."""
    lines = [
        "# P1 audit: every clause, its check, its scenarios, its broken workers",
        "",
        "Generated by `python -m tests.audit_p1` from the table of rules (`conformance/p1/checks/rules.py`), the",
        "campaigns' checks, the golden scenarios' own `clauses` and the broken workers' expectations",
        "(`tests/test_broken_workers.py`, `tests/test_attack.py`, `tests/broken/workers`); do not edit it by hand.",
        "`tests/test_audit_p1.py` keeps it equal to what the generator makes. A clause that no check of its own",
        "names (`convergence.outcomes` names one only where a scenario's expected outcome differs) needs a",
        "reason: one the contract gives (a clause that binds the kit, a gate's definition) or a sentence of the clause",
        "quoted in `tests/audit_p1_reasons.yaml` that marks it attested, power-loss-only or not observed;",
        "any other is a gap, listed in the test's `KNOWN_GAPS` so that the list can only shrink.",
        "",
        f"{len(rows)} clauses; {sum(1 for row in rows if row.own_checks)} named by a check of their own; "
        f"{sum(1 for row in rows if row.gap)} gaps.",
        "",
        "| clause | profile | observable | checks | scenarios | broken workers | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = (
            row.clause,
            row.profile,
            row.observable.replace("*", "\\*"),
            ", ".join(f"`{name}`" for name in row.checks) or "none",
            _scenario_cell(row),
            _worker_cell(row),
            _status(row),
        )
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """Write the table (``--check``: only say whether the file is up to date, by the exit status)."""
    made = render(audit_rows())
    if "--check" in argv:
        current = TABLE.read_text(encoding="utf-8") if TABLE.is_file() else ""
        if current != made:
            print(f"{TABLE.name} is out of date: run python -m tests.audit_p1", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(made, encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
