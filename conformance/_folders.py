"""Folders of the kit's own, held by a descriptor from the moment the kit makes them.

The worker runs as the same user as the kit and knows the scratch paths: it can rename any folder there and
put a link in its place. So the kit opens each folder it makes once, without following a link, keeps the
descriptor, and names everything it writes relative to it (``dir_fd``): a new file is created exclusively
and never through a link (``O_CREAT | O_EXCL | O_NOFOLLOW``); a file that takes the place of another is
written under a name nobody can guess and renamed over it inside the held folder, so that a link found at
the name is replaced, never followed; a folder a worker made (a workspace, ``tasks/``) is opened without
following a link before anything is written in it. A folder swapped for a link after the kit opened it
keeps getting the kit's writes wherever it was moved: the link is never written through.

Windows has no ``dir_fd``. There a Folder holds only its path: before each write the kit checks that the
folder is still a directory and no link or junction (no reparse point at all), and creates files
exclusively. A process that swaps the folder for a junction between that check and the write can still
redirect that one write: the check narrows the window, it cannot close it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import BinaryIO

HELD = sys.platform != "win32"  # folders held by a descriptor, names relative to it (dir_fd)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


class Refused(Exception):
    """A path an implementation named, or left at a name of the kit's, that the kit will not touch."""


def staged_name() -> str:
    """A name in a folder of the kit's that nobody can guess before the kit uses it."""
    return f".resumekit-{secrets.token_hex(8)}"


