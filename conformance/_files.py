"""All of the kit's file plumbing: scratch workspaces, snapshots, and writing damaged ledgers."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

Snapshot = dict[str, tuple[str, int, str]]


def scratch(prefix: str) -> Path:
    """A fresh, empty directory of the kit's own."""
    return Path(tempfile.mkdtemp(prefix=f"resumekit-{prefix}-"))


def remove(path: Path) -> None:
    """Delete a scratch tree, retrying while Windows still holds a handle of a killed process."""

    def writable(function: object, name: str, _: object) -> None:
        os.chmod(name, stat.S_IWRITE)
        if os.path.isdir(name):
            os.rmdir(name)
        else:
            os.unlink(name)

    delay = 0.01
    for _ in range(8):
        try:
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=writable)
            else:  # Python 3.10 and 3.11 have no onexc
                shutil.rmtree(path, onerror=writable)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(delay)
            delay *= 2
    shutil.rmtree(path, ignore_errors=True)


def snapshot(root: Path) -> Snapshot:
    """Every entry below *root*: its kind, size and content digest."""
    entries: Snapshot = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_dir():
            entries[name] = ("dir", 0, "")
        else:
            data = path.read_bytes()
            entries[name] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return entries


def describe_changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs between two snapshots, one phrase per entry."""
    changes = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            changes.append(f"{name} removed")
        elif name not in before:
            changes.append(f"{name} created")
        elif before[name] != after[name]:
            changes.append(f"{name} changed ({before[name][1]} -> {after[name][1]} bytes)")
    return changes


def write_bytes(path: Path, data: bytes) -> None:
    """Replace a file's bytes in place (the implementation's process is stopped while the kit does this)."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
