"""Broken workers of checkpoint scope: rows reused across generations, identities and bindings (SCOPE)."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import BINDING_FIELDS, Row, attempts
from tests.broken.workers._base import _patched, _Tracked


class ReusesAcrossGenerations(_Tracked):
    """Reuses an earlier attempt's rows when only ``generation`` differs (SCOPE-4)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        loose = tuple(name for name in BINDING_FIELDS if name != "generation")
        first = attempt.first
        mine = tuple(getattr(first, name) for name in loose)
        earlier = [
            group
            for group in attempts(self.journal.rows())
            if group[0].task_id == first.task_id
            and group[0].attempt < first.attempt
            and tuple(getattr(group[0], name) for name in loose) == mine
            and group[0].generation != first.generation
        ]
        if not earlier:
            return super()._reuse(attempt)
        # Pretend the earlier attempts carry this attempt's generation, so the reference reuses them.
        real_rows = self.journal.rows

        def rows() -> list[Row]:
            return [
                row.replace(generation=first.generation) if row.task_id == first.task_id else row
                for row in real_rows()
            ]

        with _patched(self.journal, "rows", rows):
            return super()._reuse(attempt)


class IgnoresSupersededAttempts(_Tracked):
    """Takes a superseded attempt served again for an attempt of its own: resumes or starts it although
    the journal holds rows of a later attempt of the task (SCOPE-7)."""

    def _superseded(self, attempt: reference.Attempt) -> bool:
        return False

    def _abandoned(self, attempt: reference.Attempt) -> bool:
        return False  # the superseded attempt's lost lease is recorded too: out of sight with the rows

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        real_rows = self.journal.rows

        def rows() -> list[Row]:  # the later attempts of the served task, out of sight
            return [r for r in real_rows() if r.task_id != task.get("task_id") or r.attempt <= task.get("attempt", 0)]

        with _patched(self.journal, "rows", rows):
            super()._served(task, lease)


class IgnoresIdentityConflicts(_Tracked):
    """Takes an attempt served with another identity than its rows for a new attempt and runs it (SCOPE-6)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        real_rows = self.journal.rows
        served = tuple(task.get(name) for name in journal.IDENTITY_FIELDS)

        def rows() -> list[Row]:  # the other identity's rows of the same attempt, out of sight
            return [r for r in real_rows() if r.identity[:2] != served[:2] or r.identity == served]

        with _patched(self.journal, "rows", rows):
            super()._served(task, lease)


class ReusesCommitDoneAcrossBindings(_Tracked):
    """Reuses an earlier attempt's commit_done, whatever its binding, instead of its own convergence from
    claimed: a governed commit's row carried into another Job (SCOPE-3, SCOPE-4)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        done = [
            row
            for row in self.journal.rows()
            if row.task_id == first.task_id and row.attempt < first.attempt and row.phase == "commit_done"
        ]
        if self._kind(attempt) != "commit" or not done:
            return super()._reuse(attempt)
        source = done[-1]
        self._record(
            attempt,
            "commit_done",
            result_hash=source.result_hash,
            result_body=source.result_body,
            commit_oid=source.commit_oid,
            reused_from=source.seq,
        )
        return True


class ForgetsAbandonmentsAtRestart(_Tracked):
    """Remembers a lost lease in this process only: a restart that finds the lease ACTIVE again (a replayed
    delivery revived it) resumes the abandoned attempt and makes governed side effects for it (LEASE-4)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost_here: set[tuple[str, int, str]] = set()

    def _abandoned(self, attempt: reference.Attempt) -> bool:
        return (attempt.first.task_id, attempt.first.attempt, attempt.lease_id) in self.lost_here

    def _abandon(self, attempt: reference.Attempt, why: str) -> None:
        if attempt.lost:
            self.lost_here.add((attempt.first.task_id, attempt.first.attempt, attempt.lease_id))
        attempt.lost = False  # so that the reference records nothing in the journal
        super()._abandon(attempt, why)


class LeavesTheFencesUnreported(_Tracked):
    """Writes the rows of SCOPE-6 and LEASE-6 but never reports them: a fence is taken for no reconciliation of
    the control plane's concern (PHASE-4)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        if attempt.last.reason in ("identity_conflict", "stale_generation"):
            self._release(attempt.lease_id)
            return
        super()._finish(attempt)


class LeavesTheJobOutOfTheBinding(_Tracked):
    """Compares bindings on seven fields, ``job_id`` left out as a mere label, so it reuses an earlier attempt's
    rows under another Job (SCOPE-2)."""

    LEFT_OUT = "job_id"

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        real_rows = self.journal.rows

        def rows() -> list[Row]:  # the earlier attempts of the task, as if issued under this attempt's Job
            return [
                row.replace(**{self.LEFT_OUT: getattr(first, self.LEFT_OUT)}) if row.task_id == first.task_id else row
                for row in real_rows()
            ]

        with _patched(self.journal, "rows", rows):
            return super()._reuse(attempt)


class StampsTheEarlierBinding(_Tracked):
    """Takes a later attempt's binding from its journal rather than from the claim: an attempt served while the
    journal holds an earlier attempt of the task gets that attempt's eight binding fields in its rows (SCOPE-1)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        earlier = [
            row
            for row in self.journal.rows()
            if row.task_id == task.get("task_id") and row.attempt < task.get("attempt", 0)
        ]
        if earlier:
            task = {**task, **{name: getattr(earlier[-1], name) for name in BINDING_FIELDS}}
        super()._served(task, lease)


class ReusesAReconciledAttempt(_Tracked):
    """Reuses the result_pending of an earlier attempt with an identical binding even when that attempt ended in
    reconciliation_required (SCOPE-5)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        real_rows = self.journal.rows

        def rows() -> list[Row]:  # the earlier attempts' reconciliation rows, out of sight
            return [
                row
                for row in real_rows()
                if not (row.task_id == first.task_id and row.attempt < first.attempt
                        and row.phase == "reconciliation_required")
            ]

        with _patched(self.journal, "rows", rows):
            return super()._reuse(attempt)


class IgnoresStaleGenerations(_Tracked):
    """Never fences a stale generation itself: an attempt served with a generation below its journal's rows on the
    branch runs like any other, and submits (LEASE-6)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        real_rows = self.journal.rows
        branch = (task.get("repository"), task.get("target_branch"))
        generation = task.get("generation", 0)

        def rows() -> list[Row]:  # the rows of a higher generation on the branch, out of sight
            return [
                row
                for row in real_rows()
                if (row.repository, row.target_branch) != branch or row.generation <= generation
            ]

        with _patched(self.journal, "rows", rows):
            super()._served(task, lease)
