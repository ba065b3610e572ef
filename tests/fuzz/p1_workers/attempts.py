"""Hostile workers of the rows the kit reads for how attempts follow each other: a first row numbered at SQLite's
largest integer, so SQLite picks every later seq at random (JNL-3), and a claimed row whose task nests arrays
deeper than any JSON reader recurses (PHASE-1); both must be refused naming the clause, with no traceback."""

from __future__ import annotations

from typing import Any, ClassVar

from resumekit.reference.p1 import journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched

NESTING = 100_000  # far deeper than Python's recursion limit


class _TopJournal(journal.Journal):
    def append(self, values: Any) -> Row:
        if self.rows():
            return super().append(values)
        row = tuple(values.get(name) for name in journal._INSERTED)
        seq = 2**63 - 1  # after it, SQLite chooses each new rowid at random (no larger one exists)
        names = ", ".join(journal._INSERTED)
        self._insert(f"INSERT INTO checkpoints (seq, {names}) VALUES (?, {', '.join('?' * len(row))})", (seq, *row))
        return Row(seq, *row)


class SeqAtTheIntegerLimit(reference.Worker):
    """Numbers its first checkpoint row 2**63 - 1; SQLite then gives every later row a random seq."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _TopJournal):
            super()._startup()


class _NestedJournal(journal.Journal):
    held: ClassVar[dict[int, Any]] = {}  # seq -> the task as served, which the worker goes on from

    def append(self, values: Any) -> Row:
        if values.get("phase") != "claimed":
            return super().append(values)
        row = super().append({**values, "task": "[" * NESTING + "]" * NESTING})
        self.held[row.seq] = values.get("task")
        return row.replace(task=values.get("task"))

    def rows(self) -> list[Row]:
        return [row.replace(task=self.held.get(row.seq, row.task)) for row in super().rows()]


class ClaimedTaskNestedDeep(reference.Worker):
    """Writes its claimed rows with a task of 100,000 nested arrays (200 kB), going on from the task in memory."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _NestedJournal):
            super()._startup()