class Folder:
    """A directory the kit made (or a worker's directory it opened without following a link), held open.

    Every method names entries relative to the held descriptor (POSIX) or, on Windows, by path after
    checking that the folder is still no link or junction. The kit closes a Folder when it is done with it.
    """

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path, self._fd = Path(path), fd

    @classmethod
    def open(cls, path: Path) -> Folder:
        """The directory at *path*, opened without following a link as its last part; Refused if it is none."""
        if sys.platform == "win32":
            _plain_directory(Path(path))
            return cls(Path(path), None)
        try:
            return cls(Path(path), os.open(path, os.O_RDONLY | _DIRECTORY))
        except OSError as error:
            raise Refused(f"{str(path)!r} is not a directory the kit can hold: {error}") from None

    @property
    def fd(self) -> int:
        """The held descriptor (POSIX only)."""
        if self._fd is None:
            raise ValueError(f"{str(self.path)!r} is not held by a descriptor on this system")
        return self._fd

    def close(self) -> None:
        """Let the descriptor go (the folder itself stays)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _checked(self) -> None:
        if sys.platform == "win32":
            _plain_directory(self.path)

    def folder(self, name: str) -> Folder:
        """The subfolder *name*: made now, or opened if a directory is there already (never a link's target).

        Refused when a link or anything else but a directory is at the name."""
        self._checked()
        try:
            if sys.platform != "win32":
                os.mkdir(name, dir_fd=self.fd)
            else:
                os.mkdir(self.path / name)
        except FileExistsError:
            pass
        except OSError as error:
            raise Refused(f"cannot make {str(self.path / name)!r}: {error}") from None
        found = self.child(name)
        if found is None:
            raise Refused(f"{str(self.path / name)!r} is not a directory: something else was put at its name")
        return found

    def child(self, name: str) -> Folder | None:
        """The existing directory *name* (a worker's, say), opened without following a link; None if a link,
        anything else or nothing is there."""
        self._checked()
        if sys.platform == "win32":
            try:
                _plain_directory(self.path / name)
            except Refused:
                return None
            return Folder(self.path / name, None)
        try:
            return Folder(self.path / name, os.open(name, os.O_RDONLY | _DIRECTORY, dir_fd=self.fd))
        except OSError:
            return None

    def lstat(self, name: str) -> os.stat_result | None:
        """What is at *name* (a link is itself, never followed); None when nothing is there."""
        self._checked()
        try:
            if sys.platform != "win32":
                return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            return os.lstat(self.path / name)
        except FileNotFoundError:
            return None

    def read(self, name: str, limit: int) -> bytes:
        """The bytes of the regular file *name*, at most *limit* of them; Refused for a link, a FIFO, a device
        or a directory at the name (opened without following a link, never blocking on a FIFO) or a file
        holding more; FileNotFoundError when nothing is there."""
        self._checked()
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(name, flags, dir_fd=self.fd) if sys.platform != "win32" else os.open(self.path / name, flags)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise Refused(f"{str(self.path / name)!r} cannot be opened: {error}") from None
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise Refused(f"{str(self.path / name)!r} is not a regular file")
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise Refused(f"{str(self.path / name)!r} holds more than {limit} bytes")
        return data

    def names(self) -> list[str]:
        """The names of the folder's entries, sorted."""
        self._checked()
        return sorted(os.listdir(self.fd if sys.platform != "win32" else self.path))

    def create(self, name: str, data: bytes, mode: int = 0o666, *, sync: bool = False) -> None:
        """A new file *name* holding *data* (synced with *sync*); Refused if anything, a link included, is at
        the name already."""
        self._checked()
        try:
            if sys.platform != "win32":
                fd = os.open(name, _NEW, mode, dir_fd=self.fd)
            else:
                fd = _open_new(self.path / name, mode)
        except OSError as error:
            raise Refused(f"cannot create {str(self.path / name)!r}: {error}") from None
        with open(fd, "wb") as handle:
            handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())

    def fifo(self, name: str) -> None:
        """A new FIFO *name*; Refused if anything is at the name already, or where the system has none."""
        self._checked()
        try:
            if sys.platform == "win32":
                raise OSError("Windows has no FIFOs in its file system")
            os.mkfifo(name, dir_fd=self.fd)
        except OSError as error:
            raise Refused(f"cannot make the FIFO {str(self.path / name)!r}: {error}") from None

    def put(self, name: str, data: bytes, mode: int = 0o666, *, sync: bool = False) -> None:
        """A file of the kit's holding *data* at *name*, in place of whatever was there: written under a name
        nobody can guess, then renamed over the name, so that a link found there is replaced, never followed.
        With *sync* the file and the folder are synced. Refused when the name cannot be taken (a directory)."""
        staged = staged_name()
        self.create(staged, data, mode, sync=sync)
        try:
            if sys.platform != "win32":
                os.replace(staged, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            else:
                os.replace(self.path / staged, self.path / name)
        except OSError as error:
            with contextlib.suppress(OSError):
                self.unlink(staged)
            raise Refused(f"cannot put a file at {str(self.path / name)!r}: {error}") from None
        if sync:
            self.sync()

    def append(self, name: str) -> BinaryIO:
        """*name* opened for appending: made now if absent; Refused for a link or anything but a regular file."""
        self._checked()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            if sys.platform != "win32":
                fd = os.open(name, flags | os.O_NONBLOCK, 0o666, dir_fd=self.fd)
            else:
                _not_a_link(self.path / name)
                fd = os.open(self.path / name, flags, 0o666)
        except OSError as error:
            raise Refused(f"cannot append to {str(self.path / name)!r}: {error}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Refused(f"{str(self.path / name)!r} is not a regular file")
        if sys.platform != "win32":
            os.set_blocking(fd, True)
        return open(fd, "ab")

    def link(self, name: str, target: Path) -> None:
        """A new symbolic link *name* to *target*; Refused if anything is at the name already."""
        self._checked()
        try:
            if sys.platform != "win32":
                os.symlink(target, name, dir_fd=self.fd)
            else:
                os.symlink(target, self.path / name, target_is_directory=Path(target).is_dir())
        except OSError as error:
            raise Refused(f"cannot make the link {str(self.path / name)!r}: {error}") from None

    def unlink(self, name: str) -> bool:
        """Remove the entry *name* if it is no directory (a link goes itself, its target stays); whether it did."""
        self._checked()
        try:
            if sys.platform != "win32":
                os.unlink(name, dir_fd=self.fd)
            else:
                os.unlink(self.path / name)
        except OSError:
            return False
        return True

    def move(self, name: str, to: Folder, new_name: str) -> None:
        """Rename the entry *name* of this folder to *new_name* in *to* (a link moves as a link)."""
        self._checked()
        to._checked()
        try:
            if sys.platform != "win32":
                os.rename(name, new_name, src_dir_fd=self.fd, dst_dir_fd=to.fd)
            else:
                os.rename(self.path / name, to.path / new_name)
        except OSError as error:
            raise Refused(f"cannot move {str(self.path / name)!r}: {error}") from None

    def chmod(self, mode: int) -> None:
        """Set the folder's own mode (through its descriptor: never a link's target)."""
        self._checked()
        if sys.platform != "win32":
            os.fchmod(self.fd, mode)
        else:
            os.chmod(self.path, mode)

    def sync(self) -> None:
        """fsync the folder (POSIX; Windows cannot open a directory to sync it)."""
        if sys.platform != "win32":
            os.fsync(self.fd)


def is_link(info: os.stat_result) -> bool:
    """A link, or on Windows any reparse point (a junction, a mount point)."""
    attributes: int = getattr(info, "st_file_attributes", 0)
    return stat.S_ISLNK(info.st_mode) or bool(attributes & stat.FILE_ATTRIBUTE_REPARSE_POINT)


def _plain_directory(path: Path) -> None:
    """Refused unless *path* is a directory and no link or junction (the check of the Windows fallback)."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise Refused(f"{str(path)!r} cannot be looked at: {error}") from None
    if is_link(info) or not stat.S_ISDIR(info.st_mode):
        raise Refused(f"{str(path)!r} is no longer a plain directory of the kit's (a link or junction took its place)")


def _not_a_link(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if is_link(os.lstat(path)):
            raise Refused(f"{str(path)!r} is a link the kit did not make")


def _open_new(path: Path, mode: int) -> int:
    """Windows: a new file, created exclusively, after a check that no link (even a dangling one) is there."""
    if os.path.lexists(path):
        raise FileExistsError(f"{str(path)!r} exists")
    return os.open(path, _NEW, mode)
