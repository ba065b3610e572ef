"""What the P1 checks judge and what they report: the evidence of one scenario, as plain data.

Pure: the harness gathers the evidence, the check modules (``evidence_checks`` and the modules it gathers)
only judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from resumekit.conformance.p1.model import Row, Snapshot
from resumekit.conformance.results import Mismatch


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one scenario left behind, as plain data."""

    rows: Sequence[Row]
    snapshots: Sequence[Snapshot]
    submissions: Sequence[Mapping[str, Any]]  # task_id, attempt, key, result_hash, status
    tasks: Mapping[str, Mapping[str, Any]]  # task_id -> state, attempt, stored
    leases: Sequence[Mapping[str, Any]]
    pushes: Sequence[Mapping[str, Any]]  # every push attempt the origins saw
    commits: Mapping[str, Sequence[str]]  # task_id -> commits its branch gained above expected_branch_oid
    expected: Mapping[str, Mapping[str, Any]]  # task_id -> the result body the kit computed
    caches: Mapping[str, tuple[str, Any]]  # task_id -> (status, cache)
    idle: bool
    settings: Sequence[Mapping[str, Any]] | None  # None: the adapter does not claim p1.journal
    decoy_changed: bool
    strict: bool = False  # the run's profile is strict: the strict clauses are checked too
    # attempts served against CP-5 or CP-7 (SCOPE-6, SCOPE-7), each with the governed side effects after it
    deliveries: Sequence[Mapping[str, Any]] = ()
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


def mismatch(clause: str, pointer: str, expected: Any, actual: Any, note: str) -> Mismatch:
    """A check's finding, with the clause first: the order the checks read best in."""
    return Mismatch(pointer, expected, actual, clause, note)
