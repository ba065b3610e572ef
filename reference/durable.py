"""The reference's durability primitives, shared by the Phase 0 ledger and the P1 cache.

Every fsync the reference does goes through here, so each OS difference is handled once:
macOS flushes the drive cache with F_FULLFSYNC, Windows cannot open a directory to sync it (NTFS
journals directory metadata itself), and a failed fsync is never retried as if it had succeeded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["atomic_write", "sync_directory", "sync_fd"]


def sync_fd(fd: int) -> None:
    """Push a file's data and metadata to stable storage."""
    if sys.platform == "darwin":
        import fcntl

        full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
        if full_fsync is not None:
            # Plain fsync on macOS leaves the data in the drive's write cache; F_FULLFSYNC flushes it.
            # File systems that do not offer it (some network and FUSE mounts) fail, and then fsync
            # is the best there is.
            try:
                fcntl.fcntl(fd, full_fsync)
                return
            except OSError:
                pass
    os.fsync(fd)


def sync_directory(path: Path) -> None:
    """Make a directory's entries durable, where the system allows it."""
    if sys.platform == "win32":
        # Windows cannot open a directory for syncing (os.open on a directory fails with
        # PermissionError; it needs FILE_FLAG_BACKUP_SEMANTICS), and NTFS journals directory
        # metadata itself.
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        sync_fd(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace *path* with *data* so a crash leaves the old bytes or the new, never a mix.

    The temporary file sits in the same directory (a rename never crosses file systems), is synced
    before the replace, and the directory is synced after it so the new name is durable too.
    """
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        sync_fd(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    sync_directory(path.parent)
