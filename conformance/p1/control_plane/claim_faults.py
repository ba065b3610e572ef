"""The scripted faults of a claim (CP-21, SCOPE-6, SCOPE-7), with what each one does to the claim it fires on.

A claim fault counts a claim only while its task is in the state the fault needs (``applies_to_claim``),
so that a claim sent before the kit has issued or re-issued the task does not use it up. The claim's own
rules (``worker_endpoints``) ask each fault that fired, in the order they were scripted, for an answer;
the first that gives one answers the claim. The other faults are in ``faults.py``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.p1.control_plane.faults import FaultError, check_integer, check_nth, fault_to_mapping
from resumekit.conformance.p1.control_plane.lifecycle import check_task, grant
from resumekit.conformance.p1.control_plane.state import (
    Fault,
    Heads,
    Lease,
    Log,
    Outcome,
    Request,
    State,
    fire_kill_point,
    lease_view,
    ok_answer,
)


def _claims_only(fault: DuplicateDelivery | ServeStale | ReplayAttempt | ConflictingIdentity) -> None:
    check_nth(fault.nth)
    if fault.on != "claim":
        raise FaultError(f"{type(fault).__name__} fires on claims only")


@dataclass(frozen=True, slots=True)
class DuplicateDelivery(Fault):
    """Answer the nth claim with the task's RUNNING attempt and its current lease, to whoever claims."""

    task_id: str
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)

    def applies_to_claim(self, state: State, worker: str | None) -> bool:
        """The nth claim (from ``worker`` when it names one)."""
        return self.worker in (None, worker)

    def answer_claim(self, state: State, request: Request, heads: Heads, log: Log) -> Outcome | None:
        """The task's RUNNING attempt and its lease again; with none, the fault is missed (logged)."""
        rec = state.tasks.get(self.task_id)
        lease_id = None if rec is None else rec.lease_of.get(rec.current["attempt"])
        if rec is None or rec.state != "RUNNING" or lease_id is None:
            log.add("fault_missed", fault=fault_to_mapping(self), why="the task has no RUNNING attempt")
            return None
        lease = state.leases[lease_id]
        log.add("duplicate_delivery", task_id=self.task_id, attempt=rec.current["attempt"], lease_id=lease_id)
        task, view = copy.deepcopy(rec.current), lease_view(lease)
        return Outcome(*ok_answer(state, 200, task=task, lease=view, retry_after_ms=state.retry_after_ms), [])


@dataclass(frozen=True, slots=True)
class ServeStale(Fault):
    """Let the nth claim serve the task's QUEUED attempt although its generation is below the branch's.

    Counted over the claims at which the task has a QUEUED attempt, so that a claim the worker sends
    before the kit has issued the task does not use the fault up."""

    task_id: str
    nth: int = 1
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)

    def applies_to_claim(self, state: State, worker: str | None) -> bool:
        """The nth claim at which the task has a QUEUED attempt."""
        rec = state.tasks.get(self.task_id)
        return rec is not None and rec.state == "QUEUED"

    def stale_task(self) -> str | None:
        """Its task, whatever its generation."""
        return self.task_id


@dataclass(frozen=True, slots=True)
class ReplayAttempt(Fault):
    """Answer the nth claim with attempt *attempt* of the task, superseded by a later one, as served then,
    with its own lease made ACTIVE again (a new one if it never had one): a replayed, faulty delivery
    (SCOPE-7). Counted over the claims at which the task's current attempt is above *attempt*."""

    task_id: str
    attempt: int
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)
        check_integer(self.attempt, "ReplayAttempt.attempt", 1)

    def applies_to_claim(self, state: State, worker: str | None) -> bool:
        """The nth claim (from ``worker``) at which the task is past ``attempt``."""
        rec = state.tasks.get(self.task_id)
        return self.worker in (None, worker) and rec is not None and self.attempt < rec.current["attempt"]

    def may_grant(self) -> bool:
        """A replayed attempt that never had a lease is granted one."""
        return True

    def answer_claim(self, state: State, request: Request, heads: Heads, log: Log) -> Outcome:
        """Attempt ``attempt`` as served then, its lease revived (or granted)."""
        rec = state.tasks[self.task_id]
        served = copy.deepcopy(rec.attempts[self.attempt - 1])
        check_task(state, served, [])
        earlier = rec.lease_of.get(self.attempt)
        if earlier is not None:
            # The old claim answer again, its lease revived as a control plane that lost its lease state would
            # (CP-12 never does this): a worker that resumes the attempt from its journal renews it with success.
            lease = state.leases[earlier]
            lease.data.update(state="ACTIVE", expires_at_ms=state.now_ms + lease.data["ttl_ms"])
            log.add("lease", event="revived", lease=lease_view(lease))
        else:
            lease = grant(state, log, served, generation=served["generation"], official=True,
                          holder=request.worker, heads=heads)
            rec.lease_of[self.attempt] = lease.data["lease_id"]
        outcome = _faulty_delivery(state, request, log, self, "replayed_delivery", self.attempt, served, lease, earlier)
        # A kill here leaves the revived lease ACTIVE with the worker never told: only what its journal holds can
        # keep a restart from using it (LEASE-4).
        if fire_kill_point(state, "server_claim_granted", self.task_id):
            outcome.kill_point, outcome.kill_worker = "server_claim_granted", request.worker
        return outcome


