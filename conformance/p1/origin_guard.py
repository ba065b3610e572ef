"""The files of an origin that git reads blindly, checked before the kit runs git on it.

A scenario's origin is the kit's (p1-control-plane.md CP-17): the worker fetches from it and pushes the
governed commit, and changes nothing else, not even by writing the repository directly. But the worker runs
as the same user and can write the origin's folder, and git trusts what it finds there: it reads ``config``
and the files it includes whole, follows ``objects/info/alternates`` wherever it points (``/dev/zero``
included), opens a loose ref or object that is a FIFO and waits on it for ever. So before each git command
on an origin the kit looks at those files itself, never following a link and never opening anything but a
regular file: ``config`` and ``HEAD`` are the bytes the kit made; the files the kit never makes and git
would follow (``commondir``, ``shallow``, ``info/grafts``, alternates) are absent; ``packed-refs``, every
loose ref and every file under ``objects/info`` and ``objects/pack`` and every loose object is a regular
file of a bounded size; the origin holds at most ``MAX_REFS`` refs. Anything else raises OriginUnreadable,
which the scenario turns into a failure of COMMIT-3 naming the file and what was found there.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

MAX_REFS = 1000  # refs of one origin the kit reads; it makes a handful
CONFIG_MAX = 64 << 10
HEAD_MAX = 4 << 10
REF_MAX = 4 << 10  # one loose ref: an object name or "ref: <name>"
PACKED_REFS_MAX = 4 << 20  # room for MAX_REFS refs of the longest names git allows, and their peeled lines
INFO_MAX = 16 << 20  # one file under objects/info (commit-graph, packs)
MAX_ENTRIES = 1 << 16  # entries under objects/ the kit walks: a few dozen after a scenario's pushes
ABSENT = ("commondir", "shallow", "info/grafts", "objects/info/alternates", "objects/info/http-alternates")
KIT_FILES = ("resumekit-policy.json", "resumekit-pushes.jsonl")  # the hook's, read or written by its code
_HEX = frozenset("0123456789abcdef")


class OriginUnreadable(Exception):
    """A file of a worker's origin that the kit will not let git read, or a read of the origin that git could
    not finish within the kit's limits: the origin is not as the kit made it and pushes left it."""

    def __init__(self, origin: Path, where: str, expected: str, found: str) -> None:
        super().__init__(f"{where} of the origin {str(origin)!r}: {found}")
        self.origin = origin
        self.where = where  # a path inside the origin, or the git command that could not finish
        self.expected = expected
        self.found = found


def check(origin: Path, made: Mapping[str, bytes]) -> None:
    """Raise OriginUnreadable unless the files git reads blindly are as the kit can read them safely; *made*:
    the files whose bytes the kit made and nothing may change (``config``, ``HEAD``) -> those bytes."""
    _directory(origin, "")
    for name, limit in (("config", CONFIG_MAX), ("HEAD", HEAD_MAX)):
        data = read_small(origin, name, limit)
        if name in made and data != made[name]:
            raise OriginUnreadable(origin, name, f"{made[name]!r}, as the kit made it", f"{data[:200]!r}")
    for name in ABSENT:
        info = lstat(origin, name)
        if info is not None:
            raise OriginUnreadable(origin, name, "no file (the kit makes none)", _kind(info))
    for name, limit in (("packed-refs", PACKED_REFS_MAX), *((name, INFO_MAX) for name in KIT_FILES)):
        if lstat(origin, name) is not None:
            _file(origin, name, limit)
    _refs(origin)
    _objects(origin)


