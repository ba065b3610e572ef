"""Leases (LEASE): renewal on CP time (LEASE-3, LEASE-2), no governed side effect with a lost lease (LEASE-4),
released by idle (LEASE-5); each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from tests.p1_stories import Told, clauses, judged, row


@pytest.mark.parametrize("name", ["leases.lost", "leases.renewals", "leases.released", "leases.own_leases",
                                  "leases.clock_reads"])
def test_a_history_without_leases_has_nothing_wrong_for_them(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


# -- LEASE-4 ----------------------------------------------------------------------------------------------------


def test_a_push_or_submission_with_a_lost_lease_is_lease_4() -> None:
    told = Told()
    told.logged("push", task_id="t-1", accepted=False, lease={"lease_id": "lease-1", "state": "FENCED"})
    told.logged("push", task_id="t-1", accepted=True, lease={"lease_id": "lease-2", "state": "ACTIVE"})
    told.logged("moment", check="submission", request=3, task_id="t-1", attempt=1, key="k1", result_hash="h")
    told.logged("request", worker="w1", endpoint="result", status=403, request=3, answer="answer")
    found = judged("leases.lost", told)
    assert [(m.clause, m.pointer) for m in found] == [
        ("LEASE-4", "/origin/pushes/0"), ("LEASE-4", "/control-plane/t-1/1/submission")
    ]


def test_a_side_effect_after_the_worker_was_told_its_lease_was_lost_is_lease_4_even_once_revived() -> None:
    lease = {"lease_id": "lease-1", "task_id": "t-1", "attempt": 1, "state": "ACTIVE"}
    told = Told().logged("lease", event="granted", request=1, lease=lease)
    told.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=409, request=2,
                answer="answer")
    told.logged("lease", event="revived", request=3, lease=lease)
    told.logged("moment", check="submission", request=4, task_id="t-1", attempt=1, key="k", result_hash="h")
    told.logged("request", worker="w2", endpoint="result", path="v1/tasks/t-1/result", status=201, request=4,
                answer="answer")
    (found,) = judged("leases.lost", told)
    assert (found.clause, found.pointer) == ("LEASE-4", "/control-plane/t-1/1/revived/w")
    assert "'lease-1'" in (found.note or "") and "a renewal answered 409" in (found.note or "")
    # Nothing governed after the revival: nothing to fail.
    quiet = Told().logged("lease", event="granted", request=1, lease=lease)
    quiet.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=409, request=2,
                 answer="answer")
    assert judged("leases.lost", quiet.logged("lease", event="revived", request=3, lease=lease)) == []


@pytest.mark.parametrize("status", [404, 400])
def test_a_side_effect_after_a_renewal_answered_404_or_400_is_lease_4_with_the_lease_still_active(status: int) -> None:
    # p1.md 0.5 G13: any 4xx to a renewal is a loss, though a 404 or 400 that changed nothing leaves it ACTIVE.
    lease = {"lease_id": "lease-1", "task_id": "t-1", "attempt": 1, "state": "ACTIVE"}
    told = Told().logged("lease", event="granted", request=1, lease=lease)
    told.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=status, request=2,
                answer="answer")
    told.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=200, request=3,
                answer="answer")
    told.logged("moment", check="push", task_id="t-1", attempt=1, ref="refs/heads/main", new="c" * 40)
    told.logged("moment", check="submission", request=4, task_id="t-1", attempt=1, key="k", result_hash="h")
    told.logged("request", worker="w1", endpoint="result", path="v1/tasks/t-1/result", status=201, request=4,
                answer="answer")
    (found,) = judged("leases.lost", told)
    assert (found.clause, found.pointer) == ("LEASE-4", "/control-plane/t-1/1/lost/w")
    assert [effect["endpoint"] for effect in found.actual] == ["push", "result"]
    assert f"a renewal answered {status}" in (found.note or "") and "any 4xx" in (found.note or "")


@pytest.mark.parametrize(("status", "answer"), [(503, "answer"), (500, "answer"), (404, "drop"), (409, "delay")])
def test_a_renewal_answered_5xx_or_not_at_all_tells_no_loss(status: int, answer: str) -> None:
    lease = {"lease_id": "lease-1", "task_id": "t-1", "attempt": 1, "state": "ACTIVE"}
    told = Told().logged("lease", event="granted", request=1, lease=lease)
    told.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=status, request=2,
                answer=answer)
    told.logged("moment", check="submission", request=3, task_id="t-1", attempt=1, key="k", result_hash="h")
    told.logged("request", worker="w1", endpoint="result", path="v1/tasks/t-1/result", status=201, request=3,
                answer="answer")
    assert judged("leases.lost", told) == []


# -- LEASE-3: renewal on CP time -----------------------------------------------------------------------------------

START = 1_000_000
TTL = 30_000
JOURNAL = [row(1, "claimed"), row(2, "workspace_prepared"), row(3, "verification_passed"),
           row(4, "source_capture_done"), row(5, "result_pending")]


def _lease(seq: int, event: str, expires: int, state: str = "ACTIVE") -> dict[str, Any]:
    view = {"lease_id": "lease-1", "task_id": "t-1", "attempt": 1, "state": state, "ttl_ms": TTL,
            "expires_at_ms": expires}
    return {"kind": "lease", "seq": seq, "event": event, "lease": view}


def _clock(seq: int, to: int, delta: int) -> dict[str, Any]:
    return {"kind": "clock", "seq": seq, "to": to, "delta_ms": delta}


def _moves(after_second: list[dict[str, Any]], *, granted: str = "ACTIVE", moves: int = 3,
           rows: list[dict[str, Any]] = JOURNAL) -> Told:
    """Granted at START; moved 14 s (not yet due), then 14 s more (2 s before expiry), then 14 s more."""
    told = Told()
    for entry in [_lease(1, "granted", START + TTL, granted), _lease(2, "renewed", START + TTL, granted),
                  _clock(3, START + 14_000, 14_000), _clock(4, START + 28_000, 14_000), *after_second,
                  _clock(9, START + 42_000, 14_000)]:
        told.logged(**entry)
    steps = [{"seq": 3, "rowsBefore": 2, "rowsAfter": 2}, {"seq": 4, "rowsBefore": 3, "rowsAfter": 3},
             {"seq": 9, "rowsBefore": 5, "rowsAfter": 5}]
    for step in steps[:moves]:
        told.kit("clock-moved", deltaMs=14_000, **step)
    return told.read(rows)


def test_a_step_boundary_after_the_renewal_point_without_a_renewal_is_lease_3() -> None:
    (found,) = judged("leases.renewals", _moves([]))
    assert found.clause == "LEASE-3" and found.pointer == "/journal/t-1/1/source_capture_done/renewal"
    note = found.note or ""
    assert "'lease-1'" in note and "2000 ms before its expires_at_ms" in note and "LEASE-2" in note
    assert judged("leases.renewals", _moves([_lease(5, "renewed", START + 28_000 + TTL)])) == []


def test_only_a_move_of_a_step_past_the_renewal_point_of_an_active_lease_asks_for_a_renewal() -> None:
    # The same moves, but the lease was lost (or never ACTIVE): nothing to renew.
    assert judged("leases.renewals", _moves([], granted="EXPIRED")) == []
    # A move no step made (a fault's, an expiry's) places no row.
    assert judged("leases.renewals", _moves([], moves=1)) == []
    # No row written between the moves: no boundary came.
    assert judged("leases.renewals", _moves([], rows=JOURNAL[:3])) == []


# -- LEASE-5 -----------------------------------------------------------------------------------------------------


def test_a_terminal_attempt_still_holding_its_lease_at_idle_is_lease_5() -> None:
    done = Told().read([row(1, "claimed"), row(2, "result_submitted")])
    held = done.at_end(leases=[{"lease_id": "lease-1", "state": "ACTIVE"}], last_wait="idle")
    (found,) = judged("leases.released", held)
    assert (found.clause, found.pointer) == ("LEASE-5", "/leases/lease-1")
    released = Told().read([row(1, "claimed"), row(2, "result_submitted")])
    released.at_end(leases=[{"lease_id": "lease-1", "state": "RELEASED"}], last_wait="idle")
    assert judged("leases.released", released) == []
    # A lease the kit granted itself, of no terminal attempt of the journal, is not the worker's to release.
    kits = Told().read([row(1, "claimed")]).at_end(leases=[{"lease_id": "lease-1", "state": "ACTIVE"}],
                                                    last_wait="idle")
    assert judged("leases.released", kits) == []
    assert clauses(judged("leases.released", held)) == ["LEASE-5"]
    blocked = Told().read([row(1, "claimed"), row(2, "result_submitted")])
    blocked.at_end(leases=[{"lease_id": "lease-1", "state": "ACTIVE"}], last_wait="blocked")
    assert judged("leases.released", blocked) == []  # judged once idle only


# -- LEASE-4: a source_capture attempt's lost lease is an abandonment, never lease_not_converged --------------------


def _ended(*rows: dict[str, Any]) -> Told:
    return Told().read(list(rows)).at_end(last_wait="idle")


def test_a_capture_attempt_ending_in_lease_not_converged_is_lease_4() -> None:
    body = {"result_body": "{}", "result_hash": "h"}
    capture = [row(1, "claimed"), row(2, "workspace_prepared"), row(3, "verification_passed"),
               row(4, "source_capture_done", **body)]
    (found,) = judged("leases.capture_losses", _ended(*capture, row(5, "reconciliation_required",
                                                                    reason="lease_not_converged")))
    assert (found.clause, found.pointer) == ("LEASE-4", "/journal/t-1/1/4/reason")
    assert "'source_capture_done', seq 4" in (found.note or "") and "abandons it without a row" in (found.note or "")
    # A reused result_pending of a source_capture task, with no commit either.
    reused = [row(1, "claimed", attempt=2), row(2, "result_pending", attempt=2, reused_from=9, **body),
              row(3, "reconciliation_required", attempt=2, reason="lease_not_converged")]
    assert clauses(judged("leases.capture_losses", _ended(*reused))) == ["LEASE-4"]


def test_lease_not_converged_after_a_commit_or_an_abandoned_capture_is_no_lease_4_finding() -> None:
    body = {"result_body": "{}", "result_hash": "h"}
    start = [row(1, "claimed"), row(2, "workspace_prepared"), row(3, "verification_passed")]
    after_commit = [*start, row(4, "commit_done", commit_oid="c" * 40, **body),
                    row(5, "reconciliation_required", reason="lease_not_converged")]
    reused_commit = [row(1, "claimed"), row(2, "result_pending", commit_oid="c" * 40, reused_from=9, **body),
                     row(3, "reconciliation_required", reason="lease_not_converged")]
    abandoned = [*start, row(4, "source_capture_done", **body)]  # no row after the loss: LEASE-4's reading
    other_reason = [*start, row(4, "source_capture_done", **body), row(5, "reconciliation_required",
                                                                        reason="result_conflict")]
    before_any_result = [*start, row(4, "reconciliation_required", reason="lease_not_converged")]  # not this rule's
    for journal in (after_commit, reused_commit, abandoned, other_reason, before_any_result, []):
        assert judged("leases.capture_losses", _ended(*journal)) == [], journal


# -- LEASE-3 (b), SUB-4: a renewal answered ACTIVE before every governed send, each resend included ------------------


def _granted(told: Told, attempt: int = 1) -> Told:
    lease = {"lease_id": f"lease-{attempt}", "task_id": "t-1", "attempt": attempt, "state": "ACTIVE"}
    return told.logged("lease", event="granted", request=attempt * 100, lease=lease)


def _renew(told: Told, request: int, worker: str = "w1", status: int = 200, answer: str = "answer",
           lease: str = "lease-1", effect: bool | None = None, path: str = "") -> Told:
    """A renewal request, after the control plane's own entry of the lease it renewed (*effect*: by default, when
    it answered 200), as the control plane logs them."""
    if status == 200 if effect is None else effect:
        attempt = int(lease.rsplit("-", 1)[1])
        view = {"lease_id": lease, "task_id": "t-1", "attempt": attempt, "state": "ACTIVE"}
        told.logged("lease", event="renewed", request=request, lease=view)
    return told.logged("request", worker=worker, endpoint="renew", path=path or f"v1/leases/{lease}/renew",
                       status=status, request=request, answer=answer)


def _send(told: Told, request: int, check: str = "submission", worker: str | None = "w1", status: int = 201) -> Told:
    """One governed send of attempt 1 of t-1: its moment, then its request's entry (a push's is the hook's)."""
    if check == "push":
        told.logged("moment", check="push", request=request, task_id="t-1", attempt=1, ref="refs/heads/main",
                    old="a" * 40, new="c" * 40)
        return told.logged("request", worker=None, endpoint="origin_check", status=200, request=request,
                           answer="answer")
    told.logged("moment", check=check, request=request, worker=worker, task_id="t-1", attempt=1, key="k",
                result_hash="h")
    endpoint = "result" if check == "submission" else "receipt"
    return told.logged("request", worker=worker, endpoint=endpoint, status=status, request=request, answer="answer")


