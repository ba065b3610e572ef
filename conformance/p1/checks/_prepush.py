"""What the checks of the reads before a push share (docs/spec/p1.md COMMIT-1, COMMIT-6): where in the control
plane's log a push's read of the leases must lie, and whether the kit moved a branch before an attempt's read of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1 import views
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Story
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch


def since(log: Sequence[Mapping[str, Any]], key: tuple[Any, Any], before: int) -> int:
    """The request number after which the read of the leases before a push of attempt *key* must come: the later of
    the claim that granted the attempt's lease and the first request of the process that renewed it last."""
    workers = {e.get("request"): e.get("worker") for e in log if e.get("kind") == "request"}
    granted, renewed = -1, None
    for entry in log:
        request, lease = entry.get("request"), entry.get("lease")
        if entry.get("kind") != "lease" or not isinstance(request, int) or request >= before:
            continue
        if not isinstance(lease, Mapping) or (lease.get("task_id"), lease.get("attempt")) != key:
            continue
        if entry.get("event") == "granted":
            granted = max(granted, request)
        elif entry.get("event") == "renewed":
            renewed = request
    worker = workers.get(renewed)
    began = min((r for r, w in workers.items() if w == worker and isinstance(r, int)), default=-1)
    return max(granted, began if worker is not None else -1)


def lease_reads(log: Sequence[Mapping[str, Any]], key: tuple[Any, Any]) -> list[int]:
    """The request numbers of the reads of leases answered 200 that named the branch of attempt *key*."""
    branch = next(
        ((task.get("repository"), task.get("target_branch")) for e in log if e.get("kind") == "attempt_issued"
         and isinstance(task := e.get("task"), Mapping) and (task.get("task_id"), task.get("attempt")) == key),
        None,
    )
    answered = {e.get("request") for e in log if e.get("kind") == "request" and e.get("endpoint") == "leases"
                and e.get("status") == 200}  # fmt: skip
    return [
        e["request"] for e in log
        if e.get("kind") == "leases_read" and (e.get("repository"), e.get("target_branch")) == branch
        and e.get("request") in answered and isinstance(e.get("request"), int)
    ]


# The steps after which the worker runs on its own (a move then may come after its pre-push read), or is settled:
# blocked at a failpoint, idle or ended, so that its next read of the branch comes after the move.
_RUNNING_STEPS = ("start", "continue", "second_worker")
_SETTLING_STEPS = ("wait", "kill", "stop", "crash_or_idle")


def settled(events: Sequence[Event], seq: int) -> bool:
    """Whether the kit's last step before *seq* that starts or settles a worker left it settled."""
    for event in reversed([e for e in events if e.seq < seq]):
        if event.actor == "kit" and event.kind == "step":
            verb = event.get("verb")
            if verb in _RUNNING_STEPS:
                return False
            if verb in _SETTLING_STEPS:
                return True
    return True  # no worker started yet


def branch_changed_after(history: Story, branch: tuple[Any, Any], seq: int) -> bool:
    ref = f"refs/heads/{branch[1]}"
    for event in history.events:
        if event.seq <= seq or event.actor != views.CONTROL_PLANE:
            continue
        if event.kind == "branch_moved" and (event.get("repository"), event.get("branch")) == branch:
            return True
        if event.kind == "push" and event.get("accepted") and (event.get("repository"), event.get("ref")) == (
            branch[0], ref
        ):
            return True
    return False


def attempts_of(history: Story, branch: tuple[Any, Any], moved_to: Any) -> list[tuple[Any, Any]]:
    """The commit attempts served on *branch* whose expected_branch_oid is not where the kit moved it."""
    found = []
    for event in history.of(views.CONTROL_PLANE, "attempt_issued"):
        task = event.get("task")
        if not isinstance(task, Mapping) or (task.get("repository"), task.get("target_branch")) != branch:
            continue
        if task.get("kind") == "commit" and task.get("expected_branch_oid") != moved_to:
            found.append((task.get("task_id"), task.get("attempt")))
    return found


def pushed_or_past(history: Story, before: Sequence[Row], key: tuple[Any, Any], seq: int) -> bool:
    """Whether attempt *key* had pushed, or was past its push in the journal, when the kit moved the branch."""
    if any(m.get("attempt") == key[1] and m.get("task_id") == key[0] and (history.seen_at(m) or 0) < seq
           for m in history.moments("push")):  # fmt: skip
        return True
    phases = [r["phase"] for r in before if (r["task_id"], r["attempt"]) == key]
    return bool(phases) and phases[-1] not in ("claimed", "workspace_prepared", "verification_passed")


def unread(history: Story, key: tuple[Any, Any], seq: int) -> str | None:
    """What attempt *key* did after the move that its pre-push read would have prevented, or None."""
    if any((m.get("task_id"), m.get("attempt")) == key and (history.seen_at(m) or 0) > seq
           for m in history.moments("push")):  # fmt: skip
        return "a push of the attempt reached the origin"
    rows = [r for r in history.rows if (r["task_id"], r["attempt"]) == key]
    if rows and rows[-1]["phase"] == "reconciliation_required" and rows[-1]["reason"] == "push_refused":
        return "the attempt ended in push_refused, the outcome of a push"
    return None


def moved_unread(key: tuple[Any, Any], move: Event, problem: str) -> Mismatch:
    task_id, attempt = key
    note = (
        f"the kit moved {move.get('branch')!r} of {move.get('repository')!r} to {move.get('new')!r} while the worker "
        f"was settled, before attempt {attempt} of {task_id!r} pushed, and {problem}: the pre-push read shows the "
        "moved branch, so the attempt ends in branch_moved without a push"
    )
    where = f"/tasks/{task_id}/attempts/{attempt}/branch-read"
    mismatch = _m("COMMIT-1", where, "branch_moved without a push", problem, note)
    return dataclasses.replace(mismatch, event=move.seq)
