"""The pieces of the campaign that decide, without running anything: categories and classification.

Every try ends in exactly one category:

- **clear error**: the kit refused the input and said where (the file, or the case and its reason);
- **accepted correctly**: the kit accepted an input that is fine (a harmless mutation, a benign adapter);
- **accepted, case changed**: a mutated fixture passed ``validate`` and the reference then disagreed
  with it in a ``failed`` case: the expectation itself was changed to another well-formed value, which
  only an implementation can tell (informational, not a defect of the kit);
- **accepted wrongly**: the kit accepted what it should have refused (``validate`` passed and ``run``
  then refused the tree or errored a case; a broken adapter certified; a store that lost rows), or
  refused what it should have accepted;
- **unclear error**: refused, but without naming the file or the reason;
- **traceback**: "Traceback (most recent call last)" in the kit's own output (not in an adapter's
  stderr the report quotes), an exception out of ``main``, a dead worker, or an exit code outside the
  documented ones (docs/certifying.md);
- **hang**: the try outlived its guard timeout and was killed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = (
    "clear error",
    "accepted correctly",
    "accepted, case changed",
    "accepted wrongly",
    "unclear error",
    "traceback",
    "hang",
)
BAD = ("accepted wrongly", "unclear error", "traceback", "hang")

VALIDATE_CODES = {0, 1, 2}
RUN_CODES = {0, 1, 2, 3, 130}
EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_SUBSET = 1, 2, 3

_MARKER = "Traceback (most recent call last)"
# The report quotes an adapter's stderr indented by four spaces; a traceback there is the adapter's.
_OWN_TRACEBACK = re.compile(r"^(?! {4}).*Traceback \(most recent call last\)", re.MULTILINE)


def kit_traceback(output: str) -> bool:
    """Whether *output* holds a traceback of the kit itself, not one of an adapter's it quotes."""
    return _MARKER in output and _OWN_TRACEBACK.search(output) is not None


