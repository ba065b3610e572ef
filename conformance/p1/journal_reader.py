"""The worker's journal as the kit reads it: from a copy, never the live files (p1.md EVID-3).

The database and its side files are copied into the kit's scratch through the state directory the kit holds,
each a regular file of a bounded size, and opened there: nothing is ever created or locked beside the worker's
files, and rows still in the write-ahead log are seen. Rows of a snapshot already read are kept, named by the
digest of its bytes. Here too: the journal mode its header shows, and a worker process's journal log.
"""

from __future__ import annotations

import contextlib
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
from resumekit.conformance.p1.model import COLUMNS, JOURNAL_FILE, Row, ill_typed

__all__ = ["JournalUnreadable", "journal_header", "read_journal", "read_journal_log"]


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
        raise JournalUnreadable(f"{name} is {_files.kind_of(info.st_mode)}, not a regular file")
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
