"""The pure P1 checks for reuse across bindings (SCOPE-4), keys (KEY-2) and lost leases (LEASE-4)."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1 import checks
from resumekit.conformance.p1.evidence import COLUMNS


def _row(seq: int, attempt: int, phase: str, **columns: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(seq=seq, task_id="t-1", attempt=attempt, execution_digest="d-1", job_id="j", repository="acme/w",
               base_oid="a" * 40, expected_branch_oid="a" * 40, target_branch="main", generation=1, phase=phase,
               lease_id=f"lease-{attempt}")
    row.update(columns)
    return row


def _evidence(rows: list[dict[str, Any]], submissions: list[dict[str, Any]] = [],  # noqa: B006 - never changed
              pushes: list[dict[str, Any]] = []) -> checks.Evidence:  # noqa: B006
    return checks.Evidence(rows=rows, snapshots=(), submissions=submissions, tasks={}, leases=(), pushes=pushes,
                           commits={}, expected={}, caches={}, idle=False, settings=None, decoy_changed=False)


def _clauses(found: list[Any]) -> list[str | None]:
    return [mismatch.clause for mismatch in found]


def test_reuse_of_a_row_of_another_generation_is_scope_4() -> None:
    done = {"result_hash": "h", "result_body": "{}"}
    rows = [_row(1, 1, "claimed"), _row(2, 1, "source_capture_done", **done), _row(3, 2, "claimed", generation=2),
            _row(4, 2, "source_capture_done", generation=2, reused_from=2, **done)]
    assert _clauses(checks.reuse_checks(rows)) == ["SCOPE-4"]
    rows[2]["generation"] = rows[3]["generation"] = 1
    assert checks.reuse_checks(rows) == []


def test_a_submission_under_another_key_than_result_pending_is_key_2() -> None:
    rows = [_row(1, 1, "result_pending", idempotency_key="k1")]
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h", "status": 201}]
    assert checks.key_checks(_evidence(rows, sent)) == []
    sent.append({"task_id": "t-1", "attempt": 1, "key": "k2", "result_hash": "h", "status": 409})
    assert _clauses(checks.key_checks(_evidence(rows, sent))) == ["KEY-2"]


def test_a_push_or_submission_with_a_lost_lease_is_lease_4() -> None:
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h", "status": 403}]
    pushes = [{"task_id": "t-1", "accepted": False, "lease": {"lease_id": "lease-1", "state": "FENCED"}},
              {"task_id": "t-1", "accepted": True, "lease": {"lease_id": "lease-2", "state": "ACTIVE"}}]
    assert _clauses(checks.lease_checks(_evidence([], sent, pushes))) == ["LEASE-4", "LEASE-4"]
