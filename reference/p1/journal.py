"""The checkpoint journal: ``checkpoints.sqlite3`` exactly as JNL-1 says, append-only by its own triggers.

Journal mode: WAL. A reader (the kit, ``mode=ro``) never meets a hot rollback journal after a kill,
and a commit is durable once its WAL frames are synced, which ``synchronous=FULL`` does at every
COMMIT. Each row is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (JNL-3); no transaction stays open across
anything else (JNL-6). Every error of SQLite while writing is a :class:`JournalError`, which the worker
treats as fatal (JNL-8).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from resumekit.reference.durable import sync_directory

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "BINDING_FIELDS",
    "COLUMNS",
    "HARD_FAILURES",
    "IDENTITY_FIELDS",
    "JOURNAL_NAME",
    "PHASES",
    "RANK",
    "REASONS",
    "TERMINAL",
    "Journal",
    "JournalError",
    "Row",
    "attempts",
    "identity_of",
]

JOURNAL_NAME = "checkpoints.sqlite3"
BUSY_TIMEOUT_MS = 5000

IDENTITY_FIELDS = (
    "task_id",
    "attempt",
    "execution_digest",
    "job_id",
    "repository",
    "base_oid",
    "expected_branch_oid",
    "target_branch",
    "generation",
)
BINDING_FIELDS = tuple(name for name in IDENTITY_FIELDS if name != "attempt")
PHASES = (
    "claimed",
    "workspace_prepared",
    "verification_passed",
    "source_capture_done",
    "commit_done",
    "result_pending",
    "result_submitted",
    "reconciliation_required",
)
RANK = {
    "claimed": 1,
    "workspace_prepared": 2,
    "verification_passed": 3,
    "source_capture_done": 4,
    "commit_done": 4,
    "result_pending": 5,
    "result_submitted": 6,
}
TERMINAL = frozenset({"result_submitted", "reconciliation_required"})
HARD_FAILURES = frozenset({"result_conflict", "result_rejected", "task_invalid"})
REASONS = frozenset(
    {
        *HARD_FAILURES,
        "branch_moved",
        "push_refused",
        "receipt_not_visible",
        "receipt_conflict",
        "lease_not_converged",
        "lease_conflict",
        "identity_conflict",
        "stale_generation",
        "recovery_cap",
    }
)

_SAME_ATTEMPT = "(" + ", ".join(f"c.{name}" for name in IDENTITY_FIELDS) + ") = (" + ", ".join(
    f"NEW.{name}" for name in IDENTITY_FIELDS
) + ")"


def _rank(column: str) -> str:
    cases = " ".join(f"WHEN '{phase}' THEN {rank}" for phase, rank in RANK.items())
    return f"CASE {column} {cases} END"


SCHEMA = f"""
CREATE TABLE IF NOT EXISTS checkpoints (
  seq                 INTEGER PRIMARY KEY,
  task_id             TEXT    NOT NULL,
  attempt             INTEGER NOT NULL,
  execution_digest    TEXT    NOT NULL,
  job_id              TEXT    NOT NULL,
  repository          TEXT    NOT NULL,
  base_oid            TEXT    NOT NULL,
  expected_branch_oid TEXT    NOT NULL,
  target_branch       TEXT    NOT NULL,
  generation          INTEGER NOT NULL,
  phase               TEXT    NOT NULL,
  lease_id            TEXT    NOT NULL,
  task                TEXT,
  workspace           TEXT,
  idempotency_key     TEXT,
  result_hash         TEXT,
  result_body         TEXT,
  commit_oid          TEXT,
  reused_from         INTEGER,
  reason              TEXT
);
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_first_row BEFORE INSERT ON checkpoints
WHEN NEW.phase <> 'claimed' AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE {_SAME_ATTEMPT})
BEGIN SELECT RAISE(ABORT, 'an attempt starts with claimed'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_monotonic BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints c WHERE {_SAME_ATTEMPT}
  AND (c.phase IN ('result_submitted', 'reconciliation_required')
       OR (NEW.phase <> 'reconciliation_required' AND {_rank("c.phase")} >= {_rank("NEW.phase")})))
