"""The FUSE file system that serves an implementation's workspace and forgets what it never synced.

Run by the kit as ``python -m resumekit.conformance.powerloss._server BACKING MOUNTPOINT SYNC_DELAY``
(Linux, libfuse, the ``mfusepy`` binding). Reads and writes pass through to BACKING, so the
implementation sees an ordinary file system; every write, change of size and directory change is
also told to the durable model (``model.Durable``), which makes it durable only when the file or the
directory is synced. The kit speaks to this process in JSON lines on stdin and stdout:

- ``{"op": "durable", "path": "a/b"}``: the durable bytes of that file (base64), or null.
- ``{"op": "cut", "mode": "lose", "seed": 7}``: unmount (the kernel writes back what it still
  holds, and forgets its page cache), replace BACKING by what the cut leaves, mount again.
- ``{"op": "freeze"}``: the instant of the power cut: from now on no sync completes (an fsync still
  sleeping in its delay fails), so a sync the implementation started before its kill cannot land after.
- ``{"op": "stop"}``: unmount and exit.

An fsync is answered after SYNC_DELAY seconds, and only then made durable: a slow disk, which is
what lets the kit see a row acknowledged before its sync reached the disk.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy

from resumekit.conformance.powerloss.model import Cut, Durable

assert sys.platform == "linux"  # the layer is Linux-only; type checkers for other systems stop here

_STAT_KEYS = (
    "st_atime_ns", "st_ctime_ns", "st_gid", "st_mode", "st_mtime_ns", "st_nlink", "st_size", "st_uid",
    "st_ino", "st_blocks", "st_blksize",
)  # fmt: skip
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # a folder opened only if it is one, never a link's target


class Layer(mfusepy.Operations):  # type: ignore[misc]
    """The pass-through operations, each telling the durable model what it changed."""

    use_ns = True

    def __init__(self, backing: Path, sync_delay: float) -> None:
        self.backing = str(backing)
        self.sync_delay = sync_delay
        self._mutex = threading.RLock()
        self.mounted = threading.Event()
        self.frozen = False  # the power is off: no sync completes any more, until the cut is made
        self.nodes: dict[int, int] = {}  # inode number of a backing entry to model node
        self.handles: dict[int, int] = {}  # open descriptor to model node
        self._next = 0
        self.durable = self.scan()

    # -- the model's nodes ---------------------------------------------------------------------

    def _full(self, path: str) -> str:
        return self.backing + path

    def _fresh(self, full: str) -> int:
        with self._mutex:
            self._next += 1
            self.nodes[os.lstat(full).st_ino] = self._next
            return self._next

    def _node(self, full: str) -> int:
        ino = os.lstat(full).st_ino
        with self._mutex:
            if ino not in self.nodes:
                self._next += 1
                self.nodes[ino] = self._next
            return self.nodes[ino]

    def scan(self) -> Durable:
        """Everything BACKING holds now is durable: a mount, or a cut, starts from what the disk has."""
        with self._mutex:
            self.nodes.clear()
            durable = Durable(self._fresh(self.backing))
            for directory, names, files in os.walk(self.backing):
                entries: dict[str, tuple[int, str, str | None]] = {}
                for name in names + files:
                    full = os.path.join(directory, name)
                    node = self._fresh(full)
                    if os.path.islink(full):
                        entries[name] = (node, "link", os.readlink(full))
                    elif os.path.isdir(full):
                        entries[name] = (node, "dir", None)
                    else:
                        entries[name] = (node, "file", None)
                        with open(full, "rb") as handle:
                            durable.files[node] = handle.read()
                durable.sync_dir(self._node(directory), entries)
            return durable

    def _entries(self, full: str) -> dict[str, tuple[int, str, str | None]]:
        entries: dict[str, tuple[int, str, str | None]] = {}
        for name in os.listdir(full):
            child = os.path.join(full, name)
            kind = "link" if os.path.islink(child) else "dir" if os.path.isdir(child) else "file"
            entries[name] = (self._node(child), kind, os.readlink(child) if kind == "link" else None)
        return entries

    # -- life cycle ------------------------------------------------------------------------------

    def init(self, path: str) -> None:
        self.mounted.set()

    # -- reading -----------------------------------------------------------------------------------

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.lstat(self._full(path))
        return {key: getattr(st, key) for key in _STAT_KEYS}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag")
        return {key: getattr(st, key) for key in (*keys, "f_frsize", "f_namemax")}

    def open(self, path: str, flags: int) -> int:
        # The kernel places appends itself; O_APPEND here would make pwrite ignore its offset.
        fd = os.open(self._full(path), flags & ~(os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_TRUNC))
        self.handles[fd] = self._node(self._full(path))
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def release(self, path: str, fh: int) -> int:
        self.handles.pop(fh, None)
        os.close(fh)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    # -- writing -----------------------------------------------------------------------------------

    def create(self, path: str, mode: int, flags: int) -> int:
        full = self._full(path)
        existed = os.path.lexists(full)  # the kernel may create a name it has not looked up
        fd = os.open(full, os.O_RDWR | os.O_CREAT, mode)
        node = self.handles[fd] = self._node(full) if existed else self._fresh(full)
        if existed and flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
            with self._mutex:
                self.durable.truncate(node, 0)
        return fd

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        written = os.pwrite(fh, data, offset)
        node = self.handles.get(fh)
        if node is None:
            node = self.handles[fh] = self._node_of_fd(fh)
        with self._mutex:
            self.durable.write(node, offset, data[:written])
        return written

    def _node_of_fd(self, fd: int) -> int:
        ino = os.fstat(fd).st_ino
        with self._mutex:
            if ino not in self.nodes:
                self._next += 1
                self.nodes[ino] = self._next
            return self.nodes[ino]

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        full = self._full(path)
        os.truncate(full, length)
        node = self._node(full)
        with self._mutex:
            self.durable.truncate(node, length)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        time.sleep(self.sync_delay)
        node = self.handles.get(fh)
        if node is None:
            node = self._node_of_fd(fh)
        with self._mutex:
            if self.frozen:
                raise mfusepy.FuseOSError(errno.EIO)
            self.durable.sync_file(node)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        time.sleep(self.sync_delay)
        full = self._full(path)
        with self._mutex:
            if self.frozen:
                raise mfusepy.FuseOSError(errno.EIO)
            self.durable.sync_dir(self._node(full), self._entries(full))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        full = self._full(path)
        os.mkdir(full, mode)
        self._fresh(full)
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        full = self._full(path)
        os.mknod(full, mode, dev)
        self._fresh(full)
        return 0

    def symlink(self, target: str, source: str) -> int:
        full = self._full(target)
        os.symlink(source, full)
        self._fresh(full)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._full(source), self._full(target))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._full(path))
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._full(old), self._full(new))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._full(path))
        else:
            os.utime(self._full(path), ns=times)
        return 0

    # -- the cut -----------------------------------------------------------------------------------

    def export(self, target: str) -> None:
        """Write the durable tree, as a cut would leave it, into *target*, made here (nothing may be there)."""
        with self._mutex:
            cut = self.durable.cut("lose", 0)
        _materialize(cut, target, fresh=True)

    def restore(self, mode: str, seed: int) -> str:
        """Replace BACKING by what a cut in *mode* leaves; return what was kept."""
        with self._mutex:
            cut = self.durable.cut(mode, seed)
            for name in os.listdir(self.backing):
                full = os.path.join(self.backing, name)
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full)
                else:
                    os.unlink(full)
            _materialize(cut, self.backing)
            self.handles.clear()
            self.durable = self.scan()
            self.frozen = False
            return cut.kept


def _materialize(cut: Cut, root: str, *, fresh: bool = False) -> None:
    """Write the tree a cut leaves into *root* (made here when *fresh*, and then it must not exist yet).

    The implementation can reach *root* (an export lands in the kit's scratch, the backing is there too), so
    every entry is made new relative to a descriptor of its folder, each opened without following a link:
    nothing is written through a link it put in the way."""
    if fresh:
        os.mkdir(root)
    else:
        os.makedirs(root, exist_ok=True)
    top = os.open(root, _FOLDER)
    try:
        for parts, kind, content in cut.walk():
            parent = _folder_at(top, parts[:-1])
            try:
                if kind == "dir":
                    os.mkdir(parts[-1], dir_fd=parent)
                elif kind == "link":
                    assert isinstance(content, str)
                    os.symlink(content, parts[-1], dir_fd=parent)
                else:
                    assert isinstance(content, bytes)
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                    with open(os.open(parts[-1], flags, 0o666, dir_fd=parent), "wb") as handle:
                        handle.write(content)
            finally:
                if parent != top:
                    os.close(parent)
    finally:
        os.close(top)


def _folder_at(top: int, parts: tuple[str, ...]) -> int:
    """A new descriptor of the folder *parts* below *top* (or *top* itself), never through a link."""
    fd = top
    for name in parts:
        child = os.open(name, _FOLDER, dir_fd=fd)
        if fd != top:
            os.close(fd)
        fd = child
    return fd


class _Control:
    """The kit's requests on stdin, answered on stdout, while the main thread serves the mount."""

    def __init__(self, layer: Layer, mountpoint: str) -> None:
        self.layer, self.mountpoint = layer, mountpoint
        self.out = threading.Lock()
        self.action: tuple[str, int] | None = None  # the cut to make once unmounted
        self.stopping = False
        self.done = threading.Event()
        self.result: str = ""

    def say(self, **message: Any) -> None:
        with self.out:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def wait_mounted(self, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.layer.mounted.is_set() and os.path.ismount(self.mountpoint):
                return True
            time.sleep(0.002)
        return False

    def unmount(self) -> str | None:
        """Unmount; while the mount is busy, retry for a while, then detach it lazily.

        A process killed with its group may hold a file of the mount for a moment after the process the
        kit reaped is gone (a grandchild still dying); the mount is busy until it lets go.
        """
        tool = shutil.which("fusermount3") or shutil.which("fusermount")
        argv = [tool, "-u", self.mountpoint] if tool else ["umount", self.mountpoint]
        deadline, delay = time.monotonic() + 3.0, 0.01
        while True:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                return None
            if time.monotonic() > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        lazy = [tool, "-u", "-z", self.mountpoint] if tool else ["umount", "-l", self.mountpoint]
        if subprocess.run(lazy, capture_output=True, check=False).returncode == 0:
            return None
        return done.stderr.strip() or f"{argv[0]} exited {done.returncode}"

    def serve(self) -> None:
        for line in sys.stdin:
            try:
                request = json.loads(line)
                op = request["op"]
            except (ValueError, KeyError, TypeError) as error:
                self.say(ok=False, error=f"bad request {line!r}: {error}")
                continue
            if op == "durable":
                parts = tuple(p for p in str(request["path"]).split("/") if p)
                with self.layer._mutex:
                    data = self.layer.durable.resolve(parts)
                    unsynced = self.layer.durable.unsynced()
                self.say(ok=True, data=None if data is None else base64.b64encode(data).decode(), unsynced=unsynced)
            elif op == "freeze":
                with self.layer._mutex:
                    self.layer.frozen = True
                self.say(ok=True)
            elif op == "export":
                try:
                    self.layer.export(str(request["path"]))
                    self.say(ok=True)
                except OSError as error:
                    self.say(ok=False, error=f"cannot export the durable tree: {error}")
            elif op == "cut":
                self.action = (str(request.get("mode", "lose")), int(request.get("seed", 0)))
                self.done.clear()
                problem = self.unmount()
                if problem:
                    self.action = None
                    self.say(ok=False, error=f"cannot unmount for the cut: {problem}")
                    continue
                self.done.wait()
                if self.result.startswith("error:"):
                    self.say(ok=False, error=self.result[6:])
                elif self.wait_mounted():
                    self.say(ok=True, kept=self.result)
                else:
                    self.say(ok=False, error="the layer did not mount again within 20 s")
            elif op == "stop":
                break
            else:
                self.say(ok=False, error=f"unknown op {op!r}")
        self.stopping = True
        if os.path.ismount(self.mountpoint):
            self.unmount()


def main(argv: list[str]) -> int:
    backing, mountpoint, delay = Path(argv[0]).resolve(), str(Path(argv[1]).resolve()), float(argv[2])
    layer = Layer(backing, delay)
    control = _Control(layer, mountpoint)

    def announce() -> None:
        if control.wait_mounted():
            control.say(ok=True, ready=True)
            control.serve()
        else:
            control.say(ok=False, error="the layer did not mount within 20 s")
            control.stopping = True

    threading.Thread(target=announce, daemon=True).start()
    while True:
        layer.mounted.clear()
        try:
            mfusepy.FUSE(layer, mountpoint, foreground=True, nothreads=False, fsname="resumekit-powerloss")
        except RuntimeError as error:
            control.say(ok=False, error=f"the FUSE mount failed ({error})")
            return 1
        if control.stopping or control.action is None:
            return 0
        mode, seed = control.action
        control.action = None
        try:
            control.result = layer.restore(mode, seed)
        except (OSError, ValueError) as error:
            control.result = f"error:{error}"
        control.done.set()
        if control.result.startswith("error:"):
            return 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main(sys.argv[1:]))
