"""What the kit reads itself after (or while) a worker runs: the journal, the caches, the origin.

Everything here is observed evidence (p1.md EVID-1): the journal is read from a copy in the kit's
scratch, its write-ahead log included so that rows not yet checkpointed are seen (EVID-3). This is
the shell: the journal's model (its columns, phases, rows and snapshots) lives in the pure ``model``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files, _folders
from resumekit.conformance._folders import Folder
from resumekit.conformance._text import clip, decode, safe_value
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.control_plane.state import ZERO
from resumekit.conformance.p1.model import (
    COLUMNS,
    JOURNAL_FILE,
    Entry,
    Row,
    capture_body,
    commit_text,
    ill_typed,
)
from resumekit.conformance.p1.origin import Origin, git

__all__ = [
    "JournalUnreadable",
    "content_hash",
    "expected_capture",
    "expected_commit",
    "expected_result",
    "fast_forwards",
    "governed_commits",
    "journal_header",
    "listing",
    "origin_evidence",
    "read_cache",
    "read_cache_file",
    "read_journal",
    "read_journal_log",
    "ref_updates",
    "tree_blobs",
    "tree_digest",
    "tree_entries",
    "tree_state",
]


class JournalUnreadable(Exception):
    """The journal is missing, locked past the busy timeout, or not of the normative shape (JNL-1)."""


QUERY_SECONDS = 10.0  # the longest the kit lets one read of the journal take (a VIEW can be made slow)
MAX_JOURNAL = 64 * 1024 * 1024  # bytes of the journal, and of each side file, the kit copies to read
# The side files a reader needs: a WAL holds committed rows not yet in the database file, and a hot
# rollback journal the pages a killed writer had not finished. The shared-memory index (-shm) is not
# copied: SQLite rebuilds it from the WAL, so a stale or forged index cannot hide a committed row.
_SIDE_FILES = ("-wal", "-journal")
_COPY_TRIES = 5  # copies of a journal that changed while it was copied, before the kit gives up


def read_journal(state_dir: Path, folder: Folder | None = None) -> list[Row]:
    """Every checkpoint row, in ``seq`` order, as the kit reads it itself (EVID-3).

    The worker made the files, so the kit reads a copy: the database and its side files, each a regular
    file of at most ``MAX_JOURNAL`` bytes (a link, a FIFO or a directory is refused), are copied into the
    kit's scratch and opened there, so nothing is ever created or locked beside the worker's files and
    rows still in the write-ahead log are seen. Each query runs under ``QUERY_SECONDS``, and every value
    is checked against JNL-1's column types before a check reads it. With *folder*, the state directory the
    kit made and holds, the files are read in it, whatever a process of the worker's put at its path."""
    source = _Source(state_dir, folder)
    if source.lstat(JOURNAL_FILE) is None:
        return []
    files = _snapshot(source)
    key = _digest(files)
    rows = _known_rows(key)
    if rows is None:
        scratch = Path(tempfile.mkdtemp(prefix="resumekit-journal-"))
        try:
            rows = _read_copy(_write_copy(files, scratch))
        finally:
            _files.remove(scratch)
        _remember_rows(key, rows)
    for row in rows:
        problem = ill_typed(row)
        if problem is not None:
            raise JournalUnreadable(f"{JOURNAL_FILE}: {problem}")
    return rows


class _Source:
    """Where the journal's files are read: in the held folder of the state directory, or by its path."""

    def __init__(self, state_dir: Path, folder: Folder | None) -> None:
        self.state_dir, self.folder = state_dir, folder

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            if self.folder is not None:
                return self.folder.lstat(name)
            return os.lstat(self.state_dir / name)
        except FileNotFoundError:
            return None
        except (OSError, _folders.Refused) as error:
            raise JournalUnreadable(f"cannot look at {name}: {error}") from None

    def read(self, name: str) -> bytes:
        """The file's bytes; b"" when it went since it was seen (the copy is taken again)."""
        try:
            if self.folder is not None:
                return self.folder.read(name, MAX_JOURNAL)
            return _files.read_bytes(self.state_dir, self.state_dir / name, MAX_JOURNAL)
        except FileNotFoundError:
            return b""
        except (_files.Refused, _folders.Refused) as refused:
            if self.lstat(name) is None:
                return b""
            raise JournalUnreadable(f"{name}: {refused}") from None


