"""Phases, scope and resume (PHASE, SCOPE, RESUME): how attempts step and are reported, what a reused row may
name, superseded attempts and identity conflicts, resuming before claiming, and orderly stops; each rule over
a history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.model import open_attempts
from tests.p1_stories import Told, clauses, judged, row

JOURNAL_RULES = ("resume.phases", "resume.reuse", "resume.superseded", "resume.second_worker_phases",
                 "resume.second_worker_reuse", "resume.second_worker_superseded")


@pytest.mark.parametrize("name", [*JOURNAL_RULES, "resume.orderly_stops", "resume.stops", "resume.open_attempts",
                                  "resume.deliveries", "resume.reported"])
def test_a_history_without_the_events_a_rule_judges_has_nothing_wrong_for_it(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


def test_an_attempt_starts_with_one_claimed_row_and_steps_up_by_one_until_terminal() -> None:
    good = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x"), row(3, "verification_passed")]
    assert judged("resume.phases", Told().read(good)) == []
    unclaimed = judged("resume.phases", Told().read(good[1:]))
    assert [(m.clause, m.pointer) for m in unclaimed] == [
        ("PHASE-2", "/journal/t-1/1"), ("PHASE-3", "/journal/t-1/1/1")
    ]
    skipped = judged("resume.phases", Told().read([good[0], good[2]]))
    assert [(m.clause, m.pointer, m.actual) for m in skipped] == [
        ("PHASE-3", "/journal/t-1/1/1", "verification_passed (rank 3)")
    ]
    after = [row(1, "claimed"), row(2, "reconciliation_required", reason="lease_lost"), row(3, "claimed")]
    assert clauses(judged("resume.phases", Told().read(after))) == ["PHASE-2", "PHASE-5"]
    # A reused row may skip to the phase it reuses.
    reused = [row(1, "claimed"), row(2, "result_pending", reused_from=9)]
    assert judged("resume.phases", Told().read(reused)) == []
    second = judged("resume.second_worker_phases", Told().read(good[1:], journal="second"))
    assert [m.pointer for m in second] == ["/second-worker/journal/t-1/1", "/second-worker/journal/t-1/1/1"]


def test_reuse_of_a_row_of_another_generation_is_scope_4() -> None:
    done = {"result_hash": "h", "result_body": "{}"}
    rows = [row(1, "claimed"), row(2, "source_capture_done", **done), row(3, "claimed", 2, generation=2),
            row(4, "source_capture_done", 2, generation=2, reused_from=2, **done)]
    assert clauses(judged("resume.reuse", Told().read(rows))) == ["SCOPE-4"]
    assert clauses(judged("resume.second_worker_reuse", Told().read(rows, journal="second"))) == ["SCOPE-4"]
    rows[2]["generation"] = rows[3]["generation"] = 1
    assert judged("resume.reuse", Told().read(rows)) == []
    unknown = [row(1, "claimed"), row(2, "source_capture_done", reused_from=7, **done)]
    assert clauses(judged("resume.reuse", Told().read(unknown))) == ["SCOPE-3"]


def test_a_row_of_an_attempt_below_one_the_journal_holds_is_scope_7_in_strict() -> None:
    rows = [row(1, "claimed"), row(2, "claimed", 2), row(3, "workspace_prepared", 2, workspace="task-x")]
    assert judged("resume.superseded", Told().read(rows)) == []
    rows.append(row(4, "workspace_prepared", 1, workspace="task-y"))
    assert clauses(judged("resume.superseded", Told().read(rows))) == ["SCOPE-7"]
    assert judged("resume.superseded", Told().read(rows), profile="core") == []
    assert clauses(judged("resume.second_worker_superseded", Told().read(rows, journal="second"))) == ["SCOPE-7"]
    # Another task's attempts are counted apart.
    assert judged("resume.superseded", Told().read([*rows[:3], row(4, "claimed", task_id="t-2")])) == []


def _delivered(kind: str, *after: tuple[str, dict[str, Any]], **served: Any) -> Told:
    """A delivery served against CP-5 or CP-7 to w1 (request 1), then *after* in the control plane's log."""
    task = {name: row(0, "claimed")[name] for name in IDENTITY}
    task.update(served)
    told = Told().logged(kind, worker="w1", request=1, task_id="t-1", attempt=1, task=task)
    for entry_kind, entry in after:
        told.logged(entry_kind, **entry)
    return told