def test_a_send_with_no_renewal_in_the_history_at_all_is_lease_3() -> None:
    # Absent evidence does not pass: a submission no renewal precedes, of a lease the log never granted either.
    (found,) = judged("leases.renewed_sends", _send(Told(), 1))
    assert (found.clause, found.pointer) == ("LEASE-3", "/control-plane/t-1/1/submission/0/renewal")
    assert found.actual == {"request": 1, "worker": "w1", "renewals": []}
    (ungranted,) = judged("leases.renewed_sends", _send(_renew(Told(), 1, status=404), 2))
    assert ungranted.clause == "LEASE-3" and "lease None" in (ungranted.note or "")


def test_every_send_renewed_since_the_previous_one_passes() -> None:
    told = _granted(Told())
    _send(_renew(told, 1, worker="w1"), 2, "push")  # a push: any process's renewal, the origin names none
    _send(_renew(told, 3), 4, "receipt", status=200)
    _send(_renew(told, 5), 6, status=503)
    _send(_renew(told, 7, answer="delay"), 8)  # the answer held back may have reached the worker
    _send(_renew(told, 9, path="v1/leases/%6Cease%2D1/renew"), 10)  # the lease renewed, however the path spells it
    assert judged("leases.renewed_sends", told) == []
    assert judged("leases.renewed_sends", Told()) == []


