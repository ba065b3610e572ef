"""The reference journal: JNL-1's table, JNL-4's triggers, one row per transaction, FULL on every connection."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from resumekit.reference.p1.journal import COLUMNS, JOURNAL_NAME, Journal, JournalError

IDENTITY: dict[str, Any] = {
    "task_id": "t-1", "attempt": 1, "execution_digest": "d-1", "job_id": "job-1", "repository": "acme/widgets",
    "base_oid": "a" * 40, "expected_branch_oid": "a" * 40, "target_branch": "main", "generation": 1,
}


def _row(phase: str, **extra: Any) -> dict[str, Any]:
    return {**IDENTITY, "phase": phase, "lease_id": "lease-1", **extra}


def _read_only(state: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{(state / JOURNAL_NAME).as_posix()}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(f"SELECT {', '.join(COLUMNS)} FROM checkpoints ORDER BY seq").fetchall()
    finally:
        db.close()


def test_rows_are_appended_and_read_by_another_connection(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    first = journal.append(_row("claimed", task="{}"))
    second = journal.append(_row("workspace_prepared", workspace="task-t-1-1-00000000"))
    assert (first.seq, second.seq) == (1, 2)
    rows = _read_only(tmp_path)
    assert [row[COLUMNS.index("phase")] for row in rows] == ["claimed", "workspace_prepared"]
    assert journal.rows() == [first, second]
    journal.close()


def test_every_connection_reads_back_synchronous_full(tmp_path: Path) -> None:
    settings: list[dict[str, Any]] = []
    Journal(tmp_path, settings).close()
    Journal(tmp_path, settings).close()
    assert settings == [{"synchronous": 2, "journalMode": "wal", "busyTimeoutMs": 5000}] * 2


@pytest.mark.parametrize("statement", [
    "UPDATE checkpoints SET phase = 'result_submitted'",
    "DELETE FROM checkpoints",
    "INSERT OR REPLACE INTO checkpoints (seq, task_id, attempt, execution_digest, job_id, repository, base_oid, "
    "expected_branch_oid, target_branch, generation, phase, lease_id) "
    "SELECT seq, task_id, attempt, execution_digest, job_id, repository, base_oid, expected_branch_oid, "
    "target_branch, generation, 'claimed', 'x' FROM checkpoints",
])
def test_the_database_refuses_changes_to_committed_rows(tmp_path: Path, statement: str) -> None:
    Journal(tmp_path).append(_row("claimed", task="{}"))
    db = sqlite3.connect(tmp_path / JOURNAL_NAME)
    with pytest.raises(sqlite3.DatabaseError, match=r"append-only|not monotonic"):
        db.execute(statement)
    db.close()
    assert len(_read_only(tmp_path)) == 1


def test_an_attempt_starts_with_claimed(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    with pytest.raises(JournalError, match="starts with claimed"):
        journal.append(_row("workspace_prepared", workspace="task-x"))
    journal.append(_row("claimed", task="{}"))
    other = {**_row("workspace_prepared", workspace="task-x"), "generation": 2}
    with pytest.raises(JournalError, match="starts with claimed"):
        journal.append(other)


@pytest.mark.parametrize(("phases", "refused"), [
    (["claimed"], "claimed"),
    (["claimed", "workspace_prepared"], "workspace_prepared"),
    (["claimed", "workspace_prepared", "verification_passed"], "workspace_prepared"),
    (["claimed", "workspace_prepared", "verification_passed", "source_capture_done"], "commit_done"),
    (["claimed", "reconciliation_required"], "workspace_prepared"),
    (["claimed", "reconciliation_required"], "reconciliation_required"),
    (["claimed", "result_pending", "result_submitted"], "reconciliation_required"),
])
def test_phases_only_move_forward(tmp_path: Path, phases: list[str], refused: str) -> None:
    journal = Journal(tmp_path)
    for phase in phases:
        journal.append(_row(phase, reason="branch_moved" if phase == "reconciliation_required" else None))
    with pytest.raises(JournalError, match="not monotonic"):
        journal.append(_row(refused, reason="branch_moved" if refused == "reconciliation_required" else None))
    assert len(journal.rows()) == len(phases)


def test_reconciliation_may_follow_any_non_terminal_row(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    for phase in ("claimed", "workspace_prepared", "verification_passed", "commit_done", "reconciliation_required"):
        journal.append(_row(phase))
    assert journal.rows()[-1].phase == "reconciliation_required"


def test_recoveries_are_counted_per_last_seq(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    for _ in range(3):
        journal.append_recovery("t-1", 1, 7)
    journal.append_recovery("t-1", 1, 8)
    assert journal.recoveries("t-1", 1, 7) == 3
    assert journal.recoveries("t-1", 1, 8) == 1
    db = sqlite3.connect(tmp_path / JOURNAL_NAME)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM recoveries")
    db.close()
