"""The copying of ``keep``: a tree of the implementation's read without following a link, regular files only,
within bounds, into a folder of the kit's; and a listing of one.

Private to ``keep``, whose docstring says what is safe and how. On POSIX every folder is opened relative to
the one holding it (``dir_fd``) without following a link, and each entry is checked, once open, to be the
entry first looked at; on Windows the walk goes by path, each entry looked at before it is opened.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from resumekit.conformance import _files
from resumekit.conformance._folders import is_link
from resumekit.conformance._text import printable

MAX_FILE = 32 * 1024 * 1024  # bytes of one file copied
MAX_CASE = 256 * 1024 * 1024  # bytes copied for one case
MAX_FILES = 5000  # files copied, and entries listed, for one case
MAX_ENTRIES = 20_000  # entries looked at for one case's copy (a folder of a million names is not walked whole)
MAX_DEPTH = 32  # folders inside folders walked
MAX_NOTED = 200  # entries left out that the note names one by one (the rest are counted)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_FILE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


@dataclass
class Tally:
    """What one case's copy took and left out."""

    left_out: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    seen: int = 0  # entries looked at
    uncounted: int = 0  # left out beyond MAX_NOTED

    def leave(self, what: str, path: str, why: str = "") -> None:
        if len(self.left_out) >= MAX_NOTED:
            self.uncounted += 1
            return
        self.left_out.append(f"{what:<10} {printable(path)}" + (f"  ({why})" if why else ""))


class Budget:
    """The bytes the cases of a run may still copy together (thread-safe)."""

    def __init__(self, total: int) -> None:
        self._left = total
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Up to *wanted* bytes of what is left; how many were granted."""
        with self._lock:
            granted = max(0, min(wanted, self._left))
            self._left -= granted
            return granted

    def give(self, unused: int) -> None:
        """Bytes taken and not used."""
        with self._lock:
            self._left += max(0, unused)


# ---------------------------------------------------------------------------------------------- source


class _Source:
    """A folder of the implementation's, opened without following a link: by descriptor, or on Windows by path."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path, self.fd = path, fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def names(self, limit: int) -> tuple[list[str], bool]:
        """At most *limit* names of the folder's entries, sorted, and whether it holds more."""
        found: list[str] = []
        with os.scandir(self.fd if self.fd is not None else self.path) as entries:
            for entry in entries:
                if len(found) >= limit:
                    return sorted(found), True
                found.append(entry.name)
        return sorted(found), False

    def lstat(self, name: str) -> os.stat_result:
        if self.fd is not None:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        return os.lstat(self.path / name)

    def readlink(self, name: str) -> str:
        try:
            return os.readlink(name, dir_fd=self.fd) if self.fd is not None else os.readlink(self.path / name)
        except OSError as error:
            return f"? ({error.strerror or error})"

    def child(self, name: str, seen: os.stat_result) -> _Source | None:
        """The folder *name*, if it is still the folder *seen* (no link took its place)."""
        try:
            if self.fd is None:
                return _Source(self.path / name, None) if _same(os.lstat(self.path / name), seen) else None
            fd = os.open(name, os.O_RDONLY | _DIRECTORY, dir_fd=self.fd)
        except OSError:
            return None
        if not _same(os.fstat(fd), seen):
            os.close(fd)
            return None
        return _Source(self.path / name, fd)

    def read(self, name: str, seen: os.stat_result, limit: int) -> bytes | None:
        """The bytes of the regular file *name*, if it is still the file *seen*, and at most *limit* of them
        (None if it is something else now, or holds more)."""
        try:
            if self.fd is not None:
                fd = os.open(name, _FILE, dir_fd=self.fd)
            else:
                if is_link(os.lstat(self.path / name)):
                    return None
                fd = os.open(self.path / name, _FILE)
        except OSError:
            return None
        with open(fd, "rb") as handle:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or not _same(opened, seen):
                return None
            if sys.platform != "win32":
                os.set_blocking(fd, True)
            data = handle.read(limit + 1)
        return data if len(data) <= limit else None


