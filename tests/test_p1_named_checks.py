"""Failures that once showed only as a changed outcome or named the wrong rule, each named by its own clause:
a 409 taken for an exact match (SUB-5), a durable row submitted under another key (KEY-2, not SUB-1), a lease
renewal decided by the worker's own clock (LEASE-3, LEASE-2), a damaged cache trusted over the journal
(CACHE-4), and the paths outside the workspace root that changed (CLEAN-2)."""

from __future__ import annotations

import dataclasses
from typing import Any

from resumekit.conformance.p1 import evidence_checks as checks
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


CONFLICTED = [_row(1, "result_pending", idempotency_key="k", result_hash="h"),
              _row(2, "reconciliation_required", reason="result_conflict")]


# ---------------------------------------------------------------- SUB-1 only without a durable row

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