def test_a_resend_of_a_submission_with_no_renewal_since_the_first_send_is_sub_4() -> None:
    told = _send(_renew(_granted(Told()), 1), 2, status=502)
    (found,) = judged("leases.renewed_sends", _send(told, 3))
    assert (found.clause, found.pointer) == ("SUB-4", "/control-plane/t-1/1/submission/1/renewal")
    assert found.event == len(told.events) - 2  # seen at the resend's moment
    assert "send 2 of the result submission of attempt 1 of 't-1' (request 3, by 'w1')" in (found.note or "")
    assert "lease 'lease-1'" in (found.note or "") and "previous governed send (its result submission, request 2)" \
        in (found.note or "")


@pytest.mark.parametrize(
    ("status", "answer", "worker", "lease", "effect"),
    [(503, "answer", "w1", "lease-1", True), (503, "answer", "w1", "lease-1", False),
     (200, "drop", "w1", "lease-1", True), (200, "answer", "w2", "lease-1", True),
     (200, "answer", "w1", "lease-2", True), (409, "answer", "w1", "lease-1", False)],
)
def test_a_renewal_unanswered_failed_of_another_process_or_of_another_lease_does_not_count(
    status: int, answer: str, worker: str, lease: str, effect: bool
) -> None:
    told = _granted(_granted(Told()), 2)
    _renew(told, 1)
    _send(told, 2, status=500)
    _renew(told, 3, worker=worker, status=status, answer=answer, lease=lease, effect=effect)
    (found,) = judged("leases.renewed_sends", _send(told, 4))
    assert found.clause == "SUB-4"
    renewed = worker == "w2"  # renewed, but for another process than the one that sends
    renewal = {"request": 3, "worker": worker, "status": status, "answer": answer, "renewed": renewed}
    assert found.actual == {"request": 4, "worker": "w1", "renewals": [] if lease == "lease-2" else [renewal]}


