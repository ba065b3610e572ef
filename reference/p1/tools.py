"""The reference worker's process plumbing for tools: a tool, and whatever it starts, ends with the worker
(p1.md WRK-5), however the worker ends.

POSIX: the worker does not start the tool itself but a *keeper* (``keeper.py``, run as ``python -I -S
keeper.py keep LOCK -- ARGV``) in a session and process group of its own, whose id is the keeper's pid. The
keeper starts the tool in that group, so the tool and everything it starts (unless it leaves the group on
purpose) are members. The worker holds the write end of a pipe whose read end is the keeper's stdin: the
*lifeline*. When the worker dies, however it dies, the kernel closes that end and the keeper reads
end-of-file; it then kills its whole group, itself included, with one ``killpg(SIGKILL)``. When the tool
exits first, the keeper reaps it, reports its status on stdout and kills the group the same way, so a
grandchild the tool left behind goes too. The group id is the keeper's own pid and the keeper is alive while
it sends the kill, so the kill can never reach another process that happens to reuse a pid. The lifeline
alone would leave a race: the next worker could finish its startup cleanup before a slow keeper has read its
end-of-file. So each keeper also holds an exclusive ``flock`` on a file of its own under
``<stateDir>/tools/`` until it dies, and the next worker, before its cleanup, takes every such lock in turn
(``wait_for_keepers``): a lock it gets is a keeper that has sent its group kill and is gone. What this does
not cover: a member that moves to another group or session itself, and a kill of the keeper alone.

Windows: the tool is started suspended, put in a Job Object made with
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and no breakaway allowed, then resumed, so everything it starts is in
the job from its first instruction. The worker holds the job's only handle: when the worker dies the
system closes it and ends every process in the job; when the tool exits first the worker ends the job
itself. (Written for Windows and type-checked for it, not run there.)

git: a keeper per git command would cost an interpreter start each time, so a worker keeps one *command
group* (``CommandGroup``): a keeper that runs nothing itself, started at the first git command and kept
until the worker ends, whose process group every git command joins (``process_group``, Python 3.11 and
later; the keeper is then in the worker's session, since a process may only join a group of its own
session). It holds its lock and its lifeline like any keeper, so a git command still running when the
worker dies ends with it before the next startup cleanup. On Python 3.10 and on Windows git runs as a
plain child of the worker (a Job Object for git is not written yet).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CommandGroup", "ToolError", "run_tool", "wait_for_keepers"]

# The keeper runs as a script of the standard library alone (-I -S): an interpreter start and little more,
# where `-m resumekit...` would import the package and site-packages first, on the worker's critical path.
KEEPER = [sys.executable, "-I", "-S", str(Path(__file__).with_name("keeper.py"))]
KEEPERS = "tools"  # under the state directory: one lock file per keeper
KEEPER_WAIT_S = 10.0  # how long a startup waits for one keeper to end before it goes on without it


class ToolError(Exception):
    """The tool could not be started, or its keeper died without reporting the tool's status."""


def run_tool(argv: Sequence[str], cwd: Path, state_dir: Path) -> int:
    """Run *argv* in *cwd* with stdin from the null device and wait for it; its exit status."""
    if not argv:
        raise ToolError("the tool's argv is empty")
    if sys.platform == "win32":
        return _run_in_job(list(argv), cwd)
    with _keeper_lock(state_dir) as lock:
        return _run_kept(list(argv), cwd, lock)


def wait_for_keepers(state_dir: Path) -> list[str]:
    """Before startup cleanup: wait until every keeper an earlier process started has ended its group
    (POSIX; on Windows the job ended with the process). The names of keepers that would not end."""
    folder = state_dir / KEEPERS
    if sys.platform == "win32" or not folder.is_dir():
        return []
    return [path.name for path in sorted(folder.glob("keeper-*.lock")) if not _retire(path, KEEPER_WAIT_S)]


def _retire(path: Path, timeout: float) -> bool:
    """Take a keeper's lock (its keeper is gone, or never got so far) and remove the file while holding it,
    so that a keeper that takes the lock later finds its file gone and starts nothing; False on timeout."""
    if sys.platform == "win32":
        return True
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.005)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return True
    finally:
        os.close(fd)  # the lock goes with it


