"""Failures that once showed only as a changed outcome or named the wrong rule, each named by its own clause:
a 409 taken for an exact match (SUB-5), a durable row submitted under another key (KEY-2, not SUB-1), a lease
renewal decided by the worker's own clock (LEASE-3, LEASE-2), a damaged cache trusted over the journal
(CACHE-4), and the paths outside the workspace root that changed (CLEAN-2)."""

from __future__ import annotations

import dataclasses
from typing import Any

from resumekit.conformance.p1 import evidence_checks as checks
from resumekit.conformance.p1 import views as log_views
from resumekit.conformance.p1.evidence import COLUMNS


def _row(seq: int, phase: str, attempt: int = 1, **columns: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(seq=seq, task_id="t-1", attempt=attempt, execution_digest="d-1", job_id="j", repository="acme/w",
               base_oid="a" * 40, expected_branch_oid="a" * 40, target_branch="main", generation=1, phase=phase,
               lease_id=f"lease-{attempt}")
    row.update(columns)
    return row


def _evidence(rows: list[dict[str, Any]], **fields: Any) -> checks.Evidence:
    base = checks.Evidence(rows=rows, snapshots=(), submissions=(), tasks={}, leases=(), pushes=(), commits={},
                           expected={}, caches={}, idle=False, settings=None, decoy_changed=False)
    return dataclasses.replace(base, **fields)


def _clauses(found: list[Any]) -> list[str | None]:
    return [mismatch.clause for mismatch in found]


# ---------------------------------------------------------------- SUB-5: a 409 accepted only on an exact match

SUBMITTED = [_row(1, "result_pending", idempotency_key="k", result_hash="h"),
             _row(2, "result_submitted", idempotency_key="k", result_hash="h")]


def _answered(status: int, answer: Any = None) -> dict[str, Any]:
    return {"task_id": "t-1", "attempt": 1, "key": "k", "result_hash": "h", "status": status, "answer": answer}


def _exact(state: str = "VERIFYING", attempt: int = 1, digest: str = "h") -> dict[str, Any]:
    return {"state": state, "stored": {"attempt": attempt, "result_hash": digest}}


def test_a_409_with_this_attempts_body_in_verifying_or_succeeded_backs_result_submitted() -> None:
    for state in ("VERIFYING", "SUCCEEDED"):
        assert checks.exact_match_checks(_evidence(SUBMITTED, submissions=[_answered(409, _exact(state))])) == []


def test_a_409_in_another_state_or_with_another_result_is_sub_5_naming_what_differed() -> None:
    cases = {
        "the task was 'RUNNING'": _exact("RUNNING"),
        "the stored result_hash is 'other'": _exact(digest="other"),
        "attempt 2's": _exact(attempt=2),
        "no stored result": {"state": "VERIFYING", "stored": None},
        "recorded nothing of the answer": None,  # absent evidence is no exact match
    }
    for why, answer in cases.items():
        (found,) = checks.exact_match_checks(_evidence(SUBMITTED, submissions=[_answered(409, answer)]))
        assert found.clause == "SUB-5" and found.pointer == "/journal/t-1/1/result_submitted", found
        assert why in (found.note or ""), (why, found.note)
        assert "'t-1' attempt 1" in (found.note or "")


def test_sub_5_judges_only_a_result_submitted_resting_on_409s_alone() -> None:
    running = _answered(409, _exact("RUNNING"))
    assert checks.exact_match_checks(_evidence(SUBMITTED, submissions=[running, _answered(201)])) == []
    assert checks.exact_match_checks(_evidence(SUBMITTED)) == []  # no 409 at all: SUB-7's to judge
    assert checks.exact_match_checks(_evidence(SUBMITTED[:1], submissions=[running])) == []  # no row written
    # One exact match among the 409s backs the row.
    assert checks.exact_match_checks(_evidence(SUBMITTED, submissions=[running, _answered(409, _exact())])) == []


CONFLICTED = [_row(1, "result_pending", idempotency_key="k", result_hash="h"),
              _row(2, "reconciliation_required", reason="result_conflict")]


def test_an_exact_match_refused_for_result_conflict_is_sub_5_whatever_key_the_result_is_stored_under() -> None:
    exact = dict(_exact(), stored={"attempt": 1, "result_hash": "h", "idempotency_key": "the-kit's"})
    (found,) = checks.exact_match_checks(_evidence(CONFLICTED, submissions=[_answered(409, exact)]))
    assert found.clause == "SUB-5" and found.pointer == "/journal/t-1/1/reconciliation_required", found
    assert "was an exact match" in (found.note or "") and "'VERIFYING'" in (found.note or "")


def test_result_conflict_after_409s_that_were_no_exact_match_passes_and_absent_answers_prove_no_refusal() -> None:
    for answer in (_exact("RUNNING"), _exact(digest="other"), _exact(attempt=2), None):
        assert checks.exact_match_checks(_evidence(CONFLICTED, submissions=[_answered(409, answer)])) == []
    assert checks.exact_match_checks(_evidence(CONFLICTED)) == []  # no 409 at all: nothing was refused
    # No result_pending row: nothing to match against (SUB-1 judges such a submission).
    assert checks.exact_match_checks(_evidence(CONFLICTED[1:], submissions=[_answered(409, _exact())])) == []


def test_the_log_gives_each_409_the_state_and_stored_result_it_carried() -> None:
    log = [
        {"kind": "task_state", "task_id": "t-1", "to": "RUNNING", "request": 1},
        {"kind": "moment", "check": "submission", "task_id": "t-1", "request": 2},
        {"kind": "result_stored", "task_id": "t-1", "attempt": 1, "result_hash": "h", "request": 2},
        {"kind": "request", "endpoint": "result", "status": 409, "request": 2},
        {"kind": "moment", "check": "submission", "task_id": "t-1", "request": 3},
        {"kind": "task_state", "task_id": "t-1", "to": "VERIFYING", "request": 3},
        {"kind": "request", "endpoint": "result", "status": 409, "request": 3},
        {"kind": "moment", "check": "submission", "task_id": "t-1", "request": 4},
        {"kind": "request", "endpoint": "result", "status": 201, "request": 4},
    ]
    assert log_views.conflict_answers(log) == {2: _exact("RUNNING"), 3: _exact("VERIFYING")}
    assert log_views.conflict_answers([]) == {}


# ---------------------------------------------------------------- SUB-1 only without a durable row

def test_a_submission_is_sub_1_only_when_its_attempt_has_no_durable_result_pending() -> None:
    source = _row(1, "source_capture_done", result_hash="h")
    early = checks.submission_problem([source], "t-1", 1, "k", "h")
    assert early is not None and early.clause == "SUB-1" and "latest durable row is 'source_capture_done'" in early.note
    none = checks.submission_problem([], "t-1", 1, "k", "h")  # an empty journal never passes
    assert none is not None and none.clause == "SUB-1"
    pending = [source, _row(2, "result_pending", idempotency_key="k", result_hash="h")]
    assert checks.submission_problem(pending, "t-1", 1, "k", "h") is None
    # A durable row under another key: KEY-1's and KEY-2's to name (key_checks), not SUB-1's.
    assert checks.submission_problem(pending, "t-1", 1, "minted-again", "h") is None
    other = checks.submission_problem(pending, "t-1", 1, "k", "other")
    assert other is not None and other.clause == "SUB-2" and "'other'" in other.note


def test_a_key_minted_again_names_both_keys() -> None:
    rows = [_row(1, "result_pending", idempotency_key="k1", result_hash="h")]
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k2", "result_hash": "h", "status": 201}]
    (found,) = checks.key_checks(_evidence(rows, submissions=sent))
    assert found.clause == "KEY-2" and "'k2'" in found.note and "'k1'" in found.note


# ---------------------------------------------------------------- LEASE-3: renewal on CP time

START = 1_000_000
TTL = 30_000


def _lease(seq: int, event: str, expires: int, state: str = "ACTIVE") -> dict[str, Any]:
    view = {"lease_id": "lease-1", "task_id": "t-1", "attempt": 1, "state": state, "ttl_ms": TTL,
            "expires_at_ms": expires}
    return {"kind": "lease", "seq": seq, "event": event, "lease": view}


def _clock(seq: int, to: int, delta: int) -> dict[str, Any]:
    return {"kind": "clock", "seq": seq, "to": to, "delta_ms": delta}


JOURNAL = [_row(1, "claimed"), _row(2, "workspace_prepared"), _row(3, "verification_passed"),
           _row(4, "source_capture_done"), _row(5, "result_pending")]


def _renewal_evidence(after_second: list[dict[str, Any]]) -> checks.Evidence:
    # Granted at START; moved 14 s (not yet due), then 14 s more (2 s before expiry), then 14 s more.
    log = [_lease(1, "granted", START + TTL), _lease(2, "renewed", START + TTL), _clock(3, START + 14_000, 14_000),
           _clock(4, START + 28_000, 14_000), *after_second, _clock(9, START + 42_000, 14_000)]
    moves = [{"seq": 3, "rows_before": 2, "rows_after": 2}, {"seq": 4, "rows_before": 3, "rows_after": 3},
             {"seq": 9, "rows_before": 5, "rows_after": 5}]
    return _evidence(JOURNAL, lease_log=log, clock_moves=moves)


def test_a_step_boundary_after_the_renewal_point_without_a_renewal_is_lease_3() -> None:
    (found,) = checks.renewal_checks(_renewal_evidence([]))
    assert found.clause == "LEASE-3" and found.pointer == "/journal/t-1/1/source_capture_done/renewal"
    assert "'lease-1'" in found.note and "2000 ms before its expires_at_ms" in found.note and "LEASE-2" in found.note
    renewed = [_lease(5, "renewed", START + 28_000 + TTL)]
    assert checks.renewal_checks(_renewal_evidence(renewed)) == []


def test_only_a_move_of_a_step_past_the_renewal_point_of_an_active_lease_asks_for_a_renewal() -> None:
    found = _renewal_evidence([])
    # The same moves, but the lease was lost (or never ACTIVE): nothing to renew.
    lost = [_lease(1, "granted", START + TTL, state="EXPIRED"), *found.lease_log[2:]]
    assert checks.renewal_checks(dataclasses.replace(found, lease_log=lost)) == []
    # A move no step made (a fault's, an expiry's) places no row.
    assert checks.renewal_checks(dataclasses.replace(found, clock_moves=found.clock_moves[:1])) == []
    # No row written between the moves: no boundary came.
    assert checks.renewal_checks(dataclasses.replace(found, rows=JOURNAL[:3])) == []
    assert checks.renewal_checks(_evidence([])) == []


def test_the_log_keeps_clock_moves_and_lease_events_in_order() -> None:
    log = [
        {"kind": "request", "seq": 1, "endpoint": "claim"},
        {"kind": "lease", "seq": 2, "event": "granted", "lease": {"lease_id": "lease-1", "state": "ACTIVE",
                                                                  "ttl_ms": TTL, "expires_at_ms": 5, "holder": "w1"}},
        {"kind": "clock", "seq": 3, "from": 0, "to": 7, "delta_ms": 7},
    ]
    kinds = [(entry["kind"], entry["seq"]) for entry in log_views.lease_log(log)]
    assert kinds == [("lease", 2), ("clock", 3)]
    assert log_views.lease_log(log)[0]["lease"]["expires_at_ms"] == 5


# ---------------------------------------------------------------- CACHE-4: the journal decides, not the cache

HELD = _row(4, "source_capture_done")


def _damaged(rows: list[dict[str, Any]], lease: str | None, *, idle: bool = True) -> checks.Evidence:
    leases = [] if lease is None else [{"lease_id": "lease-1", "state": lease}]
    damages = [{"task_id": "t-1", "how": "newer", "open": HELD}]
    return _evidence(rows, leases=leases, cache_damages=damages, idle=idle)


def test_an_open_attempt_left_as_it_was_after_its_cache_was_damaged_is_cache_4() -> None:
    for lease in ("RELEASED", "ACTIVE", None):  # a lease the kit did not find never passes
        (found,) = checks.cache_damage_checks(_damaged([HELD], lease))
        assert found.clause == "CACHE-4" and found.pointer == "/caches/t-1/damaged-newer", found
        assert "'newer'" in found.note and "'source_capture_done'" in found.note and f"{lease!r}" in found.note
    back = checks.cache_damage_checks(_damaged([HELD, _row(5, "workspace_prepared")], "ACTIVE"))
    assert _clauses(back) == ["CACHE-4"] and "'workspace_prepared'" in back[0].note


def test_an_attempt_that_went_on_from_its_journal_row_or_lost_its_lease_passes() -> None:
    assert checks.cache_damage_checks(_damaged([HELD, _row(5, "result_pending")], "ACTIVE")) == []
    assert checks.cache_damage_checks(_damaged([HELD, _row(5, "reconciliation_required")], "RELEASED")) == []
    assert checks.cache_damage_checks(_damaged([HELD], "EXPIRED")) == []  # abandoned (LEASE-4)
    assert checks.cache_damage_checks(_damaged([HELD], "RELEASED", idle=False)) == []  # judged once idle
    finished = dataclasses.replace(_damaged([HELD], "RELEASED"), cache_damages=[{"task_id": "t-1", "how": "garbage",
                                                                                  "open": None}])
    assert checks.cache_damage_checks(finished) == []  # a finished task's rebuild is idle_checks' to judge


# ---------------------------------------------------------------- CLEAN-2 names what changed outside the root

def test_a_changed_decoy_names_each_path_relative_to_its_tree() -> None:
    before = {"decoy/keep.txt": "file:1", "decoy/deep": "dir", "decoy/deep/also.txt": "file:2"}
    after = {"decoy/keep.txt": "file:9", "decoy/new.txt": "file:3"}
    changes = checks.decoy_changes(before, after)
    assert changes == {"decoy/deep": "removed", "decoy/deep/also.txt": "removed", "decoy/keep.txt": "changed",
                       "decoy/new.txt": "added"}
    (found,) = checks.decoy_checks(_evidence([], decoy_changed=True, decoy_changes=changes))
    assert found.clause == "CLEAN-2" and found.actual == changes
    assert "'decoy/keep.txt' (changed)" in found.note and "4 path(s)" in found.note
    assert checks.decoy_changes(before, before) == {}
    assert checks.decoy_checks(_evidence([])) == []
    # A change the kit saw without the paths (no listing) still fails.
    (bare,) = checks.decoy_checks(_evidence([], decoy_changed=True))
    assert bare.clause == "CLEAN-2"
