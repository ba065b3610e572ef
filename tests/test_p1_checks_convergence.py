"""Where a scenario converged (OUT, FPT-4): each task's expected outcome as the scenario's ``expect`` names it,
and a worker idle while an attempt still held its lease (OUT-2); over histories written by hand, one without
rows or readings included."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1.canonical import result_hash
from tests.p1_stories import Told, clauses, judged, row

NAMES = {"task": "t-1"}
# A crash scenario's own clauses (golden/p1/failpoints.yaml): its outcomes stand for FPT-4.
CRASH = ("FPT-1", "FPT-2", "FPT-4", "RESUME-2", "PHASE-3", "LEASE-4", "RESUME-3")


def _outcome(told: Told, cites: tuple[str, ...] = CRASH, **expect: Any) -> list[Any]:
    return judged("convergence.outcomes", told, expect={"task": expect}, names=NAMES, cites=cites)


EVERY = {"final": "result_submitted", "reason": "x", "attempts": 1, "state": "SUCCEEDED", "stored": True,
         "pushes": 1, "submissions": 1, "ended": ["result_submitted"], "reused": False}


def test_no_expectation_is_nothing_to_judge_and_no_rows_never_pass_one() -> None:
    assert judged("convergence.outcomes", Told()) == []
    found = _outcome(Told(), **EVERY)
    assert [(m.clause, m.pointer) for m in found] == [
        ("FPT-4", "/expect/task/final"), ("FPT-4", "/expect/task/reason"), ("FPT-4", "/expect/task/state"),
        ("FPT-4", "/expect/task/stored"), ("FPT-4", "/expect/task/attempts"), ("FPT-4", "/expect/task/pushes"),
        ("RESUME-2", "/expect/task/submissions"), ("FPT-4", "/expect/task/ended"),
    ]


def test_an_outcome_names_the_scenarios_own_rule_for_it_or_no_clause() -> None:
    # A resend after 5xx (p1-submit-5xx-twice-then-success cites SUB-4): a count of submissions is SUB-4's,
    # not SUB-6's, a clause of 4xx answers that never came; so is the final phase the resends lead to.
    five = ("SUB-4", "WRK-3", "CP-21", "KEY-1")
    found = _outcome(Told(), five, final="result_submitted", submissions=3)
    assert [(m.clause, m.pointer) for m in found] == [("SUB-4", "/expect/task/final"),
                                                     ("SUB-4", "/expect/task/submissions")]
    # A 4xx scenario's count is SUB-6's.
    assert clauses(_outcome(Told(), ("SUB-6", "OUT-1", "CP-9"), submissions=1)) == ["SUB-6"]
    # A duplicate delivery's count of attempts is RESUME-4's, not SCOPE-1's; with no clause of attempts, none.
    delivery = ("RESUME-4", "LEASE-1", "PHASE-2", "CP-7", "CP-21", "KEY-1")
    assert clauses(_outcome(Told(), delivery, attempts=1)) == ["RESUME-4"]
    cleanup = _outcome(Told(), ("CLEAN-1", "CLEAN-4"), final="result_submitted", attempts=1, pushes=1, reused=True)
    assert clauses(cleanup) == [None, None, None, None]
    # A scope scenario's count of attempts stands for the identity it sets up; its reuse for SCOPE-4.
    scope = ("SCOPE-1", "SCOPE-2", "SCOPE-4", "KEY-1", "PHASE-2", "PHASE-3")
    assert clauses(_outcome(Told(), scope, attempts=2, reused=True)) == ["SCOPE-1", "SCOPE-4"]
    # A moved branch's reason is the pre-push read's (COMMIT-1), not PHASE-4's list of reasons.
    assert clauses(_outcome(Told(), ("COMMIT-1", "PHASE-4", "COMMIT-3"), reason="branch_moved")) == ["COMMIT-1"]


def test_a_task_that_converged_as_expected_passes() -> None:
    body = {"kind": "source_capture"}
    told = Told().read([row(1, "claimed"), row(2, "result_submitted")])
    told.logged("push", task_id="t-1", accepted=True)
    told.logged("moment", check="submission", request=1, task_id="t-1", attempt=1, key="k", result_hash="h")
    told.at_end(tasks={"t-1": {"state": "SUCCEEDED", "stored": {"result_hash": result_hash(body)}}},
                expected={"t-1": body})
    assert _outcome(told, final="result_submitted", attempts=1, state="SUCCEEDED", stored=True, pushes=1,
                    submissions=1, ended=["result_submitted"], reused=False) == []
    assert clauses(_outcome(told, ("SCOPE-3", "KEY-2"), reused=True)) == ["SCOPE-3"]


def test_the_second_workers_journal_is_judged_by_its_own_expectation() -> None:
    ok = [row(1, "claimed"), row(2, "reconciliation_required", reason="lease_not_converged")]
    told = Told().read(ok, journal="second")
    found = _outcome(told, second_worker={"final": "result_submitted", "attempts": 1})
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/second_worker/final")]
    assert "in the second worker's journal" in (found[0].note or "")
    none = _outcome(Told(), ("SCOPE-7", "LEASE-4"), second_worker={"attempts": 1})
    assert [(m.clause, m.actual) for m in none] == [("SCOPE-7", 0)]


def test_an_attempt_left_holding_its_lease_at_idle_is_told_as_out_2_beside_fpt_4() -> None:
    rows = [row(1, "claimed"), row(2, "verification_passed")]
    active = [{"lease_id": "lease-1", "state": "ACTIVE"}]

    def told(*, idle: bool = True, leases: Any = active, lost: bool = False) -> Told:
        made = Told().read(rows)
        if lost:
            made.logged("lease", event="expired", lease={"lease_id": "lease-1", "state": "EXPIRED"})
        return made.at_end(leases=leases, last_wait="idle" if idle else "blocked")

    found = _outcome(told(), final="result_submitted")
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/final"), ("OUT-2", "/expect/task/idle")]
    # Not idle, the lease not held, or lost once (a revived lease is not the worker's to keep): FPT-4 alone.
    for other in (told(idle=False), told(leases=[]), told(lost=True)):
        assert clauses(_outcome(other, final="result_submitted")) == ["FPT-4"]
    # A converged task says nothing of its lease here (LEASE-5 does).
    done = Told().read([*rows, row(3, "result_submitted")]).at_end(leases=active, last_wait="idle")
    assert _outcome(done, final="result_submitted") == []


# -- OUT-1: no submission of an attempt once its hard failure is durable ----------------------------------------


def _arrived(rows: list[dict[str, Any]], read: bool = True, attempt: int = 1) -> Told:
    """A submission of t-1 (by w2, under the key k2) with the journal the kit read as it arrived."""
    told = Told().logged("moment", check="submission", request=9, worker="w2", task_id="t-1", attempt=attempt,
                         key="k2", result_hash="h")
    if read:
        told.read(rows, why="moment", worker="w2", request=9, check="submission")
    return told.logged("request", worker="w2", endpoint="result", status=409, request=9, answer="answer")


PENDING = [row(1, "claimed"), row(2, "source_capture_done", result_hash="h"),
           row(3, "result_pending", idempotency_key="k", result_hash="h")]


def test_a_submission_while_the_journal_holds_the_attempts_hard_failure_is_out_1() -> None:
    for reason in ("result_conflict", "result_rejected", "task_invalid"):
        failed = row(4, "reconciliation_required", reason=reason)
        (found,) = judged("convergence.hard_failures", _arrived([*PENDING, failed]))
        assert (found.clause, found.pointer, found.actual) == ("OUT-1", "/tasks/t-1/attempts/1/submission", 9)
        assert f"by 'w2', under the key 'k2') while the journal held the attempt's hard failure, " \
               f"reconciliation_required: {reason} (seq 4)" in (found.note or "")


def test_a_submission_before_any_hard_failure_or_of_another_attempt_is_no_out_1() -> None:
    assert judged("convergence.hard_failures", Told()) == []
    assert judged("convergence.hard_failures", _arrived(PENDING)) == []
    # A reconciliation that is no hard failure is not OUT-1's (RESUME-2 names a side effect after it).
    reconciled = row(4, "reconciliation_required", reason="receipt_not_visible")
    assert judged("convergence.hard_failures", _arrived([*PENDING, reconciled])) == []
    failed = row(4, "reconciliation_required", reason="result_conflict")
    assert judged("convergence.hard_failures", _arrived([*PENDING, failed], attempt=2)) == []
    # No journal read at the arrival: SUB-1 names a submission no durable row was seen for.
    assert judged("convergence.hard_failures", _arrived([*PENDING, failed], read=False)) == []
