"""What the P1 checks judge and what they report: the evidence of one scenario, as plain data.

Pure: the harness gathers the evidence, the check modules (``evidence_checks`` and the modules it gathers)
only judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


def mismatch(clause: str, pointer: str, expected: Any, actual: Any, note: str) -> Mismatch:
    """A check's finding, with the clause first: the order the checks read best in."""
    return Mismatch(pointer, expected, actual, clause, note)