def _snapshot(source: _Source) -> dict[str, bytes | None]:
    """The bytes of the journal and its side files (None: no such file), as one consistent moment of them.

    The files are read again if any of them changed while they were read (the worker may be writing: the
    kit reads while it runs, JNL-6); the database and its WAL read at different moments would be a
    journal no writer ever left."""
    names = [JOURNAL_FILE, *(JOURNAL_FILE + side for side in _SIDE_FILES)]
    for _ in range(_COPY_TRIES):
        before = [_identity(source, name) for name in names]
        files = {name: None if seen is None else source.read(name) for name, seen in zip(names, before, strict=True)}
        if [_identity(source, name) for name in names] == before:
            if before[0] is None:
                raise JournalUnreadable(f"{JOURNAL_FILE} disappeared while the kit read it")
            return files
    raise JournalUnreadable(f"{JOURNAL_FILE} changed during each of {_COPY_TRIES} copies the kit made to read it")


def _write_copy(files: Mapping[str, bytes | None], scratch: Path) -> Path:
    """The snapshot written into *scratch*, where SQLite opens it; the copy's database file."""
    for name, data in files.items():
        if data is not None:
            (scratch / name).write_bytes(data)
    return scratch / JOURNAL_FILE


def _digest(files: Mapping[str, bytes | None]) -> bytes:
    """What names a snapshot: its bytes, never the files' sizes or times, which the worker can set."""
    hasher = hashlib.sha256()
    for name, data in files.items():
        hasher.update(f"{name}\0{-1 if data is None else len(data)}\0".encode())
        hasher.update(data or b"")
    return hasher.digest()


# The kit reads a journal a dozen times in a case, most often unchanged since the last read: the rows of
# a snapshot already read are taken again instead of copying it and opening SQLite once more.
_KNOWN_MOST = 256  # snapshots whose rows are kept, the oldest forgotten first
_known: dict[bytes, tuple[tuple[tuple[str, Any], ...], ...]] = {}
_known_lock = threading.Lock()


def _known_rows(key: bytes) -> list[Row] | None:
    with _known_lock:
        kept = _known.get(key)
    return None if kept is None else [dict(items) for items in kept]


def _remember_rows(key: bytes, rows: Sequence[Row]) -> None:
    kept = tuple(tuple(row.items()) for row in rows)
    with _known_lock:
        _known[key] = kept
        while len(_known) > _KNOWN_MOST:
            del _known[next(iter(_known))]


def _identity(source: _Source, name: str) -> tuple[int, int, int, int] | None:
    """What tells one version of a file from the next (None: there is no file); a non-regular file is refused."""
    info = source.lstat(name)
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise JournalUnreadable(f"{name} is {_file_kind(info.st_mode)}, not a regular file")
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _read_copy(copy: Path) -> list[Row]:
    """The rows of the kit's own copy of the journal, under the query deadline."""
    try:
        connection = sqlite3.connect(copy, timeout=QUERY_SECONDS)
    except sqlite3.Error as error:
        raise JournalUnreadable(f"cannot open {JOURNAL_FILE}: {error}") from None
    deadline = time.monotonic() + QUERY_SECONDS
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        with contextlib.closing(connection):
            # The copy is the kit's scratch, removed after this read, and this is its only connection:
            # exclusive locking keeps SQLite from making a shared-memory file beside a WAL copy, and the
            # checkpoint it makes when the connection closes need not reach the disk.
            connection.execute("PRAGMA locking_mode=EXCLUSIVE")
            connection.execute("PRAGMA synchronous=OFF")
            return _select_rows(connection)
    except sqlite3.Error as error:
        late = " (the read took longer than the kit allows)" if time.monotonic() > deadline else ""
        raise JournalUnreadable(f"cannot read {JOURNAL_FILE}: {error}{late}") from None


