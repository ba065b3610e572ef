"""The subreaper of each adapter process of a P1 case (Linux): the kit's side of ``subreaper.py``.

Every adapter process of a P1 case starts below a small process of its own, its *reaper*, never below the
kit's own process, which may be a user's pytest. The reaper is a child subreaper: every process orphaned
below the adapter (a double fork, a ``setsid`` daemon, one started with its environment rebuilt or one that
wrote over the case's marker) is reparented to it, not to init, so the case's sweep (``escaped``) finds it by
where it is, not by what its environment says. The reapers of a case are registered under the case's token;
``take`` hands them to the sweep, which names and kills what is below them and then ends each (``end``).

Reapers are forked by a server (``subreaper.serve``) that the kit starts once, with ``python -I -S``, on the
first reaper it needs: a fork of that small process costs a tenth of an interpreter's start, and an adapter
process waits for its reaper. The kit hands the server the adapter's three pipes and the reaper's two over a
socket; the server reaps a reaper only when the kit asks, so a reaper's pid, which the sweep reads the tree
below, stays its own until the kit is done with it. The server ends when the kit's end of its socket closes.

Nothing of the kit's kills changes: the adapter is the reaper's child, in a session and process group of its
own whose id is its pid, as before; the reaper is outside that group. The adapter's stdin, stdout and stderr
are the kit's pipes, which the reaper passes down and lets go of. The reaper keeps the adapter unreaped until
the kit has ended its group (``release``), so its pid and group id cannot be reused while the kit may signal
them, and says on a pipe when it exited and with what status (``status``). If the kit dies, however it dies,
each reaper reads the end of its control pipe and kills every process below it.

What the reaper does not see: a process started outside the adapter's tree (by a service manager, the task
scheduler, a daemon the implementation reached over a socket), and the orphans of an adapter that killed its
reaper (it runs as the same user, and may), which go to init; both are still found by the marker, if they
carry it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO

from resumekit.conformance._process.pids import pidfd_open, ready_pidfds, wait_pid_gone

SCRIPT = Path(__file__).with_name("subreaper.py")
# The module is imported, not run as a file (a file run is compiled anew at every start, a module once);
# appended to the path, its folder shadows no standard module.
_BOOT = "import sys; sys.path.append({folder!r}); from subreaper import serve; sys.exit(serve(sys.argv[1:]))"
START_S = 30.0  # how long the server may take to start a reaper, and a reaper its adapter, and say so
END_S = 5.0  # how long a reaper may take to kill what is below it and exit before the kit kills it
LOST_STATUS = 255  # the adapter's exit status when its reaper was killed before it could tell it
_LINE_CAP = 256  # bytes of one line of a reaper's report at most

_REGISTERED: dict[str, list[Reaper]] = {}  # case token -> the reapers of the case not taken yet
_REGISTERED_LOCK = threading.Lock()
_RUNNING: set[int] = set()  # the pids of the reapers not ended yet, of every case


def usable() -> bool:
    """Whether adapter processes can start below a reaper here: Linux, with an interpreter to run the server."""
    return sys.platform == "linux" and bool(sys.executable) and SCRIPT.is_file()


def running() -> frozenset[int]:
    """The pids of the reapers the kit has not ended yet (each still its own: the server keeps it unreaped)."""
    return frozenset(_RUNNING)


def abort(cases: Collection[str] | None = None) -> None:
    """Have the reapers of *cases* (None: every one not ended) kill everything below them and exit at once
    (SIGTERM), as when a run is interrupted or a case abandoned. With *cases* None it only sends signals, to
    pids the server still keeps: a signal handler may call it."""
    if cases is None:
        pids = frozenset(_RUNNING)
    else:
        with _REGISTERED_LOCK:
            pids = frozenset(r.reaper for case in cases for r in _REGISTERED.get(case, ()) if r.reaper in _RUNNING)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def take(case: str) -> list[Reaper]:
    """The reapers of *case*, which the caller ends; none stays registered."""
    with _REGISTERED_LOCK:
        return _REGISTERED.pop(case, [])


def request(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None) -> bytes:
    """What the kit writes on a reaper's control pipe: the working directory (empty: the server's), argv and the
    environment as NUL-separated fields, after their length. What subprocess refuses is refused the same way."""
    words = [os.fsencode(word) for word in argv]
    if not words:
        raise ValueError("an empty command line starts nothing")
    entries = []
    for name, value in env.items():
        key = os.fsencode(name)
        if b"=" in key:
            raise ValueError("illegal environment variable name")
        entries.append(key + b"=" + os.fsencode(value))
    fields = [os.fsencode(cwd) if cwd is not None else b"", str(len(words)).encode(), *words, *entries]
    if any(b"\0" in field for field in fields):
        raise ValueError("embedded null byte")
    blob = b"\0".join(fields)
    return len(blob).to_bytes(8, "big") + blob


class Reaper:
    """The reaper of one adapter process, from the kit's side: ``pid`` is the adapter's, ``reaper`` the
    reaper's; ``stdin``, ``stdout`` and ``stderr`` are the kit's ends of the adapter's pipes."""

    def __init__(self, argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str] | None, case: str) -> None:
        blob = request(argv, os.environ if env is None else env, cwd)
        self.argv, self.cwd, self.case = list(argv), cwd, case
        self._lock = threading.Lock()
        self._status: int | None = None
        self._reaped = self._released = self._lost = self._closed = False
        self._reading = True  # the kit's ends of the reaper's pipes are open
        self._buffer = b""
        self._pidfd: int | None = None
        pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, control, report
        kept = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][1], pipes[4][0]]
        given = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][0], pipes[4][1]]
        try:
            self.reaper = _server_start(given)
        except BaseException:
            for fd in kept:
                os.close(fd)
            raise
        finally:
            for fd in given:
                os.close(fd)
        self._reaper_fd = pidfd_open(self.reaper)  # the server keeps it unreaped: it is the reaper
        # Buffered file objects, as subprocess.Popen makes of its pipes (LineProcess closes them).
        self.stdin: IO[bytes] = os.fdopen(kept[0], "wb")
        self.stdout: IO[bytes] = os.fdopen(kept[1], "rb")
        self.stderr: IO[bytes] = os.fdopen(kept[2], "rb")
        self._control, self._report = kept[3], kept[4]
        try:
            _write_all(self._control, blob)
            self.pid, self.subreaper = self._started()
        except BaseException:
            self._closed = True
            self._finish()
            for stream in (self.stdin, self.stdout, self.stderr):
                stream.close()
            raise
        self._pidfd = pidfd_open(self.pid)  # the adapter's, while the reaper holds it unreaped
        with _REGISTERED_LOCK:
            _prune()
            _REGISTERED.setdefault(case, []).append(self)
            _RUNNING.add(self.reaper)

    def _started(self) -> tuple[int, bool]:
        """The adapter's pid, and whether the reaper is a subreaper, as the reaper's first line says."""
        line = self._next_line(time.monotonic() + START_S)
        words = (line or b"").split()
        if len(words) == 3 and words[0] == b"started" and words[1].isdigit():
            return int(words[1]), words[2] == b"1"
        if len(words) == 3 and words[0] == b"failed" and words[1].isdigit():
            code = int(words[1])
            raise OSError(code, os.strerror(code), str(self.cwd) if words[2] == b"cwd" else self.argv[0])
        said = "nothing" if line is None else repr(line[:80])
        raise OSError(f"its reaper did not start it within {START_S:g} s (it said {said})")

    # -- what the reaper says ------------------------------------------------------------------------------

    def _next_line(self, deadline: float | None) -> bytes | None:
        """The next line the reaper wrote; None at the end of its report, or once *deadline* has passed."""
        while b"\n" not in self._buffer:
            if self._lost or not self._reading:
                return None
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not _readable(self._report, remaining):
                return None
            chunk = os.read(self._report, 4096)
            self._buffer += chunk
            if not chunk or len(self._buffer) > _LINE_CAP:
                self._lost = True  # the reaper is gone (killed: it would have said more), or not itself
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _take(self, line: bytes) -> None:
        words = line.split()
        if len(words) == 2 and words[0] == b"exited" and words[1].lstrip(b"-").isdigit():
            self._status = int(words[1])
        elif words == [b"reaped"]:
            self._reaped = True

    def status(self, timeout: float | None) -> int | None:
        """The adapter's exit status, waiting up to *timeout* seconds (None: until it exits); None while it runs.
        The adapter is not reaped by this."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._status is None:
                line = self._next_line(deadline)
                if line is None:
                    break
                self._take(line)
            if self._status is None and self._closed:
                return LOST_STATUS  # the case is over: its reaper killed everything below it
            if self._status is None and self._lost:
                return self._status_without_reaper(deadline)
            return self._status

    def _status_without_reaper(self, deadline: float | None) -> int | None:
        """LOST_STATUS once the adapter has ended, if its reaper was killed before it could tell its status;
        None while the adapter runs."""
        remaining = 3600.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if self._pidfd is not None and self._pidfd >= 0:
            gone = bool(ready_pidfds([self._pidfd], remaining))
        else:
            gone = wait_pid_gone(self.pid, remaining)
        return LOST_STATUS if gone else None

    def release(self) -> int | None:
        """Once the kit has ended the adapter's group: wait for the adapter's exit, let the reaper reap it, and
        wait until it has; the adapter's exit status."""
        status = self.status(None)
        with self._lock:
            if not (self._released or self._lost or self._closed):
                try:
                    os.write(self._control, b"r")
                except OSError:
                    self._lost = True
                deadline = time.monotonic() + END_S
                while not self._reaped:
                    line = self._next_line(deadline)
                    if line is None:
                        break
                    self._take(line)
            self._released = True
        return status

    def holds(self) -> bool:
        """Whether the adapter's pid, and its group id, are surely still the adapter's: the reaper has not been
        let reap it, or, if the reaper is gone, the adapter still runs. Never waits: a signal handler asks."""
        if self._released or self._closed:
            return False
        if not self._lost and self.alive():
            return True
        if self._pidfd is not None and self._pidfd >= 0:
            return not ready_pidfds([self._pidfd], 0.0)
        return not wait_pid_gone(self.pid, 0.0)

    def alive(self) -> bool:
        """Whether the reaper still runs."""
        if self._closed:
            return False
        if self._reaper_fd is not None and self._reaper_fd >= 0:
            return not ready_pidfds([self._reaper_fd], 0.0)
        return _state(self.reaper) not in (None, b"Z", b"X")

    def lingers(self) -> bool:
        """Whether the adapter was released and the reaper still runs: it has a child left below it (or is about
        to exit, having none)."""
        return self._released and self.alive()

    # -- the end -------------------------------------------------------------------------------------------

    def end(self) -> None:
        """Close the reaper's control pipe, on which it kills every process left below it, reaps them and
        exits; wait for it (killing it after ``END_S``), keep the adapter's status if it said it, and have
        the server reap it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finish()

    def _finish(self) -> None:
        os.close(self._control)
        if not self._await_reaper(END_S):
            self._kill_reaper()
            self._await_reaper(END_S)
        while self._status is None:  # what it said before it exited: the adapter's status, perhaps
            line = self._next_line(time.monotonic())
            if line is None:
                break
            self._take(line)
        _RUNNING.discard(self.reaper)  # before the server reaps it: a pid in _RUNNING is always the reaper's
        with contextlib.suppress(OSError):
            _server_ask(b"reap %d" % self.reaper)
        self._reading = False
        os.close(self._report)
        for fd in (self._pidfd, self._reaper_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        self._pidfd = self._reaper_fd = None

    def _kill_reaper(self) -> None:
        if sys.platform != "linux":  # never called elsewhere: reapers are Linux only
            return
        with contextlib.suppress(OSError):
            if self._reaper_fd is not None and self._reaper_fd >= 0:
                signal.pidfd_send_signal(self._reaper_fd, signal.SIGKILL)
            else:  # not reaped by the server until the kit asks: the pid is still the reaper's
                os.kill(self.reaper, signal.SIGKILL)

    def _await_reaper(self, timeout: float) -> bool:
        if self._reaper_fd is not None and self._reaper_fd >= 0:
            return bool(ready_pidfds([self._reaper_fd], timeout))
        deadline = time.monotonic() + timeout
        while _state(self.reaper) not in (None, b"Z", b"X"):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def _prune() -> None:
    """End the registered reapers that have exited by themselves (their adapter released and nothing left
    below them), so that a caller that never sweeps its case leaves no reaper and no descriptor behind."""
    for case, reapers in list(_REGISTERED.items()):
        done = [reaper for reaper in reapers if reaper._released and not reaper.alive()]
        for reaper in done:
            reaper.end()
        kept = [reaper for reaper in reapers if reaper not in done]
        if kept:
            _REGISTERED[case] = kept
        else:
            del _REGISTERED[case]


# -- the server -----------------------------------------------------------------------------------------------


class _Server:
    """The process that forks the reapers (``subreaper.serve``), and the kit's end of its socket."""

    channel: socket.socket
    popen: subprocess.Popen[bytes]

    def __init__(self) -> None:
        if sys.platform == "win32":  # never started there: reapers are Linux only
            raise OSError("no reapers on Windows")
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT.format(folder=str(SCRIPT.parent)), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # no signal of the kit's terminal reaches it, or its reapers
            )
        except BaseException:
            self.channel.close()
            raise
        finally:
            theirs.close()

    def ask(self, message: bytes, fds: Sequence[int] = ()) -> bytes:
        if sys.platform == "win32":  # never asked there
            raise OSError("no reapers on Windows")
        socket.send_fds(self.channel, [message], list(fds))
        if not _readable(self.channel.fileno(), START_S):
            raise OSError(f"the reapers' server did not answer within {START_S:g} s")
        answer = self.channel.recv(64)
        if not answer:
            raise OSError("the reapers' server is gone")
        return answer

    def close(self) -> None:
        self.channel.close()  # the end of its socket: it exits
        try:
            self.popen.wait(END_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


_SERVER: list[_Server] = []  # the one server of this process, once started
_SERVER_LOCK = threading.Lock()


def _server_ask(message: bytes, fds: Sequence[int] = ()) -> bytes:
    """Ask the server, started first if it is not there, and started again once if it died."""
    with _SERVER_LOCK:
        for attempt in (1, 2):
            if not _SERVER:
                _SERVER.append(_Server())
                if len(_STOPPING) == 0:
                    _STOPPING.append(atexit.register(_stop_server))
            try:
                return _SERVER[0].ask(message, fds)
            except OSError:
                _SERVER.pop().close()
                if attempt == 2:
                    raise
    raise AssertionError("not reached")


_STOPPING: list[object] = []  # the exit handler that ends the server, once registered


def _stop_server() -> None:
    """At the kit's exit: end the server and reap it, so that the processes of the kit are all accounted for
    (its CPU and that of the reapers it reaped count as the kit's)."""
    with _SERVER_LOCK:
        while _SERVER:
            _SERVER.pop().close()


def _server_start(fds: Sequence[int]) -> int:
    """A new reaper, given the adapter's stdin, stdout and stderr and its own control and report pipes."""
    answer = _server_ask(b"start", fds)
    if not answer.isdigit():
        raise OSError(f"the reapers' server could not start a reaper (it said {answer[:80]!r})")
    return int(answer)


def _state(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read(4096).rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _readable(fd: int, timeout: float | None) -> bool:
    """Whether *fd* can be read (or is at its end) within *timeout* seconds (None: however long)."""
    if sys.platform == "win32":  # never called there: reapers are Linux only
        return False
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else int(timeout * 1000) + (timeout > 0)))