RECEIPT = ("request", {"worker": "w1", "endpoint": "receipt", "path": "v1/jobs/j/receipt", "status": 200, "request": 2})


def test_a_governed_side_effect_after_a_faulty_delivery_names_its_clause() -> None:
    assert clauses(judged("resume.deliveries", _delivered("replayed_delivery", RECEIPT))) == ["SCOPE-7"]
    assert clauses(judged("resume.deliveries", _delivered("conflicting_delivery", RECEIPT, job_id="x"))) == ["SCOPE-6"]
    assert judged("resume.deliveries", _delivered("replayed_delivery")) == []
    # The worker's next claim ends what is counted for the delivery.
    claim = ("request", {"worker": "w1", "endpoint": "claim", "path": "v1/claims", "status": 200, "request": 3})
    assert judged("resume.deliveries", _delivered("replayed_delivery", claim, RECEIPT)) == []
    assert judged("resume.deliveries", _delivered("replayed_delivery", RECEIPT), profile="core") == []


def test_an_attempt_served_with_another_identity_gets_claimed_then_identity_conflict_only() -> None:
    held = [row(1, "claimed"), row(2, "result_submitted", idempotency_key="k", result_hash="h", result_body="{}")]
    good = [*held, row(3, "claimed", job_id="x"), row(4, "reconciliation_required", job_id="x",
                                                        reason="identity_conflict")]
    assert judged("resume.deliveries", _delivered("conflicting_delivery", job_id="x").read(good)) == []
    ran = [*held, row(3, "claimed", job_id="x"), row(4, "workspace_prepared", job_id="x", workspace="t")]
    found = judged("resume.deliveries", _delivered("conflicting_delivery", job_id="x").read(ran))
    assert [(m.clause, m.pointer) for m in found] == [("SCOPE-6", "/journal/t-1/1/served-identity")]


def test_every_reconciliation_is_reported_by_idle_with_its_state_and_reason() -> None:
    fenced = Told().read([row(1, "claimed"), row(2, "reconciliation_required", reason="identity_conflict")])
    (found,) = judged("resume.reported", fenced.at_end(last_wait="idle"))
    assert found.clause == "PHASE-4" and found.expected == {"state": "RECONCILIATION_REQUIRED",
                                                            "reason": "identity_conflict"}
    told = fenced.logged("report", task_id="t-1", attempt=1, state="RECONCILIATION_REQUIRED",
                         reason="identity_conflict")
    assert judged("resume.reported", told.at_end(last_wait="idle")) == []
    # A hard failure is reported FAILED; and nothing is judged before the worker is idle.
    hard = Told().read([row(1, "claimed"), row(2, "reconciliation_required", reason="result_conflict")])
    hard.logged("report", task_id="t-1", attempt=1, state="RECONCILIATION_REQUIRED", reason="result_conflict")
    assert clauses(judged("resume.reported", hard.at_end(last_wait="idle"))) == ["PHASE-4"]
    assert judged("resume.reported", fenced.at_end(last_wait="blocked")) == []


def _restart(open_rows: list[dict[str, Any]], *requests: tuple[str, str, str]) -> Told:
    told = Told().read(open_rows, why="start", worker="w2")
    for number, (worker, endpoint, path) in enumerate(requests, start=1):
        told.logged("request", worker=worker, endpoint=endpoint, path=path, request=number, status=200)
    return told


def _open(task_id: str, phase: str) -> dict[str, Any]:
    return row(1, phase, task_id=task_id, lease_id=f"L-{task_id}")


def test_open_attempts_are_the_non_terminal_ones_in_claimed_order() -> None:
    rows = [_open("a", "claimed"), _open("b", "claimed"), _open("a", "result_submitted"), _open("b", "commit_done")]
    assert open_attempts(rows) == [_open("b", "commit_done")]
    assert open_attempts([]) == []


def test_resume_1_needs_each_open_attempt_touched_before_the_first_claim() -> None:
    open_rows = [_open("a", "verification_passed")]
    renew, claim = ("w2", "renew", "v1/leases/L-a/renew"), ("w2", "claim", "v1/claims")
    assert judged("resume.open_attempts", _restart(open_rows, renew, claim)) == []
    assert judged("resume.open_attempts", _restart(open_rows)) == []  # it never claimed
    (found,) = judged("resume.open_attempts", _restart(open_rows, claim, renew))
    assert found.clause == "RESUME-1" and "'a' attempt 1" in (found.note or "")
    # It says what to do, for an abandoned attempt too: resuming one is what LEASE-4 forbids.
    assert "releases its lease" in (found.note or "") and "resuming the open" not in (found.note or "")
    # Another process's requests do not count for this one.
    (found,) = judged("resume.open_attempts", _restart(open_rows, ("w1", "renew", "v1/leases/L-a/renew"), claim))
    assert found.clause == "RESUME-1"


