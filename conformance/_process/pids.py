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
