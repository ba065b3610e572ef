"""What the P1 checks judge and what they report: the evidence of one scenario, as plain data.

Pure: the harness gathers the evidence, the check modules (``evidence_checks`` and the modules it gathers)
only judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from resumekit.conformance.p1.checks.story import JournalSettings
from resumekit.conformance.p1.model import Row, Snapshot
from resumekit.conformance.results import Mismatch


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one scenario left behind, as plain data."""

    rows: Sequence[Row]
    snapshots: Sequence[Snapshot]
    # task_id, attempt, key, result_hash, status; for a 409, ``answer``: the state and stored it carried (SUB-5)
    submissions: Sequence[Mapping[str, Any]]
    tasks: Mapping[str, Mapping[str, Any]]  # task_id -> state, attempt, stored
    leases: Sequence[Mapping[str, Any]]
    pushes: Sequence[Mapping[str, Any]]  # every push attempt the origins saw
    commits: Mapping[str, Sequence[str]]  # task_id -> commits its branch gained above expected_branch_oid
    expected: Mapping[str, Mapping[str, Any]]  # task_id -> the result body the kit computed
    caches: Mapping[str, tuple[str, Any]]  # task_id -> (status, cache)
    idle: bool
    settings: JournalSettings | None  # None: the adapter does not claim p1.journal
    decoy_changed: bool
    strict: bool = False  # the run's profile is strict: the strict clauses are checked too
    # attempts served against CP-5 or CP-7 (SCOPE-6, SCOPE-7), each with the governed side effects after it
    deliveries: Sequence[Mapping[str, Any]] = ()
    # leases revived after the control plane told a worker they were lost, each with what that worker's journal
    # then did for the lease's attempt (LEASE-4; views.revived_after_loss)
    revivals: Sequence[Mapping[str, Any]] = ()
    # each orderly stop of a blocked or idle worker, with the governed side effects before it exited (RESUME-5)
    stopped: Sequence[Mapping[str, Any]] = ()
    # every report the control plane received, in log order: task_id, attempt, state, reason (PHASE-4, CP-11)
    reports: Sequence[Mapping[str, Any]] = ()
    second_rows: Sequence[Row] = ()  # the journal of a scenario's second worker, if it has one
    second_snapshots: Sequence[Snapshot] = ()
    # The origins once the last step is done (CP-17, COMMIT-3): repository -> every ref it holds -> the object
    # the ref names; None when the kit did not read them, which no origin check passes.
    origin_refs: Mapping[str, Mapping[str, str]] | None = None
    # repository -> every ref the kit made when it created the origin -> the object it made the ref at
    kit_refs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # every change of an origin's ref since, in order: repository, ref, new, and ``by``, ``kit`` for a
    # branch the kit moved (CP-21) or ``push`` for an update the origin's hook let land (CP-18)
    ref_updates: Sequence[Mapping[str, Any]] = ()
    # (repository, old, new) of each push attempt -> whether old is new or an ancestor of it (a fast-forward),
    # None when new is neither an object of the origin nor a governed commit the kit computed (COMMIT-2)
    fast_forward: Mapping[tuple[str, str, str], bool | None] = field(default_factory=dict)
    # every claim request in log order: worker (its process's base-URL name), arrived_ms (real time, from
    # the control plane's start), empty (answered without a task); and the wait WRK-3 asks after an empty one
    claims: Sequence[Mapping[str, Any]] = ()
    retry_after_ms: int = 0
    # every request the control plane refused for calling one of the kit's own paths without the kit's secret
    # (CP-22), in log order: worker (None outside any base URL), method and path (its secret shown as <secret>)
    kit_calls: Sequence[Mapping[str, Any]] = ()
    # worker process name -> the last row of each attempt its journal held open when the kit started it
    # (RESUME-1); and every request of the control plane's log in order: worker, endpoint, path
    open_at_start: Mapping[str, Sequence[Row]] = field(default_factory=dict)
    requests: Sequence[Mapping[str, Any]] = ()
    # each clock move a step made (LEASE-3): the seq of its log entry, and the first worker's journal length
    # just before and just after it; and the log's clock and lease entries in order (``views.lease_log``)
    clock_moves: Sequence[Mapping[str, Any]] = ()
    lease_log: Sequence[Mapping[str, Any]] = ()
    # each cache the kit damaged (CACHE-4): task_id, how, and ``open``, the last row of the task's attempt the
    # journal then held open (None when it had none)
    cache_damages: Sequence[Mapping[str, Any]] = ()
    # each path of the decoy trees (``<tree>/<path>``) that changed in the scenario: removed, added or changed
    decoy_changes: Mapping[str, str] = field(default_factory=dict)


def mismatch(clause: str, pointer: str, expected: Any, actual: Any, note: str) -> Mismatch:
    """A check's finding, with the clause first: the order the checks read best in."""
    return Mismatch(pointer, expected, actual, clause, note)
