"""The kit's scratch folders: made fresh, removed whole without touching anything around them, and all removed
at once when a run is interrupted.

A scratch folder is made under the temporary folder (``TMPDIR``), its path resolved once (macOS's ``/tmp``
is itself a link) and the folder opened then; it stays *live* until ``remove`` has taken it away.

``remove`` works from that descriptor (POSIX): it lists each folder through a descriptor of its own,
opened without following a link and checked to be the entry it listed, and deletes each entry relative to
its folder's descriptor. A link is deleted as a link; a mount of another file system is never entered. It
changes a mode only below the root it removes, and only to delete what is there (a folder a process left
without read, write or search bits gets them back for its owner); it never changes the mode of the root's
parent, nor of anything else. A tree that something keeps writing into is tried ``PASSES`` times and then
reported, not fought forever. Windows has no descriptors of folders: there ``shutil.rmtree`` removes the
tree, retried while a killed process's handles go, and only an entry's own read-only attribute is cleared.

``stop`` is what Ctrl-C calls first: from then on the run's threads, and the threads that work for them
(``works_for``: the crash schedule's streams), start no process and make no folder (``check_running`` raises
``Interrupted``), so nothing writes below a folder once it is removed. ``interrupt`` follows once every process
of the run is killed: every live scratch folder of those threads goes (after the hooks that end what works in
it, ``before_removal``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance._folders import Folder, is_link, staged_name

PASSES = 8  # times the kit tries to empty and remove a tree before it reports what it could not
MAX_DEPTH = 64  # folders open at once while a tree is emptied; a deeper folder is moved up to the root first
MAX_ENTRIES = 100_000  # entries one folder gives up in one pass (a writer cannot hold a pass in one folder)
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


class Interrupted(KeyboardInterrupt):
    """A thread of an interrupted run asked for a new scratch folder."""


@dataclass
class _Live:
    fd: int | None  # the kit's own descriptor of the folder, taken when it made it (POSIX)
    owner: threading.Thread
    hooks: list[Callable[[], object]] = field(default_factory=list)


_LOCK = threading.Lock()
_LIVE: dict[Path, _Live] = {}
_STOPPED: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_WORKS_FOR: weakref.WeakKeyDictionary[threading.Thread, threading.Thread] = weakref.WeakKeyDictionary()


def works_for(thread: threading.Thread) -> None:
    """The current thread works on behalf of *thread* (a case's helper, such as a stream of the crash schedule):
    its scratch folders are that thread's, and it is stopped when that thread is."""
    with _LOCK:
        _WORKS_FOR[threading.current_thread()] = thread


def stop(threads: Iterable[threading.Thread]) -> None:
    """Ctrl-C, before the run's processes are killed: *threads* (and the threads working for them) start nothing
    new from now on, so that nothing the kill misses appears while the run winds down."""
    _STOPPED.update(threads)


def check_running() -> None:
    """Raise ``Interrupted`` on a thread of an interrupted run: it makes no new folder and starts no process,
    which would write below a folder the interrupt has removed."""
    current = threading.current_thread()
    with _LOCK:
        owner = _WORKS_FOR.get(current, current)
    if owner in _STOPPED:
        raise Interrupted("the run was interrupted: nothing new starts")


def scratch(prefix: str) -> Path:
    """A fresh, empty directory of the kit's own (its path resolved), live until ``remove`` takes it away."""
    check_running()
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix=f"resumekit-{prefix}-")))
    fd = os.open(path, _FOLDER) if sys.platform != "win32" else None
    current = threading.current_thread()
    with _LOCK:
        _LIVE[path] = _Live(fd, _WORKS_FOR.get(current, current))
    return path


def before_removal(path: Path, hook: Callable[[], object]) -> None:
    """Have ``interrupt`` call *hook* before it removes the live scratch folder *path* (to end what works in it)."""
    with _LOCK:
        live = _LIVE.get(Path(path))
        if live is not None:
            live.hooks.append(hook)


def interrupt(threads: Iterable[threading.Thread] | None = None) -> list[str]:
    """Ctrl-C, once every process of the run is killed: remove every live scratch folder made by *threads*
    (every one, if None), each after its hooks; each of *threads* that later asks for a new one gets
    ``Interrupted``. What could not be removed, a sentence each."""
    chosen = None if threads is None else set(threads)
    if chosen is not None:
        _STOPPED.update(chosen)
    with _LOCK:
        live = [(path, list(entry.hooks)) for path, entry in _LIVE.items() if chosen is None or entry.owner in chosen]
    problems = []
    for path, hooks in live:
        for hook in hooks:
            with contextlib.suppress(Exception):
                hook()
        problem = remove(path)
        if problem is not None:
            problems.append(problem)
    return problems