def _same(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def _open_parent(path: Path) -> _Source | None:
    """The folder holding *path* (the kit's own), by a descriptor where there is one."""
    if sys.platform == "win32":
        return _Source(path.parent, None)
    try:
        return _Source(path.parent, os.open(path.parent, os.O_RDONLY | _DIRECTORY))
    except OSError:
        return None


def _open_top(path: Path) -> tuple[_Source | None, os.stat_result | None]:
    """The folder at *path* opened without following a link, or None and what is there instead (None if nothing)."""
    parent = _open_parent(path)
    if parent is None:
        return None, None
    try:
        try:
            info = parent.lstat(path.name)
        except OSError:
            return None, None
        if is_link(info) or not stat.S_ISDIR(info.st_mode):
            return None, info
        return parent.child(path.name, info), info
    finally:
        parent.close()


# ------------------------------------------------------------------------------------------------ copy


def copy(source: Path, case: _files.Folder, label: str, tally: Tally, budget: Budget) -> None:
    """Copy the folder or regular file at *source* into *case* as *label*, leaving out (and noting) whatever is
    unsafe: a link at *source* itself is listed, not followed."""
    parent = _open_parent(source)
    if parent is None:
        tally.leave("missing", label, f"{printable(str(source.parent))} cannot be opened")
        return
    try:
        try:
            info = parent.lstat(source.name)
        except OSError:
            tally.leave("missing", label)
            return
        if stat.S_ISDIR(info.st_mode) and not is_link(info):
            top = parent.child(source.name, info)
            if top is None:
                tally.leave("replaced", label, "no longer the folder first seen")
                return
            try:
                with case.folder(label) as into:
                    _copy_folder(top, into, label, tally, budget, 0)
            finally:
                top.close()
        elif stat.S_ISREG(info.st_mode) and not is_link(info):
            _copy_file(parent, source.name, info, case, label, tally, budget, as_name=label)
        else:
            _leave_entry(parent, source.name, info, label, tally)
    finally:
        parent.close()


def _copy_folder(folder: _Source, into: _files.Folder, where: str, tally: Tally, budget: Budget, depth: int) -> None:
    if depth >= MAX_DEPTH:
        tally.leave("too deep", where, f"folders nested more than {MAX_DEPTH} deep are not walked")
        return
    names, more = folder.names(max(0, MAX_ENTRIES - tally.seen))
    tally.seen += len(names)
    if more:
        tally.leave("too many", where, f"more than {MAX_ENTRIES} entries in the case: the rest not looked at")
    for name in names:
        path = f"{where}/{name}"
        try:
            info = folder.lstat(name)
        except OSError:
            tally.leave("gone", path)
            continue
        if stat.S_ISDIR(info.st_mode) and not is_link(info):
            child = folder.child(name, info)
            if child is None:
                tally.leave("replaced", path, "no longer the folder first seen")
                continue
            try:
                with into.folder(name) as target:
                    _copy_folder(child, target, path, tally, budget, depth + 1)
            except _files.Refused as error:
                tally.leave("not kept", path, str(error))
            finally:
                child.close()
        elif stat.S_ISREG(info.st_mode) and not is_link(info):
            _copy_file(folder, name, info, into, path, tally, budget)
        else:
            _leave_entry(folder, name, info, path, tally)


def _leave_entry(folder: _Source, name: str, info: os.stat_result, path: str, tally: Tally) -> None:
    """Note an entry that is not copied: a link with its target, or what else it is."""
    if is_link(info):
        tally.leave("link", path, f"-> {folder.readlink(name)}, not followed")
    else:
        tally.leave(_kind(info.st_mode), path, "not a regular file: never opened")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"))
    return next((word for test, word in kinds if test(mode)), "other")


def _copy_file(
    folder: _Source,
    name: str,
    info: os.stat_result,
    into: _files.Folder,
    path: str,
    tally: Tally,
    budget: Budget,
    as_name: str | None = None,
) -> None:
    """Copy the regular file *name* of *folder*, if it is still the file *info* and every bound allows it."""
    if info.st_size > MAX_FILE:
        tally.leave("too big", path, f"{info.st_size} bytes, more than {MAX_FILE}")
        return
    if tally.files >= MAX_FILES:
        tally.leave("too many", path, f"more than {MAX_FILES} files in one case")
        return
    if tally.bytes + info.st_size > MAX_CASE:
        tally.leave("not kept", path, f"the case's {MAX_CASE} bytes are used up")
        return
    granted = budget.take(info.st_size)
    if granted < info.st_size:
        budget.give(granted)
        tally.leave("not kept", path, "the run's bytes for kept worlds are used up")
        return
    data = folder.read(name, info, info.st_size)
    budget.give(granted - len(data or b""))
    if data is None:
        tally.leave("not kept", path, "it grew, changed or was replaced as the kit read it")
        return
    try:
        into.create(as_name or name, data)
    except _files.Refused as error:
        tally.leave("not kept", path, str(error))
        return
    tally.files += 1
    tally.bytes += len(data)


# ------------------------------------------------------------------------------------------ listing


def listing(root: Path) -> str:
    """Every entry below *root* on a line, with its kind and size, links with their targets (never followed)."""
    lines = [f"# {printable(str(root))}, listed without following a link"]
    top, info = _open_top(root)
    if top is None:
        return "\n".join([*lines, "(missing)" if info is None else "(not a folder: a link or a file)"]) + "\n"
    try:
        _list(top, "", lines, 0)
    finally:
        top.close()
    return "\n".join(lines) + "\n"


def _list(folder: _Source, where: str, lines: list[str], depth: int) -> None:
    names, more = folder.names(MAX_FILES + 1 - len(lines))
    for name in names:
        if len(lines) > MAX_FILES:
            more = True
            break
        path = printable(f"{where}{name}")
        try:
            info = folder.lstat(name)
        except OSError:
            continue
        if is_link(info):
            lines.append(f"link   {path} -> {printable(folder.readlink(name))}")
        elif stat.S_ISDIR(info.st_mode):
            lines.append(f"dir    {path}/")
            child = folder.child(name, info) if depth + 1 < MAX_DEPTH else None
            if child is not None:
                try:
                    _list(child, f"{where}{name}/", lines, depth + 1)
                finally:
                    child.close()
        elif stat.S_ISREG(info.st_mode):
            lines.append(f"file   {path} ({info.st_size} bytes)")
        else:
            lines.append(f"{_kind(info.st_mode):<6} {path}")
    if more and not lines[-1].startswith("..."):
        lines.append(f"... (more than {MAX_FILES} entries: the rest not listed)")
