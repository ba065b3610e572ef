"""What the kit reads itself after (or while) a worker runs: the journal, the caches, the origin.

Everything here is observed evidence (p1.md EVID-1): the journal is opened read-only, never with
``immutable=1`` so rows still in a write-ahead log are seen (EVID-3), and closed after each read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumekit.conformance.p1.cp_core import IDENTITY
from resumekit.conformance.p1.origin import Origin, git, git_bytes

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


class JournalUnreadable(Exception):
    """The journal is missing, locked past the busy timeout, or not of the normative shape (JNL-1)."""


def read_journal(state_dir: Path) -> list[Row]:
    """Every checkpoint row, in ``seq`` order, as the kit reads it itself (EVID-3)."""
    path = state_dir / JOURNAL_FILE
    if not path.is_file():
        return []
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=10.0)
    except sqlite3.Error as error:
        raise JournalUnreadable(f"cannot open {JOURNAL_FILE} read-only: {error}") from None
    try:
        with contextlib.closing(connection):
            found = {row[1] for row in connection.execute("PRAGMA table_info(checkpoints)")}
            missing = [name for name in COLUMNS if name not in found]
            if missing:
                raise JournalUnreadable(f"table checkpoints lacks the columns {missing} of JNL-1")
            cursor = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM checkpoints ORDER BY seq")
            return [dict(zip(COLUMNS, values, strict=True)) for values in cursor.fetchall()]
    except sqlite3.Error as error:
        raise JournalUnreadable(f"cannot read {JOURNAL_FILE}: {error}") from None


def read_cache(state_dir: Path, task_id: str) -> tuple[str, Any]:
    """(``absent``, None), (``torn``, raw text) or (``ok``, the parsed object) for a task's cache."""
    path = state_dir / "tasks" / f"{task_id}.json"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return "absent", None
    try:
        return "ok", json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "torn", raw.decode("utf-8", "replace")


def identity(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in IDENTITY)


def binding(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in BINDING)


def attempts(rows: Sequence[Row]) -> dict[tuple[Any, ...], list[Row]]:
    """The rows of each identity, in order of their first row (PHASE-2)."""
    grouped: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        grouped.setdefault(identity(row), []).append(row)
    return grouped


def tree_blobs(origin: Origin, oid: str) -> list[tuple[str, str, bytes]]:
    """Every blob of a commit's tree, recursively: (mode, path, bytes), sorted by the path's bytes."""
    listing = git(["ls-tree", "-r", "-z", "--full-tree", oid], cwd=origin.path)
    blobs = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind != "blob":
            continue
        data = _cat_blob(origin, blob)
        blobs.append((mode, path, data))
    return sorted(blobs, key=lambda item: item[1].encode("utf-8"))


def _cat_blob(origin: Origin, blob: str) -> bytes:
    return git_bytes(["cat-file", "blob", blob], cwd=origin.path)


def expected_capture(origin: Origin, base_oid: str) -> dict[str, Any]:
    """The result body TASK-3 demands, computed by the kit from the origin."""
    files = [
        {"path": path, "sha256": hashlib.sha256(data).hexdigest()} for _, path, data in tree_blobs(origin, base_oid)
    ]
    return {"base_oid": base_oid, "files": files, "kind": "source_capture"}


def commit_text(tree: str, parent: str, commit: Mapping[str, Any]) -> bytes:
    """The exact commit object TASK-4 defines."""
    person = f"{commit['name']} <{commit['email']}> {int(commit['timestamp'])} +0000"
    return (f"tree {tree}\nparent {parent}\nauthor {person}\ncommitter {person}\n\n{commit['message']}").encode()


