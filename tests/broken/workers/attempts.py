"""Broken workers of how rows are numbered and attempts follow each other: a ``seq`` of its own (JNL-3), two
attempts at once (WRK-2), a task stored without its empty members (PHASE-1), a recovery cap reached early
(RESUME-6), a fenced identity served again fenced once more (RESUME-4), and a capture replayed from the old
workspace's files (RESUME-3)."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git, journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import IDENTITY_FIELDS, Row
from tests.broken.workers._base import _patched, _Tracked
from tests.broken.workers.cleanup import ResumesInOldWorkspace


class _TimedJournal(journal.Journal):
    def append(self, values: Any) -> Row:
        # Each row numbered by the microsecond it was written at: unique and rising, but chosen by the worker.
        seq = time.time_ns() // 1000
        row = tuple(values.get(name) for name in journal._INSERTED)
        names = ", ".join(journal._INSERTED)
        self._insert(f"INSERT INTO checkpoints (seq, {names}) VALUES (?, {', '.join('?' * len(row))})", (seq, *row))
        return Row(seq, *row)


class NumbersItsRows(_Tracked):
    """Inserts each checkpoint row with an explicit ``seq``, the time it writes it in microseconds (JNL-3): the
    order holds, but the seqs are the worker's, not SQLite's."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _TimedJournal):
            super()._startup()


class PrefetchesTheNextTask(_Tracked):
    """Claims the next task as soon as it has recorded a claim, records that claim too, and works on the second
    attempt only once the first is done (WRK-2): two attempts at once, their rows interleaved."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._later: list[reference.Attempt] = []
        self._prefetching = False

    def _drive(self, attempt: reference.Attempt) -> None:
        if self._prefetching:  # the prefetched attempt's claimed row is written: its work waits
            self._later.append(attempt)
            return
        if attempt.last.phase == "claimed" and not self._later:
            self._prefetch()
        super()._drive(attempt)
        while self._later:
            super()._drive(self._later.pop(0))

    def _prefetch(self) -> None:
        answer = self._request("POST", "v1/claims", {})
        task, lease = answer.body.get("task"), answer.body.get("lease")
        if answer.status == 200 and isinstance(task, dict) and isinstance(lease, dict):
            self._prefetching = True
            try:
                self._served(task, lease)
            finally:
                self._prefetching = False


class OmitsEmptyMembers(_Tracked):
    """Stores the served task re-serialized with its empty members left out, as a struct field tagged
    ``omitempty`` would: a source_capture task's empty payload is not in its claimed row (PHASE-1: the row holds
    the task as served)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        super()._served({name: value for name, value in task.items() if value not in ({}, [], "", None)}, lease)


class CapsRecoveriesEarly(_Tracked):
    """Counts the recoveries row of the resumption it is making too, so it ends an attempt in recovery_cap at its
    fifth resumption without progress, not its sixth (RESUME-6)."""

    def _resume(self, attempt: reference.Attempt, *, count_recovery: bool) -> None:
        with _patched(reference, "RECOVERY_CAP", reference.RECOVERY_CAP - 1):
            super()._resume(attempt, count_recovery=count_recovery)


class FencesAConflictTwice(_Tracked):
    """Applies the identity-conflict fence before it looks for a duplicate delivery, so a conflicting identity
    served a second time, its two rows already written, gets claimed and identity_conflict again (RESUME-4;
    p1.md 0.5, G11 makes it a duplicate delivery of a terminal attempt); the journal's guard is dropped first."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        served = tuple(task.get(name) for name in IDENTITY_FIELDS)
        rows = self.journal.rows()
        number = (task.get("task_id"), task.get("attempt"))
        if not any(row.identity == served for row in rows) or all(row.identity == served for row in rows
                                                                   if (row.task_id, row.attempt) == number):
            super()._served(task, lease)
            return
        with contextlib.closing(sqlite3.connect(self.journal.path)) as db:
            db.execute("DROP TRIGGER IF EXISTS checkpoints_monotonic")
            db.commit()
        everything = self.journal.rows
        with _patched(self.journal, "rows", lambda: [row for row in everything() if row.identity != served]):
            super()._served(task, lease)


def _files_on_disk(path: Path, base_oid: str) -> list[tuple[str, str]]:
    """``(path, sha256)`` of every regular file of the workspace but ``.git``'s: what its checkout holds, as long as
    nothing but the checkout is in it."""
    found = []
    for entry in sorted(path.rglob("*")):
        name = entry.relative_to(path).as_posix()
        if entry.is_file() and not entry.is_symlink() and name.split("/")[0] != ".git":
            found.append((name, hashlib.sha256(entry.read_bytes()).hexdigest()))
    return found


class CapturesTheOldWorkspace(ResumesInOldWorkspace):
    """Resumes a capture at verification_passed in its old workspace, which startup cleanup kept, without verifying
    it again (the phase is durable), and captures the files on disk rather than the base commit's tree (RESUME-3:
    a file the kit put there reaches the result)."""

    def _replay(self, attempt: reference.Attempt) -> None:
        with _patched(git, "verify_workspace", lambda path, base: True), \
                _patched(git, "capture_files", _files_on_disk):
            super()._replay(attempt)
