"""A hand-written history of a failing P1 commit scenario, as a report keeps it, for the tests of the story.

The worker (``w1``) claims a commit task, prepares its workspace, verifies, pushes C to the origin and is
killed at the failpoint right after the push, before ``commit_done`` is durable. The kit restarts it
(``w2``): its journal ends at ``verification_passed``, and instead of reading the branch and adopting C
(COMMIT-1) it pushes a second time, which the origin refuses and the control plane logs (COMMIT-3). The
events are shaped as the harness records them (``conformance/history.py``): the kit's steps, the worker
processes, the control plane's log entries, the origin's ref updates and the journal's reads with rows.
"""

from __future__ import annotations

from typing import Any

from resumekit.conformance.results import CaseResult, Mismatch, Outcome

CASE_ID = "p1-commit-crash-after-push"
TASK = "t-commit-1"
BASE, C, C2 = "1" * 40, "c" * 40, "d" * 40


def _row(seq: int, phase: str, **more: Any) -> dict[str, Any]:
    return {"task_id": TASK, "attempt": 1, "seq": seq, "phase": phase, "lease_id": "lease-1", **more}


ROWS = [
    _row(1, "claimed"),
    _row(2, "workspace_prepared", workspace="/scratch/workspaces/task-t-commit-1-a1"),
    _row(3, "verification_passed", commit_oid=C),
]


def _request(worker: str, number: int, method: str, path: str, endpoint: str, status: int) -> dict[str, Any]:
    return {"request": number, "now_ms": 0, "worker": worker, "method": method, "path": path, "endpoint": endpoint,
            "idempotency_key": None, "body_sha256": None, "status": status, "answer": "answer"}  # fmt: skip


_EVENTS: list[tuple[float, str, str, dict[str, Any]]] = [
    (0.4, "kit", "issued", {"name": "commit", "task": {"task_id": TASK, "attempt": 1, "kind": "commit",
                                                      "repository": "app", "target_branch": "main"}}),
    (1.2, "kit", "step", {"index": 0, "verb": "start", "argument": {"failpoint": "after_push"}}),
    (3.0, "journal", "read", {"journal": "first", "why": "start", "worker": "w1", "rows": []}),
    (48.7, "w1", "started", {"pid": 41213, "failpoint": "after_push", "diskFault": None, "tool": False,
                             "listing": [], "rowsAtStart": 0, "openAtStart": []}),
    (61.9, "control-plane", "request", _request("w1", 1, "POST", "/v1/claim", "claim", 200)),
    (62.0, "control-plane", "lease", {"event": "granted", "lease": {"lease_id": "lease-1", "task_id": TASK,
                                                                    "attempt": 1, "expires_ms": 30000}}),
    (70.3, "journal", "read", {"journal": "first", "why": "moment", "worker": "w1", "rows": ROWS[:1]}),
    (95.8, "journal", "read", {"journal": "first", "why": "moment", "worker": "w1", "rows": ROWS}),
    (96.1, "control-plane", "request", _request("w1", 2, "POST", "/v1/leases/lease-1/renew", "renew", 200)),
    (101.5, "control-plane", "push", {"repository": "app", "ref": "refs/heads/main", "old": BASE, "new": C,
                                      "accepted": True, "reason": ""}),
    (101.9, "origin", "ref-updated", {"repository": "app", "ref": "refs/heads/main", "old": BASE, "new": C}),
    (103.2, "w1", "blocked", {"failpoint": "after_push", "armed": "after_push", "rows": ROWS,
                              "cache": ["ok", {"phase": "verification_passed"}], "temporaries": []}),
    (103.4, "kit", "step", {"index": 1, "verb": "wait", "argument": "blocked"}),
    (104.0, "kit", "step", {"index": 2, "verb": "kill", "argument": {}}),
    (104.3, "w1", "killed", {"pid": 41213, "signal": "SIGKILL", "at": "after_push"}),
    (109.8, "w1", "reaped", {"marker": False}),
    (110.0, "kit", "step", {"index": 3, "verb": "start", "argument": {}}),
    (112.6, "journal", "read", {"journal": "first", "why": "start", "worker": "w2", "rows": ROWS}),
    (151.2, "w2", "started", {"pid": 41290, "failpoint": None, "diskFault": None, "tool": False,
                              "listing": ["task-t-commit-1-a1"], "rowsAtStart": 3,
                              "openAtStart": [ROWS[-1]]}),
    (160.4, "control-plane", "request", _request("w2", 3, "POST", "/v1/leases/lease-1/renew", "renew", 200)),
    (171.0, "control-plane", "push", {"repository": "app", "ref": "refs/heads/main", "old": BASE, "new": C2,
                                      "accepted": False, "reason": "not a fast-forward of the branch"}),
    (173.7, "control-plane", "request", _request("w2", 4, "PUT", "/v1/jobs/job-1/receipt", "receipt", 200)),
    (174.1, "control-plane", "receipt", {"job_id": "job-1", "task_id": TASK, "attempt": 1, "visibility": "confirmed",
                                         "commit_oid": C}),
    (180.9, "kit", "step", {"index": 4, "verb": "wait", "argument": "idle"}),
    (230.5, "w2", "state", {"wanted": "idle", "answer": {"state": "idle"}}),
    (231.0, "journal", "read", {"journal": "first", "why": "final", "worker": "w2",
                                "rows": [*ROWS, _row(4, "commit_done", commit_oid=C)]}),
    (240.2, "w2", "stopped", {"exitCode": 0, "marker": True}),
]

PUSH_AGAIN = 20  # the seq of w2's second push, where COMMIT-3 is seen


def history() -> list[dict[str, Any]]:
    """The events as a report keeps them: ``{"seq", "atMs", "actor", "kind", "data"}``."""
    return [
        {"seq": seq, "atMs": at, "actor": actor, "kind": kind, "data": data}
        for seq, (at, actor, kind, data) in enumerate(_EVENTS)
    ]


MISMATCHES = (
    Mismatch(
        "/origins/app/pushes",
        "at most one push of the binding reaches the origin",
        {"ref": "refs/heads/main", "old": BASE, "new": C2, "worker": "w2"},
        "COMMIT-3",
        "after the kill at after_push, w2 pushed again instead of reading the branch and adopting C",
        check="commit.pushed_once",
        event=PUSH_AGAIN,
    ),
    Mismatch(
        "/journal/rows/3",
        {"phase": "commit_done"},
        {"phase": "commit_done", "after": "a second push"},
        "COMMIT-1",
        "commit_done was written after a push the origin refused, not after adopting C",
        check="commit.adopts_after_crash",
        event=25,
    ),
)


def failing_result(**changes: Any) -> CaseResult:
    """The failed result of the scenario, carrying the history and the two mismatches seen in it."""
    fields: dict[str, Any] = {
        "case_id": CASE_ID,
        "kind": "p1",
        "outcome": Outcome.FAILED,
        "clauses": ("COMMIT-1", "COMMIT-3"),
        "profile": "core",
        "mismatches": MISMATCHES,
        "message": "2 check(s) failed",
        "fault_model": "process-crash",
        "counts_toward": ("commit",),
        "history": tuple(history()),
    }
    fields.update(changes)
    return CaseResult(**fields)
