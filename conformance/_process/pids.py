"""Process ids the kit did not start itself: whether one is plausible, whether it still runs, waiting for it."""

from __future__ import annotations

import os
import sys
import time

if sys.platform == "win32":
    from resumekit.conformance._process.windows import _QUERY_LIMITED_INFORMATION, _SYNCHRONIZE, _kernel32

MAX_PID = 2**31 - 1  # pid_t on POSIX; Windows pids are DWORDs, but far below this in practice


def plausible_pid(pid: object) -> bool:
    """Whether *pid* is a JSON integer (not a bool, not a float) in the range of process ids."""
    return isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid <= MAX_PID


def wait_pid_gone(pid: int, timeout: float) -> bool:
    """Wait until *pid* no longer runs (for a pid the kit did not start itself)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.005)
    return not pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether a process with *pid* still runs."""
    if not plausible_pid(pid):
        return False
    if sys.platform == "win32":
        handle = _kernel32.OpenProcess(_QUERY_LIMITED_INFORMATION | _SYNCHRONIZE, False, pid)
        if not handle:
            return False
        try:
            return bool(_kernel32.WaitForSingleObject(handle, 0) == 0x102)  # WAIT_TIMEOUT: still running
        finally:
            _kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers signal 0; the kit reaps its own children, so treat it as alive until then.
    return True


def pidfd_open(pid: int) -> int | None:
    """A pidfd for *pid*; None where pidfds are not available, -1 when the process is gone."""
    if sys.platform != "linux" or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except OSError:
        return None  # ENOSYS (an old kernel), EMFILE, or refused by a sandbox: fall back to the pid


def ready_pidfds(fds: list[int], timeout: float) -> list[int]:
    """The pidfds among *fds* whose process has ended, waiting up to *timeout* seconds for the first (Linux)."""
    if sys.platform != "linux":
        return []
    import select

    poller = select.poll()  # not select(): a descriptor may be past FD_SETSIZE
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(max(0, int(timeout * 1000) + 1) if timeout > 0 else 0)]
