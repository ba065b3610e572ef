"""All of the kit's file plumbing: scratch workspaces, snapshots, and writing damaged ledgers.

The kit touches a file an implementation names only through ``inside``: the path must resolve, with
every symbolic link followed, to a place inside a folder the kit made for the case. Snapshots of such
a folder never follow a link and never read anything but regular files.

What the kit writes into a folder an implementation can reach goes through ``Folder`` (``_folders``): a
descriptor of each folder the kit makes, taken when it makes it, every write relative to it, nothing
written through a link the kit did not make (on Windows, which has no ``dir_fd``, a check by path before
each write). Scratch folders are made, removed and, on Ctrl-C, all removed by ``_scratch``: removing one
never changes the mode of its parent (``TMPDIR``) or of anything outside it, and a tree something keeps
writing into is reported, not fought forever.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The folder and scratch plumbing lives in modules of its own; the kit names it all through this one.
from resumekit.conformance._folders import HELD as HELD
from resumekit.conformance._folders import Folder as Folder
from resumekit.conformance._folders import Refused as Refused
from resumekit.conformance._scratch import Interrupted as Interrupted
from resumekit.conformance._scratch import before_removal as before_removal
from resumekit.conformance._scratch import check_running as check_running
from resumekit.conformance._scratch import interrupt as interrupt
from resumekit.conformance._scratch import remove as remove
from resumekit.conformance._scratch import scratch as scratch
from resumekit.conformance._scratch import stop as stop
from resumekit.conformance._scratch import works_for as works_for

MAX_READ = 256 * 1024 * 1024  # bytes the kit reads from one file an implementation names


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


def same_place(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether *one* and *other* name the same file or folder: by identity (device and file number), never by
    spelling, since one folder has many names (a Windows 8.3 short name such as ``RUNNER~1``, macOS's
    ``/tmp`` and ``/private/tmp``, a link). False when either cannot be looked at (gone, a NUL, no access).
    Where the file system numbers no file (0, as some Windows network shares do), the resolved paths are
    compared, without case on Windows."""
    try:
        first, second = os.stat(one), os.stat(other)
        if first.st_ino and second.st_ino:
            return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
        return os.path.normcase(os.path.realpath(one)) == os.path.normcase(os.path.realpath(other))
    except (OSError, ValueError):
        return False


class NotRegular(OSError):
    """The path names something other than a regular file: a directory, a FIFO, a device."""


def open_regular(path: Path | str, flags: int) -> int:
    """A descriptor of *path* opened with *flags*, only if it is a regular file (NotRegular if not); a FIFO
    never blocks the open. OSError when it cannot be opened at all."""
    flags |= getattr(os, "O_BINARY", 0)
    if sys.platform != "win32":
        flags |= os.O_NONBLOCK  # a FIFO must not block the open
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(f"{str(path)!r} is not a regular file")
    if sys.platform != "win32":
        os.set_blocking(fd, True)
    return fd


def _regular(root: Path, path: Path, flags: int) -> int:
    """Open *path* (re-checked inside *root*) without following a last link, and only a regular file."""
    target = inside(root, str(path))
    try:
        return open_regular(target, flags | getattr(os, "O_NOFOLLOW", 0))
    except NotRegular:
        raise Refused(f"{str(path)!r} is not a regular file") from None
    except OSError as error:
        raise Refused(f"{str(path)!r} cannot be opened: {error}") from None


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words, for a message (of its ``st_mode``)."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_bytes(root: Path, path: Path, limit: int = MAX_READ) -> bytes:
    """The bytes of a regular file inside *root*, at most *limit* of them (Refused if it holds more)."""
    fd = _regular(root, path, os.O_RDONLY)
    with open(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"{str(path)!r} holds more than {limit} bytes")
    return data


def read_head(root: Path, path: Path, size: int) -> bytes:
    """The first *size* bytes (or fewer) of a regular file inside *root*."""
    fd = _regular(root, path, os.O_RDONLY)
    with open(fd, "rb") as handle:
        return handle.read(size)


def sync_path(path: Path) -> None:
    """fsync a file or a directory by its path (POSIX: Windows cannot open a directory to sync it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a workspace as a snapshot records it: what it is, which file it is, and when it changed.

    ``identity`` is the (device, inode) pair on POSIX and the (volume, file id) pair on Windows, so a
    file removed and created again under its name is a different entry even with the same bytes;
    ``mtime_ns`` and ``ctime_ns`` catch a rewrite of identical bytes and a touch. The access time is
    not recorded: reading a file may update it.
    """

    kind: str  # "file", "dir", "link", "special" or "unreadable"
    size: int = 0
    digest: str = ""  # a file's SHA-256, a link's target, a special file's mode, why an entry is unreadable
    identity: tuple[int, int] = (0, 0)
    mtime_ns: int = 0
    ctime_ns: int = 0