def expected_commit(origin: Origin, base_oid: str, payload: Mapping[str, Any]) -> str:
    """The governed commit's object name, computed by the kit in a scratch repository (TASK-4)."""
    with tempfile.TemporaryDirectory(prefix="resumekit-expect-") as scratch:
        work = Path(scratch)
        git(["init", "--quiet", "--bare", str(work / "r.git")], cwd=work)
        repo = work / "r.git"
        git(["fetch", "--quiet", origin.url, base_oid], cwd=repo)
        env = {"GIT_INDEX_FILE": str(work / "index")}
        git(["read-tree", base_oid], cwd=repo, env=env)
        modes = {path: mode for mode, path, _ in tree_blobs(origin, base_oid)}
        for write in payload["writes"]:
            blob_file = work / "blob"
            blob_file.write_bytes(str(write["content"]).encode("utf-8"))
            blob = git(["hash-object", "-w", str(blob_file)], cwd=repo).strip()
            mode = modes.get(write["path"], "100644")
            git(["update-index", "--add", "--cacheinfo", f"{mode},{blob},{write['path']}"], cwd=repo, env=env)
        tree = git(["write-tree"], cwd=repo, env=env).strip()
        text = commit_text(tree, base_oid, payload["commit"])
        (work / "commit").write_bytes(text)
        return git(["hash-object", "-t", "commit", str(work / "commit")], cwd=repo).strip()


def expected_result(task: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    """The result body the kit expects for a task, from the task and the origin alone."""
    if task["kind"] == "source_capture":
        return expected_capture(origin, task["base_oid"])
    oid = expected_commit(origin, task["base_oid"], task["payload"])
    return {"commit_oid": oid, "kind": "commit", "target_branch": task["target_branch"]}


def listing(root: Path) -> list[str]:
    """The names directly under a directory, sorted; a missing directory has none."""
    try:
        return sorted(os.listdir(root))
    except FileNotFoundError:
        return []


Entry = tuple[Any, ...]  # ("dir",), ("dir", mtime_ns) if unreadable, ("link", target), ("file", size, mtime_ns, sha256)


def tree_state(root: Path, names: Sequence[str]) -> dict[str, Entry]:
    """The entries named *names* directly under *root* and everything below them, without following
    links: relative path -> kind, and for a file its size, mtime and content hash (WRK-5's watch).
    An entry that vanishes while it is read is left out, as if it had gone a moment earlier."""
    state: dict[str, Entry] = {}

    def add(path: Path, relative: str) -> None:
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                state[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                try:
                    names = sorted(os.listdir(path))
                except PermissionError:  # unreadable to the kit: its time still tells a change
                    state[relative] = ("dir", info.st_mtime_ns)
                    return
                state[relative] = ("dir",)
                for name in names:
                    add(path / name, f"{relative}/{name}")
            else:
                try:
                    content: str | None = hashlib.sha256(path.read_bytes()).hexdigest()
                except PermissionError:
                    content = None  # unreadable to the kit: its size and time still tell a change
                state[relative] = ("file", info.st_size, info.st_mtime_ns, content)
        except (FileNotFoundError, NotADirectoryError):
            state.pop(relative, None)

    for name in names:
        add(root / name, name)
    return state


def tree_changes(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> dict[str, str]:
    """Each path created, changed or removed between two tree states, with the word for what happened."""
    changes = {path: "created" for path in after if path not in before}
    changes.update({path: "removed" for path in before if path not in after})
    changes.update({path: "changed" for path in after if path in before and after[path] != before[path]})
    return changes


def tree_digest(root: Path) -> str:
    """A checksum of a whole tree, names, kinds and bytes, without following links."""
    digest = hashlib.sha256()
    for current, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(current, d))]):
            path = Path(current, name)
            relative = path.relative_to(root).as_posix()
            digest.update(relative.encode("utf-8") + b"\0")
            if path.is_symlink():
                digest.update(b"link:" + os.readlink(path).encode("utf-8"))
            else:
                digest.update(path.read_bytes())
        for name in dirs:
            digest.update(Path(current, name).relative_to(root).as_posix().encode("utf-8") + b"/\0")
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The journal at one moment, for the append-only check of JNL-4."""

    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Snapshot:
        return cls(tuple(tuple(row[name] for name in COLUMNS) for row in rows))

    def kept_by(self, later: Snapshot) -> bool:
        """Whether every row of this read is present, unchanged, in a later one."""
        return later.rows[: len(self.rows)] == self.rows
