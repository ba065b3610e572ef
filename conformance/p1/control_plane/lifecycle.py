"""The lifecycle of attempts and leases (docs/spec/p1-control-plane.md CP-4 to CP-6, CP-10, CP-12), pure.

How the state changes over CP time, whether the kit, a request or a scripted fault drives it: the clock
moves, an attempt is checked and issued, a task changes state, a lease is granted (fencing the branch's
lower generations), ends (released, expired, fenced, superseded) and, when its RUNNING attempt has no
result stored, has the task issued anew; a task's one result is stored. Every change is written to the
``Log`` it is given.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, result_hash
from resumekit.conformance.p1.control_plane.state import (
    TASK_SCHEMA,
    Heads,
    KitError,
    Lease,
    Log,
    State,
    TaskRec,
    branch_leases,
    lease_view,
)


def set_task_state(state: State, log: Log, task_id: str, to: str, cause: str) -> None:
    """Move the task to state *to* (logged with its *cause*); a task already there is left as it is."""
    rec = state.tasks[task_id]
    if rec.state != to:
        attempt = rec.current["attempt"]
        log.add("task_state", task_id=task_id, attempt=attempt, **{"from": rec.state}, to=to, cause=cause)
        rec.state = to


def issue_next(state: State, log: Log, task_id: str, changes: Mapping[str, Any], cause: str) -> None:
    """Issue the task's next official attempt, QUEUED, with *changes* to its identity (CP-6)."""
    rec = state.tasks[task_id]
    previous = rec.current
    served = {**copy.deepcopy(previous), **copy.deepcopy(dict(changes)), "attempt": previous["attempt"] + 1}
    check_task(state, served, rec.attempts)
    rec.attempts.append(served)
    state.issue_order.append((task_id, served["attempt"]))
    log.add("attempt_issued", task_id=task_id, attempt=served["attempt"], task=copy.deepcopy(served), cause=cause)
    set_task_state(state, log, task_id, "QUEUED", cause)
    # Issuing a new attempt ends the previous attempt's lease (CP-6).
    lease_id = rec.lease_of.get(previous["attempt"])
    if lease_id is not None and state.leases[lease_id].data["state"] == "ACTIVE":
        end_lease(state, log, state.leases[lease_id], "EXPIRED", "superseded")


def end_lease(state: State, log: Log, lease: Lease, to: str, event: str) -> None:
    """End *lease* in state *to* (logged as *event*); an official lease's RUNNING attempt with no result
    stored is issued anew (CP-12)."""
    lease.data["state"] = to
    log.add("lease", event=event, lease=lease_view(lease))
    if not lease.official:
        return
    rec = state.tasks[lease.data["task_id"]]
    # CP-12: a RUNNING attempt whose lease stops being ACTIVE with no result stored is issued anew.
    if rec.current["attempt"] == lease.data["attempt"] and rec.state == "RUNNING" and rec.stored is None:
        issue_next(state, log, lease.data["task_id"], {}, f"lease_{event}")


def move_clock(state: State, log: Log, delta_ms: int) -> None:
    """Move CP time by *delta_ms*; leases expire at once where due (CP-4, CP-12)."""
    before = state.now_ms
    state.now_ms += delta_ms
    log.add("clock", **{"from": before}, to=state.now_ms, delta_ms=delta_ms)
    expire(state, log)


def expire(state: State, log: Log) -> None:
    """CP-12 expiry: every ACTIVE lease whose expires_at_ms has been reached becomes EXPIRED."""
    for lease in list(state.leases.values()):
        if lease.data["state"] == "ACTIVE" and lease.data["expires_at_ms"] <= state.now_ms:
            end_lease(state, log, lease, "EXPIRED", "expired")


def grant(
    state: State,
    log: Log,
    served: Mapping[str, Any],
    *,
    generation: int,
    official: bool,
    holder: str | None,
    heads: Heads,
) -> Lease:
    """Grant an ACTIVE lease on the attempt *served*, whose view carries the branch's head from *heads*."""
    repository, branch = served["repository"], served["target_branch"]
    lease_id = f"lease-{state.next_lease}"
    state.next_lease += 1
    lease = Lease(
        data={
            "lease_id": lease_id,
            "repository": repository,
            "target_branch": branch,
            "task_id": served["task_id"],
            "attempt": served["attempt"],
            "generation": generation,
            "state": "ACTIVE",
            "ttl_ms": state.ttl_ms,
            "acquired_at_ms": state.now_ms,
            "expires_at_ms": state.now_ms + state.ttl_ms,
            "current_head_oid": heads.get((repository, branch)),
        },
        official=official,
        holder=holder,
    )
    state.leases[lease_id] = lease
    key = (repository, branch)
    state.highest_generation[key] = max(state.highest_generation.get(key, 0), generation)
    log.add("lease", event="granted", lease=lease_view(lease), official=official, holder=holder)
    # Granting generation g fences every ACTIVE lease of the branch with a lower generation.
    for other in branch_leases(state, repository, branch):
        if other.data["state"] == "ACTIVE" and other.data["generation"] < generation:
            end_lease(state, log, other, "EXPIRED", "fenced")
    return lease


# ---------------------------------------------------------------- a task as served, its stored result


def check_task(state: State, served: Mapping[str, Any], earlier: list[dict[str, Any]]) -> None:
    """Refuse (``KitError``) a task as served that breaks its schema, is not canonical JSON, or shares an
    execution_digest with one of the *earlier* attempts but not its kind and payload (CP-5)."""
    problem = state.validate(TASK_SCHEMA, dict(served))
    if problem is not None:
        raise KitError(f"task {served.get('task_id')!r} breaks schemas/p1/task.json {problem}")
    try:
        canonical_json(dict(served))
    except NotCanonical as error:
        raise KitError(f"task {served.get('task_id')!r}: {error}") from None
    for other in earlier:
        same_digest = other["execution_digest"] == served["execution_digest"]
        if same_digest and (other["kind"] != served["kind"] or other["payload"] != served["payload"]):
            raise KitError("attempts with one execution_digest must have the same kind and payload (CP-5)")


def store_result(
    state: State, log: Log, rec: TaskRec, task_id: str, attempt: int, key: str, result: Any, cause: str
) -> None:
    """Store *result* as the task's one result (CP-10), for *attempt* under the idempotency *key*."""
    digest = result_hash(result)
    rec.stored = {"attempt": attempt, "idempotency_key": key, "result_hash": digest, "result": copy.deepcopy(result)}
    state.keys[key] = task_id
    log.add(
        "result_stored",
        task_id=task_id,
        attempt=attempt,
        idempotency_key=key,
        result_hash=digest,
        body=canonical_json(result).decode("utf-8"),
        cause=cause,
    )
