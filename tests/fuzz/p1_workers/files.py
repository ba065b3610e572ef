"""Hostile workers of the files the kit reads: a journal or a cache that is a FIFO, a link, a directory, a slow
VIEW, rows of the wrong types (EVID-3: the kit reads them defensively and names what it found)."""

from __future__ import annotations

import os

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import COLUMNS, JOURNAL_NAME
from tests.fuzz.p1_workers._base import AfterRow, AtTheEnd, argument, execute, move_aside

_INSERTED = COLUMNS[1:]


def _copy_of_last_row(**values: str) -> str:
    """An INSERT of a copy of the journal's latest row, with some columns replaced by SQL expressions."""
    chosen = ", ".join(values.get(name, name) for name in _INSERTED)
    latest = "FROM checkpoints ORDER BY seq DESC LIMIT 1"
    return f"INSERT INTO checkpoints ({', '.join(_INSERTED)}) SELECT {chosen} {latest}"


# -- caches -----------------------------------------------------------------------------------------


class CacheIsAFifo(AtTheEnd):
    def strike(self, attempt: reference.Attempt) -> None:
        path = self.cache_path(attempt)
        path.unlink()
        os.mkfifo(path)  # a reader that opens it without O_NONBLOCK waits for a writer for ever


class CacheIsADirectory(AtTheEnd):
    def strike(self, attempt: reference.Attempt) -> None:
        path = self.cache_path(attempt)
        path.unlink()
        path.mkdir()
        (path / "inside.json").write_text("{}", encoding="utf-8")


class CacheLinksToDevZero(AtTheEnd):
    def strike(self, attempt: reference.Attempt) -> None:
        path = self.cache_path(attempt)
        path.unlink()
        os.symlink(os.devnull.replace("null", "zero"), path)  # endless zeros: a reader without a cap never ends


class CacheIsASparseGigabyte(AtTheEnd):
    def strike(self, attempt: reference.Attempt) -> None:
        os.truncate(self.cache_path(attempt), 1 << 30)  # its row, then a gigabyte of NUL bytes that take no disk


# -- the journal as a file --------------------------------------------------------------------------


class JournalIsAFifo(AtTheEnd):
    def strike(self, attempt: reference.Attempt) -> None:
        move_aside(self.journal_path)
        os.mkfifo(self.journal_path)


class JournalLinksOutside(AtTheEnd):
    """Replaces its journal with a link to a SQLite file outside its state directory (the campaign's decoy, in
    WAL mode, so that even a read-only reader that follows the link leaves a -shm or -wal beside it)."""

    def strike(self, attempt: reference.Attempt) -> None:
        move_aside(self.journal_path)
        os.symlink(argument(0), self.journal_path)


# -- the journal's content --------------------------------------------------------------------------


class CheckpointsIsASlowView(AtTheEnd):
    """Renames its table and puts a VIEW of the same columns in its place, whose every read first counts to a
    trillion in a recursive CTE: minutes of work for a reader that does not cut its query off."""

    def strike(self, attempt: reference.Attempt) -> None:
        execute(
            self.journal_path,
            "ALTER TABLE checkpoints RENAME TO checkpoints_rows",
            "CREATE VIEW checkpoints AS SELECT r.* FROM checkpoints_rows r, "
            "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 1000000000000) "
            "SELECT COUNT(*) AS c FROM n) s WHERE s.c > 0",
        )


class NullAttempt(AtTheEnd):
    """Rebuilds its table without NOT NULL, then appends a copy of its last row whose ``attempt`` is NULL."""

    def strike(self, attempt: reference.Attempt) -> None:
        columns = ", ".join(f"{name} {'INTEGER PRIMARY KEY' if name == 'seq' else ''}".strip() for name in COLUMNS)
        execute(
            self.journal_path,
            "ALTER TABLE checkpoints RENAME TO checkpoints_strict",
            f"CREATE TABLE checkpoints ({columns})",
            "INSERT INTO checkpoints SELECT * FROM checkpoints_strict",
            "DROP TABLE checkpoints_strict",
            _copy_of_last_row(attempt="NULL"),
        )


class TextAttempt(AfterRow):
    """Mid-attempt, once workspace_prepared is written, appends a copy of that row whose ``attempt`` is the
    text 'one' (INTEGER affinity keeps text that is no number): the kit meets it at the submission's moment
    check, and at every read after."""

    phase = "workspace_prepared"

    def strike(self, attempt: reference.Attempt) -> None:
        execute(self.config.state_dir / JOURNAL_NAME, _copy_of_last_row(attempt="'one'"))


class BlobPhase(AtTheEnd):
    """Appends a copy of its last row whose ``phase`` is a BLOB holding the bytes of 'claimed'."""

    def strike(self, attempt: reference.Attempt) -> None:
        execute(self.journal_path, _copy_of_last_row(phase="CAST('claimed' AS BLOB)"))
