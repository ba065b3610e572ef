"""Broken workers that take the other side of a reading p1.md settles (section 0.4, FPT-1, adapter-protocol.md):
each follows the reference everywhere else, and each reading is pinned by one golden scenario."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched, _Tracked


class ReconcilesACaptureAtThePendingBoundary(_Tracked):
    """Takes a lease a source_capture attempt loses just before result_pending, with source_capture_done (of
    commit_done's rank) durable, for COMMIT-4's lease_not_converged instead of an abandonment (LEASE-4)."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        capture = phase == "result_pending" and attempt.last.phase == "source_capture_done"
        try:
            return super()._record(attempt, phase, **columns)
        except reference.Abandon as abandon:
            if not capture or not attempt.lost:
                raise
            raise reference.Reconcile("lease_not_converged") from abandon


class _CheckpointsOnlyJournal(journal.Journal):
    def _insert(self, sql: str, values: tuple[Any, ...]) -> None:
        # A row of a side table (recoveries, abandonments) is committed as durably, but not counted.
        with _patched(self, "_disk", lambda file, op: None):
            super()._insert(sql, values)


class CountsOnlyCheckpointRows(_Tracked):
    """Counts the hits of an injected journal fault (p1.disk-faults) on checkpoint rows only, skipping the
    commits of the side tables: a recoveries row shifts every later hit (adapter-protocol.md)."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _CheckpointsOnlyJournal):
            super()._startup()


class PassesBeforeReceiptOnEachSend(_Tracked):
    """Passes the failpoint before_receipt again before each resend of a receipt after an unknown answer, as
    before_result_submit is passed before each send: FPT-1 places it once per convergence check."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipt_renewals: int | None = None  # the renewals of the receipt report under way, if any

    def _converge(self, attempt: reference.Attempt) -> None:
        self.receipt_renewals = 0
        try:
            super()._converge(attempt)
        finally:
            self.receipt_renewals = None

    def _renew(self, attempt: reference.Attempt) -> bool:
        if self.receipt_renewals is not None:
            if self.receipt_renewals > 0:  # a resend; the reference passed the failpoint before the first send
                self._failpoint("before_receipt")
            self.receipt_renewals += 1
        return super()._renew(attempt)