def remove(target: Path | Folder) -> str | None:
    """Delete a scratch tree and nothing else; None when it is gone, else a sentence saying what is left and why.

    A live scratch folder is removed through the kit's descriptor of it, even if a link now stands at its
    path; any other path is opened without following a link (a link there is deleted as a link)."""
    path = Path(target.path if isinstance(target, Folder) else target)
    try:
        if sys.platform == "win32":
            return _remove_plain(path)
        fd = _descriptor(path, target)
        if fd is None:
            return None
        try:
            return _remove_held(path, fd)
        finally:
            os.close(fd)
    except OSError as error:
        return f"the kit could not remove {str(path)!r}: {error.strerror or error}"
    finally:
        with _LOCK:
            live = _LIVE.pop(path, None)
            if live is not None and live.fd is not None:
                os.close(live.fd)


def _descriptor(path: Path, target: Path | Folder) -> int | None:
    """A descriptor of the tree to remove, of the kit's own; None when nothing is left to remove."""
    with _LOCK:
        live = _LIVE.get(path)
        if live is not None and live.fd is not None:
            return os.dup(live.fd)
    if isinstance(target, Folder):
        with contextlib.suppress(ValueError, OSError):
            return os.dup(target.fd)
    try:
        return os.open(path, _FOLDER)
    except FileNotFoundError:
        return None
    except PermissionError:  # the root left without its owner's bits: given back, it is the tree to remove
        parent = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            why = _allow(parent, path.name)
        finally:
            os.close(parent)
        if why is not None:
            raise PermissionError(why) from None
        return os.open(path, _FOLDER)
    except OSError:  # a link or a file at the path: deleted itself, never followed
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
        return None


def _remove_held(path: Path, fd: int) -> str | None:
    """Empty the folder open as *fd* and remove it from *path*, up to PASSES times."""
    info = os.fstat(fd)
    _owner_bits(fd, info)  # the root is the kit's: its owner gets its bits back
    problem: str | None = None
    delay = 0.01
    for _ in range(PASSES):
        problem = _empty(fd, info.st_dev)
        if not _names(path, info):
            _unlink_if_link(path)
            return (
                f"{str(path)!r} no longer names the folder the kit made there (it was moved, or a link or another "
                "entry took its place): the folder was emptied through the kit's descriptor and left where it is"
            )
        try:
            os.rmdir(path)  # the parent is only written (the entry goes), never changed in mode
            return None
        except FileNotFoundError:
            return None
        except OSError as error:
            problem = problem or f"{str(path)!r}: {error.strerror or error}"
        time.sleep(delay)
        delay *= 2
        _clear_immutable(path)
    return f"the kit could not remove {str(path)!r} in {PASSES} tries: {problem} (something may keep writing there)"