def test_a_renewal_before_the_push_does_not_cover_the_receipt_after_it() -> None:
    told = _send(_renew(_granted(Told()), 1, worker="w2"), 2, "push")
    (found,) = judged("leases.renewed_sends", _send(told, 3, "receipt", status=200))
    assert (found.clause, found.pointer) == ("LEASE-3", "/control-plane/t-1/1/receipt/0/renewal")
    assert "previous governed send (its push, request 2)" in (found.note or "")


def test_a_push_with_no_renewal_is_lease_3_once_however_many_branches_it_updates() -> None:
    told = _granted(Told())
    told.logged("moment", check="push", request=1, task_id="t-1", attempt=1, ref="refs/heads/main", old="a", new="c")
    (found,) = judged("leases.renewed_sends", _send(told, 1, "push"))
    assert (found.clause, found.pointer) == ("LEASE-3", "/control-plane/t-1/1/push/0/renewal")
    assert "(request 1)" in (found.note or "") and "to that process" not in (found.note or "")


# -- LEASE-1 -----------------------------------------------------------------------------------------------------


def _grant(attempt: int, lease_id: str, official: bool = True) -> dict[str, Any]:
    view = {"lease_id": lease_id, "task_id": "t-1", "attempt": attempt, "state": "ACTIVE"}
    return {"kind": "lease", "event": "granted", "official": official, "lease": view}


def _leased(rows: list[dict[str, Any]], *grants: dict[str, Any]) -> Told:
    told = Told()
    for grant in grants:
        told.logged(**grant)
    return told.read(rows)


