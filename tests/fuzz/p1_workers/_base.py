"""What the hostile P1 workers share: the argument the campaign hands them and the moments they strike at."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import JOURNAL_NAME, Row

# The campaign's arguments after the attack's name (a decoy's path, a probe file): set by ``main`` before the
# adapter builds any worker, since the adapter constructs the worker itself and passes it nothing of ours.
ARGUMENTS: list[str] = []

TRIGGERS = ("checkpoints_no_update", "checkpoints_no_delete", "checkpoints_first_row", "checkpoints_monotonic")


def argument(index: int = 0) -> str:
    if len(ARGUMENTS) <= index:
        raise SystemExit(f"this attack needs argument {index + 1}")
    return ARGUMENTS[index]


class AtTheEnd(reference.Worker):
    """The reference worker, which strikes once a task's result_submitted row and cache are written: nothing
    of its own reads the journal or the cache again before it is idle, so only the kit meets the damage."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        self.strike(attempt)

    def strike(self, attempt: reference.Attempt) -> None:
        raise NotImplementedError

    @property
    def journal_path(self) -> Path:
        return self.config.state_dir / JOURNAL_NAME

    def cache_path(self, attempt: reference.Attempt) -> Path:
        return self.config.state_dir / "tasks" / f"{attempt.first.task_id}.json"


class AfterRow(reference.Worker):
    """The reference worker, which strikes right after the row of ``phase`` is written (and its cache)."""

    phase = "workspace_prepared"

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        row = super()._record(attempt, phase, **columns)
        if phase == self.phase:
            self.strike(attempt)
        return row

    def strike(self, attempt: reference.Attempt) -> None:
        raise NotImplementedError


def execute(path: Path, *statements: str) -> None:
    """Run *statements* on the journal through a connection of the attack's own, the worker's guards dropped
    first: the worker owns its file, and the kit must cope with whatever it finds there."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=5)) as db:
        for name in TRIGGERS:
            db.execute(f"DROP TRIGGER IF EXISTS {name}")
        for statement in statements:
            db.execute(statement)


def move_aside(path: Path) -> None:
    """Rename a file out of the kit's way; the worker's open connection keeps the renamed inode."""
    if path.exists():
        os.replace(path, path.with_name(path.name + ".moved"))
