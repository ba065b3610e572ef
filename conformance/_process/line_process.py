"""The adapter process: a child spoken to in lines, in a tree of its own that every kill goes through.

On POSIX the tree is a new session (so a new process group whose id is the adapter's pid), on Windows a
Job Object that kills its members when the kit closes it. ``LineProcess.kill`` and ``LineProcess.stop``
end the whole group or job, so a grandchild cannot outlive the adapter or keep its pipes open;
``LineProcess.kill_member`` is the one way to kill a pid the adapter *names* (``phase0.crash.arm``), and
it kills nothing that is not the adapter or one of its descendants.

An adapter process of a P1 case (``case_token``) starts on Linux below a subreaper of its own
(``reapers``): the adapter is then the reaper's child, not the kit's, and the reaper tells its exit status;
everything above holds the same, and the pipes are the kit's as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from resumekit.conformance._process.errors import LineTooLong, NotInTree, ProcessGone, ReadTimeout
from resumekit.conformance._process.lines import MAX_LINE, _SelectedLines, _Tail, _ThreadedLines
from resumekit.conformance._process.pids import pidfd_open, plausible_pid, ready_pidfds
from resumekit.conformance._process.reapers import Reaper, abort, usable
from resumekit.conformance._process.windows import Joinable, admit, start_options

if sys.platform == "win32":
    from resumekit.conformance._process.windows import _Job

# Every LineProcess whose tree has not been ended yet, so that an interrupted run can end them all.
_LIVE: set[LineProcess] = set()
_LIVE_LOCK = threading.Lock()


def kill_all(owner: int | None = None) -> int:
    """End the tree of every process the kit started and has not ended yet; return how many.

    With *owner* (a thread's ident), only the processes that thread started: those of one case the runner
    abandoned, while the other cases' processes run on. The subreapers of their cases (all of them, without
    *owner*) kill what is below them and exit. Without *owner* it is safe to call from a signal handler: it
    only sends kills (SIGKILL to each group, SIGTERM to each subreaper, or terminates each job), and never
    waits.
    """
    with _LIVE_LOCK:
        live = [process for process in _LIVE if owner is None or process.owner == owner]
    ended = 0
    for process in live:
        # A process already reaped may have given its pid (its group id) to a stranger: leave it.
        if process._holds():
            with contextlib.suppress(OSError):
                process._end_tree()
            ended += 1
    abort(None if owner is None else {process._reaper.case for process in live if process._reaper is not None})
    return ended


def _signal_kill(pid: int) -> None:
    """Kill one pid at once, without letting it run any exit path. Only LineProcess calls this."""
    if sys.platform == "win32":
        # Any signal other than the console events makes os.kill call TerminateProcess.
        os.kill(pid, signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGKILL)


def _admit_or_kill(job: Joinable, popen: subprocess.Popen[bytes]) -> None:
    """Windows: put the suspended adapter in the kit's job and let it run; if the job refuses it, kill it
    (it ran nothing) and close its pipes, then raise: an adapter outside the job could outlive the kit."""
    try:
        admit(job, int(getattr(popen, "_handle", popen.pid)))  # Windows: the process handle Popen holds
    except OSError as error:
        popen.kill()
        popen.wait()
        for stream in (popen.stdin, popen.stdout, popen.stderr):
            if stream is not None:
                stream.close()
        raise OSError(f"the kit's Job Object refused the adapter: {error}") from None


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
        case_token: str | None = None,
    ) -> None:
        self.argv = list(argv)
        job = None
        self._reaper: Reaper | None = None
        self._stdin: IO[bytes]
        self._stdout: IO[bytes]
        self._stderr: IO[bytes]
        try:
            if sys.platform == "win32":
                job = _Job()
            if case_token is not None and usable():
                # Linux: below a subreaper of the case, which passes the kit's pipes down to the adapter.
                self._reaper = Reaper(self.argv, cwd=cwd, env=env, case=case_token)
                self._stdin, self._stdout, self._stderr = self._reaper.stdin, self._reaper.stdout, self._reaper.stderr
                self._popen = None
            else:
                self._popen = popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=env,
                    **start_options(sys.platform == "win32"),
                )
                assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
                self._stdin, self._stdout, self._stderr = popen.stdin, popen.stdout, popen.stderr
            if job is not None and self._popen is not None:
                _admit_or_kill(job, self._popen)
        except (OSError, ValueError) as error:
            if job is not None:
                job.close()
            raise ProcessGone(f"cannot start {self.argv!r}: {error}") from None
        self._job = job
        self._tree_ended = False
        self._lines: _ThreadedLines | _SelectedLines = (
            _ThreadedLines(self._stdout, line_limit)
            if sys.platform == "win32"
            else _SelectedLines(self._stdout, line_limit)
        )
        self._tail = _Tail(self._stderr)
        self._stderr_settled = False
        self._writer_lock = threading.Lock()
        self.owner = threading.get_ident()  # the thread that started it: a case's, for kill_all(owner)
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        """The process id of the process the kit started (below its reaper, if it has one)."""
        return self._reaper.pid if self._reaper is not None else self._child().pid

    def _child(self) -> subprocess.Popen[bytes]:
        """The process, where it is the kit's own child (not below a reaper)."""
        assert self._popen is not None
        return self._popen

    def _holds(self) -> bool:
        """Whether the process is not reaped yet, so that its pid and group id are still its own."""
        return self._reaper.holds() if self._reaper is not None else self._child().returncode is None

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr (at most ``STDERR_TAIL_BYTES`` of them)."""
        if not self._stderr_settled and self.poll() is not None:
            # It has exited: let the reader take in its last words (not forever: a grandchild may hold stderr).
            self._tail.ended.wait(0.5)
            self._stderr_settled = True
        return self._tail.text()

    # -- talking -----------------------------------------------------------------------------------

    def send(self, line: bytes, timeout: float | None = None) -> None:
        """Write one line to the process's stdin, within *timeout* seconds if given."""
        stdin = self._stdin
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
        if self._reaper is not None:
            return self._reaper.status(0.0)
        popen = self._child()
        if sys.platform == "win32" or sys.platform == "darwin":  # no waitid: poll reaps
            return popen.poll()
        if popen.returncode is not None:
            return popen.returncode
        try:
            info = os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            return popen.poll()
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
        Below a reaper, the reaper holds the process unreaped until ``kill`` or ``stop`` releases it.
        """
        if self._reaper is not None:
            return self._reaper.status(timeout)
        if sys.platform == "win32" or sys.platform == "darwin":
            try:
                return self._child().wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
        deadline, delay = None if timeout is None else time.monotonic() + timeout, 0.001
        exited = pidfd_open(self.pid)  # readable at the exit itself; it reaps nothing
        try:
            while True:
                code = self.poll()
                if code is not None:
                    return code
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if exited is not None and exited >= 0:
                    ready_pidfds([exited], 3600.0 if left is None else left)
                else:
                    time.sleep(delay if left is None else min(delay, left))
                    delay = min(delay * 2, 0.05)
        finally:
            if exited is not None and exited >= 0:
                os.close(exited)

    def close_stdin(self) -> None:
        """Close the process's stdin, its signal to exit; a stdin already closed is fine."""
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()

    def _end_tree(self) -> None:
        """Kill every process left in the adapter's group or job, the adapter included."""
        if self._tree_ended:
            return
        if sys.platform == "win32":
            if self._job is not None:
                self._job.kill()
                self._job.close()
            if self._child().poll() is None:
                with contextlib.suppress(OSError):
                    self._child().kill()
        elif self._holds():  # its group id is surely its own: not reaped, by the kit or its reaper
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self._tree_ended = True
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def kill(self) -> None:
        """Kill the process the kit started and everything it started, and reap it."""
        self._end_tree()
        self._reap()
        self._release()

    def stop(self, grace: float) -> int | None:
        """Close stdin and give the process *grace* seconds to exit by itself, then end its tree."""
        self.close_stdin()
        code = self.wait(grace)
        self._end_tree()  # leftovers of an orderly exit are orphans: they go too
        reaped = self._reap()
        self._release()
        return code if code is not None else reaped

    def _reap(self) -> int | None:
        """Wait for the process, its tree ended, and reap it (or have its reaper reap it)."""
        if self._reaper is not None:
            return self._reaper.release()
        return self._child().wait()

    def _release(self) -> None:
        # stdout: closed by the kit only where the kit's own thread reads it; stderr: by its reader.
        self.close_stdin()
        self._lines.close()

    # -- the one gate for killing a pid the adapter names ----------------------------------------

    def owns(self, pid: object) -> bool:
        """Whether *pid* is this process or one of its descendants (its POSIX session, its Windows job)."""
        if not isinstance(pid, int) or not plausible_pid(pid):
            return False
        if pid == self.pid:
            return self._holds()
        if sys.platform == "win32":
            return self._job is not None and self._job.contains(pid)
        try:
            return os.getsid(pid) == self.pid or os.getpgid(pid) == self.pid
        except (OSError, OverflowError):
            return False

    def kill_member(self, pid: int) -> None:
        """Kill *pid* at once if it is this process or a descendant; raise NotInTree (killing nothing) if not.

        Every kill of a pid that an adapter reports goes through here.
        """
        if not self.owns(pid):
            raise NotInTree(f"pid {pid!r} is not the adapter or one of its descendants")
        _signal_kill(pid)
