"""The journal's model and the results the kit expects, as pure values and functions (docs/spec/p1.md).

The columns of a checkpoint row (JNL-1), the ranks of its phases (PHASE-1 to PHASE-5), a row and a snapshot
of the journal (JNL-4), the result body a source capture must carry (TASK-3), the commit object a governed
commit must be (TASK-4), and the changes between two states of a tree (WRK-5): everything the checks judge
evidence by. Nothing here reads a file or starts a process; ``evidence`` reads the journal, the caches and
the origin and hands this module's values on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.p1.control_plane.state import IDENTITY

JOURNAL_FILE = "checkpoints.sqlite3"
COLUMNS = (
    "seq",
    *IDENTITY,
    "phase",
    "lease_id",
    "task",
    "workspace",
    "idempotency_key",
    "result_hash",
    "result_body",
    "commit_oid",
    "reused_from",
    "reason",
)
BINDING = tuple(name for name in IDENTITY if name != "attempt")
RANKS = {
    "claimed": 1,
    "workspace_prepared": 2,
    "verification_passed": 3,
    "source_capture_done": 4,
    "commit_done": 4,
    "result_pending": 5,
    "result_submitted": 6,
}
TERMINAL = ("result_submitted", "reconciliation_required")
HARD_FAILURES = ("result_conflict", "result_rejected", "task_invalid")

Row = dict[str, Any]

# JNL-1's type of each column: integers, texts, and which of them may be NULL.
INTEGERS = frozenset({"seq", "attempt", "generation", "reused_from"})
NULLABLE = frozenset({"task", "workspace", "idempotency_key", "result_hash", "result_body", "commit_oid",
                      "reused_from", "reason"})


def ill_typed(row: Mapping[str, Any]) -> str | None:
    """What breaks JNL-1's column types in *row* (a value of the wrong storage class, or a NULL where the
    column is NOT NULL), or None: the checks read a row only after this said nothing."""
    for name in COLUMNS:
        value = row[name]
        if value is None:
            if name not in NULLABLE:
                return f"row seq {row['seq']!r} holds NULL in the NOT NULL column {name!r}"
            continue
        wanted: type = int if name in INTEGERS else str
        if type(value) is not wanted:
            return (f"row seq {row['seq']!r} holds {value!r:.60} ({type(value).__name__}) in column {name!r}, "
                    f"which JNL-1 declares {'INTEGER' if wanted is int else 'TEXT'}")
    return None


def identity(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row's attempt identity: its values of the identity fields, in their order."""
    return tuple(row[name] for name in IDENTITY)


def binding(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row's binding: the identity fields but the attempt number (SCOPE-4)."""
    return tuple(row[name] for name in BINDING)


def attempts(rows: Sequence[Row]) -> dict[tuple[Any, ...], list[Row]]:
    """The rows of each identity, in order of their first row (PHASE-2)."""
    grouped: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        grouped.setdefault(identity(row), []).append(row)
    return grouped


def open_attempts(rows: Sequence[Row]) -> list[Row]:
    """The last row of every attempt whose last row is not terminal, in the order of their first rows."""
    last: dict[tuple[Any, Any], Row] = {}
    for row in rows:
        last[(row["task_id"], row["attempt"])] = row  # dicts keep the order of first insertion
    return [row for row in last.values() if row["phase"] not in TERMINAL]


def capture_body(base_oid: str, blobs: Iterable[tuple[str, str, bytes]]) -> dict[str, Any]:
    """The result body TASK-3 demands of a source capture, from the base commit's (mode, path, bytes) blobs."""
    files = [{"path": path, "sha256": hashlib.sha256(data).hexdigest()} for _, path, data in blobs]
    return {"base_oid": base_oid, "files": files, "kind": "source_capture"}


def commit_text(tree: str, parent: str, commit: Mapping[str, Any]) -> bytes:
    """The exact commit object TASK-4 defines."""
    person = f"{commit['name']} <{commit['email']}> {int(commit['timestamp'])} +0000"
    return (f"tree {tree}\nparent {parent}\nauthor {person}\ncommitter {person}\n\n{commit['message']}").encode()


# ("dir",), ("dir", mtime_ns) if unreadable, ("link", target), ("file", size, mtime_ns, sha256), and
# (kind, mtime_ns) for a FIFO, a device or a socket
Entry = tuple[Any, ...]


def tree_changes(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> dict[str, str]:
    """Each path created, changed or removed between two tree states, with the word for what happened."""
    changes = {path: "created" for path in after if path not in before}
    changes.update({path: "removed" for path in before if path not in after})
    changes.update({path: "changed" for path in after if path in before and after[path] != before[path]})
    return changes


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The journal at one moment, for the append-only check of JNL-4."""

    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Snapshot:
        """The snapshot of *rows*: each row's values in the order of ``COLUMNS``."""
        return cls(tuple(tuple(row[name] for name in COLUMNS) for row in rows))

    def kept_by(self, later: Snapshot) -> bool:
        """Whether every row of this read is present, unchanged, in a later one (where a new row stands among
        them is JNL-3's to judge: ``seq`` follows commit order)."""
        return set(self.rows) <= set(later.rows)