def _select_rows(connection: sqlite3.Connection) -> list[Row]:
    found = {row[1] for row in connection.execute("PRAGMA table_info(checkpoints)")}
    missing = [name for name in COLUMNS if name not in found]
    if missing:
        raise JournalUnreadable(f"table checkpoints lacks the columns {missing} of JNL-1")
    not_utf8: list[tuple[str, bytes]] = []

    def text(data: bytes) -> str:
        # SQLite keeps whatever bytes a writer gave a TEXT; JNL-1 wants UTF-8, so any other is named below.
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            not_utf8.append((decode(data), data))
            return not_utf8[-1][0]

    connection.text_factory = text
    cursor = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM checkpoints ORDER BY seq")
    rows: list[Row] = [dict(zip(COLUMNS, values, strict=True)) for values in cursor.fetchall()]
    if not_utf8:
        (shown, data), where = not_utf8[0], ""
        for row in rows:
            where = next((f"row seq {row['seq']!r}, {name}: " for name, v in row.items() if v is shown), where)
        raise JournalUnreadable(f"{where}TEXT that is not UTF-8 (JNL-1): {data[:200]!r}")
    return rows


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


SQLITE_MAGIC = b"SQLite format 3\x00"
JOURNAL_LOG_LIMIT = 256 * 1024  # bytes of one process's journal log: a few hundred connections at most
_HEADER_VERSIONS = {(2, 2): "wal", (1, 1): "rollback"}


def journal_header(state_dir: Path) -> str | None:
    """``wal`` or ``rollback``: the journal mode the file's header shows (bytes 18 and 19, the read and
    write versions, are 2 in WAL mode, 1 otherwise); None when there is no journal or no whole header."""
    try:
        head = _files.read_head(state_dir, state_dir / JOURNAL_FILE, 100)
    except _files.Refused:
        return None
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return None
    return _HEADER_VERSIONS.get((head[18], head[19]))


