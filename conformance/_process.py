"""All of the kit's process plumbing: start, talk line by line with a deadline, kill, reap.

Kill semantics differ by OS. On POSIX a kill is SIGKILL. On Windows it is TerminateProcess, which
returns before the process is gone, so every kill is followed by a wait on the handle. Under a venv
launcher on Windows the process the kit started is not the interpreter that holds the files, which is
why adapters report their own pid and the kit can kill a pid it did not start.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

STDERR_TAIL_LINES = 40
_EOF = object()


class ProcessGone(Exception):
    """The process exited (or closed its stdout) while the kit waited for a line."""


class ReadTimeout(Exception):
    """No line arrived before the deadline."""


class LineProcess:
    """A child process spoken to in lines: stdin for requests, stdout for responses, stderr kept as a tail."""

    def __init__(self, argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        try:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
            )
        except OSError as error:
            raise ProcessGone(f"cannot start {self.argv!r}: {error}") from None
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def _pump_stdout(self) -> None:
        assert self._popen.stdout is not None
        for raw in self._popen.stdout:
            self._lines.put(raw)
        self._lines.put(_EOF)

    def _pump_stderr(self) -> None:
        assert self._popen.stderr is not None
        for raw in self._popen.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr."""
        return "\n".join(self._stderr)

    def send(self, line: bytes) -> None:
        """Write one line to the process's stdin."""
        assert self._popen.stdin is not None
        try:
            self._popen.stdin.write(line)
            self._popen.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as error:
            raise ProcessGone(
                f"stdin is closed ({error.__class__.__name__}); the process exited with {self.poll()!r}"
            ) from None

    def receive(self, timeout: float) -> bytes:
        """The next stdout line, waiting at most *timeout* seconds."""
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise ReadTimeout(f"no line on stdout within {timeout:g} s") from None
        if item is _EOF:
            self._lines.put(_EOF)  # later reads see the end too
            code = self.wait(timeout=2.0)
            raise ProcessGone(f"the process closed stdout and exited with {code!r}")
        assert isinstance(item, bytes)
        return item

    def pending(self) -> list[bytes]:
        """Lines already written to stdout that nobody asked for."""
        stray: list[bytes] = []
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return stray
            if item is _EOF:
                self._lines.put(_EOF)
                return stray
            assert isinstance(item, bytes)
            stray.append(item)

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """Reap the process; None if it is still running after *timeout*."""
        try:
            return self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close_stdin(self) -> None:
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()

    def kill(self) -> None:
        """Kill the process the kit started and reap it."""
        if self._popen.poll() is None:
            self._popen.kill()
        self._popen.wait()
        self._close_pipes()

    def stop(self, grace: float) -> int | None:
        """Close stdin and give the process *grace* seconds to exit by itself, then kill it."""
        self.close_stdin()
        code = self.wait(timeout=grace)
        if code is None:
            self.kill()
            return self._popen.returncode
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        for stream in (self._popen.stdin, self._popen.stdout, self._popen.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def kill_pid(pid: int) -> None:
    """Kill *pid* at once, without letting it run any exit path."""
    if os.name == "nt":
        # Any signal other than the console events makes os.kill call TerminateProcess.
        os.kill(pid, signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGKILL)


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
    if os.name == "nt":
        import ctypes

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        handle = kernel32.OpenProcess(0x1000 | 0x00100000, False, pid)  # QUERY_LIMITED_INFORMATION | SYNCHRONIZE
        if not handle:
            return False
        try:
            return bool(kernel32.WaitForSingleObject(handle, 0) == 0x102)  # WAIT_TIMEOUT: still running
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers signal 0; the kit reaps its own children, so treat it as alive until then.
    return True
