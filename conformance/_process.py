"""All of the kit's process plumbing: start, talk line by line with a deadline, kill, reap.

Every adapter starts in a tree of its own: on POSIX a new session (so a new process group whose id is
the adapter's pid), on Windows a Job Object that kills its members when the kit closes it. Every kill
goes through that tree. ``LineProcess.kill`` and ``LineProcess.stop`` end the whole group or job, so a
grandchild cannot outlive the adapter or keep its pipes open; ``LineProcess.kill_member`` is the one
way to kill a pid the adapter *names* (``phase0.crash.arm``), and it kills nothing that is not the
adapter or one of its descendants.

Kill semantics differ by OS. On POSIX a kill is SIGKILL. On Windows it is TerminateProcess (or
TerminateJobObject), which returns before the process is gone, so every kill is followed by a wait.
Under a venv launcher on Windows the process the kit started is not the interpreter that holds the
files, which is why adapters report their own pid and the kit can kill a pid it did not start.

Every pipe is read in bounded pieces. A protocol line longer than ``MAX_LINE`` bytes is refused, the
deadline of a read holds however many bytes keep arriving, and only the last ``STDERR_TAIL_BYTES`` of
stderr are kept. POSIX pipes can be waited on with select; Windows pipes cannot, so there a reader
thread hands chunks over through a bounded queue. No thread that reads a pipe ever has that pipe
closed under it: a reader closes its own end when it sees the end of the stream.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

MAX_LINE = 64 * 1024 * 1024  # bytes in one protocol line, its newline not counted (docs/adapter-protocol.md)
STDERR_TAIL_BYTES = 64 * 1024  # the most of an adapter's stderr the kit keeps
STDERR_TAIL_LINES = 40  # of which the report shows the last lines
MAX_PID = 2**31 - 1  # pid_t on POSIX; Windows pids are DWORDs, but far below this in practice
_CHUNK = 1 << 16


# Every LineProcess whose tree has not been ended yet, so that an interrupted run can end them all.
_LIVE: set[LineProcess] = set()
_LIVE_LOCK = threading.Lock()


def kill_all() -> int:
    """End the tree of every process the kit started and has not ended yet; return how many.

    Safe to call from a signal handler: it only sends kills (SIGKILL to each group, or terminates
    each job), and never waits.
    """
    with _LIVE_LOCK:
        live = list(_LIVE)
    ended = 0
    for process in live:
        # A process already reaped may have given its pid (its group id) to a stranger: leave it.
        if process._popen.returncode is None:
            with contextlib.suppress(OSError):
                process._end_tree()
            ended += 1
    return ended


class ProcessGone(Exception):
    """The process exited (or closed its stdout) while the kit waited for a line."""


class ReadTimeout(Exception):
    """No line arrived before the deadline."""


class LineTooLong(ProcessGone):
    """A line on stdout grew past ``MAX_LINE`` bytes; the stream is unusable from there on."""


class NotInTree(Exception):
    """A pid the kit was asked to kill is not the adapter or one of its descendants."""


# --------------------------------------------------------------------------------------------
# Reading stdout: one line assembler over a source of chunks
# --------------------------------------------------------------------------------------------


class _Lines:
    """Lines out of chunks: linear in the line's length, capped at *limit*, deadline held per call."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._ready: collections.deque[bytes] = collections.deque()
        self._ended = False
        self._broken: LineTooLong | None = None

    def _chunk(self, timeout: float) -> bytes | None:
        """Up to one chunk: b"" at the end of the stream, None if nothing came within *timeout*."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop reading; the source is not read again."""

    def _add(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            self._parts.append(chunk[start : end + 1])
            self._size += end + 1 - start
            self._check(self._size - 1)
            self._ready.append(b"".join(self._parts))
            self._parts, self._size = [], 0
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
            self._size += len(chunk) - start
            self._check(self._size)

    def _check(self, size: int) -> None:
        if size > self._limit:
            self._parts, self._size = [], 0
            self._broken = LineTooLong(
                f"a line on stdout is longer than {self._limit} bytes (the protocol's limit); refused"
            )
            self.close()
            raise self._broken

    def next(self, timeout: float) -> bytes | None:
        """The next line; None at the end of the stream; ReadTimeout past *timeout* whatever arrives."""
        if self._broken is not None:
            raise self._broken
        deadline = time.monotonic() + timeout
        tried = False
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._ended:
                if self._parts:
                    line = b"".join(self._parts)
                    self._parts, self._size = [], 0
                    return line
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0 and tried:
                break
            tried = True
            chunk = self._chunk(max(0.0, remaining))
            if chunk is None:
                break
            if chunk:
                self._add(chunk)
            else:
                self._ended = True
        partial = f" ({self._size} bytes of an unfinished line)" if self._size else ""
        raise ReadTimeout(f"no line on stdout within {timeout:g} s{partial}")


class _ThreadedLines(_Lines):
    """stdout through a reader thread: works on every OS, Windows pipes included.

    The queue is bounded, so a process that writes faster than the kit reads is held back by the
    pipe, not buffered without end in the kit.
    """

    def __init__(self, stream: IO[bytes], limit: int = MAX_LINE) -> None:
        super().__init__(limit)
        self._chunks: queue.Queue[bytes] = queue.Queue(maxsize=16)
        self._closed = threading.Event()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        fd = stream.fileno()
        try:
            while not self._closed.is_set():
                try:
                    data = os.read(fd, _CHUNK)
                except OSError:
                    data = b""
                while not self._closed.is_set():
                    try:
                        self._chunks.put(data, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if not data:
                    return
        finally:
            with contextlib.suppress(OSError):
                stream.close()  # the reader's own end, closed by the reader

    def _chunk(self, timeout: float) -> bytes | None:
        try:
            data = self._chunks.get(timeout=timeout) if timeout > 0 else self._chunks.get_nowait()
        except queue.Empty:
            return None
        return data

    def close(self) -> None:
        self._closed.set()


class _SelectedLines(_Lines):
    """stdout read in the caller's thread with select: POSIX only, and a third faster per request.

    A reader thread costs a thread hand-off on every response; on a two-core machine that was about
    0.15 ms of a 0.45 ms round trip.
    """

    def __init__(self, stream: IO[bytes], limit: int = MAX_LINE) -> None:
        super().__init__(limit)
        self._stream = stream
        self._fd = stream.fileno()

    def _chunk(self, timeout: float) -> bytes | None:
        import select

        if self._stream.closed:
            return b""
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return None
        try:
            return os.read(self._fd, _CHUNK)
        except OSError:
            return b""

    def close(self) -> None:
        # Only the caller's thread reads this pipe, so closing it cannot block on a reader.
        with contextlib.suppress(OSError):
            self._stream.close()


class _Tail:
    """The last *size* bytes of a stream, read by a thread of its own in bounded chunks."""

    def __init__(self, stream: IO[bytes], size: int = STDERR_TAIL_BYTES) -> None:
        self._size = size
        self._data = bytearray()
        self._lock = threading.Lock()
        self.dropped = 0
        self.ended = threading.Event()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        fd = stream.fileno()
        try:
            while True:
                try:
                    data = os.read(fd, _CHUNK)
                except OSError:
                    return
                if not data:
                    return
                with self._lock:
                    self._data += data
                    if len(self._data) > 2 * self._size:  # trim in bulk: linear overall
                        excess = len(self._data) - self._size
                        del self._data[:excess]
                        self.dropped += excess
        finally:
            self.ended.set()
            with contextlib.suppress(OSError):
                stream.close()

    def text(self, lines: int = STDERR_TAIL_LINES) -> str:
        with self._lock:
            data = bytes(self._data[-self._size :])
            dropped = self.dropped + max(0, len(self._data) - self._size)
        kept = data.decode("utf-8", "replace").splitlines()[-lines:]
        if dropped and kept:
            kept[0] = f"[{dropped} earlier bytes of stderr not kept] {kept[0]}"
        return "\n".join(kept)


# --------------------------------------------------------------------------------------------
# Process trees: a POSIX session, a Windows Job Object
# --------------------------------------------------------------------------------------------

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


def _signal_kill(pid: int) -> None:
    """Kill one pid at once, without letting it run any exit path. Only LineProcess calls this."""
    if sys.platform == "win32":
        # Any signal other than the console events makes os.kill call TerminateProcess.
        os.kill(pid, signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGKILL)


def plausible_pid(pid: object) -> bool:
    """Whether *pid* is a JSON integer (not a bool, not a float) in the range of process ids."""
    return isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid <= MAX_PID


# --------------------------------------------------------------------------------------------
# The adapter process
# --------------------------------------------------------------------------------------------


class LineProcess:
    """A child process spoken to in lines: stdin for requests, stdout for responses, stderr kept as a tail.

    The process and everything it starts form one tree (a POSIX session, a Windows Job Object) that
    ``kill`` and ``stop`` end as a whole.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        line_limit: int = MAX_LINE,
    ) -> None:
        self.argv = list(argv)
        job = None
        try:
            if sys.platform == "win32":
                job = _Job()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                # POSIX: its own session and process group, whose id is its pid. Windows: the job below.
                start_new_session=sys.platform != "win32",
            )
            if job is not None:
                # A child started in the instant before this line escapes the job: documented.
                with contextlib.suppress(OSError):
                    job.add(int(self._popen._handle))  # type: ignore[attr-defined,unused-ignore]
        except (OSError, ValueError) as error:
            if job is not None:
                job.close()
            raise ProcessGone(f"cannot start {self.argv!r}: {error}") from None
        self._job = job
        self._tree_ended = False
        assert self._popen.stdout is not None and self._popen.stderr is not None
        self._lines: _ThreadedLines | _SelectedLines = (
            _ThreadedLines(self._popen.stdout, line_limit)
            if sys.platform == "win32"
            else _SelectedLines(self._popen.stdout, line_limit)
        )
        self._stderr = _Tail(self._popen.stderr)
        self._stderr_settled = False
        self._writer_lock = threading.Lock()
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self._popen.pid

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr (at most ``STDERR_TAIL_BYTES`` of them)."""
        if not self._stderr_settled and self.poll() is not None:
            # It has exited: let the reader take in its last words (not forever: a grandchild may hold stderr).
            self._stderr.ended.wait(0.5)
            self._stderr_settled = True
        return self._stderr.text()

    # -- talking -----------------------------------------------------------------------------------

    def send(self, line: bytes, timeout: float | None = None) -> None:
        """Write one line to the process's stdin, within *timeout* seconds if given."""
        stdin = self._popen.stdin
        assert stdin is not None
        if sys.platform == "win32":
            self._send_blocking(stdin, line, timeout)
            return
        import select

        deadline = None if timeout is None else time.monotonic() + timeout
        view = memoryview(line)
        try:
            fd = stdin.fileno()
            os.set_blocking(fd, False)
            while view:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                _, ready, _ = select.select([], [fd], [], remaining)
                if not ready:
                    raise ReadTimeout(f"stdin took no request within {timeout:g} s (is stdin read?)")
                try:
                    written = os.write(fd, view)
                except BlockingIOError:
                    continue
                view = view[written:]
        except (BrokenPipeError, OSError, ValueError) as error:
            raise ProcessGone(
                f"stdin is closed ({error.__class__.__name__}); the process exited with {self.poll()!r}"
            ) from None

    def _send_blocking(self, stdin: IO[bytes], line: bytes, timeout: float | None) -> None:
        failure: list[BaseException] = []

        def write() -> None:
            try:
                with self._writer_lock:
                    stdin.write(line)
                    stdin.flush()
            except (BrokenPipeError, OSError, ValueError) as error:
                failure.append(error)

        if timeout is None:
            write()
        else:  # Windows pipes have no select: a writer thread, which a kill of the job unblocks
            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            writer.join(timeout)
            if writer.is_alive():
                raise ReadTimeout(f"stdin took no request within {timeout:g} s (is stdin read?)")
        if failure:
            raise ProcessGone(
                f"stdin is closed ({failure[0].__class__.__name__}); the process exited with {self.poll()!r}"
            )

    def receive(self, timeout: float) -> bytes:
        """The next stdout line, waiting at most *timeout* seconds."""
        line = self._lines.next(timeout)
        if line is None:
            code = self.wait(timeout=min(2.0, timeout))
            raise ProcessGone(f"the process closed stdout and exited with {code!r}")
        return line

    def pending(self) -> list[bytes]:
        """Lines already written to stdout that nobody asked for."""
        stray: list[bytes] = []
        while True:
            try:
                line = self._lines.next(0.0)
            except ReadTimeout:
                return stray
            except LineTooLong:
                return [*stray, b"(a line longer than the protocol's limit)"]
            if line is None:
                return stray
            stray.append(line)

    # -- life cycle --------------------------------------------------------------------------------

    def poll(self) -> int | None:
        """The exit status, or None while the process runs; on POSIX the process is not reaped."""
        if sys.platform == "win32" or sys.platform == "darwin":  # no waitid: poll reaps
            return self._popen.poll()
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            info = os.waitid(os.P_PID, self._popen.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            return self._popen.poll()
        if info is None:
            return None
        status: int = info.si_status
        return status if info.si_code == os.CLD_EXITED else -status

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the process to exit; None if it is still running after *timeout*.

        On POSIX the process is reaped only once its tree has been ended (``kill``, ``stop``): while
        it is unreaped its pid, and so its process group id, cannot be reused, and the group kill
        cannot reach a stranger. macOS has no waitid: there the wait reaps, and the group kill that
        follows relies on macOS handing out pids in sequence, so a freed one is not reused at once.
        """
        if sys.platform == "win32" or sys.platform == "darwin":
            try:
                return self._popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
        deadline, delay = None if timeout is None else time.monotonic() + timeout, 0.001
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def close_stdin(self) -> None:
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self._popen.stdin.close()

    def _end_tree(self) -> None:
        """Kill every process left in the adapter's group or job, the adapter included."""
        if self._tree_ended:
            return
        if sys.platform == "win32":
            if self._job is not None:
                self._job.kill()
                self._job.close()
            if self._popen.poll() is None:
                with contextlib.suppress(OSError):
                    self._popen.kill()
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, signal.SIGKILL)
        self._tree_ended = True
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def kill(self) -> None:
        """Kill the process the kit started and everything it started, and reap it."""
        self._end_tree()
        self._popen.wait()
        self._release()

    def stop(self, grace: float) -> int | None:
        """Close stdin and give the process *grace* seconds to exit by itself, then end its tree."""
        self.close_stdin()
        code = self.wait(grace)
        self._end_tree()  # leftovers of an orderly exit are orphans: they go too
        reaped = self._popen.wait()
        self._release()
        return code if code is not None else reaped

    def _release(self) -> None:
        # stdout: closed by the kit only where the kit's own thread reads it; stderr: by its reader.
        self.close_stdin()
        self._lines.close()

    # -- the one gate for killing a pid the adapter names ----------------------------------------

    def owns(self, pid: object) -> bool:
        """Whether *pid* is this process or one of its descendants (its POSIX session, its Windows job)."""
        if not isinstance(pid, int) or not plausible_pid(pid):
            return False
        if pid == self._popen.pid:
            return self._popen.returncode is None
        if sys.platform == "win32":
            return self._job is not None and self._job.contains(pid)
        try:
            return os.getsid(pid) == self._popen.pid or os.getpgid(pid) == self._popen.pid
        except (OSError, OverflowError):
            return False

    def kill_member(self, pid: int) -> None:
        """Kill *pid* at once if it is this process or a descendant; raise NotInTree (killing nothing) if not.

        Every kill of a pid that an adapter reports goes through here.
        """
        if not self.owns(pid):
            raise NotInTree(f"pid {pid!r} is not the adapter or one of its descendants")
        _signal_kill(pid)


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
