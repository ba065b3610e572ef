"""The task cache ``tasks/<task_id>.json``: a mirror of the task's latest journal row, never read back.

The worker writes it after each row commits (CACHE-2) by atomic replace (CACHE-3) and rebuilds every
cache from the journal at startup (CACHE-4); nothing decides anything from a cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from resumekit.reference.durable import sync_directory, sync_fd
from resumekit.reference.p1.journal import Row

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CacheError", "cache_bytes", "cache_path", "rebuild", "remove_temporaries", "write_cache"]

TASKS = "tasks"
_SHARING_RETRY_S = 1.0


class CacheError(Exception):
    """A cache write, fsync or replace failed: fatal to the worker (JNL-7, JNL-8)."""


def cache_path(state_dir: Path, task_id: str) -> Path:
    return state_dir / TASKS / f"{task_id}.json"


def cache_bytes(row: Row) -> bytes:
    """The cache of a task whose latest row is *row* (CACHE-1)."""
    value: dict[str, Any] = {"cache_version": 1, **row.as_dict()}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def tasks_dir(state_dir: Path) -> Path:
    """``tasks/`` in the state directory, created (and the state directory synced) when absent."""
    directory = state_dir / TASKS
    if not directory.is_dir():
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        sync_directory(state_dir)
    return directory


def _replace(source: Path, target: Path) -> None:
    deadline = time.monotonic() + _SHARING_RETRY_S
    while True:
        try:
            os.replace(source, target)
            return
        except PermissionError:
            # Windows: another process (a reader, a virus scanner) holds the target open.
            if sys.platform != "win32" or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def write_cache(state_dir: Path, row: Row, before_replace: Callable[[], None] = lambda: None,
                disk: Callable[[str, str], None] = lambda file, op: None) -> None:
    """Replace the cache of ``row.task_id`` atomically (CACHE-3).

    *before_replace* runs with the temporary written and synced and not yet renamed: the site of the
    ``before_<phase>_cache`` failpoint.
    """
    try:
        directory = tasks_dir(state_dir)
        target = directory / f"{row.task_id}.json"
        temporary = directory / f".{row.task_id}.json.tmp"
        data = cache_bytes(row)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o644)
        try:
            view = memoryview(data)
            disk("cache", "write")  # an injected disk error, where os.write would raise it
            while view:
                view = view[os.write(fd, view):]
            disk("cache", "fsync")
            sync_fd(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise CacheError(f"cache write failed for {row.task_id}: {error}") from error
    before_replace()
    try:
        _replace(temporary, target)
        sync_directory(directory)
    except OSError as error:
        raise CacheError(f"cache replace failed for {row.task_id}: {error}") from error


def remove_temporaries(state_dir: Path) -> list[str]:
    """Remove stray temporaries (``.*.tmp``) from ``tasks/``; return their names."""
    directory = state_dir / TASKS
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.name.startswith(".") and entry.name.endswith(".tmp") and not entry.is_dir(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError as error:
                raise CacheError(f"cannot remove the stray temporary {entry.name}: {error}") from error
            removed.append(entry.name)
    if removed:
        try:
            sync_directory(directory)
        except OSError as error:
            raise CacheError(f"cannot sync {directory}: {error}") from error
    return removed


def rebuild(state_dir: Path, rows: Iterable[Row]) -> list[str]:
    """Make every task's cache the projection of its journal rows (CACHE-4); return the tasks rewritten."""
    latest: dict[str, Row] = {}
    for row in rows:
        current = latest.get(row.task_id)
        if current is None or row.seq > current.seq:
            latest[row.task_id] = row
    rewritten = []
    for task_id, row in sorted(latest.items()):
        path = cache_path(state_dir, task_id)
        try:
            found = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        except OSError:
            found = None
        if found != cache_bytes(row):
            if path.is_dir() and not path.is_symlink():
                raise CacheError(f"{path} is a directory, not a cache")
            write_cache(state_dir, row)
            rewritten.append(task_id)
    return rewritten
