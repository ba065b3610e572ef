"""All of the kit's file plumbing: scratch workspaces, snapshots, and writing damaged ledgers.

The kit touches a file an implementation names only through ``inside``: the path must resolve, with
every symbolic link followed, to a place inside a folder the kit made for the case. Snapshots of such
a folder never follow a link and never read anything but regular files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

Snapshot = dict[str, tuple[str, int, str]]
MAX_READ = 256 * 1024 * 1024  # bytes the kit reads from one file an implementation names


class Refused(Exception):
    """A path an implementation named that the kit will not touch."""


def inside(root: Path, path: object) -> Path:
    """*path* resolved (symbolic links followed), if it lies inside *root*; raise Refused otherwise.

    The one guard for every file the kit touches on an implementation's word.
    """
    if not isinstance(path, str) or not path:
        raise Refused(f"{path!r} is not a path")
    try:
        base = Path(root).resolve(strict=True)
        target = Path(path)
        if not target.is_absolute():
            raise Refused(f"{path!r} is not an absolute path")
        resolved = target.resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as error:  # a loop of links, a NUL, a name too long
        raise Refused(f"{path!r} cannot be resolved: {error}") from None
    if resolved != base and base not in resolved.parents:
        raise Refused(f"{path!r} resolves to {str(resolved)!r}, outside the kit's workspace {str(base)!r}")
    return resolved


def _regular(root: Path, path: Path, flags: int) -> int:
    """Open *path* (re-checked inside *root*) without following a last link, and only a regular file."""
    target = inside(root, str(path))
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    if sys.platform != "win32":
        flags |= os.O_NONBLOCK  # a FIFO must not block the open
    try:
        fd = os.open(target, flags)
    except OSError as error:
        raise Refused(f"{str(path)!r} cannot be opened: {error}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"{str(path)!r} is not a regular file")
    if sys.platform != "win32":
        os.set_blocking(fd, True)
    return fd


def read_bytes(root: Path, path: Path) -> bytes:
    """The bytes of a regular file inside *root*, at most MAX_READ of them."""
    fd = _regular(root, path, os.O_RDONLY)
    with open(fd, "rb") as handle:
        data = handle.read(MAX_READ + 1)
    if len(data) > MAX_READ:
        raise Refused(f"{str(path)!r} holds more than {MAX_READ} bytes")
    return data


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
    """Every entry below *root*: its kind, size and content digest.

    Links are recorded by their target's name and never followed; only regular files are read.
    """
    entries: Snapshot = {}
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            children = list(os.scandir(folder))
        except OSError:
            continue
        for entry in children:
            path = Path(entry.path)
            name = path.relative_to(root).as_posix()
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as error:
                entries[name] = ("unreadable", 0, str(error))
                continue
            if stat.S_ISLNK(info.st_mode):
                entries[name] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entries[name] = ("dir", 0, "")
                pending.append(path)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256()
                with contextlib.suppress(OSError), open(path, "rb") as handle:
                    while block := handle.read(1 << 20):
                        digest.update(block)
                entries[name] = ("file", info.st_size, digest.hexdigest())
            else:
                entries[name] = ("special", 0, stat.filemode(info.st_mode))
    return dict(sorted(entries.items()))


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


def write_bytes(root: Path, path: Path, data: bytes) -> None:
    """Replace the bytes of a regular file inside *root* in place (the implementation is stopped meanwhile)."""
    fd = _regular(root, path, os.O_WRONLY)
    with open(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
