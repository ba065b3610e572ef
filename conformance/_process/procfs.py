"""Reading other processes through /proc (Linux): defensively, since any of them may vanish, be another
user's, or belong to the implementation. Every read is capped; a process gone or refused reads as nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator

_STAT_CAP = 4096  # bytes of /proc/<pid>/stat read at most
_MAX_DEPTH = 4096  # parents followed at most from one process to the processes it may descend from
_CMDLINE_CAP = 64 << 10  # bytes of a command line read at most


def pids() -> Iterator[int]:
    """Every process id in /proc, but the kit's own."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    me = os.getpid()
    for name in names:
        if name.isdigit() and int(name) != me:
            yield int(name)


def read(path: str, cap: int) -> bytes | None:
    """At most *cap* bytes of a /proc file, or None if it cannot be read (gone, refused)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    data = bytearray()
    try:
        while len(data) < cap:
            chunk = os.read(fd, cap - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return bytes(data)


def stat(pid: int) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command's name (which may hold anything): state, parent, ...
    [] if the process is gone."""
    return (read(f"/proc/{pid}/stat", _STAT_CAP) or b"").rpartition(b")")[2].split()


def parent(pid: int) -> int | None:
    """The parent of *pid*, None if it is gone (or a zombie or dead: it runs nothing any more)."""
    return _parent(stat(pid))


def _parent(fields: list[bytes]) -> int | None:
    if len(fields) < 2 or fields[0] in (b"Z", b"X"):
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


def group(pid: int) -> tuple[int, int] | None:
    """The process group and the session of *pid*; None if it is gone."""
    return group_of(stat(pid))


def group_of(fields: list[bytes]) -> tuple[int, int] | None:
    """The process group and the session in the stat *fields* of a process; None if they are not there."""
    try:
        return int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def below(roots: Collection[int], early: Callable[[int, list[bytes]], object] | None = None) -> dict[int, int]:
    """Every live process below *roots* (their children, the children of those, ...), zombies left out, each
    with the root it is below.

    The newest processes are read first, just after the listing, and *early* is called with each child of a
    root and its stat fields as soon as they are read: a process that forks and ends on and on, so that its
    pid never stays the same, is reparented to a root at every turn, and is read (and can be acted on) before
    it has moved on."""
    children: dict[int, list[int]] = {}
    found: dict[int, int] = {}
    for pid in sorted(pids(), reverse=True):
        fields = stat(pid)
        up = _parent(fields)
        if up is None or pid in roots:
            continue
        children.setdefault(up, []).append(pid)
        if up in roots:
            found[pid] = up
            if early is not None:
                early(pid, fields)
    queue = list(found)
    while queue:
        top = queue.pop()
        for child in children.get(top, ()):
            if child not in found:
                found[child] = found[top]
                queue.append(child)
    return found


def descends(pid: int, roots: Collection[int]) -> bool:
    """Whether live process *pid* is below one of *roots*, its parents read one by one up to a root."""
    seen = {pid}
    up = parent(pid)
    for _ in range(_MAX_DEPTH):
        if up is None or up <= 1:
            return False
        if up in roots:
            return True
        if up in seen:
            return False
        seen.add(up)
        up = parent(up)
    return False


def running(pid: object, module: bytes) -> dict[str, object] | None:
    """Whether the live process *pid* runs *module* (one of its command line's words, as ``python -m MODULE``
    gives it) and its working directory (None if unreadable); None when there is no such process, a zombie
    included (its command line is empty). A *pid* that is no positive int names no process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    cmdline = read(f"/proc/{pid}/cmdline", _CMDLINE_CAP)
    if not cmdline:
        return None
    try:
        cwd: str | None = os.fsdecode(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        cwd = None
    return {"runs": module in cmdline.split(b"\0"), "cwd": cwd}
