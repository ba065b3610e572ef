"""The subreapers of the adapter processes of P1 cases, on Linux, and the server that forks them.

**The server** (``serve``) is started once per kit process, by ``reapers``, with ``python -I -S`` (a module
of the standard library alone, which the kit never imports). On a socket from the kit it takes a request to
start a reaper, with five descriptors (the adapter's stdin, stdout and stderr, and the reaper's CONTROL and
REPORT pipes), forks, and answers the reaper's pid; it reaps a reaper only when the kit asks, so that a
reaper's pid stays its own until the kit is done with it. A fork of this small process costs about a tenth
of an interpreter's start, and an adapter process of a case waits for its reaper to start. The server is
not a subreaper itself, and ends when the kit's end of the socket closes.

**A reaper** (``_reaper``, one per adapter process) makes itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``), so that every process orphaned below it (by a double fork, a ``setsid``
daemon, whatever environment it started with) is reparented to it and not to init, and makes itself not
dumpable, so that the adapter, which runs as the same user, cannot open its descriptors through ``/proc``.
It reads the adapter's command, environment and working directory on CONTROL, starts the adapter in a new
session with the three descriptors (passed down, never copied), and keeps none of them. On REPORT it says
``started PID SUBREAPER`` (or ``failed ERRNO cwd|program``), ``exited STATUS`` once the adapter has ended,
and ``reaped`` once it has reaped it.

It keeps the adapter unreaped until the kit writes ``r``: until then the adapter's pid, and the id of its
process group, cannot be given to another process while the kit may still signal them. Every other child is
reaped as it ends. Once the adapter is reaped and no child is left, nothing can be orphaned to it any more,
and it exits. When CONTROL reaches its end, as it does when the kit closes it at the end of the case or dies
however it dies, it kills every process below it, reaps them all, and exits; so it does on SIGTERM too
(``reapers.abort``: the run was interrupted, or the case abandoned).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import socket
import sys
from collections.abc import Iterator

if sys.platform != "linux":  # the kit starts it on Linux only (reapers.usable)
    raise ImportError("the subreapers run on Linux only")

_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36
_HEADER = 8  # bytes of a request's length, big-endian
_REQUEST_CAP = 1 << 26  # bytes of a request at most: far above any command line and environment Linux takes
_END_WAIT_MS = 50  # how long an end waits for a killed child to end before it looks below again
_FDS = 5  # the descriptors of a request to start a reaper


class _Gone(Exception):
    """The kit's end of a pipe is closed: the kit is gone, or done with this reaper."""


class _Adapter:
    """What a reaper knows of its adapter: its status once it has ended, and whether it may be reaped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None
        self.released = False  # the kit has ended the adapter's group: the reaper may reap it
        self.reaped = False
        self.said = False  # its status is on REPORT


# -- the server ---------------------------------------------------------------------------------------------


def serve(args: list[str]) -> int:
    """Fork a reaper for each request on the kit's socket (``args``: its descriptor), and reap one when asked;
    return when the kit's end closes."""
    if len(args) != 1 or not args[0].isdigit():
        print("usage: serve([SOCKET]): the descriptor of the kit's socket (Linux)", file=sys.stderr)
        return 2
    channel = socket.socket(fileno=int(args[0]))
    _libc()  # the C library found once, before any fork
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 64, _FDS)
        except OSError:
            return 0
        if not message:  # the kit is gone, or done: each reaper sees the end of its own CONTROL
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:  # the reapers that have ended, reaped
                    pass
            return 0
        words = message.split()
        try:
            answer = _answer(channel, words, fds)
        finally:
            for fd in fds:
                os.close(fd)
        channel.send(answer)


def _answer(channel: socket.socket, words: list[bytes], fds: list[int]) -> bytes:
    if words == [b"start"] and len(fds) == _FDS:
        try:
            pid = os.fork()
        except OSError as error:
            return b"error %d" % (error.errno or 0)
        if pid == 0:  # the reaper: it never returns into the server's loop
            code = 70
            try:
                channel.close()
                code = _reaper(fds)
            finally:
                os._exit(code)
        return b"%d" % pid
    if len(words) == 2 and words[0] == b"reap" and words[1].isdigit():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(int(words[1]), os.WNOHANG)  # asked once the reaper has ended: never blocks the server
        return b"reaped"
    return b"?"


# -- a reaper -----------------------------------------------------------------------------------------------