def read_journal_log(root: Path, path: Path) -> tuple[list[Mapping[str, Any]] | None, str | None]:
    """(the connections, None) a worker process appended to its journal log (``p1.journal-log``), one JSON
    object per line; (None, why) for a log the kit will not read. A last line without its newline is a
    line the kill cut short: the connection it named never wrote (it logs before its first write)."""
    try:
        data = _files.read_bytes(root, path, JOURNAL_LOG_LIMIT)
    except _files.Refused as error:
        return None, str(error)
    lines = data.split(b"\n")
    connections: list[Mapping[str, Any]] = []
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1] follows the last newline
        try:
            entry = safe_value(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None, f"line {number} is not JSON: {line[:80]!r}"
        if not isinstance(entry, dict):
            return None, f"line {number} is {clip(repr(entry), 200)}, not an object"
        connections.append(entry)
    return connections, None


MAX_CACHE = 4 * 1024 * 1024  # bytes: a cache holds one row, so a larger file is not a cache (CACHE-1)


def read_cache(state_dir: Path, task_id: str) -> tuple[str, Any]:
    """(``absent``, None), (``torn``, raw text), (``unreadable``, what the kit found instead) or (``ok``, the
    parsed object) for a task's cache."""
    return read_cache_file(state_dir, state_dir / "tasks" / f"{task_id}.json")


def read_cache_file(state_dir: Path, path: Path) -> tuple[str, Any]:
    """``read_cache`` of one file of ``tasks/``: a cache, or a temporary the worker has not renamed yet.

    The worker made the file, so the kit reads it defensively: a regular file only, never through a link
    that leaves the state directory, and never more than ``MAX_CACHE`` bytes (a FIFO, a device or a
    directory would otherwise hang the kit or fill its memory)."""
    if not os.path.lexists(path):
        return "absent", None
    try:
        raw = _files.read_bytes(state_dir, path, limit=MAX_CACHE)
    except _files.Refused as refused:
        return "unreadable", str(refused)
    try:
        return "ok", safe_value(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "torn", decode(raw)


def tree_blobs(origin: Origin, oid: str) -> list[tuple[str, str, bytes]]:
    """Every blob of a commit's tree, recursively: (mode, path, bytes), sorted by the path's bytes.

    Two git commands whatever the tree's size: the listing, then every blob at once through
    ``cat-file --batch``, whose answer is each blob's header line and its bytes."""
    listing = origin.git(["ls-tree", "-r", "-z", "--full-tree", oid])
    entries = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob":
            entries.append((mode, path, blob))
    contents = _cat_blobs(origin, [blob for _, _, blob in entries])
    blobs = [(mode, path, contents[blob]) for mode, path, blob in entries]
    return sorted(blobs, key=lambda item: item[1].encode("utf-8"))


def _cat_blobs(origin: Origin, blobs: Sequence[str]) -> dict[str, bytes]:
    if not blobs:
        return {}
    out = origin.git_bytes(["cat-file", "--batch"], stdin="".join(f"{b}\n" for b in blobs).encode("ascii"))
    found: dict[str, bytes] = {}
    at = 0
    for blob in blobs:
        end = out.index(b"\n", at)
        fields = out[at:end].decode("ascii", "replace").split()
        if len(fields) != 3 or fields[:2] != [blob, "blob"] or not fields[2].isdigit():
            raise GitError(f"git cat-file --batch answered {out[at:end]!r} for the blob {blob}")
        size = int(fields[2])
        found[blob] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the bytes, then a newline
    return found


def expected_capture(origin: Origin, base_oid: str) -> dict[str, Any]:
    """The result body TASK-3 demands, computed by the kit from the origin."""
    return capture_body(base_oid, tree_blobs(origin, base_oid))


def expected_commit(origin: Origin, base_oid: str, payload: Mapping[str, Any]) -> str:
    """The governed commit's object name, computed by the kit in a scratch repository (TASK-4)."""
    with tempfile.TemporaryDirectory(prefix="resumekit-expect-") as scratch:
        work = Path(scratch)
        git(["init", "--quiet", "--bare", str(work / "r.git")], cwd=work)
        repo = work / "r.git"
        origin.fetch(repo, base_oid)
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
    """The result body the kit expects for a task, from the task and the origin alone.

    A git object name names its content, so the expectation for a base commit and a payload is the same in
    every origin: each is computed once per process (the scenarios share a few bases).
    """
    fields = [task["kind"], task["base_oid"], task.get("payload"), task.get("target_branch")]
    key = json.dumps(fields, sort_keys=True, default=str)
    with _expected_lock:
        known = _expected.get(key)
    if known is None:
        known = _expected_body(task, origin)  # outside the lock: threads computing the same body agree
        with _expected_lock:
            _expected[key] = known
    return copy.deepcopy(known)


_expected: dict[str, dict[str, Any]] = {}
_expected_lock = threading.Lock()


def _expected_body(task: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    if task["kind"] == "source_capture":
        return expected_capture(origin, task["base_oid"])
    oid = expected_commit(origin, task["base_oid"], task["payload"])
    return {"commit_oid": oid, "kind": "commit", "target_branch": task["target_branch"]}


def origin_evidence(
    origins: Mapping[str, Origin], log: Sequence[Mapping[str, Any]], tasks: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The origins' side of the evidence once the last step is done, under the names of the Evidence fields it
    fills: every ref of every origin, read from git once (CP-17), the refs the kit made, every ref change the
    kit made or the origin's hook let land (from the control plane's *log*), which push attempts were
    fast-forwards (COMMIT-2), and the governed commit the kit computes for every commit attempt served (TASK-4).
    *tasks* are the control plane's tasks, each with every attempt as served."""
    governed = governed_commits(origins, tasks)
    return {
        "origin_refs": {repository: origin.refs() for repository, origin in origins.items()},
        "kit_refs": {repository: dict(origin.made) for repository, origin in origins.items()},
        "ref_updates": ref_updates(log),
        "fast_forward": fast_forwards(origins, log, governed),
        "governed": governed,
    }


def ref_updates(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every change of an origin's ref in the control plane's log, in order: a branch the kit moved (CP-21) and
    an update that landed through the origin's hook (CP-18), which its post-receive half reports."""
    found = []
    for entry in log:
        if entry.get("kind") == "branch_moved" and entry.get("done"):
            ref = f"refs/heads/{entry.get('branch')}"
            found.append({"repository": entry.get("repository"), "ref": ref, "new": entry.get("new"), "by": "kit"})
        elif entry.get("kind") == "origin_ref_updated":
            found.append(
                {"repository": entry.get("repository"), "ref": entry.get("ref"), "new": entry.get("new"), "by": "push"}
            )
    return found


def fast_forwards(
    origins: Mapping[str, Origin], log: Sequence[Mapping[str, Any]], governed: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str, str], bool | None]:
    """For each push attempt the control plane logged, (repository, old, new) -> whether old is new or one of
    its ancestors, or None when the kit cannot place new. A refused push leaves no object on the origin; its
    new value is then placed only when it is one of the *governed* commits (``governed_commits``) of that
    repository, whose one parent is its attempt's base_oid (TASK-4). Creations and deletions are left out."""
    parents = {(str(g["repository"]), str(g["commit"])): str(g["base_oid"]) for g in governed}
    found: dict[tuple[str, str, str], bool | None] = {}
    for entry in log:
        if entry.get("kind") != "push":
            continue
        repository, old, new = str(entry.get("repository")), str(entry.get("old")), str(entry.get("new"))
        origin = origins.get(repository)
        if origin is None or ZERO in (old, new) or (repository, old, new) in found:
            continue
        known = origin.is_ancestor(old, new)
        if known is None:
            parent = parents.get((repository, new))
            known = None if parent is None else origin.is_ancestor(old, parent)
        found[(repository, old, new)] = known
    return found


def governed_commits(
    origins: Mapping[str, Origin], tasks: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The governed commit C the kit computes for every commit attempt served, of every task (TASK-4): its
    repository, target ref, task_id, attempt, base_oid (C's one parent) and C; each distinct C computed once.
    An attempt whose payload no commit can be made of (task_invalid) has none."""
    found: list[dict[str, Any]] = []
    known: dict[str, str | None] = {}
    for task_id, facts in tasks.items():
        for served in facts.get("attempts") or ():
            if not isinstance(served, Mapping) or served.get("kind") != "commit":
                continue
            repository, base = str(served.get("repository")), served.get("base_oid")
            if repository not in origins or not isinstance(base, str):
                continue
            key = json.dumps([repository, base, served.get("payload")], sort_keys=True, default=str)
            if key not in known:
                try:  # expected_result keeps each body it computed: the at-end reading computed most already
                    known[key] = str(expected_result(served, origins[repository])["commit_oid"])
                except (GitError, KeyError, TypeError, ValueError):
                    known[key] = None
            if known[key] is not None:
                found.append({"repository": repository, "ref": f"refs/heads/{served.get('target_branch')}",
                              "task_id": task_id, "attempt": served.get("attempt"), "base_oid": base,
                              "commit": known[key]})
    return found


def listing(root: Path) -> list[str]:
    """The names directly under a directory, sorted; a missing directory has none."""
    try:
        return sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []


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
            elif not stat.S_ISREG(info.st_mode):  # a FIFO, a device, a socket: never opened
                state[relative] = (_file_kind(info.st_mode), info.st_mtime_ns)
            else:  # a file unreadable to the kit still tells a change by its size and time
                state[relative] = ("file", info.st_size, info.st_mtime_ns, content_hash(path))
        except (FileNotFoundError, NotADirectoryError):
            state.pop(relative, None)

    for name in names:
        add(root / name, name)
    return state


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
                digest.update(content_hash(path).encode("ascii"))
        for name in dirs:
            digest.update(Path(current, name).relative_to(root).as_posix().encode("utf-8") + b"/\0")
    return digest.hexdigest()


def tree_entries(root: Path) -> dict[str, str]:
    """Every path of a tree, without following links: relative path -> ``dir``, ``link:<target>`` or
    ``file:<sha256>``; what ``tree_digest`` sums, entry by entry, so that a change can be named (CLEAN-2)."""
    entries: dict[str, str] = {}
    for current, dirs, files in os.walk(root, followlinks=False):
        for name in files + dirs:
            path = Path(current, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                entries[relative] = "link:" + os.readlink(path)
            elif name in dirs:
                entries[relative] = "dir"
            else:
                entries[relative] = "file:" + content_hash(path)
    return entries


HASH_LIMIT = 256 * 1024 * 1024  # bytes of one file the kit hashes; a larger one is told by its size


def content_hash(path: Path) -> str:
    """The sha256 of a regular file's bytes, read without following a link and never blocking; for a
    FIFO, a device or a socket its kind instead (opening one could hang the kit or never end), and for a
    file larger than ``HASH_LIMIT`` its size (a sparse file of a terabyte would take hours to read); a
    file the kit may not open is told by why. A file that is gone raises FileNotFoundError."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:  # no permission, or a link put in its place since it was listed
        return f"unreadable:{error.strerror}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _file_kind(info.st_mode).replace(" ", "-")
        if info.st_size > HASH_LIMIT:
            return f"larger-than-{HASH_LIMIT}:{info.st_size}"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)
