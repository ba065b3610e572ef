"""The views the P1 rules share (``p1.views``), over the control plane's log as it was made: what each 409 answer
to a submission carried (SUB-5), and the clock moves and lease events in order (LEASE-3)."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1 import views

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