def test_resume_1_wants_the_order_of_the_claimed_rows() -> None:
    open_rows = [_open("a", "claimed"), _open("b", "claimed")]
    in_order = [("w2", "renew", "v1/leases/L-a/renew"), ("w2", "task", "v1/tasks/b"), ("w2", "claim", "v1/claims")]
    assert judged("resume.open_attempts", _restart(open_rows, *in_order)) == []
    (found,) = judged("resume.open_attempts", _restart(open_rows, in_order[1], in_order[0], in_order[2]))
    assert found.clause == "RESUME-1" and "order" in (found.note or "")


def test_an_orderly_stop_exits_0_with_no_governed_side_effect_before() -> None:
    assert judged("resume.orderly_stops", Told().by("w1", "stopped", exitCode=0, marker=True)) == []
    (found,) = judged("resume.orderly_stops", Told().by("w1", "stopped", exitCode=3, marker=True))
    assert (found.clause, found.actual) == ("RESUME-5", 3)
    submitted = {"worker": "w1", "endpoint": "result", "path": "v1/tasks/t-1/result", "status": 201, "request": 1}
    told = Told().logged("request", **submitted).kit("stopped-in-order", worker="w1", logFrom=0, logTo=1)
    (found,) = judged("resume.stops", told)
    assert (found.clause, found.pointer) == ("RESUME-5", "/stop/w1")
    quiet = Told().logged("request", **submitted).kit("stopped-in-order", worker="w1", logFrom=1, logTo=1)
    assert judged("resume.stops", quiet) == []


def _governed(check: str, rows: list[dict[str, Any]], journal: str = "first", told: Told | None = None) -> Told:
    """A *check* moment (submission, receipt, push) of t-1 attempt 1 at request 7, the journal read as it arrived."""
    told = (told or Told()).logged("moment", check=check, request=7, task_id="t-1", attempt=1)
    return told.read(rows, why="moment", journal=journal, request=7, check=check)


def test_no_governed_side_effect_follows_a_terminal_row() -> None:
    assert judged("resume.after_submitted", Told()) == []
    pending = [row(1, "claimed"), row(2, "result_pending")]
    submitted = [*pending, row(3, "result_submitted")]
    for check in ("submission", "receipt", "push"):
        assert judged("resume.after_submitted", _governed(check, pending)) == []
        (found,) = judged("resume.after_submitted", _governed(check, submitted))
        assert (found.clause, found.pointer) == ("RESUME-2", f"/tasks/t-1/attempts/1/{check}")
        assert "request 7" in (found.note or "")
    # Another attempt's terminal row says nothing about this one.
    other = [row(1, "claimed", attempt=2), row(2, "result_submitted", attempt=2), row(3, "claimed")]
    assert judged("resume.after_submitted", _governed("submission", other)) == []
    # An identity conflict's reconciled attempt of the same number leaves the first identity's submission in order.
    conflict = [*pending, row(3, "claimed", execution_digest="d-2"), row(4, "reconciliation_required",
                                                                           execution_digest="d-2")]
    assert judged("resume.after_submitted", _governed("submission", conflict)) == []
    # reconciliation_required is terminal too.
    reconciled = [row(1, "claimed"), row(2, "reconciliation_required", reason="push_refused")]
    (found,) = judged("resume.after_submitted", _governed("push", reconciled))
    assert "reconciliation_required row" in (found.note or "")


def test_a_side_effect_after_result_submitted_is_in_order_while_a_second_journal_holds_the_attempt_open() -> None:
    submitted = [row(1, "claimed"), row(2, "result_pending"), row(3, "result_submitted")]
    open_there = _governed("submission", submitted).read(submitted[:2], why="moment", journal="second", request=7)
    assert judged("resume.after_submitted", open_there) == []
    # No rows of the attempt in the second journal: the first one's terminal row stands.
    empty_there = _governed("submission", submitted).read([], why="moment", journal="second", request=7)
    assert clauses(judged("resume.after_submitted", empty_there)) == ["RESUME-2"]
