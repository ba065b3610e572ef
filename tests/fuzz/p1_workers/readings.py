"""Hostile workers of the readings p1.md settles: which journal commits the hits of an injected disk fault
count (adapter-protocol.md, ``p1.disk-faults``), a source_capture attempt's lease lost at its result_pending
boundary (LEASE-4), and ``before_receipt`` on a resend (FPT-1).

The first commits rows of a table of its own, which the kit never reads: a bulk of them at each start and
one before every checkpoint row, each in a transaction of its own, so every hit the scenario names lands on
an earlier row than the kit's count, and the journal the kit reads holds megabytes it must not read. It
appends ``own rows`` to the probe file (argument 1) once it has committed them. The other two take the other
side of a reading, as a hostile worker would, and must fail naming the clause.
"""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers.readings import PassesBeforeReceiptOnEachSend, ReconcilesACaptureAtThePendingBoundary
from tests.fuzz.p1_workers._base import argument

BULK_ROWS = 4000
BULK_TEXT = "x" * 1024  # 4 MB of rows of its own at each start


class OwnRowsBeforeEachCheckpoint(reference.Worker):
    """Commits rows of a table of its own: a bulk at each start and one before every checkpoint row."""

    def _startup(self) -> None:
        super()._startup()
        self.journal._insert("CREATE TABLE IF NOT EXISTS own_notes (seq INTEGER PRIMARY KEY, note TEXT)", ())
        self.journal._insert(
            "INSERT INTO own_notes (note) SELECT ? FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
            "SELECT i + 1 FROM n WHERE i < ?) SELECT i FROM n)",
            (BULK_TEXT, BULK_ROWS),
        )
        with open(argument(0), "a", encoding="utf-8") as probe:
            probe.write(f"own rows: {BULK_ROWS}\n")

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        self.journal._insert("INSERT INTO own_notes (note) VALUES (?)", (f"before {phase}",))
        return super()._record(attempt, phase, **columns)


class CaptureLossReconciled(ReconcilesACaptureAtThePendingBoundary):
    """Ends a source_capture attempt whose lease is lost before result_pending in lease_not_converged."""


class ReceiptFailpointOnEachResend(PassesBeforeReceiptOnEachSend):
    """Blocks at before_receipt again on the resend of a receipt answered 503."""