@dataclass
class Tally:
    """The counts of one part of the campaign, and the findings behind its bad ones."""

    name: str
    counts: Counter[str] = field(default_factory=Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    peak_kb: int = 0
    outside_writes: int = 0
    unrelated_kills: int = 0
    orphans: int = 0
    scratch_left: int = 0
    seconds: float = 0.0
    scale_ratio: float | None = None
    tries: list[dict[str, Any]] = field(default_factory=list)  # one row per try, where a part keeps them

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def add(self, category: str, what: str, reason: str = "", **extra: Any) -> None:
        assert category in CATEGORIES, category
        self.counts[category] += 1
        if category in BAD:
            self.findings.append({"category": category, "what": what, "reason": reason[:2000], **extra})

    def clean(self) -> bool:
        return not (
            any(self.counts[c] for c in BAD)
            or self.outside_writes
            or self.unrelated_kills
            or self.orphans
            or self.scratch_left
        )


def _problem_lines(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if line.strip() and not line.startswith(("resumekit: warning", "resumekit: note"))
    ]


def classify_fixture(result: dict[str, Any], names: list[str]) -> tuple[str, str]:
    """The category of one mutated tree from its worker's answer; *names* are the tree's file names."""
    if result.get("hang"):
        return "hang", f"no answer within {result['hang']} s"
    if "died" in result:
        return "traceback", f"the worker died: {result['died']}"
    if "harness" in result:
        raise RuntimeError(f"the campaign itself failed:\n{result['harness']}")
    validate, run = result["validate"], result["run"]
    for what, answer, codes in (("validate", validate, VALIDATE_CODES), ("run", run, RUN_CODES)):
        output = answer["stdout"] + answer["stderr"]
        if answer["escaped"]:
            last = answer["escaped"].strip().splitlines()[-1]
            return "traceback", f"{what}: {last}\n{answer['escaped'][-1500:]}"
        if answer["code"] not in codes:
            return "traceback", f"{what}: exit code {answer['code']} is not documented\n{output[-1500:]}"
        if kit_traceback(output):
            return "traceback", f"{what}: {output[-1500:]}"

    def names_a_file(text: str) -> bool:
        return any(name in text for name in names)

    if validate["code"] == EXIT_USAGE:
        return "accepted wrongly", f"validate could not load the schemas: {validate['stderr'][-500:]}"
    if validate["code"] == EXIT_NOT_CERTIFIED:
        problems = _problem_lines(validate["stderr"])
        unclear = [line for line in problems if not names_a_file(line)]
        if not problems or unclear:
            return "unclear error", "validate: " + ("\n".join(unclear[:3]) or "no problem named")
        if run["code"] == EXIT_USAGE and not names_a_file(run["stderr"]):
            return "unclear error", f"run refused the tree without naming the file: {run['stderr'][-500:]}"
        return "clear error", problems[0][:300]
    # validate accepted the tree: run must then run it, and the reference may only disagree by content.
    errored = result.get("report", {}).get("errored") or []
    if run["code"] == EXIT_SUBSET:
        return "accepted correctly", ""
    if run["code"] == EXIT_USAGE:
        return "accepted wrongly", f"validate passed, run refused the tree: {run['stderr'][-600:]}"
    if errored:
        return "accepted wrongly", f"validate passed, run errored a case: {errored[0]}"
    if run["code"] == EXIT_NOT_CERTIFIED:
        return "accepted, case changed", ""
    return "accepted wrongly", f"run exited {run['code']}"


def _broken_run(code: int | None, output: str) -> tuple[str, str] | None:
    """The category of a run that ended without a verdict (a hang, an undocumented exit, a traceback)."""
    if code is None:
        return "hang", "the kit outlived its guard timeout"
    if code not in RUN_CODES:
        return "traceback", f"exit code {code} is not documented\n{output[-1500:]}"
    if kit_traceback(output):
        return "traceback", output[-1500:]
    return None


def classify_run(
    code: int | None, output: str, document: dict[str, Any], expect: str, evidence: str = ""
) -> tuple[str, str]:
    """The category of one ``resumekit run`` against a misbehaving (or benign) adapter.

    *expect* is "refuse" (the adapter is broken: the run must not pass, and must say why) or "pass"
    (the behaviour is allowed: the run must pass). *evidence* must appear in the reasons when given.
    """
    broken = _broken_run(code, output)
    if broken is not None:
        return broken
    results = document.get("results", [])
    reasons = "\n".join(
        f"{r['id']}: {r['outcome']}: {r.get('message', '')} "
        + " ".join(str(m.get("clause")) for m in r.get("mismatches", []))
        for r in results
        if r.get("outcome") not in ("passed", "not_claimed")
    )
    if expect == "pass":
        if code == EXIT_SUBSET:
            return "accepted correctly", ""
        return "accepted wrongly", f"a benign adapter was refused (exit {code}): {(reasons or output)[-800:]}"
    if code in (0, EXIT_SUBSET):
        return "accepted wrongly", f"a broken adapter passed (exit {code})"
    if code == EXIT_USAGE:
        said = [line for line in output.splitlines() if line.startswith("resumekit:")]
        if not said:
            return "unclear error", output[-800:]
        reasons = "\n".join(said)
    elif not reasons.strip():
        summary = document.get("summary", {})
        if results and summary.get("not_claimed") == len(results):
            return "clear error", f"every selected case is not claimed ({summary['not_claimed']})"
        return "unclear error", f"not certified, but no case says why: {output[-800:]}"
    if evidence and evidence not in reasons and evidence not in output:
        return "unclear error", f"expected {evidence!r} among the reasons:\n{reasons[-800:]}"
    return "clear error", reasons.splitlines()[0][:300]


def classify_p1(
    code: int | None, output: str, document: dict[str, Any], expect: str, clauses: tuple[str, ...]
) -> tuple[str, str]:
    """The category of one ``resumekit run --kind p1`` against a hostile worker.

    *expect* is "refuse" or "pass". A refusal is clear only when a failed case names one of *clauses* with
    what it found: an errored case names no clause (the kit gave up, it did not judge), and a failure that
    names only other clauses points the implementer at the wrong rule.
    """
    broken = _broken_run(code, output)
    if broken is not None:
        return broken
    results = document.get("results", [])
    if expect == "pass":
        if code == EXIT_SUBSET and results:
            return "accepted correctly", ""
        return "accepted wrongly", f"a worker that does its work was refused (exit {code}): {_p1_reasons(results)}"
    if code in (0, EXIT_SUBSET):
        return "accepted wrongly", f"a hostile worker passed (exit {code})"
    errored = [r for r in results if r.get("outcome") == "errored"]
    if errored or not results:
        first = errored[0] if errored else {}
        return "unclear error", f"{first.get('id', 'no case')} errored: {first.get('message', output[-800:])}"[:1500]
    for result in results:
        for mismatch in result.get("mismatches", []):
            found = mismatch.get("actual") not in (None, "") or mismatch.get("note")
            if mismatch.get("clause") in clauses and found:
                said = mismatch.get("note") or result.get("message", "")
                return "clear error", f"{mismatch['clause']}: {said}; found {mismatch.get('actual')!r}"[:300]
    return "unclear error", f"no failure names {', '.join(clauses)}: {_p1_reasons(results)}"


def p1_clauses_named(document: dict[str, Any]) -> list[str]:
    """The clauses the failed cases of a P1 report name, in the order they first appear."""
    named: dict[str, None] = {}
    for result in document.get("results", []):
        if result.get("outcome") == "failed":
            named.update(dict.fromkeys(str(m.get("clause")) for m in result.get("mismatches", [])))
    return list(named)


def _p1_reasons(results: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{r.get('id')}: {r.get('outcome')}: {r.get('message', '')} "
        + " ".join(f"[{m.get('clause')}] {m.get('note') or m.get('actual')}" for m in r.get("mismatches", []))
        for r in results
        if r.get("outcome") != "passed"
    )[-1200:]


def format_table(tallies: list[Tally], peak_kb: int) -> str:
    """The campaign's table: one row per part and a total, then the guards."""
    header = ["part", "tried", *CATEGORIES, "outside writes", "unrelated kills", "orphans", "scratch left", "peak MB"]
    rows = []
    for tally in [*tallies, _total(tallies)]:
        rows.append(
            [
                tally.name,
                str(tally.tried),
                *(str(tally.counts[c]) for c in CATEGORIES),
                str(tally.outside_writes),
                str(tally.unrelated_kills),
                str(tally.orphans),
                str(tally.scratch_left),
                _megabytes(tally.peak_kb if tally.name != "total" else peak_kb),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join(lines)


def _megabytes(kilobytes: int) -> str:
    return f"{kilobytes / 1024:.0f}" if kilobytes else "-"  # 0: not measured for this part


def _total(tallies: list[Tally]) -> Tally:
    total = Tally("total")
    for tally in tallies:
        total.counts.update(tally.counts)
        total.outside_writes += tally.outside_writes
        total.unrelated_kills += tally.unrelated_kills
        total.orphans += tally.orphans
        total.scratch_left += tally.scratch_left
        total.peak_kb = max(total.peak_kb, tally.peak_kb)
    return total
