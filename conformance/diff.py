"""Two run reports side by side: which cases changed verdict, which came or went, and what else changed.

Pure: it reads two documents valid against schemas/report/run-report.json and says what differs. A
*regression* is a case that passed (or was an expected failure) in the first and does not in the
second, or a run certified in the first and not in the second. A case is *less safe* when its plan is
graded unsafe in the second and was not in the first (docs/spec/phase0.md, GRADE-1), whatever its outcome
was: that is a regression too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resumekit.conformance._text import printable

_GOOD = ("passed",)


@dataclass(frozen=True, slots=True)
class Change:
    """One case whose outcome differs between the two runs."""

    case_id: str
    before: str
    after: str
    before_grade: str | None = None  # the grade of a failed plan (GRADE-1), when it had one
    after_grade: str | None = None

    @property
    def less_safe(self) -> bool:
        """Whether the case's plan is graded unsafe in B and was not in A."""
        return self.after_grade == "unsafe" and self.before_grade != "unsafe"

    @property
    def regression(self) -> bool:
        """Whether a case that passed (or was an expected failure) in A does not in B, or is less safe."""
        return (self.before in _GOOD and self.after not in _GOOD) or self.less_safe

    def describe(self) -> str:
        """``failed (detail) -> failed (unsafe)``: each side's outcome with its grade, when it has one."""
        before = self.before + (f" ({self.before_grade})" if self.before_grade else "")
        after = self.after + (f" ({self.after_grade})" if self.after_grade else "")
        return f"{before} -> {after}" + (": less safe" if self.less_safe else "")


@dataclass(frozen=True, slots=True)
class Diff:
    """What differs between run A and run B."""

    changed: tuple[Change, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    notes: tuple[str, ...]  # kit version, golden digest, implementation, profile, verdict
    verdict_lost: bool

    @property
    def regressions(self) -> tuple[Change, ...]:
        """The changes that are regressions."""
        return tuple(change for change in self.changed if change.regression)

    @property
    def less_safe(self) -> tuple[Change, ...]:
        """The changes that make a case's plan unsafe."""
        return tuple(change for change in self.changed if change.less_safe)

    @property
    def regressed(self) -> bool:
        """Whether B is worse than A: a regression, or a certification lost."""
        return bool(self.regressions) or self.verdict_lost


def _outcomes(document: Mapping[str, Any]) -> dict[str, str]:
    outcomes = {}
    for result in document["results"]:
        outcome = result["outcome"]
        known = result.get("knownFailure")
        if known is not None:
            outcome = known["verdict"]
        outcomes[result["id"]] = outcome
    return outcomes


def _grades(document: Mapping[str, Any]) -> dict[str, str | None]:
    grades = {}
    for result in document["results"]:
        grade = result.get("grade")
        grades[result["id"]] = grade if isinstance(grade, str) else None
    return grades


def _verdict(document: Mapping[str, Any]) -> str:
    verdict = document.get("verdict")
    if isinstance(verdict, Mapping) and isinstance(verdict.get("headline"), str):
        return str(verdict["headline"])
    return "certified" if document.get("certified") else "not certified"


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> Diff:
    """The differences between report *a* (before) and report *b* (after)."""
    before, after = _outcomes(a), _outcomes(b)
    graded_before, graded_after = _grades(a), _grades(b)
    changed = tuple(
        Change(case_id, before[case_id], after[case_id], graded_before[case_id], graded_after[case_id])
        for case_id in before
        if case_id in after
        and (before[case_id], graded_before[case_id]) != (after[case_id], graded_after[case_id])
    )
    notes = []
    facts = (
        ("kit version", lambda d: d["resumekit"].get("version")),
        ("golden digest", lambda d: d["resumekit"].get("goldenDigest")),
        ("implementation", lambda d: f"{d['implementation']['name']} {d['implementation']['version']}"),
        ("profile", lambda d: d.get("profile")),
        ("verdict", _verdict),
    )
    for name, read in facts:
        old, new = read(a), read(b)
        if old != new:
            notes.append(f"{name} changed: {old!r} -> {new!r}")
    return Diff(
        changed=changed,
        added=tuple(case_id for case_id in after if case_id not in before),
        removed=tuple(case_id for case_id in before if case_id not in after),
        notes=tuple(notes),
        verdict_lost=bool(a.get("certified")) and not bool(b.get("certified")),
    )


def format_diff(diff: Diff, a_name: str, b_name: str) -> str:
    """The diff for people: notes first, then regressions, other changes, and cases that came or went."""
    lines = [f"resumekit diff {a_name} -> {b_name}"]
    lines += [f"  note: {note}" for note in diff.notes]
    for title, changes in (
        ("regressions", diff.regressions),
        ("other changes", tuple(c for c in diff.changed if not c.regression)),
    ):
        if changes:
            lines.append(f"{title} ({len(changes)}):")
            lines += [f"  {change.case_id}: {change.describe()}" for change in changes]
    if diff.added:
        lines.append(f"new cases ({len(diff.added)}): " + ", ".join(diff.added))
    if diff.removed:
        lines.append(f"removed cases ({len(diff.removed)}): " + ", ".join(diff.removed))
    if diff.verdict_lost:
        lines.append("REGRESSION: the first run was certified, the second is not")
    elif diff.regressions:
        dropped = sum(1 for change in diff.regressions if change.before in _GOOD)
        said = [f"{dropped} case(s) passed before and do not now"] if dropped else []
        if diff.less_safe:
            said.append(f"{len(diff.less_safe)} case(s) less safe: their plans are unsafe now")
        lines.append("REGRESSION: " + "; ".join(said))
    elif not (diff.changed or diff.added or diff.removed or diff.notes):
        lines.append("no difference in verdicts")
    else:
        lines.append("no regression")
    return printable("\n".join(lines)) + "\n"
