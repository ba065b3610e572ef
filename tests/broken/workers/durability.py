"""Broken workers of the journal and the cache: weak settings, ignored errors, rows deleted (JNL, CACHE)."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from resumekit.reference.p1 import journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched, _Tracked


class _NormalJournal(journal.Journal):
    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        db.execute("PRAGMA synchronous=NORMAL")
        entry = self.settings[-1]
        entry["synchronous"] = int(db.execute("PRAGMA synchronous").fetchone()[0])  # reported truthfully: 1
        return db


class SynchronousNormal(_Tracked):
    """Writes the journal with ``synchronous=NORMAL`` and says so in p1.journal.settings (JNL-5)."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _NormalJournal):
            super()._startup()


class _ForgivingJournal(journal.Journal):
    def append(self, values: Any) -> Row:
        try:
            return super().append(values)
        except journal.JournalError:
            # Takes the failed commit for done: the row it would have had, or the one a synced-late
            # commit left behind.
            rows = self.rows()
            if rows and rows[-1].phase == values.get("phase") and rows[-1].task_id == values.get("task_id"):
                return rows[-1]
            return Row(rows[-1].seq + 1 if rows else 1, *(values.get(name) for name in journal._INSERTED))


_write_cache = reference.write_cache


def _forgiving_cache(*args: Any, **kwargs: Any) -> None:
    with contextlib.suppress(reference.CacheError):
        _write_cache(*args, **kwargs)


class IgnoresDiskErrors(_Tracked):
    """Takes a failed journal commit, cache write or fsync for a success and goes on (JNL-7, JNL-8)."""

    def run(self) -> int:
        with _patched(reference, "Journal", _ForgivingJournal), _patched(reference, "write_cache", _forgiving_cache):
            return super().run()


class SkipsTheCacheRebuild(_Tracked):
    """Writes a cache only with a new row: a damaged cache of a finished task stays damaged (CACHE-4)."""

    def _startup(self) -> None:
        with _patched(reference, "rebuild", lambda *_args, **_kwargs: []):
            super()._startup()


class ForgetsItsClaim(_Tracked):
    """Once its result is submitted, deletes the attempt's claimed row, dropping the journal's guard first:
    the final journal no longer shows it, and only a snapshot taken before the first wait can (JNL-4)."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        first = attempt.first
        with contextlib.closing(sqlite3.connect(self.journal.path)) as db:
            db.execute("DROP TRIGGER IF EXISTS checkpoints_no_delete")
            db.execute(
                "DELETE FROM checkpoints WHERE task_id = ? AND attempt = ? AND phase = 'claimed'",
                (first.task_id, first.attempt),
            )
            db.commit()
