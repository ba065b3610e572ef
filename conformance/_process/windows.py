"""Windows Job Objects: a tree of processes that ends as a whole (the job itself exists on Windows only).

The kit adds every adapter it starts to a job of its own, created to kill its members when the kit
closes it; ``LineProcess`` ends the job to end the adapter's tree, and asks it whether a pid is a member.
The adapter starts suspended and runs only once it is in the job (``start_options``, ``admit``): under a
venv launcher the process the kit starts at once starts the real interpreter, which a job added later
would not hold.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

CREATE_SUSPENDED = 0x00000004


class Joinable(Protocol):
    """What ``admit`` needs of a job: ``_Job`` on Windows."""

    def add(self, process_handle: int) -> None: ...

    def resume(self, process_handle: int) -> None: ...


def start_options(windows: bool) -> dict[str, Any]:
    """The ``Popen`` options of an adapter. POSIX: a session of its own, whose process group id is its pid.
    Windows: suspended, so that it runs no instruction, and starts no child, before ``admit`` put it in the
    kit's job."""
    return {"creationflags": CREATE_SUSPENDED} if windows else {"start_new_session": True}


def admit(job: Joinable, process_handle: int) -> None:
    """Put a suspended process in *job*, then let it run. OSError if the job refuses it: the caller kills the
    process, which has run nothing yet, rather than run an adapter whose tree it could not end."""
    job.add(process_handle)
    job.resume(process_handle)

if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _kernel32.CreateJobObjectW.restype = wintypes.HANDLE
    _kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
    _kernel32.SetInformationJobObject.restype = wintypes.BOOL
    _kernel32.SetInformationJobObject.argtypes = [wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD]
    _kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    _kernel32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
    _kernel32.TerminateJobObject.restype = wintypes.BOOL
    _kernel32.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
    _kernel32.IsProcessInJob.restype = wintypes.BOOL
    _kernel32.IsProcessInJob.argtypes = [wintypes.HANDLE, wintypes.HANDLE, ctypes.POINTER(wintypes.BOOL)]
    _kernel32.OpenProcess.restype = wintypes.HANDLE
    _kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    _kernel32.WaitForSingleObject.restype = wintypes.DWORD
    _kernel32.WaitForSingleObject.argtypes = [wintypes.HANDLE, wintypes.DWORD]
    _kernel32.CloseHandle.restype = wintypes.BOOL
    _kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    # Popen closes the main thread's handle, so the process is resumed as a whole (as the reference's tools).
    _ntdll = ctypes.WinDLL("ntdll")
    _ntdll.NtResumeProcess.restype = ctypes.c_long
    _ntdll.NtResumeProcess.argtypes = [wintypes.HANDLE]

    _QUERY_LIMITED_INFORMATION, _SYNCHRONIZE = 0x1000, 0x00100000
    _JOB_EXTENDED_LIMIT_INFORMATION, _KILL_ON_JOB_CLOSE = 9, 0x2000

    class _BasicLimits(ctypes.Structure):
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

    class _ExtendedLimits(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", _BasicLimits),
            ("IoInfo", ctypes.c_uint64 * 6),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    class _Job:
        """A Job Object that kills every process in it when it is closed."""

        def __init__(self) -> None:
            handle = _kernel32.CreateJobObjectW(None, None)
            if not handle:
                raise ctypes.WinError(ctypes.get_last_error())
            self.handle: int | None = handle
            limits = _ExtendedLimits()
            limits.BasicLimitInformation.LimitFlags = _KILL_ON_JOB_CLOSE
            if not _kernel32.SetInformationJobObject(
                handle, _JOB_EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits), ctypes.sizeof(limits)
            ):
                error = ctypes.WinError(ctypes.get_last_error())
                self.close()
                raise error

        def add(self, process_handle: int) -> None:
            if not _kernel32.AssignProcessToJobObject(self.handle, process_handle):
                raise ctypes.WinError(ctypes.get_last_error())

        def resume(self, process_handle: int) -> None:
            status = _ntdll.NtResumeProcess(process_handle)
            if status < 0:  # an NTSTATUS error
                raise OSError(f"cannot resume the process: NTSTATUS {status & 0xFFFFFFFF:#010x}")

        def contains(self, pid: int) -> bool:
            if self.handle is None:
                return False
            process = _kernel32.OpenProcess(_QUERY_LIMITED_INFORMATION, False, pid)
            if not process:
                return False
            try:
                inside = wintypes.BOOL(False)
                return bool(_kernel32.IsProcessInJob(process, self.handle, ctypes.byref(inside))) and bool(inside)
            finally:
                _kernel32.CloseHandle(process)

        def kill(self) -> None:
            if self.handle is not None:
                _kernel32.TerminateJobObject(self.handle, 1)

        def close(self) -> None:
            handle, self.handle = self.handle, None
            if handle is not None:
                _kernel32.CloseHandle(handle)  # KILL_ON_JOB_CLOSE: whatever still runs in it ends