def test_a_row_that_records_a_lease_not_granted_to_its_attempt_is_lease_1() -> None:
    done = {"result_hash": "h", "result_body": "{}"}
    rows = [row(1, "claimed"), row(2, "source_capture_done", **done), row(3, "claimed", 2),
            row(4, "source_capture_done", 2, reused_from=2, **done)]
    grants = (_grant(1, "lease-1"), _grant(2, "lease-2"))
    assert judged("leases.own_leases", _leased(rows, *grants)) == []
    rows[3]["lease_id"] = "lease-1"  # the reused row copied whole, its source's lease with it
    (found,) = judged("leases.own_leases", _leased(rows, *grants))
    assert (found.clause, found.pointer, found.expected, found.actual) == (
        "LEASE-1", "/journal/t-1/2/lease_id", "lease-2", ["lease-2", "lease-1"]
    )
    assert "{'4': 'lease-1'}" in (found.note or "")
    # No grant in the log at all: no row of either attempt rests on a lease the control plane granted.
    assert clauses(judged("leases.own_leases", _leased(rows))) == ["LEASE-1", "LEASE-1"]
    # A lease the kit granted itself is no attempt's.
    assert clauses(judged("leases.own_leases", _leased(rows[:2], _grant(1, "lease-1", False)))) == ["LEASE-1"]


# -- LEASE-2 -----------------------------------------------------------------------------------------------------


def _request(seq: int, endpoint: str = "clock") -> dict[str, Any]:
    return {"kind": "request", "seq": seq, "worker": "w1", "endpoint": endpoint, "status": 200, "answer": "answer"}


def test_a_renewing_row_after_a_move_with_no_request_until_the_next_is_lease_2() -> None:
    # Moved to 2 s before expiry, then source_capture_done and result_pending with no request at all.
    (found,) = judged("leases.clock_reads", _moves([]))
    assert (found.clause, found.pointer) == ("LEASE-2", "/journal/t-1/1/source_capture_done/cp-time")
    assert "'lease-1' 2000 ms before expiry" in (found.note or "") and "no request" in str(found.actual)
    # A renewal the log shows without its request (a hand-written history only) still told the worker nothing.
    assert clauses(judged("leases.clock_reads", _moves([_lease(5, "renewed", START + 28_000 + TTL)]))) == ["LEASE-2"]
    # Any request between the moves could have told it the CP time: judged by LEASE-3 alone.
    assert judged("leases.clock_reads", _moves([_request(5)])) == []
    assert judged("leases.clock_reads", _moves([_request(5, "renew")])) == []
    # A call of the origin's hook (a push's report) answers the worker nothing.
    assert clauses(judged("leases.clock_reads", _moves([_request(5, "origin_check")]))) == ["LEASE-2"]


def test_only_a_step_move_that_left_an_active_lease_due_asks_for_cp_time() -> None:
    assert judged("leases.clock_reads", _moves([], granted="EXPIRED")) == []
    assert judged("leases.clock_reads", _moves([], moves=1)) == []  # moves no step made place no row
    assert judged("leases.clock_reads", _moves([], rows=JOURNAL[:3])) == []  # no row after the second move
    assert judged("leases.clock_reads", Told().read(JOURNAL)) == []  # no move at all


def test_the_lease_a_faulty_delivery_served_is_one_its_attempt_was_granted() -> None:
    # CP-21 serves attempt 1 again under another Job with a lease of the kit's: the two fence rows record it.
    rows = [row(1, "claimed"), row(2, "claimed", job_id="j2", lease_id="lease-9"),
            row(3, "reconciliation_required", job_id="j2", lease_id="lease-9", reason="identity_conflict")]
    told = Told().logged(**_grant(1, "lease-1")).logged(**_grant(1, "lease-9", False))
    assert clauses(judged("leases.own_leases", told.read(rows))) == ["LEASE-1"]
    told = Told().logged(**_grant(1, "lease-1")).logged(**_grant(1, "lease-9", False))
    told.logged("conflicting_delivery", task_id="t-1", attempt=1, lease_id="lease-9")
    assert judged("leases.own_leases", told.read(rows)) == []


def test_a_lease_id_of_a_megabyte_is_named_cut_short() -> None:
    huge = "x" * (1 << 20)
    (found,) = judged("leases.own_leases", _leased([row(1, "claimed", lease_id=huge)], _grant(1, "lease-1")))
    assert found.clause == "LEASE-1" and len(found.note or "") < 2000 and len(repr(found.actual)) < 500
    assert f"{1 << 20} characters" in (found.note or "")


def test_the_second_workers_rows_record_their_attempts_leases_too() -> None:
    second = _leased([], _grant(1, "lease-1")).read([row(1, "claimed", lease_id="lease-7")], journal="second")
    (found,) = judged("leases.second_worker_own_leases", second)
    assert (found.clause, found.pointer) == ("LEASE-1", "/second-worker/journal/t-1/1/lease_id")
    assert judged("leases.second_worker_own_leases", _leased([], _grant(1, "lease-1")).read(
        [row(1, "claimed")], journal="second")) == []