def _names(path: Path, info: os.stat_result) -> bool:
    """Whether *path* still names the folder of *info* (no link or other entry took its place)."""
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return True  # gone already: rmdir says so
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _unlink_if_link(path: Path) -> None:
    """A link at the kit's own name goes, as a link (never its target); anything else there stays."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)


@dataclass
class _Frame:
    """A folder being emptied: its descriptor, where it is below the root, its name in its parent."""

    fd: int
    where: str
    name: str
    entries: Iterator[os.DirEntry[str]]
    left: int = MAX_ENTRIES

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.entries.close()  # type: ignore[attr-defined]
        os.close(self.fd)


def _frame(fd: int, where: str, name: str) -> _Frame:
    try:
        return _Frame(fd, where, name, os.scandir(fd))
    except OSError:
        os.close(fd)
        raise


def _empty(top: int, device: int) -> str | None:
    """Delete every entry below the folder open as *top*, never through a link and never across a mount;
    None, or the first entry it could not delete (a later pass tries again). A folder deeper than MAX_DEPTH
    is moved up to *top* and emptied from there, so a tree of any depth holds few descriptors at once."""
    problem: str | None = None
    for _ in range(MAX_ENTRIES):
        moved: list[int] = []
        problem = _walk(top, device, moved) or problem
        if not moved:
            break
    return problem


def _walk(top: int, device: int, moved: list[int]) -> str | None:
    problem: str | None = None
    frames = [_frame(os.dup(top), "", "")]
    try:
        while frames:
            frame = frames[-1]
            entry = next(frame.entries, None) if frame.left > 0 else None
            if entry is None:
                frames.pop().close()
                if frames:
                    problem = _attempt(frame.where, os.rmdir, frame.name, dir_fd=frames[-1].fd) or problem
                continue
            frame.left -= 1
            where = f"{frame.where}/{entry.name}" if frame.where else entry.name
            opened, why = _descend(frame, entry, where, top, device, len(frames), moved)
            problem = problem or why
            if opened is not None:
                frames.append(opened)
    finally:
        for frame in frames:
            frame.close()
    return problem


def _descend(
    frame: _Frame, entry: os.DirEntry[str], where: str, top: int, device: int, depth: int, moved: list[int]
) -> tuple[_Frame | None, str | None]:
    """Delete *entry* of *frame* if it is no folder; a frame to empty it if it is; and what went wrong."""
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    except OSError as error:
        return None, f"{where!r}: {error.strerror or error}"
    if not stat.S_ISDIR(info.st_mode):
        return None, _attempt(where, os.unlink, entry.name, dir_fd=frame.fd)
    if info.st_dev != device:
        return None, f"{where!r} is a mount of another file system: the kit deletes nothing across it"
    if depth > MAX_DEPTH:  # moved up to the root, and emptied from there by the next walk
        moved.append(depth)
        return None, _attempt(where, os.rename, entry.name, staged_name(), src_dir_fd=frame.fd, dst_dir_fd=top)
    fd = _open_folder(frame.fd, entry.name, info)
    if isinstance(fd, str):
        return None, f"{where!r}: {fd}"
    try:
        return _frame(fd, where, entry.name), None
    except OSError as error:
        return None, f"{where!r}: {error.strerror or error}"


def _attempt(where: str, action: Callable[..., object], *args: Any, **kwargs: Any) -> str | None:
    """None once *action* has deleted (or found gone) the entry at *where*; else why it could not."""
    try:
        action(*args, **kwargs)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{where!r}: {error.strerror or error}"
    return None


def _open_folder(parent: int, name: str, info: os.stat_result) -> int | str:
    """The folder *name* of *parent*, opened without following a link, checked to be the entry listed, and
    given its owner's read, write and search bits if it lacked them; or why not."""
    try:
        fd = os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:
        why = _allow(parent, name)
        if why is not None:
            return why
        try:
            fd = os.open(name, _FOLDER, dir_fd=parent)
        except OSError as error:
            return str(error.strerror or error)
    except OSError as error:  # swapped for a link or gone meanwhile: the next pass sees what is there
        return str(error.strerror or error)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        return "replaced by another entry while the kit removed it"
    _owner_bits(fd, opened)
    return fd


def _owner_bits(fd: int, info: os.stat_result) -> None:
    """Give the folder open as *fd* its owner's read, write and search bits, so its entries can be deleted."""
    if sys.platform != "win32" and stat.S_IMODE(info.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)


def _allow(parent: int, name: str) -> str | None:
    """Give the owner back the bits of a folder it cannot open, without following a link; or why not."""
    try:
        if sys.platform == "linux":
            # O_PATH opens the folder itself whatever its mode; its /proc name reaches that very inode.
            fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            try:
                os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(os.fstat(fd).st_mode) | stat.S_IRWXU)
            finally:
                os.close(fd)
            return None
        if os.chmod in os.supports_follow_symlinks:  # macOS and the BSDs change a link itself, never its target
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode):
                return "no longer a folder"
            os.chmod(name, stat.S_IMODE(info.st_mode) | stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
            return None
    except OSError as error:
        return str(error.strerror or error)
    return "a folder the kit cannot open, and this system cannot change its mode without following a link"


def _clear_immutable(path: Path) -> None:
    """Linux, as root: a process may have made an entry immutable (``chattr +i``), which no mode bit undoes
    and which stops even root from deleting it; clear the flag through the tree (chattr follows no link)."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("chattr") is None or os.path.islink(path):
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["chattr", "-R", "-f", "-i", str(path)], capture_output=True, check=False, timeout=30)


def _remove_plain(path: Path) -> str | None:
    """Windows: ``shutil.rmtree``, retried while a killed process's handles go. Only an entry itself is ever
    changed: a read-only file or folder loses that attribute (Windows deletes neither), a link or junction
    goes as itself, and nothing above the entry is touched."""

    def writable(function: object, name: str, _: object) -> None:
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(name)
            if is_link(info):
                os.unlink(name)  # Windows unlinks a folder's link or junction itself, never its target
                return
            os.chmod(name, stat.S_IWRITE)
            (os.rmdir if stat.S_ISDIR(info.st_mode) else os.unlink)(name)  # a folder not empty: the next pass

    problem = ""
    delay = 0.01
    for _ in range(PASSES):
        try:
            _rmtree(path, writable)
            return None
        except OSError as error:
            if not os.path.lexists(path):
                return None
            problem = str(error)
        time.sleep(delay)
        delay *= 2
    return f"the kit could not remove {str(path)!r} in {PASSES} tries: {problem}"


def _rmtree(path: Path, handler: Any) -> None:
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=handler)
    else:  # Python 3.10 and 3.11 have no onexc
        shutil.rmtree(path, onerror=handler)