def _reaper(fds: list[int]) -> int:
    """The life of one reaper, in a child of the server: its adapter, and everything orphaned below it."""
    os.setsid()  # no group or session of the server's
    for number, fd in enumerate(fds[:3]):
        os.dup2(fd, number)  # the adapter's stdin, stdout and stderr: passed down to it
    for fd in fds[:3]:
        os.close(fd)  # the descriptors received are inheritable: only 0, 1 and 2 may reach the adapter
    control, report = fds[3], fds[4]
    for fd in (control, report):
        os.set_inheritable(fd, False)  # the adapter gets none of the kit's pipes but its three
    subreaper, _ = _prctl(_PR_SET_CHILD_SUBREAPER, 1), _prctl(_PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGTERM, _aborted)  # the kit's run was interrupted, or the case abandoned
    wake = _wake_on_children()  # before the adapter starts: no child's end is missed
    adapter = None
    try:
        argv, env, cwd = _read_request(control)
        try:
            pid = _spawn(argv, env, cwd)
        except _Failed as failure:
            _say(report, b"failed %d %s\n" % (failure.code, failure.what))
            return 0
        _let_go_of_stdio()
        adapter = _Adapter(pid)
        _say(report, b"started %d %d\n" % (pid, subreaper))
        _serve(control, report, wake, adapter)
    except _Gone:
        pass
    finally:  # whatever ended the service, even a fault of this module, nothing below outlives it
        _end(wake, report, adapter)
    return 0


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL | None:
    """The C library of this process, through ctypes; None where it cannot be had."""
    if not _LIBC:
        with contextlib.suppress(OSError):
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0] if _LIBC else None


