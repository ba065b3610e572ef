"""What the adapter and a running worker share: the armed failpoint, the stop request and the state
that ``p1.worker.wait`` reports (FPT-2, ADP-2, RESUME-5)."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DISK_ERRNOS", "DISK_FILES", "DISK_OPS", "Control", "DiskFault", "StopRequested"]

DISK_FILES = ("journal", "cache")
DISK_OPS = ("write", "fsync")
DISK_ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


class DiskFault:
    """One injected disk error (capability p1.disk-faults): the *hit*-th *op* on *file* in this worker
    process fails with *errno_name*."""

    def __init__(self, file: str, op: str, errno_name: str, hit: int) -> None:
        self.file, self.op, self.errno_name, self.hit = file, op, errno_name, hit


class StopRequested(Exception):
    """The worker was asked to stop and has reached a step boundary (RESUME-5)."""


class Control:
    def __init__(self, failpoint: tuple[str, int] | None = None, disk_fault: DiskFault | None = None,
                 tool: tuple[str, ...] | None = None) -> None:
        self.tool = tool  # capability p1.tools: run in every verified workspace (ADP-2, WRK-5)
        self._cond = threading.Condition()
        self._disk_fault = disk_fault
        self._disk_hits: dict[tuple[str, str], int] = {}
        self._armed = failpoint
        self._hits: dict[str, int] = {}
        self._total = 0  # every site reached, whatever its name: the hit count of the name "*"
        self._blocked: str | None = None
        self._stop = False
        self._idle = False
        self._exit_code: int | None = None
        self.before_exit: Callable[[], None] | None = None  # the adapter's marker (ADP-2)

    # -- the worker's side ------------------------------------------------------------------------

    def failpoint(self, name: str) -> None:
        """Count a hit of the site *name*; block here while it is the armed name and hit (FPT-2), or
        while ``"*"`` is armed and this is the hit-th site of any name (capability p1.failpoint-any)."""
        with self._cond:
            hit = self._hits[name] = self._hits.get(name, 0) + 1
            self._total += 1
            if self._stop or self._armed not in ((name, hit), ("*", self._total)):
                return
            self._armed = None
            self._blocked = name
            self._cond.notify_all()
            while self._blocked == name:
                self._cond.wait()

    def disk(self, file: str, op: str) -> None:
        """Count one *op* ("write" or "fsync") on *file* ("journal" or "cache"); raise the armed disk
        error when this is its hit, as the operating system would report it (JNL-7, JNL-8)."""
        with self._cond:
            hit = self._disk_hits[(file, op)] = self._disk_hits.get((file, op), 0) + 1
            fault = self._disk_fault
            if fault is None or (fault.file, fault.op, fault.hit) != (file, op, hit):
                return
        code = DISK_ERRNOS[fault.errno_name]
        raise OSError(code, f"{os.strerror(code)} (injected: {op} #{hit} of the {file})")

    def hits(self, name: str) -> int:
        with self._cond:
            return self._hits.get(name, 0)

    @property
    def stop_requested(self) -> bool:
        with self._cond:
            return self._stop

    def check_stop(self) -> None:
        if self.stop_requested:
            raise StopRequested

    def sleep(self, seconds: float) -> None:
        """Wait in real time, waking early for a stop request (then raising StopRequested)."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)
        raise StopRequested

    def set_idle(self, idle: bool) -> None:
        with self._cond:
            if self._idle != idle:
                self._idle = idle
                self._cond.notify_all()

    def exited(self, code: int) -> None:
        # The orderly-exit marker comes first, so that no wait is answered 'exited' before it exists (ADP-2).
        if self.before_exit is not None:
            self.before_exit()
        with self._cond:
            self._exit_code = code
            self._idle = False
            self._cond.notify_all()

    # -- the adapter's side -----------------------------------------------------------------------

    @property
    def exit_code(self) -> int | None:
        with self._cond:
            return self._exit_code

    def state(self) -> dict[str, Any] | None:
        if self._exit_code is not None:
            return {"state": "exited", "exitCode": self._exit_code}
        if self._blocked is not None:
            return {"state": "blocked", "failpoint": self._blocked}
        if self._idle:
            return {"state": "idle"}
        return None

    def wait(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                state = self.state()
                if state is not None:
                    return state
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"state": "running"}
                self._cond.wait(left)

    def release(self, failpoint: tuple[str, int] | None) -> None:
        """Release a blocked worker, disarm the failpoint reached and arm *failpoint* (ADP-2)."""
        with self._cond:
            self._blocked = None
            self._armed = failpoint
            self._cond.notify_all()

    def request_stop(self) -> None:
        with self._cond:
            self._stop = True
            self._armed = None
            self._blocked = None
            self._cond.notify_all()