# The identity fields a ConflictingIdentity may change: every one but task_id and attempt, which name the
# attempt served, and repository, which would need another origin.
CONFLICT_FIELDS = ("execution_digest", "job_id", "base_oid", "expected_branch_oid", "target_branch", "generation")


@dataclass(frozen=True, slots=True)
class ConflictingIdentity(Fault):
    """Answer the nth claim with an attempt of the task (default: its current one) served with *changes* to
    its identity, and a new ACTIVE lease of the kit's for it. CP-5 forbids this: it is a deliberate fault of
    the kit's, for SCOPE-6. The lease has the served generation and is granted as a claim's would be (a
    higher generation fences the branch's lower ones, CP-12); the task's own record is left as it was.
    Counted over the claims at which the task has that attempt."""

    task_id: str
    changes: dict[str, Any]
    attempt: int | None = None
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)
        if not isinstance(self.changes, dict) or not self.changes:
            raise FaultError("ConflictingIdentity.changes must be a non-empty mapping of identity fields")
        unknown = sorted(set(self.changes) - set(CONFLICT_FIELDS))
        if unknown:
            raise FaultError(
                f"ConflictingIdentity.changes cannot change {', '.join(unknown)}; it may change "
                f"{', '.join(CONFLICT_FIELDS)}"
            )
        if self.attempt is not None:
            check_integer(self.attempt, "ConflictingIdentity.attempt", 1)

    def applies_to_claim(self, state: State, worker: str | None) -> bool:
        """The nth claim (from ``worker``) at which the task has the attempt."""
        rec = state.tasks.get(self.task_id)
        return self.worker in (None, worker) and rec is not None and (self.attempt or 1) <= rec.current["attempt"]

    def may_grant(self) -> bool:
        """The kit grants the attempt it serves a lease."""
        return True

    def answer_claim(self, state: State, request: Request, heads: Heads, log: Log) -> Outcome:
        """The attempt served with ``changes``, under a new lease of the kit's."""
        rec = state.tasks[self.task_id]
        number = self.attempt or rec.current["attempt"]
        served = {**copy.deepcopy(rec.attempts[number - 1]), **copy.deepcopy(self.changes)}
        check_task(state, served, [])
        earlier = rec.lease_of.get(number)
        # A lease of the kit's, which no real attempt of the task holds.
        lease = grant(state, log, served, generation=served["generation"], official=False,
                      holder=request.worker, heads=heads)
        return _faulty_delivery(state, request, log, self, "conflicting_delivery", number, served, lease, earlier)


def _faulty_delivery(
    state: State,
    request: Request,
    log: Log,
    fault: ReplayAttempt | ConflictingIdentity,
    kind: str,
    number: int,
    served: dict[str, Any],
    lease: Lease,
    earlier: str | None,
) -> Outcome:
    """A claim answered with an attempt CP-5 and CP-7 would never serve (SCOPE-6, SCOPE-7), with an ACTIVE
    lease, so that a worker that does not fence it can go on to a governed side effect the kit then sees."""
    log.add(kind, task_id=fault.task_id, attempt=number, worker=request.worker,
            task=copy.deepcopy(served), lease_id=lease.data["lease_id"], earlier_lease_id=earlier,
            fault=fault_to_mapping(fault))
    answer = {"task": served, "lease": lease_view(lease), "retry_after_ms": state.retry_after_ms}
    return Outcome(*ok_answer(state, 200, **answer), [])
