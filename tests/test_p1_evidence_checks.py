"""The pure P1 checks: reuse across bindings (SCOPE-4), keys (KEY-2), lost leases (LEASE-4), superseded
attempts and identity conflicts (SCOPE-6, SCOPE-7), and a second worker's journal."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from resumekit.conformance.p1 import evidence_checks as checks
from resumekit.conformance.p1 import model
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


def test_a_row_of_an_attempt_below_one_the_journal_holds_is_scope_7() -> None:
    rows = [_row(1, 1, "claimed"), _row(2, 2, "claimed"), _row(3, 2, "workspace_prepared", workspace="task-x")]
    assert checks.superseded_checks(rows) == []
    rows.append(_row(4, 1, "workspace_prepared", workspace="task-y"))
    assert _clauses(checks.superseded_checks(rows)) == ["SCOPE-7"]
    # Another task's attempts are counted apart.
    assert checks.superseded_checks([*rows[:3], _row(4, 1, "claimed", task_id="t-2")]) == []


def _delivery(kind: str, governed: list[dict[str, Any]], **served: Any) -> dict[str, Any]:
    task = {name: _row(0, 1, "claimed")[name] for name in checks.IDENTITY}
    task.update(served)
    return {"kind": kind, "task_id": "t-1", "attempt": 1, "worker": "w1", "task": task, "governed": governed}


def test_a_governed_side_effect_after_a_faulty_delivery_names_its_clause() -> None:
    receipt = [{"endpoint": "receipt", "path": "v1/jobs/j/receipt", "status": 200}]
    replayed = dataclasses.replace(_evidence([]), deliveries=[_delivery("replayed_delivery", receipt)])
    assert _clauses(checks.delivery_checks(replayed)) == ["SCOPE-7"]
    served = _delivery("conflicting_delivery", receipt, job_id="x")
    conflicting = dataclasses.replace(_evidence([]), deliveries=[served])
    assert _clauses(checks.delivery_checks(conflicting)) == ["SCOPE-6"]
    quiet = dataclasses.replace(_evidence([]), deliveries=[_delivery("replayed_delivery", [])])
    assert checks.delivery_checks(quiet) == []


def test_an_attempt_served_with_another_identity_gets_claimed_then_identity_conflict_only() -> None:
    held = [_row(1, 1, "claimed"), _row(2, 1, "result_submitted", idempotency_key="k", result_hash="h",
                                         result_body="{}")]
    good = [*held, _row(3, 1, "claimed", job_id="x"),
            _row(4, 1, "reconciliation_required", job_id="x", reason="identity_conflict")]
    delivery = [_delivery("conflicting_delivery", [], job_id="x")]
    assert checks.delivery_checks(dataclasses.replace(_evidence(good), deliveries=delivery)) == []
    ran = [*held, _row(3, 1, "claimed", job_id="x"), _row(4, 1, "workspace_prepared", job_id="x", workspace="t")]
    assert _clauses(checks.delivery_checks(dataclasses.replace(_evidence(ran), deliveries=delivery))) == ["SCOPE-6"]


def test_the_second_workers_journal_is_checked_and_its_outcome_judged() -> None:
    ok = [_row(1, 1, "claimed"), _row(2, 1, "reconciliation_required", reason="lease_not_converged")]
    ev = dataclasses.replace(_evidence([]), second_rows=ok)
    assert checks.second_worker_checks(ev) == []
    expect = {"task": {"second_worker": {"final": "result_submitted", "attempts": 1}}}
    found = checks.outcome_checks(expect, {"task": "t-1"}, ev)
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/second_worker/final")]
    broken = dataclasses.replace(ev, second_rows=[_row(1, 1, "workspace_prepared", workspace="t")])
    assert [(m.clause, m.pointer[:15]) for m in checks.second_worker_checks(broken)] == [("PHASE-2", "/second-worker/")]


def test_the_journal_model_judges_plain_values() -> None:
    # What the kit expects and compares, computed from values alone: no origin, no journal file.
    blobs = [("100644", "README.md", b"hello\n"), ("100755", "bin/run", b"")]
    assert model.capture_body("a" * 40, blobs) == {
        "base_oid": "a" * 40,
        "files": [{"path": path, "sha256": hashlib.sha256(data).hexdigest()} for _, path, data in blobs],
        "kind": "source_capture",
    }
    commit = {"name": "kit", "email": "kit@resumekit.invalid", "timestamp": 1767225600, "message": "p1: t\n"}
    person = "kit <kit@resumekit.invalid> 1767225600 +0000"
    assert model.commit_text("t" * 40, "p" * 40, commit) == (
        f"tree {'t' * 40}\nparent {'p' * 40}\nauthor {person}\ncommitter {person}\n\np1: t\n".encode()
    )
    before = {"a": ("dir",), "a/f": ("file", 1, 10, "h"), "gone": ("link", "x")}
    after = {"a": ("dir",), "a/f": ("file", 1, 11, "h"), "new": ("dir",)}
    assert model.tree_changes(before, after) == {"new": "created", "gone": "removed", "a/f": "changed"}
    rows = [_row(1, 1, "claimed"), _row(2, 1, "workspace_prepared", workspace="task-x")]
    assert model.Snapshot.of(rows[:1]).kept_by(model.Snapshot.of(rows))
    assert not model.Snapshot.of(rows).kept_by(model.Snapshot.of(rows[1:]))