Snapshot = dict[str, Entry]
# Linux stamps files with a coarse clock (one scheduler tick, up to 10 ms); waiting this long after the
# newest stamp before a snapshot makes any later write carry a later stamp.
_STAMP_GRANULARITY_NS = 25_000_000


def _entry(path: Path, info: os.stat_result) -> Entry:
    identity = (info.st_dev, info.st_ino)
    times = {"mtime_ns": info.st_mtime_ns, "ctime_ns": info.st_ctime_ns}
    if stat.S_ISLNK(info.st_mode):
        return Entry("link", 0, os.readlink(path), identity, **times)
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", 0, "", identity, **times)
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with contextlib.suppress(OSError), open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        return Entry("file", info.st_size, digest.hexdigest(), identity, **times)
    return Entry("special", 0, stat.filemode(info.st_mode), identity, **times)


def snapshot(root: Path, *, settle: bool = False) -> Snapshot:
    """Every entry below *root* (the directory listing) with its kind, identity, size, times and digest.

    Links are recorded by their target's name and never followed; only regular files are read. The
    entry ``.`` is *root* itself. With *settle*, wait first until the newest stamp below *root* is older
    than the file system's clock granularity, so that a write after this snapshot cannot carry the same
    stamp as one before it.
    """
    entries = _walk(root)
    if settle:
        newest = max((e.mtime_ns for e in entries.values()), default=0)
        wait = newest + _STAMP_GRANULARITY_NS - time.time_ns()
        if wait > 0:
            time.sleep(min(wait, _STAMP_GRANULARITY_NS) / 1e9)
    return entries


def _walk(root: Path) -> Snapshot:
    entries: Snapshot = {}
    try:
        entries["."] = _entry(root, root.stat(follow_symlinks=False))
    except OSError as error:
        entries["."] = Entry("unreadable", 0, str(error))
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            children = list(os.scandir(folder))
        except OSError:
            continue
        for child in children:
            path = Path(child.path)
            name = path.relative_to(root).as_posix()
            try:
                # os.stat, not DirEntry.stat: on Windows only the former fills in the file id.
                info = os.stat(path, follow_symlinks=False)
                entries[name] = _entry(path, info)
            except OSError as error:
                entries[name] = Entry("unreadable", 0, str(error))
                continue
            if entries[name].kind == "dir":
                pending.append(path)
    return dict(sorted(entries.items()))


def describe_changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs between two snapshots, one phrase per entry, naming every way it differs."""
    changes = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            changes.append(f"{name} removed")
        elif name not in before:
            changes.append(f"{name} created ({after[name].kind}, {after[name].size} bytes)")
        elif before[name] != after[name]:
            changes.append(f"{name} {_difference(before[name], after[name])}")
    return changes


def _difference(old: Entry, new: Entry) -> str:
    if old.kind != new.kind:
        return f"replaced ({old.kind} -> {new.kind})"
    if old.identity != new.identity:
        return f"replaced by another {new.kind} of the same name (identity {old.identity} -> {new.identity})"
    ways = []
    if old.size != new.size:
        ways.append(f"{old.size} -> {new.size} bytes")
    if old.digest != new.digest:
        ways.append("contents differ" if new.kind == "file" else f"{old.digest!r} -> {new.digest!r}")
    if old.mtime_ns != new.mtime_ns:
        ways.append(f"modification time {old.mtime_ns} -> {new.mtime_ns} ns")
    elif old.ctime_ns != new.ctime_ns:
        ways.append(f"status change time {old.ctime_ns} -> {new.ctime_ns} ns")
    if new.kind == "file" and old.size == new.size and old.digest == new.digest:
        ways.append("same bytes: rewritten or touched")
    return "changed (" + "; ".join(ways) + ")"


def write_bytes(root: Path, path: Path, data: bytes) -> None:
    """Replace the bytes of a regular file inside *root* in place (the implementation is stopped meanwhile).

    The file's modification time is then set two seconds back, so that any later write, even one of
    the same bytes within the same tick of a coarse file-system clock, changes it (STORE-6).
    The bytes are not synced: the implementation reads them through the same operating system, and
    a damaged ledger is written hundreds of times in one sweep. The file is overwritten and then cut
    to length, not emptied first, so that its blocks are not freed and allocated again each time.
    """
    fd = _regular(root, path, os.O_WRONLY)
    with open(fd, "wb") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        info = os.fstat(handle.fileno())
        backdated = (info.st_atime_ns, info.st_mtime_ns - 2_000_000_000)
        if os.utime in os.supports_fd:
            os.utime(handle.fileno(), ns=backdated)
        else:  # Windows: by name; the path was checked above and the implementation is stopped
            os.utime(inside(root, str(path)), ns=backdated)


def remove_file(root: Path, path: Path) -> None:
    """Remove a regular file inside *root* (the implementation is stopped meanwhile)."""
    fd = _regular(root, path, os.O_RDONLY)
    os.close(fd)
    try:
        os.unlink(inside(root, str(path)))
    except OSError as error:
        raise Refused(f"{str(path)!r} cannot be removed: {error}") from None
