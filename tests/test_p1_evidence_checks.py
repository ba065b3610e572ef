"""The pure P1 checks: reuse across bindings (SCOPE-4), keys (KEY-2), lost leases (LEASE-4), superseded
attempts and identity conflicts (SCOPE-6, SCOPE-7), a second worker's journal, and the origins: every push a
plain update of a target branch (COMMIT-2), every ref where the kit and the landed pushes left it (COMMIT-3)."""

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


def test_a_push_or_submission_with_a_lost_lease_is_lease_4() -> None:
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h", "status": 403}]
    pushes = [{"task_id": "t-1", "accepted": False, "lease": {"lease_id": "lease-1", "state": "FENCED"}},
              {"task_id": "t-1", "accepted": True, "lease": {"lease_id": "lease-2", "state": "ACTIVE"}}]
    assert _clauses(checks.lease_checks(_evidence([], sent, pushes))) == ["LEASE-4", "LEASE-4"]


def test_the_second_workers_journal_is_checked_and_its_outcome_judged() -> None:
    ok = [_row(1, 1, "claimed"), _row(2, 1, "reconciliation_required", reason="lease_not_converged")]
    ev = dataclasses.replace(_evidence([]), second_rows=ok)
    expect = {"task": {"second_worker": {"final": "result_submitted", "attempts": 1}}}
    found = checks.outcome_checks(expect, {"task": "t-1"}, ev)
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/second_worker/final")]


def test_an_attempt_left_holding_its_lease_at_idle_is_told_as_out_2_beside_fpt_4() -> None:
    rows = [_row(1, 1, "claimed"), _row(2, 1, "verification_passed")]
    expect = {"task": {"final": "result_submitted"}}
    active = [{"lease_id": "lease-1", "state": "ACTIVE"}]
    held = dataclasses.replace(_evidence(rows), idle=True, leases=active)
    found = checks.outcome_checks(expect, {"task": "t-1"}, held)
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/final"), ("OUT-2", "/expect/task/idle")]
    # Not idle, the lease not held, or lost once (a revived lease is not the worker's to keep): FPT-4 alone.
    lost = [{"kind": "lease", "event": "expired", "lease": {"lease_id": "lease-1", "state": "EXPIRED"}}]
    for ev in (dataclasses.replace(held, idle=False), dataclasses.replace(held, leases=()),
               dataclasses.replace(held, lease_log=lost)):
        assert _clauses(checks.outcome_checks(expect, {"task": "t-1"}, ev)) == ["FPT-4"]
    # A converged task says nothing of its lease here (LEASE-5 does).
    done = dataclasses.replace(held, rows=[*rows, _row(3, 1, "result_submitted")])
    assert checks.outcome_checks(expect, {"task": "t-1"}, done) == []


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


BASE, C, LATER = "b" * 40, "c" * 40, "d" * 40
MAIN = "refs/heads/main"


LANDED = [{"repository": "acme/w", "ref": MAIN, "new": C, "by": "push"}]


# -- checks of what the control plane and the origin saw, each shown to fail ---------------------------------
