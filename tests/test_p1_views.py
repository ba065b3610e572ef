"""The values the P1 rules share: the views of ``p1.views`` over the control plane's log as it was made (what
each 409 answer to a submission carried, SUB-5; the clock moves and lease events in order, LEASE-3) and the
journal's model (``p1.model``), computed from values alone."""

from __future__ import annotations

import hashlib
from typing import Any

from resumekit.conformance.p1 import model, views
from tests.p1_stories import row

TTL = 30_000


def _exact(state: str = "VERIFYING", attempt: int = 1, digest: str = "h") -> dict[str, Any]:
    return {"state": state, "stored": {"attempt": attempt, "result_hash": digest}}


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
    assert views.conflict_answers(log) == {2: _exact("RUNNING"), 3: _exact("VERIFYING")}
    assert views.conflict_answers([]) == {}


def test_the_log_keeps_clock_moves_and_lease_events_in_order() -> None:
    log = [
        {"kind": "request", "seq": 1, "endpoint": "claim"},
        {"kind": "lease", "seq": 2, "event": "granted", "lease": {"lease_id": "lease-1", "state": "ACTIVE",
                                                                  "ttl_ms": TTL, "expires_at_ms": 5, "holder": "w1"}},
        {"kind": "clock", "seq": 3, "from": 0, "to": 7, "delta_ms": 7},
    ]
    kinds = [(entry["kind"], entry["seq"]) for entry in views.lease_log(log)]
    assert kinds == [("lease", 2), ("clock", 3)]
    assert views.lease_log(log)[0]["lease"]["expires_at_ms"] == 5


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
    rows = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x")]
    assert model.Snapshot.of(rows[:1]).kept_by(model.Snapshot.of(rows))
    assert not model.Snapshot.of(rows).kept_by(model.Snapshot.of(rows[1:]))