BEGIN SELECT RAISE(ABORT, 'phase not monotonic within the attempt'); END;
CREATE TABLE IF NOT EXISTS recoveries (
  seq      INTEGER PRIMARY KEY,
  task_id  TEXT    NOT NULL,
  attempt  INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS recoveries_no_update BEFORE UPDATE ON recoveries
BEGIN SELECT RAISE(ABORT, 'recoveries are append-only'); END;
CREATE TRIGGER IF NOT EXISTS recoveries_no_delete BEFORE DELETE ON recoveries
BEGIN SELECT RAISE(ABORT, 'recoveries are append-only'); END;
CREATE TABLE IF NOT EXISTS abandonments (
  seq      INTEGER PRIMARY KEY,
  task_id  TEXT    NOT NULL,
  attempt  INTEGER NOT NULL,
  lease_id TEXT    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS abandonments_no_update BEFORE UPDATE ON abandonments
BEGIN SELECT RAISE(ABORT, 'abandonments are append-only'); END;
CREATE TRIGGER IF NOT EXISTS abandonments_no_delete BEFORE DELETE ON abandonments
BEGIN SELECT RAISE(ABORT, 'abandonments are append-only'); END;
"""


class JournalError(Exception):
    """A journal write or setting failed: fatal to the worker (JNL-7, JNL-8)."""


COLUMNS = (
    "seq", "task_id", "attempt", "execution_digest", "job_id", "repository", "base_oid", "expected_branch_oid",
    "target_branch", "generation", "phase", "lease_id", "task", "workspace", "idempotency_key", "result_hash",
    "result_body", "commit_oid", "reused_from", "reason",
)
_REQUIRED = 12  # the columns up to lease_id are NOT NULL; the rest default to NULL


class Row:
    """One checkpoint row, every column of JNL-1, immutable; made from a SELECT's values in column order.

    A plain class, not a dataclass: dataclasses imports inspect, about a sixth of the worker's imports.
    """

    __slots__ = COLUMNS
    seq: int
    task_id: str
    attempt: int
    execution_digest: str
    job_id: str
    repository: str
    base_oid: str
    expected_branch_oid: str
    target_branch: str
    generation: int
    phase: str
    lease_id: str
    task: str | None
    workspace: str | None
    idempotency_key: str | None
    result_hash: str | None
    result_body: str | None
    commit_oid: str | None
    reused_from: int | None
    reason: str | None

    def __init__(self, *values: Any) -> None:
        if not _REQUIRED <= len(values) <= len(COLUMNS):
            raise TypeError(f"a Row takes {_REQUIRED} to {len(COLUMNS)} values, not {len(values)}")
        for name, value in zip(COLUMNS, (*values, *(None,) * (len(COLUMNS) - len(values))), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Row is immutable: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and self.values == other.values

    def __hash__(self) -> int:
        return hash(self.values)

    def __repr__(self) -> str:
        return "Row(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in COLUMNS) + ")"

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in COLUMNS)

    def replace(self, **changes: Any) -> Row:
        """This row with the columns in *changes* set to other values."""
        unknown = set(changes) - set(COLUMNS)
        if unknown:
            raise TypeError(f"a Row has no columns {sorted(unknown)!r}")
        return Row(*(changes.get(name, getattr(self, name)) for name in COLUMNS))

    @property
    def identity(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in IDENTITY_FIELDS)

    @property
    def binding(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in BINDING_FIELDS)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COLUMNS}


_INSERTED = COLUMNS[1:]


def identity_of(values: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(values[name] for name in IDENTITY_FIELDS)


class Journal:
    """One worker process's connection to the journal, with its settings recorded (ADP-3)."""

    def __init__(self, state_dir: Path, settings: list[dict[str, Any]] | None = None,
                 disk: Callable[[str, str], None] = lambda file, op: None) -> None:
        self.path = state_dir / JOURNAL_NAME
        # Called before each commit ("write") and after it ("fsync"): where an injected disk error
        # surfaces as SQLite would report one, a failed write with the row rolled back, or a failed
        # sync after the commit, when the row's state on disk is unknown (JNL-7, JNL-8).
        self._disk = disk
        self._settings = settings if settings is not None else []
        self._lock = threading.Lock()
        existed = self.path.exists()
        self._db = self._connect()
        if not existed:
            sync_directory(state_dir)

    @property
    def settings(self) -> list[dict[str, Any]]:
        return self._settings

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                 check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            mode = str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA fullfsync=ON")  # macOS; a no-op elsewhere
            synchronous = int(db.execute("PRAGMA synchronous").fetchone()[0])
            busy = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
            locking = str(db.execute("PRAGMA locking_mode").fetchone()[0]).lower()
            mode = str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        except sqlite3.Error as error:
            raise JournalError(f"cannot open the journal {self.path}: {error}") from error
        self._settings.append({"synchronous": synchronous, "journalMode": mode, "busyTimeoutMs": busy})
        if synchronous not in (2, 3) or mode not in ("wal", "delete", "truncate", "persist") or locking != "normal" \
                or busy < BUSY_TIMEOUT_MS:
            db.close()
            raise JournalError(
                f"journal settings refused: synchronous={synchronous} journal_mode={mode} locking_mode={locking}"
            )
        try:
            db.execute("BEGIN IMMEDIATE")
            for statement in _statements(SCHEMA):
                db.execute(statement)
            db.execute("COMMIT")
        except sqlite3.Error as error:
            _rollback(db)
            db.close()
            raise JournalError(f"cannot create the journal schema: {error}") from error
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writes -----------------------------------------------------------------------------------

    def append(self, values: Mapping[str, Any]) -> Row:
        """Insert one row in a transaction of its own and return it with its ``seq`` (JNL-3)."""
        unknown = set(values) - set(_INSERTED)
        if unknown:
            raise ValueError(f"not columns of checkpoints: {sorted(unknown)}")
        row: tuple[Any, ...] = tuple(values.get(name) for name in _INSERTED)
        sql = f"INSERT INTO checkpoints ({', '.join(_INSERTED)}) VALUES ({', '.join('?' * len(_INSERTED))})"
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                cursor = self._db.execute(sql, row)
                seq = cursor.lastrowid
                self._disk("journal", "write")
                self._db.execute("COMMIT")
                self._disk("journal", "fsync")
            except (sqlite3.Error, OSError) as error:
                _rollback(self._db)
                raise JournalError(f"journal write failed: {error}") from error
        assert seq is not None
        return Row(seq, *row)

    def append_recovery(self, task_id: str, attempt: int, last_seq: int) -> None:
        """One ``recoveries`` row (RESUME-6)."""
        sql = "INSERT INTO recoveries (task_id, attempt, last_seq) VALUES (?, ?, ?)"
        self._insert(sql, (task_id, attempt, last_seq))

    def append_abandonment(self, task_id: str, attempt: int, lease_id: str) -> None:
        """One ``abandonments`` row: the attempt's lease is lost, for this process and every later one (LEASE-4)."""
        sql = "INSERT INTO abandonments (task_id, attempt, lease_id) VALUES (?, ?, ?)"
        self._insert(sql, (task_id, attempt, lease_id))

    def _insert(self, sql: str, values: tuple[Any, ...]) -> None:
        """A row of a side table, in a transaction of its own and as durable as a checkpoint row."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(sql, values)
                self._disk("journal", "write")
                self._db.execute("COMMIT")
                self._disk("journal", "fsync")
            except (sqlite3.Error, OSError) as error:
                _rollback(self._db)
                raise JournalError(f"journal write failed: {error}") from error

    # -- reads ------------------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        with self._lock:
            try:
                found = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM checkpoints ORDER BY seq").fetchall()
            except sqlite3.Error as error:
                raise JournalError(f"journal read failed: {error}") from error
        return [Row(*values) for values in found]

    def recoveries(self, task_id: str, attempt: int, last_seq: int) -> int:
        sql = "SELECT COUNT(*) FROM recoveries WHERE task_id = ? AND attempt = ? AND last_seq = ?"
        return self._count(sql, (task_id, attempt, last_seq))

    def abandoned(self, task_id: str, attempt: int, lease_id: str) -> bool:
        """Whether a process recorded this attempt's lease as lost (LEASE-4)."""
        sql = "SELECT COUNT(*) FROM abandonments WHERE task_id = ? AND attempt = ? AND lease_id = ?"
        return self._count(sql, (task_id, attempt, lease_id)) > 0

    def _count(self, sql: str, values: tuple[Any, ...]) -> int:
        with self._lock:
            try:
                found = self._db.execute(sql, values).fetchone()
            except sqlite3.Error as error:
                raise JournalError(f"journal read failed: {error}") from error
        return int(found[0])


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""


def _rollback(db: sqlite3.Connection) -> None:
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def attempts(rows: Sequence[Row]) -> list[list[Row]]:
    """The rows grouped by identity, in the order of their first (``claimed``) row."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(row.identity, []).append(row)
    return list(groups.values())
