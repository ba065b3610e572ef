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
        # The reference records its settings as it reads them back: let it record into a list of our own,
        # and record the connection once it is NORMAL, so that every report (and the journal log) says 1.
        recorded, self._settings = self._settings, []
        try:
            db = super()._connect()
        finally:
            mine, self._settings = self._settings, recorded
        entry = mine[-1]
        db.execute("PRAGMA synchronous=NORMAL")
        entry["synchronous"] = int(db.execute("PRAGMA synchronous").fetchone()[0])  # reported truthfully: 1
        self._settings.append(entry)
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


class _CacheFirstJournal(journal.Journal):
    def append(self, values: Any) -> Row:
        # The cache of the row about to be written, before the row's transaction (CACHE-2 puts it after).
        (seq,) = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM checkpoints").fetchone()
        ahead = Row(int(seq), *(values.get(name) for name in journal._INSERTED))
        reference.write_cache(self.path.parent, ahead)
        return super().append(values)


class WritesTheCacheFirst(_Tracked):
    """Replaces a task's cache with each new row before it commits the row (CACHE-2): at the site after the
    row, the cache already shows it."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _CacheFirstJournal):
            super()._startup()


class _SilentModeJournal(journal.Journal):
    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        db.execute("PRAGMA journal_mode=DELETE")  # after the settings were read back and recorded as WAL
        return db


class ChangesTheJournalModeUnreported(_Tracked):
    """Reports each journal connection in WAL mode, then switches the file to a rollback journal without
    saying so (JNL-5): the file's header tells the kit."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _SilentModeJournal):
            super()._startup()


def _cached_phases(state_dir: Any) -> dict[tuple[str, int], str]:
    """(task_id, attempt) -> the phase each readable cache of ``tasks/`` names, as this bug believes it."""
    import json  # appended to a shared module: the imports of this part stay with it

    found: dict[tuple[str, int], str] = {}
    for path in sorted((state_dir / "tasks").glob("*.json")):
        try:
            cache = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if not isinstance(cache, dict) or not isinstance(cache.get("task_id"), str):
            continue
        phase, number = cache.get("phase"), cache.get("attempt")
        if isinstance(number, int) and (phase in journal.RANK or phase in journal.TERMINAL):
            found[(cache["task_id"], number)] = str(phase)
    return found


class TakesThePhaseFromTheCache(_Tracked):
    """At startup, takes an open attempt's phase from its task's cache where the cache disagrees with the
    journal (CACHE-4): a cache forged ahead to result_submitted ends the attempt with a release and no
    submission, a stale one replays steps already durable. The caches are read before the startup rebuild
    rewrites them, so by idle every cache mirrors the journal again."""

    def _startup(self) -> None:
        cached = _cached_phases(self.config.state_dir)
        grouped = reference.attempts

        def trusting(rows: Any) -> list[list[Row]]:
            groups = grouped(rows)
            for index, group in enumerate(groups):
                last = group[-1]
                phase = cached.pop((last.task_id, last.attempt), None)  # once: the startup's own grouping
                if phase is not None and phase != last.phase:
                    groups[index] = [*group[:-1], last.replace(phase=phase)]
            return groups

        with _patched(reference, "attempts", trusting):
            super()._startup()


class LeavesNoMarkerOnAFatalExit(_Tracked):
    """Exits non-zero after a disk error as JNL-8 says, but takes that exit for no orderly one and writes no
    marker, so the kit cannot tell it from a crash of the worker (JNL-8, ADP-2)."""

    def run(self) -> int:
        exited = self.control.exited

        def exited_without_marker(code: int) -> None:
            if code != 0:
                self.control.before_exit = None
            exited(code)

        with _patched(self.control, "exited", exited_without_marker):
            return super().run()


class HidesItsConnections(_Tracked):
    """Logs each journal connection to the kit's journal log as ``p1.journal-log`` asks, then drops them all from
    what it reports: its ``p1.journal.settings`` answer lists no connection while its log lists one (ADP-3)."""

    def _startup(self) -> None:
        super()._startup()
        self.settings.clear()  # the adapter answers p1.journal.settings from this list; the log keeps its lines
