"""The kit's own paths on the control plane (docs/spec/p1-control-plane.md CP-18, CP-22), pure.

The origin's hook asks ``_kit/origin/check`` whether a push may land (the governed push: an ACTIVE lease
of an attempt that expects the branch's old head, a commit whose only parent is that head) and tells
``_kit/origin/updated`` when a ref moved, each logged with the branch as the kit's own git read it then: the
worker can learn the paths' secret, so a report is only what it claims, and the rules hold it to that reading.
The kit's tool announces itself on ``_kit/tool/started``. Each push is attributed to the attempt whose lease
it acts under. The handlers are gathered in ``KIT_HANDLERS``; ``push_moments`` names the moment checks (CP-20)
a push asks for before it is judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.control_plane.state import (
    ZERO,
    Handler,
    Heads,
    Lease,
    Log,
    Moment,
    Outcome,
    Plan,
    Request,
    State,
    branch_leases,
    error_answer,
    fire_kill_point,
    ok_answer,
)


def _updates(body: dict[str, Any]) -> list[dict[str, Any]]:
    updates = body.get("updates")
    if not isinstance(body.get("repository"), str) or not isinstance(updates, list):
        return []
    return [
        u for u in updates
        if isinstance(u, dict) and all(isinstance(u.get(k), str) for k in ("ref", "old", "new"))
    ]


def _pusher(state: State, repository: str, update: Mapping[str, Any]) -> Lease | None:
    """The attempt a push is attributed to: the ACTIVE official lease whose attempt expects *old*, else the
    latest official lease of the branch."""
    ref = str(update["ref"])
    if not ref.startswith("refs/heads/"):
        return None
    branch = ref[len("refs/heads/"):]
    official = [lease for lease in branch_leases(state, repository, branch) if lease.official]
    active = [lease for lease in official if lease.data["state"] == "ACTIVE"]
    for lease in active:
        served = state.tasks[lease.data["task_id"]].attempts[lease.data["attempt"] - 1]
        if served["expected_branch_oid"] == update["old"]:
            return lease
    if active:
        return active[-1]
    return official[-1] if official else None


def push_moments(state: State, body: dict[str, Any]) -> list[Moment]:
    """The moment checks of a push the hook asks about (COMMIT-2): one per update of a branch that an
    attempt's lease is found to act under."""
    out = []
    for update in _updates(body):
        lease = _pusher(state, str(body["repository"]), update)
        if lease is not None:
            args = {
                "task_id": lease.data["task_id"],
                "attempt": lease.data["attempt"],
                "ref": update["ref"],
                "old": update["old"],
                "new": update["new"],
            }
            out.append(Moment("push", args))
    return out


def _read(heads: Heads, repository: str, ref: str) -> str | None:
    """A branch as the kit's own git read it when a report of the hook arrived: its object, or the zero name when
    the origin has no such branch; None for a ref that is no branch, which the kit does not read."""
    if not ref.startswith("refs/heads/"):
        return None
    return heads.get((repository, ref[len("refs/heads/"):])) or ZERO


def _origin_check(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    body = plan.body
    updates = _updates(body)
    if not updates or len(updates) != len(body["updates"]):
        message = "give repository and updates [{ref, old, new, ...}]"
        return Outcome(*error_answer(state, 400, "bad_request", message), [])
    repository = body["repository"]
    verdicts = []
    for update in updates:
        reason = _refusal(state, repository, update)
        verdicts.append({"ref": update["ref"], "accepted": reason is None, "reason": reason or ""})
    if any(not v["accepted"] for v in verdicts):
        for verdict in verdicts:
            if verdict["accepted"]:
                verdict["accepted"], verdict["reason"] = False, "another update of the same push was refused"
    for update, verdict in zip(updates, verdicts, strict=True):
        lease = _pusher(state, repository, update)
        log.add(
            "push",
            repository=repository,
            ref=update["ref"],
            old=update["old"],
            new=update["new"],
            accepted=verdict["accepted"],
            reason=verdict["reason"],
            read=_read(heads, repository, str(update["ref"])),
            task_id=None if lease is None else lease.data["task_id"],
            attempt=None if lease is None else lease.data["attempt"],
            lease={"lease_id": None, "state": None} if lease is None else {
                "lease_id": lease.data["lease_id"], "state": lease.data["state"]},
        )
    return Outcome(*ok_answer(state, 200, updates=verdicts), [])


def _refusal(state: State, repository: str, update: Mapping[str, Any]) -> str | None:
    ref, old, new = str(update["ref"]), str(update["old"]), str(update["new"])
    branches = {
        served["target_branch"]
        for rec in state.tasks.values()
        for served in rec.attempts
        if served["repository"] == repository
    }
    if not ref.startswith("refs/heads/") or ref[len("refs/heads/"):] not in branches:
        return f"ref {ref} is not the target branch of a task on {repository}"
    if old == ZERO:
        return f"creating {ref} is refused"
    if new == ZERO:
        return f"deleting {ref} is refused"
    branch = ref[len("refs/heads/"):]
    holders = [
        state.tasks[lease.data["task_id"]].attempts[lease.data["attempt"] - 1]
        for lease in branch_leases(state, repository, branch)
        if lease.official and lease.data["state"] == "ACTIVE"
    ]
    if not any(served["expected_branch_oid"] == old for served in holders):
        return f"{ref} is at {old}, which is not the expected_branch_oid of an attempt with an ACTIVE lease"
    if update.get("type") != "commit" or update.get("parents") != [old]:
        return f"{new} is not a commit whose only parent is {old}"
    return None


def _origin_updated(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    body = plan.body
    updates = _updates(body)
    outcome = Outcome(*ok_answer(state, 200), [])
    for update in updates:
        lease = _pusher(state, body["repository"], update)
        task_id = None if lease is None else str(lease.data["task_id"])
        log.add("origin_ref_updated", repository=body["repository"], ref=update["ref"], old=update["old"],
                new=update["new"], read=_read(heads, str(body["repository"]), str(update["ref"])), task_id=task_id,
                attempt=None if lease is None else lease.data["attempt"])
        if outcome.kill_point is None and fire_kill_point(state, "origin_ref_updated", task_id):
            outcome.kill_point = "origin_ref_updated"
            outcome.kill_worker = None if lease is None else lease.holder
    return outcome


def _tool_started(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    """The kit's tool runs in a workspace (p1.md WRK-5): logged, and the kill point ``tool_started``."""
    log.add("tool_started", **plan.body)  # BODY_MEMBERS made it exactly pid, grandchild, cwd and writes
    outcome = Outcome(*ok_answer(state, 200), [])
    if fire_kill_point(state, "tool_started", None):
        outcome.kill_point = "tool_started"
    return outcome


KIT_HANDLERS: dict[str, Handler] = {
    "origin_check": _origin_check,
    "origin_updated": _origin_updated,
    "tool_started": _tool_started,
}
