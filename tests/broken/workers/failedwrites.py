"""Broken workers of a failed write (JNL-7): a commit that reported an error is a step not done."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched, _Tracked


class _PendingFromMemory(journal.Journal):
    def append(self, values: Any) -> Row:
        try:
            return super().append(values)
        except journal.JournalError:
            if values.get("phase") != "result_pending":
                raise
            # Keeps the row it meant to write and goes on: the result is computed, the key made.
            rows = self.rows()
            return Row(rows[-1].seq + 1 if rows else 1, *(values.get(name) for name in journal._INSERTED))


class SubmitsAPendingItFailedToCommit(_Tracked):
    """Takes a ``result_pending`` row whose commit reported an error for written, as the result and its key are
    at hand, and submits it (JNL-7: the step did not happen, and no side effect that depends on it follows)."""

    def run(self) -> int:
        with _patched(reference, "Journal", _PendingFromMemory):
            return super().run()