def read_small(origin: Path, name: str, limit: int) -> bytes:
    """The bytes of *name* in *origin*: a regular file, reached without following a link, of at most *limit*
    bytes; OriginUnreadable otherwise."""
    path = origin / name
    try:
        fd = _open_regular(path)
    except OSError as error:
        info = lstat(origin, name)
        found = _kind(info) if info is not None and not stat.S_ISREG(info.st_mode) else f"unreadable: {error}"
        raise OriginUnreadable(origin, name, "a regular file", found) from None
    with open(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OriginUnreadable(origin, name, f"at most {limit} bytes", f"more than {limit} bytes")
    return data


def _refs(origin: Path) -> None:
    """Every entry under refs/ is a folder or a regular file of a loose ref's size, and there are at most
    MAX_REFS of them."""
    count, folders = 0, 0
    pending = ["refs"]
    while pending:
        folder = pending.pop()
        for entry in _entries(origin, folder, MAX_REFS + 1):
            name = f"{folder}/{entry.name}"
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                folders += 1
                if folders > MAX_ENTRIES:
                    raise OriginUnreadable(origin, "refs", f"at most {MAX_ENTRIES} folders", "more folders")
                pending.append(name)
                continue
            _regular(origin, name, info, REF_MAX)
            count += 1
            if count > MAX_REFS:  # a folder with more says so in _entries
                found = f"more than {MAX_REFS} loose refs"
                raise OriginUnreadable(origin, "refs", f"at most {MAX_REFS} refs", found)


def _objects(origin: Path) -> None:
    """objects/info holds regular files (and commit-graphs/ of them) of a bounded size; objects/pack and each
    folder of loose objects hold regular files; MAX_ENTRIES of them in all. Other entries of objects/ (a
    push's quarantine) are not read by the kit's commands."""
    room = MAX_ENTRIES
    for entry in _entries(origin, "objects", MAX_ENTRIES):
        if entry.name in ("info", "pack") or (len(entry.name) == 2 and set(entry.name) <= _HEX):
            room -= _object_folder(origin, f"objects/{entry.name}", room)


def _object_folder(origin: Path, name: str, room: int) -> int:
    """Check one folder of objects/, of at most *room* entries; how many it holds."""
    limit = INFO_MAX if name == "objects/info" else None
    entries = _entries(origin, name, room)
    for inner in entries:
        inner_name = f"{name}/{inner.name}"
        info = inner.stat(follow_symlinks=False)
        if name == "objects/info" and inner.name == "commit-graphs" and stat.S_ISDIR(info.st_mode):
            for graph in _entries(origin, inner_name, room):
                _regular(origin, f"{inner_name}/{graph.name}", graph.stat(follow_symlinks=False), INFO_MAX)
        else:
            _regular(origin, inner_name, info, limit)
    return len(entries)


def _entries(origin: Path, name: str, room: int) -> list[os.DirEntry[str]]:
    """The entries of the folder *name* of *origin*, which must be a folder and no link, and hold at most
    *room* entries."""
    path = origin / name
    _directory(origin, name)
    entries = []
    try:
        with os.scandir(path) as listing:
            for entry in listing:
                entries.append(entry)
                if len(entries) > room:
                    raise OriginUnreadable(origin, name, f"at most {room} entries", f"more than {room} entries")
    except OSError as error:
        raise OriginUnreadable(origin, name, "a folder the kit can list", f"unreadable: {error}") from None
    return entries


def _directory(origin: Path, name: str) -> None:
    info = lstat(origin, name)
    if info is None or not stat.S_ISDIR(info.st_mode) or _is_link(info):
        raise OriginUnreadable(origin, name or ".", "a folder", "nothing" if info is None else _kind(info))


def _file(origin: Path, name: str, limit: int | None) -> None:
    info = lstat(origin, name)
    if info is None:
        raise OriginUnreadable(origin, name, "a regular file", "nothing")
    _regular(origin, name, info, limit)


def _regular(origin: Path, name: str, info: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(info.st_mode) or _is_link(info):
        raise OriginUnreadable(origin, name, "a regular file", _kind(info))
    if limit is not None and info.st_size > limit:
        raise OriginUnreadable(origin, name, f"at most {limit} bytes", f"{info.st_size} bytes")


def lstat(origin: Path, name: str) -> os.stat_result | None:
    """What is at *name* in *origin* itself (a link is not followed), or None when nothing is."""
    try:
        return os.lstat(origin / name)
    except FileNotFoundError:
        return None
    except OSError as error:  # a name too long, a folder the kit may not enter: nothing it can let git read
        raise OriginUnreadable(origin, name or ".", "a file the kit can look at", f"unreadable: {error}") from None


def _is_link(info: os.stat_result) -> bool:
    """A symbolic link, or on Windows any reparse point (a junction is one)."""
    reparse = getattr(info, "st_file_attributes", 0) & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0)
    return stat.S_ISLNK(info.st_mode) or bool(reparse)


def _kind(info: os.stat_result) -> str:
    """What a file is, in words, for a message."""
    if _is_link(info):
        return "a symbolic link"
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):  # fmt: skip
        if test(info.st_mode):
            return word
    return f"a regular file of {info.st_size} bytes" if stat.S_ISREG(info.st_mode) else "an unknown kind of file"


def _open_regular(path: Path) -> int:
    """A descriptor of a regular file, opened without following a link and without blocking on a FIFO.

    Windows has neither O_NOFOLLOW nor FIFOs: there the name is looked at first and refused if it is a link
    (a reparse point), and the file opened is checked to be the one looked at."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    before = os.lstat(path) if sys.platform == "win32" else None
    if before is not None and _is_link(before):
        raise OSError(f"{str(path)!r} is a link")
    fd = os.open(path, flags)
    info = os.fstat(fd)
    same = before is None or (before.st_ino, before.st_dev) == (info.st_ino, info.st_dev)
    if not stat.S_ISREG(info.st_mode) or not same:
        os.close(fd)
        raise OSError(f"{str(path)!r} is not the regular file it was")
    if sys.platform != "win32":
        os.set_blocking(fd, True)
    return fd