@contextlib.contextmanager
def _keeper_lock(state_dir: Path) -> Iterator[Path]:
    """A fresh lock file for one keeper, removed once the keeper is gone."""
    folder = state_dir / KEEPERS
    folder.mkdir(exist_ok=True)
    path = folder / f"keeper-{os.urandom(8).hex()}.lock"
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class CommandGroup:
    """The process group short commands of one worker join (POSIX, Python 3.11 and later): led by a keeper
    that runs nothing and ends the group when the worker dies or closes it. ``pgid()`` is None where
    commands run as plain children instead."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._keeper: subprocess.Popen[bytes] | None = None
        self._lock: contextlib.ExitStack | None = None
        self._guard = threading.Lock()

    def pgid(self) -> int | None:
        if sys.platform == "win32" or sys.version_info < (3, 11):
            return None
        with self._guard:
            if self._keeper is None or self._keeper.poll() is not None:
                self._start()
            assert self._keeper is not None
            return self._keeper.pid

    def _start(self) -> None:
        if sys.version_info < (3, 11):
            raise ToolError("a command group needs Python 3.11 or later (Popen's process_group)")
        self._end()
        stack = contextlib.ExitStack()
        lock = stack.enter_context(_keeper_lock(self._state_dir))
        try:
            keeper = subprocess.Popen(
                [*KEEPER, "keep", str(lock), "--"],
                stdin=subprocess.PIPE,  # the lifeline
                stdout=subprocess.PIPE,
                process_group=0,  # a group of its own, id = its pid, in the worker's session
            )
        except OSError as error:
            stack.close()
            raise ToolError(f"cannot start the keeper of the worker's commands: {error}") from None
        assert keeper.stdout is not None
        if keeper.stdout.readline().strip() != b"holding":
            keeper.wait()
            stack.close()
            raise ToolError(f"the keeper of the worker's commands ended ({keeper.returncode}) before it held its lock")
        self._keeper, self._lock = keeper, stack

    def close(self) -> None:
        """End the group (and any command still in it): the worker is done."""
        with self._guard:
            self._end()

    def _end(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            if keeper.stdin is not None:
                keeper.stdin.close()  # end-of-file on the lifeline: the keeper kills its group
            keeper.wait()
            if keeper.stdout is not None:
                keeper.stdout.close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


# --------------------------------------------------------------------------------------------
# POSIX: the keeper
# --------------------------------------------------------------------------------------------


def _run_kept(argv: list[str], cwd: Path, lock: Path) -> int:
    try:
        keeper = subprocess.Popen(
            [*KEEPER, "keep", str(lock), "--", *argv],
            cwd=cwd,
            stdin=subprocess.PIPE,  # the lifeline: only this process holds its write end (close-on-exec)
            stdout=subprocess.PIPE,
            start_new_session=True,  # setsid in the child before exec: its own group, id = its pid
        )
    except OSError as error:
        raise ToolError(f"cannot start the keeper of {argv[0]!r}: {error}") from None
    assert keeper.stdout is not None
    status = keeper.stdout.readline().strip()
    keeper.stdout.close()
    keeper.wait()  # it ends by its own group kill; the lifeline closes with it
    if keeper.stdin is not None:
        keeper.stdin.close()
    try:
        return int(status)
    except ValueError:
        raise ToolError(f"the keeper of {argv[0]!r} ended ({keeper.returncode}) without the tool's status") from None


# --------------------------------------------------------------------------------------------
# Windows: a Job Object that kills its members when its last handle closes
# --------------------------------------------------------------------------------------------


def _win32() -> tuple[Any, Any]:
    """kernel32 and ntdll, with the signatures of the calls a job needs declared (Windows only)."""
    if sys.platform != "win32":
        raise ToolError("kernel32 is Windows only")
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    ntdll = ctypes.WinDLL("ntdll")
    kernel32.CreateJobObjectW.restype = wintypes.HANDLE
    kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
    kernel32.SetInformationJobObject.restype = wintypes.BOOL
    kernel32.SetInformationJobObject.argtypes = [wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD]
    kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    kernel32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
    kernel32.TerminateJobObject.restype = wintypes.BOOL
    kernel32.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
    kernel32.CloseHandle.restype = wintypes.BOOL
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    ntdll.NtResumeProcess.restype = ctypes.c_long
    ntdll.NtResumeProcess.argtypes = [wintypes.HANDLE]
    return kernel32, ntdll


def _kill_on_close_limits() -> Any:
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION with KILL_ON_JOB_CLOSE and no BREAKAWAY_OK: nothing leaves."""
    import ctypes
    from ctypes import wintypes

    class BasicLimits(ctypes.Structure):
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_int64),
            ("PerJobUserTimeLimit", ctypes.c_int64),
            ("LimitFlags", wintypes.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wintypes.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wintypes.DWORD),
            ("SchedulingClass", wintypes.DWORD),
        ]

    class ExtendedLimits(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", BasicLimits),
            ("IoInfo", ctypes.c_uint64 * 6),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    limits = ExtendedLimits()
    limits.BasicLimitInformation.LimitFlags = 0x2000  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    return limits


def _run_in_job(argv: list[str], cwd: Path) -> int:
    if sys.platform != "win32":
        raise ToolError("Job Objects are Windows only")
    import ctypes

    kernel32, ntdll = _win32()
    extended_limit_information, create_suspended = 9, 0x00000004
    job = kernel32.CreateJobObjectW(None, None)  # not inheritable: no child can hold the job open
    if not job:
        raise ToolError(f"cannot create a Job Object: {ctypes.WinError(ctypes.get_last_error())}")
    try:
        limits = _kill_on_close_limits()
        if not kernel32.SetInformationJobObject(
            job, extended_limit_information, ctypes.byref(limits), ctypes.sizeof(limits)
        ):
            raise ToolError(f"cannot set the job's limits: {ctypes.WinError(ctypes.get_last_error())}")
        try:
            tool = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, creationflags=create_suspended)
        except OSError as error:
            raise ToolError(f"cannot start {argv[0]!r}: {error}") from None
        handle = int(tool._handle)  # type: ignore[attr-defined,unused-ignore]
        if not kernel32.AssignProcessToJobObject(job, handle):
            refused = ctypes.WinError(ctypes.get_last_error())
            tool.kill()
            tool.wait()
            raise ToolError(f"cannot put the tool in its job: {refused}")
        ntdll.NtResumeProcess(handle)  # only now does the tool run its first instruction
        status = tool.wait()
        kernel32.TerminateJobObject(job, 1)  # what the tool left running ends with it
        return int(status)
    finally:
        kernel32.CloseHandle(job)
