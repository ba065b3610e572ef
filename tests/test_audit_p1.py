"""The clause-by-clause audit of P1 (docs/audit-p1.md) stays generated and true: equal to what
``python -m tests.audit_p1`` makes from the rules, the golden scenarios and the broken workers' expectations;
every reason quotes a sentence of its clause that marks it unseen; and the clauses no check names without a
reason are exactly the known gaps below, a list that may only shrink."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests import audit_p1

# The clauses of docs/spec/p1.md that no check of its own names (at most an expected outcome) and the spec gives
# no reason for: a check that names one takes it off this list (the test fails until it is taken off), and a
# new clause without a check fails.
KNOWN_GAPS: frozenset[str] = frozenset()


@pytest.fixture(scope="module")
def rows() -> list[audit_p1.Row]:
    return audit_p1.audit_rows()


def test_the_audit_table_is_the_generated_one(rows: list[audit_p1.Row]) -> None:
    made = audit_p1.render(rows)
    current = audit_p1.TABLE.read_text(encoding="utf-8") if audit_p1.TABLE.is_file() else ""
    assert current == made, "docs/audit-p1.md is out of date: run python -m tests.audit_p1"


def test_every_clause_of_the_spec_has_a_row_and_every_clause_a_check_names_too(rows: list[audit_p1.Row]) -> None:
    listed = [row.clause for row in rows]
    assert len(listed) == len(set(listed))
    spec = audit_p1.spec_text()
    assert all(f"**{clause}** (" in spec for clause in listed if clause.split("-")[0] not in {"CP", "CRASH"})
    named = {clause for clause in audit_p1.clause_checks() if clause is not None}
    assert named <= set(listed), named - set(listed)
    assert all(row.observable for row in rows), [row.clause for row in rows if not row.observable]


def test_the_clauses_with_no_check_and_no_reason_are_the_known_gaps(rows: list[audit_p1.Row]) -> None:
    gaps = {row.clause for row in rows if row.gap}
    new = sorted(gaps - KNOWN_GAPS)
    assert not new, f"clauses with no check and no quoted reason: {new}"
    closed = sorted(KNOWN_GAPS - gaps)
    assert not closed, f"a check names these now: take them off KNOWN_GAPS: {closed}"


def test_every_reason_quotes_a_sentence_of_its_clause_that_marks_it_unseen(rows: list[audit_p1.Row]) -> None:
    reasons = audit_p1.load_reasons()
    texts = {row.clause: "" for row in rows} | _texts(rows)
    assert audit_p1.reason_problems(reasons, texts) == []
    checked = {row.clause for row in rows if row.own_checks}
    assert not set(reasons) & checked, "a clause a check names needs no reason"


def _texts(rows: list[audit_p1.Row]) -> dict[str, str]:
    from resumekit.conformance._cmd_golden import clause_texts

    return {clause: "\n".join(lines) for clause, (_, _, lines) in clause_texts([r.clause for r in rows]).items()}


def test_a_reason_that_quotes_no_sentence_of_its_clause_or_marks_nothing_unseen_is_refused(tmp_path: Path) -> None:
    texts = {"KEY-3": "**KEY-3** (core). Other workers MAY use any key; the kit never computes keys. Keys are long."}
    reasons = tmp_path / "reasons.yaml"
    reasons.write_text("KEY-3: {quote: 'Keys are short.'}\nKEY-9: {quote: 'x'}\n", encoding="utf-8")
    problems = audit_p1.reason_problems(audit_p1.load_reasons(reasons), texts)
    assert problems == ["KEY-3: 'Keys are short.' is not a sentence of the clause", "KEY-9: no such clause in the spec"]
    unmarked = audit_p1.reason_problems({"KEY-3": "Keys are long."}, texts)
    assert unmarked == ["KEY-3: 'Keys are long.' says nothing of attested, power-loss-only or unobserved evidence"]
    assert audit_p1.reason_problems({"KEY-3": "the kit never computes keys."}, texts) == []


def test_a_row_names_the_checks_scenarios_and_broken_workers_of_its_clause(rows: list[audit_p1.Row]) -> None:
    by = {row.clause: row for row in rows}
    assert "submission.exact_match" in by["SUB-5"].checks
    assert "p1-409-other-body-is-a-hard-failure" in by["SUB-5"].scenarios
    assert {"accepts-any-409", "matches-the-key-too"} <= set(by["SUB-5"].workers)
    assert "campaigns.matrix_visited_nothing" in by["FPT-5"].checks
    assert "ignores-the-any-failpoint" in by["FPT-5"].workers
    assert by["KEY-3"].reason.startswith("Other workers MAY") and not by["KEY-3"].gap
    assert by["EVID-3"].reason and by["GATE-1"].reason and not by["GATE-1"].checks
    assert by["COMMIT-4"].observable.startswith("After commit_done")
    # A worker that breaks a clause no check names is caught under another of its clauses: the row says so.
    assert "follows-links-in-cleanup" in by["CLEAN-4"].workers and by["CLEAN-4"].checks == ("cleanup.links",)
    unchecked = dataclasses.replace(by["CLEAN-4"], checks=())
    assert "none caught by it; broken by follows-links-in-cleanup" in audit_p1.render([unchecked])
    # An expected outcome's clause is no check of its own: a clause named only there is a gap.
    assert by["SUB-6"].own_checks == ("answers.rejections",) and not by["SUB-6"].gap
    only_outcomes = dataclasses.replace(by["SUB-6"], checks=("convergence.outcomes",))
    assert only_outcomes.gap and "gap: only an expected outcome names it" in audit_p1.render([only_outcomes])