def _aborted(number: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the end that follows is not cut short
    raise _Gone


def _prctl(option: int, value: int) -> bool:
    """Apply prctl(2) *option* with *value*; whether it took."""
    libc = _libc()
    try:
        return libc is not None and libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except AttributeError:
        return False


def _read_exactly(fd: int, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise _Gone
        data += chunk
    return bytes(data)


def _read_request(control: int) -> tuple[list[bytes], dict[bytes, bytes], bytes]:
    """The adapter's argv, environment and working directory (empty: this one's), as ``reapers.request``
    wrote them."""
    size = int.from_bytes(_read_exactly(control, _HEADER), "big")
    if size > _REQUEST_CAP:
        raise _Gone
    cwd, count, *fields = _read_exactly(control, size).split(b"\0")
    argv, entries = fields[: int(count)], fields[int(count) :]
    return argv, {name: value for name, _, value in (entry.partition(b"=") for entry in entries)}, cwd


class _Failed(Exception):
    """The adapter could not be started: the errno, and what it concerns (``cwd`` or ``program``)."""

    def __init__(self, code: int, what: bytes) -> None:
        super().__init__(code, what)
        self.code, self.what = code, what


def _spawn(argv: list[bytes], env: dict[bytes, bytes], cwd: bytes) -> int:
    """Start the adapter in a session of its own, in *cwd*, found on the PATH of its environment as subprocess
    finds it, with SIGPIPE and SIGXFSZ at their defaults again, as subprocess restores them."""
    try:
        if cwd:
            os.chdir(cwd)
    except OSError as error:
        raise _Failed(error.errno or errno.EIO, b"cwd") from None
    program = argv[0] if argv else b""
    if b"/" in program:
        candidates = [program]
    else:
        folders = os.get_exec_path(env)  # type: ignore[arg-type,unused-ignore]  # b"PATH" too
        candidates = [os.path.join(os.fsencode(folder), program) for folder in folders]
    first: OSError | None = None  # the first failure other than a program not found, as subprocess says it
    last = errno.ENOENT
    for path in candidates:
        try:
            return os.posix_spawn(path, argv, env, setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        except ValueError:
            raise _Failed(errno.EINVAL, b"program") from None
        except OSError as error:
            last = error.errno or errno.EIO
            if first is None and last not in (errno.ENOENT, errno.ENOTDIR):
                first = error
    raise _Failed((first.errno or errno.EIO) if first else last, b"program")


def _let_go_of_stdio() -> None:
    """Hold none of the adapter's pipes: their ends close when the adapter's tree lets go of them."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _wake_on_children() -> int:
    """A descriptor that becomes readable when a child ends (SIGCHLD)."""
    read_end, write_end = os.pipe()
    for fd in (read_end, write_end):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    signal.set_wakeup_fd(write_end)
    return read_end


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


def _say(report: int, line: bytes) -> None:
    try:
        os.write(report, line)
    except OSError:
        raise _Gone from None


def _stat(pid: int) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command's name (state, parent, ...); [] if it is gone."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return []
    try:
        return os.read(fd, 4096).rpartition(b")")[2].split()
    except OSError:
        return []
    finally:
        os.close(fd)


def _processes() -> Iterator[tuple[int, int, bytes, int, int]]:
    """Every process as (pid, parent, state, process group, session), the newest read first: one that forks
    and ends on and on, so that its pid never stays the same, is then read before it has moved on."""
    for pid in sorted((int(name) for name in os.listdir("/proc") if name.isdigit()), reverse=True):
        fields = _stat(pid)
        if len(fields) > 3:
            yield pid, int(fields[1]), fields[0], int(fields[2]), int(fields[3])


def _collect(adapter: _Adapter) -> bool:
    """Reap every child that has ended, but the adapter until it is released; whether a child is left."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        if info is None:
            return True
        if info.si_pid == adapter.pid:
            seen = adapter.status is not None
            if not seen:
                adapter.status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            if not adapter.released:
                if seen:  # not the wake of the adapter's own end: another child's, perhaps
                    _reap_hidden(adapter.pid)
                return True
            adapter.reaped = True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


def _reap_hidden(kept: int) -> None:
    """Reap the ended children that the adapter, ended but kept, hides from waitid (it is the first child)."""
    me = os.getpid()
    for pid, parent, state, _, _ in _processes():
        if parent == me and state == b"Z" and pid != kept:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _serve(control: int, report: int, wake: int, adapter: _Adapter) -> None:
    """Report the adapter's end, reap, and take the kit's word, until nothing is left below: then return."""
    poller = select.poll()
    poller.register(control, select.POLLIN)
    poller.register(wake, select.POLLIN)
    said_reaped = False
    while True:
        for fd, _ in poller.poll():
            if fd == wake:
                _drain(wake)
                continue
            command = os.read(control, 64)
            if not command:
                raise _Gone
            adapter.released = adapter.released or b"r" in command
        left = _collect(adapter)
        if adapter.status is not None and not adapter.said:
            _say(report, b"exited %d\n" % adapter.status)
            adapter.said = True
        if adapter.reaped and not said_reaped:
            _say(report, b"reaped\n")
            said_reaped = True
        if adapter.reaped and not left:
            return


def _kill_below() -> None:
    """SIGKILL every process below this one, each by a pidfd opened before its parent is read again, so that a
    pid that ended and was given to another process meanwhile is not hit; and the process group of each, but
    for this one's own session, so that a member whose pid never stays the same long enough to be read goes
    too (every session but this one's below it was made by a process below it: its groups hold nothing else)."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    for pid, parent, _, group, session in _processes():
        children.setdefault(parent, []).append(pid)
        if session != me and group > 1:
            groups[pid] = group
    below: set[int] = set()
    queue = [me]
    while queue:
        for child in children.get(queue.pop(), ()):
            if child not in below:
                below.add(child)
                queue.append(child)
    tree = below | {me}
    for pid in below:
        _kill(pid, tree)
    for group in {groups[pid] for pid in below if pid in groups}:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)


def _kill(pid: int, tree: set[int]) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:
        pidfd = -1  # no pidfds on this kernel: the parent read again just before the kill
    try:
        fields = _stat(pid)
        if len(fields) > 1 and int(fields[1]) in tree:
            if pidfd >= 0:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _end(wake: int, report: int, adapter: _Adapter | None) -> None:
    """Kill every process below this one and reap them all, saying the adapter's status if not said yet;
    return once no child is left."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # already ending
    poller = select.poll()
    poller.register(wake, select.POLLIN)
    while True:
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if not pid:
                    break
                if adapter is not None and pid == adapter.pid and not adapter.said:
                    adapter.said = True
                    code = os.waitstatus_to_exitcode(status) if adapter.status is None else adapter.status
                    with contextlib.suppress(_Gone):  # the kit may be gone
                        _say(report, b"exited %d\n" % code)
        except ChildProcessError:
            return
        _kill_below()
        if poller.poll(_END_WAIT_MS):
            _drain(wake)
