"""The power-loss layer's shell: it mounts, asks and cuts the FUSE server (``_server``), a process of its own.

The rules of what survives a cut are ``model``'s, which imports nothing that touches the system; this
module is the I/O around them. See the package's docstring for the fault model.
"""


from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumekit.conformance._process import LineProcess, ProcessGone, ReadTimeout
from resumekit.conformance.fault_models import POWER_LOSS
from resumekit.conformance.powerloss.model import CUT_MODES

FAULT_MODEL = POWER_LOSS
SYNC_DELAY = 0.01  # seconds the layer takes to answer an fsync: a slow disk, and the window in which a
# row acknowledged before its sync is seen not durable yet
_REPLY_TIMEOUT = 30.0


@dataclass(frozen=True)
class PowerLoss:
    """How a run simulates power loss: how long an fsync takes, and the cut modes a schedule draws from."""

    sync_delay: float = SYNC_DELAY
    modes: tuple[str, ...] = CUT_MODES


_checked: list[str | None] = []
_check_lock = threading.Lock()


class LayerError(Exception):
    """The layer could not be mounted, asked or cut; the message says why."""


def _static_reason() -> str | None:
    # Imported here: the CLI imports this module on every run, and most runs never ask.
    import ctypes.util
    import importlib.util

    if sys.platform != "linux":
        name = {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)
        return f"the power-loss layer is a FUSE file system for Linux; this is {name}"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (a container without FUSE, or the fuse module not loaded)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "no permission to open /dev/fuse: run as root, or as a user in the fuse group"
    if os.geteuid() != 0 and not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount3 is not installed (Debian and Ubuntu: apt-get install fuse3), so only root could mount"
    if not (ctypes.util.find_library("fuse3") or ctypes.util.find_library("fuse")):
        return "libfuse is not installed (Debian and Ubuntu: apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the FUSE binding mfusepy is not installed (pip install 'resumekit[powerloss]')"
    return None


def unavailable() -> str | None:
    """Why the layer cannot run on this machine, or None; the first call mounts a trial layer once."""
    with _check_lock:
        if not _checked:
            reason = _static_reason()
            if reason is None:
                reason = _trial()
            _checked.append(reason)
        return _checked[0]


def _trial() -> str | None:
    from resumekit.conformance import _files

    scratch = _files.scratch("powerloss-trial")
    layer = PowerLayer(scratch / "backing", scratch / "mount")
    try:
        layer.start()
        return None
    except LayerError as error:
        return f"a trial mount failed: {error}"
    finally:
        layer.stop()
        _files.remove(scratch)


def _mounted(path: Path) -> bool:
    """Whether *path* is a mount point, a dead FUSE mount included (``os.path.ismount`` says no to those)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    except OSError:
        return os.path.ismount(path)
    # /proc/self/mounts escapes a space, a tab, a newline and a backslash as octal.
    wanted = str(path.resolve()).replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")
    return wanted.replace("\n", "\\012") in points


class PowerLayer:
    """One mounted layer: BACKING holds the live files, MOUNTPOINT is the workspace the implementation uses."""

    def __init__(self, backing: Path, mountpoint: Path, sync_delay: float = SYNC_DELAY) -> None:
        self.backing, self.mountpoint, self.sync_delay = backing, mountpoint, sync_delay
        self._process: LineProcess | None = None
        self._lock = threading.Lock()  # one request at a time: a kill point may ask from another thread
        self.cuts = 0

    def start(self) -> None:
        """Mount the layer over an empty MOUNTPOINT; LayerError if it does not come up."""
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "resumekit.conformance.powerloss._server",
            str(self.backing),
            str(self.mountpoint),
            repr(self.sync_delay),
        ]
        try:
            self._process = LineProcess(argv)
        except ProcessGone as error:
            raise LayerError(str(error)) from None
        self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self._process is not None
        try:
            line = self._process.receive(_REPLY_TIMEOUT)
        except (ProcessGone, ReadTimeout) as error:
            tail = self._process.stderr_tail().strip().splitlines()
            raise LayerError(f"{error}{': ' + tail[-1] if tail else ''}") from None
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError:
            raise LayerError(f"the layer answered {line!r}, not a JSON reply") from None
        if not reply.get("ok"):
            raise LayerError(str(reply.get("error")))
        return reply

    def _ask(self, **request: Any) -> dict[str, Any]:
        with self._lock:
            if self._process is None:
                raise LayerError("the layer is not mounted")
            try:
                self._process.send(json.dumps(request).encode() + b"\n", timeout=_REPLY_TIMEOUT)
            except (ProcessGone, ReadTimeout) as error:
                raise LayerError(str(error)) from None
            return self._answer()

    def freeze(self) -> None:
        """The instant of the power cut, just before the kill: no sync completes from now on."""
        self._ask(op="freeze")

    def durable(self, path: Path) -> bytes | None:
        """What of the file at *path* (inside the mount) a power cut now would leave; None: no such file."""
        import base64

        relative = path.resolve().relative_to(self.mountpoint.resolve())
        data = self._ask(op="durable", path=relative.as_posix()).get("data")
        return None if data is None else base64.b64decode(data)

    def export(self, target: Path) -> None:
        """Write what a power cut now would leave into *target*, a folder that does not exist yet."""
        self._ask(op="export", path=str(target))

    def cut(self, mode: str = "lose", seed: int = 0) -> str:
        """Cut the power (the implementation must be dead by now, and the layer frozen at its kill)."""
        self.cuts += 1
        return str(self._ask(op="cut", mode=mode, seed=seed).get("kept", ""))

    def stop(self) -> None:
        """Unmount and end the layer; a mount left by a dead server is detached."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessGone, ReadTimeout):
                process.send(b'{"op": "stop"}\n', timeout=5.0)
            process.stop(grace=10.0)
        if _mounted(self.mountpoint):
            tool = shutil.which("fusermount3") or shutil.which("fusermount")
            argv = [tool, "-u", "-z", str(self.mountpoint)] if tool else ["umount", "-l", str(self.mountpoint)]
            subprocess.run(argv, capture_output=True, check=False)
