"""Hostile workers of startup cleanup's boundary: traps in the entries without the ``task-`` prefix that the kit
reads at a worker's start and first request (CLEAN-2). The kit must name the change, never follow a link it
finds there (a loop back to the root) nor wait on a FIFO put where it hashes a file."""

from __future__ import annotations

import os
import shutil

from resumekit.reference.p1 import worker as reference

KEPT = "not-a-workspace"  # the entry p1-cleanup-leaves-a-task-directory-nested-in-another-entry plants


class KeptEntryLoopsToTheRoot(reference.Worker):
    """At startup, before its cleanup, swaps the kit's entry without the prefix for a link back to the root."""

    def _startup(self) -> None:
        path = self.config.workspace_root / KEPT
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            os.symlink(self.config.workspace_root, path, target_is_directory=True)
        super()._startup()


class KeptFileBecomesAFifo(reference.Worker):
    """At startup, before its cleanup, puts a FIFO in place of the file nested in the kit's entry."""

    def _startup(self) -> None:
        path = self.config.workspace_root / KEPT / "task-nested" / "kept.txt"
        if path.is_file() and not path.is_symlink():
            path.unlink()
            os.mkfifo(path)
        super()._startup()
