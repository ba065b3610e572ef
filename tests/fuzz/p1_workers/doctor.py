"""Hostile workers of the scenario ``resumekit doctor`` runs (a kill while idle, a restart, an orderly stop): one
that exits non-zero when it is stopped in order, and one that starts again from an empty journal after the
kill, so that the rows the kit read before the kill are gone. The kit must fail each by its clause, at the
step the doctor names, and never err or hang on them."""

from __future__ import annotations

import contextlib
import os

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.control import StopRequested
from resumekit.reference.p1.journal import JOURNAL_NAME


class ExitsNonZeroWhenStopped(reference.Worker):
    """Takes an orderly stop for a fatal error: it exits with status 1 through its exit path (RESUME-5)."""

    def _claim_loop(self) -> None:
        try:
            super()._claim_loop()
        except StopRequested:
            raise RuntimeError("a stop is no reason to stop") from None


class ForgetsItsJournalAfterTheKill(reference.Worker):
    """Deletes its journal (and its WAL) when a process starts on one that has rows, so that the restart after
    a kill finds nothing to resume and the rows the kit read before the kill are gone (JNL-4)."""

    def _startup(self) -> None:
        journal = self.config.state_dir / JOURNAL_NAME
        if journal.is_file() and journal.stat().st_size:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(f"{journal}{suffix}")
        super()._startup()
