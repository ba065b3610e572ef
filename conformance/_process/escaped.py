"""Processes that escaped the adapter's tree: found by a marker in their environment, named, and killed.

Every adapter process the kit starts for a P1 case carries ``RESUMEKIT_CASE_TOKEN=<a random token of the
case>`` in its environment, as its first entry (``adapters.factory.with_marker``); whatever it starts
inherits the entry unless it is given another environment. Once the case's adapters and their trees have
ended, ``sweep_marked`` looks for every process that still carries the token, gives it a grace to end by
itself (a worker's keeper ends its tools asynchronously), and then stops, names and kills each one left.

What each OS allows:

- **Linux**: ``/proc/<pid>/environ`` holds the environment a process was started with (``execve``), for
  every process the kit may read (the same user and dumpable; root reads all). The kit reads it
  defensively: a process may vanish between the listing and the read, a read may be refused (another
  user, a setuid program, ``PR_SET_DUMPABLE`` cleared: not seen), and at most ``ENVIRON_CAP`` bytes are
  read (the marker is put first so that it is within them). A zombie's environment reads empty: it is
  dead already. Waiting uses pidfds (Linux 5.3 and later), which become readable when the process ends:
  no sleep; without them the wait polls every ``POLL_S``. A kill goes through a pidfd opened *before* the
  marker is read again, so a pid reused meanwhile by a stranger is never hit; without pidfds the marker
  is read again just before ``kill``, which leaves a small window. Only marked processes are ever
  signalled, one by one, never a process group: a group may hold a process the kit did not mark. Each
  round stops (SIGSTOP) the marked processes it finds, so that none can fork an unseen child, and scans
  again, until a scan finds nothing new; then every stopped one is killed (SIGKILL).
- **macOS and Windows**: there is no portable way to read another process's environment (on macOS
  only the undocumented ``KERN_PROCARGS2`` sysctl layout, on Windows only another process's memory
  through its PEB, an undocumented layout), and the kit uses neither: ``sweep_marked`` looks at nothing
  and says so (``Sweep.looked`` False, with the reason). What still holds there is the end of the adapter's
  tree: on macOS the kill of its process group, which a process that left the group (``setsid``,
  ``setpgid``) escapes unseen; on Windows the end of its Job Object, which takes every descendant, since
  the kit's job allows no breakaway (but for one started in the instant before the adapter joined the
  job), and no process started outside the tree (through a service, the task scheduler or WMI).

Everywhere: a process started with an environment cleared or rebuilt without the marker (``env -i``,
a service manager, a sandbox) escapes the marker and is not found; one that only changes its
environment after it started (``setenv``) is still found, since ``environ`` shows what it started with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shlex
import signal
import sys
import time
from collections.abc import Iterable, Iterator

from resumekit.conformance._process.pids import pidfd_open, ready_pidfds

MARKER = "RESUMEKIT_CASE_TOKEN"  # the environment variable that marks the processes of one case
ENVIRON_CAP = 1 << 20  # bytes of a process's environment read at most
_CMDLINE_CAP = 1 << 16  # bytes of a command line read at most
_SHOWN_CHARS = 240  # characters of a command line a description shows
_SHOWN_WORD = 80  # characters of one word of it
_SHOWN_FILES = 4  # open files a description names at most
POLL_S = 0.01  # how often a wait polls, where no pidfd can be awaited
_EXEC_RETRIES = 50  # reads, a millisecond apart, of the environment of a process caught inside its execve
_PF_KTHREAD = 0x00200000  # the flag of a kernel thread in /proc/<pid>/stat
_YOUNG_S = 1.0  # a process started this recently may still be inside its execve
KILL_WAIT_S = 5.0  # how long a killed process may take to end before the sweep says it would not
_MAX_ROUNDS = 50  # rounds of stop-and-scan before the sweep kills what it has, however many keep coming
_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "in an uninterruptible wait",
    "T": "stopped",
    "t": "traced",
    "Z": "a zombie",
    "X": "dead",
    "I": "idle",
}


def new_token() -> str:
    """A random token for one case's marker."""
    return secrets.token_hex(16)


def cannot_look() -> str | None:
    """Why the kit cannot look for marked processes on this system, or None where it can."""
    if sys.platform == "darwin":
        return "macOS offers no portable way to read another process's environment"
    if sys.platform == "win32":
        return "Windows offers no portable way to read another process's environment"
    if not sys.platform.startswith("linux"):
        return f"reading another process's environment is not written for {sys.platform!r}"
    if not os.path.isdir("/proc/self"):
        return "/proc is not mounted"
    return None


@dataclasses.dataclass(frozen=True)
class Escaped:
    """One marked process that outlived the grace: what it was, and whether the kill ended it."""

    pid: int
    argv: tuple[str, ...]
    cwd: str | None
    state: str | None
    files: tuple[str, ...]
    ended: bool = True

    def command(self) -> str:
        """The command line as a shell would read it, each word cut after ``_SHOWN_WORD`` characters and the
        whole after ``_SHOWN_CHARS`` (so that a long ``-c`` program leaves its arguments in sight)."""
        words = [word if len(word) <= _SHOWN_WORD else word[:_SHOWN_WORD] + "..." for word in self.argv]
        command = shlex.join(words) if words else "(no command line)"
        return command[:_SHOWN_CHARS] + "..." if len(command) > _SHOWN_CHARS else command

    def describe(self) -> str:
        """A line naming the process: pid, command line, working directory, state, files it held open."""
        parts = [f"pid {self.pid}", f"command {self.command()!r}", f"working directory {self.cwd!r}"]
        if self.state:
            parts.append(self.state)
        if self.files:
            parts.append("holding open " + ", ".join(repr(path) for path in self.files))
        if not self.ended:
            parts.append(f"still there {KILL_WAIT_S:g} s after SIGKILL")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What one sweep saw: whether it could look, the marked processes that ended within the grace, and
    those that did not (each killed)."""

    looked: bool
    reason: str = ""
    ended: tuple[int, ...] = ()
    escaped: tuple[Escaped, ...] = ()


def marked_pids(token: str, *, name: str = MARKER) -> list[int]:
    """The pids of the processes whose environment carries ``name=token`` (none where the kit cannot look)."""
    if cannot_look() is not None:
        return []
    entry = f"{name}={token}".encode()
    return [pid for pid in _pids() if _carries(pid, entry)]


def sweep_marked(token: str, grace: float, *, name: str = MARKER) -> Sweep:
    """End every process marked with *token*: those that end within *grace* seconds are let be; every one
    still there after it is stopped, described and killed, and named in ``Sweep.escaped``."""
    if not token:
        raise ValueError("an empty token marks nothing the kit may kill")
    reason = cannot_look()
    if reason is not None or sys.platform == "win32":
        return Sweep(looked=False, reason=reason or "")
    entry = f"{name}={token}".encode()
    with contextlib.ExitStack() as stack:
        first = [handle for handle in (_Handle.open(pid, entry) for pid in _pids()) if handle is not None]
        for handle in first:
            stack.callback(handle.close)
        _wait_gone(first, time.monotonic() + max(0.0, grace))
        ended = tuple(handle.pid for handle in first if handle.gone())
        caught = _stop_all(entry, [h for h in first if not h.gone()], stack)
        for handle in caught:
            handle.send(signal.SIGKILL)
        _wait_gone(caught, time.monotonic() + KILL_WAIT_S)
        escaped = tuple(dataclasses.replace(seen, ended=handle.gone()) for handle, seen in caught.items())
    return Sweep(looked=True, ended=ended, escaped=escaped)


def _stop_all(entry: bytes, left: list[_Handle], stack: contextlib.ExitStack) -> dict[_Handle, Escaped]:
    """Describe and stop every marked process still there, scanning again until nothing new turns up."""
    caught: dict[_Handle, Escaped] = {}
    if sys.platform == "win32":  # never called there (cannot_look): Windows has no SIGSTOP
        return caught
    known = {handle.pid for handle in left}
    fresh = left
    for _ in range(_MAX_ROUNDS):
        for handle in fresh:
            caught[handle] = _describe(handle.pid)
            handle.send(signal.SIGSTOP)
        fresh = []
        for pid in _pids():
            found = None if pid in known else _Handle.open(pid, entry)
            if found is not None:
                stack.callback(found.close)
                known.add(pid)
                fresh.append(found)
        if not fresh:
            break
    for handle in fresh:  # still coming after every round: killed undescribed rather than left
        caught[handle] = Escaped(handle.pid, (), None, None, ())
    return caught


class _Handle:
    """One marked process, held by a pidfd where the system has them, so that a signal never hits a stranger."""

    def __init__(self, pid: int, entry: bytes, pidfd: int | None) -> None:
        self.pid, self.entry, self.pidfd = pid, entry, pidfd
        self._gone = False

    @classmethod
    def open(cls, pid: int, entry: bytes) -> _Handle | None:
        """A handle on *pid* if it is a live process that carries *entry*; None otherwise."""
        if not _carries(pid, entry):  # the cheap test first: most processes are strangers
            return None
        pidfd = pidfd_open(pid)
        if pidfd == -1:
            return None  # gone already
        if not _carries(pid, entry):  # read again after the pidfd was opened: the pidfd is this marked process
            if pidfd is not None:
                os.close(pidfd)
            return None
        return cls(pid, entry, pidfd)

    def send(self, number: signal.Signals) -> None:
        """Send signal *number* to this process, if it is still the marked one."""
        if self._gone:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pidfd is not None and sys.platform == "linux":
                signal.pidfd_send_signal(self.pidfd, number)
            elif _carries(self.pid, self.entry):
                os.kill(self.pid, number)

    def gone(self) -> bool:
        """Whether the process has ended (a zombie counts: it runs nothing any more)."""
        if not self._gone:
            if self.pidfd is not None:
                self._gone = bool(ready_pidfds([self.pidfd], 0.0))
            else:
                self._gone = not _carries(self.pid, self.entry)
        return self._gone

    def close(self) -> None:
        """Close the pidfd, if any."""
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            os.close(pidfd)


def _wait_gone(handles: Iterable[_Handle], deadline: float) -> None:
    """Wait until every handle's process has ended or *deadline* (time.monotonic) has passed."""
    waiting = [handle for handle in handles if not handle.gone()]
    while waiting:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        fds = [h.pidfd for h in waiting if h.pidfd is not None]
        if len(fds) == len(waiting):
            ready_pidfds(fds, remaining)  # a pidfd becomes readable when its process ends
        else:
            time.sleep(min(POLL_S, remaining))
        waiting = [handle for handle in waiting if not handle.gone()]


def _pids() -> Iterator[int]:
    """Every process id in /proc, but the kit's own."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    me = os.getpid()
    for name in names:
        if name.isdigit() and int(name) != me:
            yield int(name)


def _read(path: str, cap: int) -> bytes | None:
    """At most *cap* bytes of a /proc file, or None if it cannot be read (gone, refused)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    data = bytearray()
    try:
        while len(data) < cap:
            chunk = os.read(fd, cap - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return bytes(data)


def _carries(pid: int, entry: bytes) -> bool:
    """Whether process *pid* was started with the environment entry *entry* (``NAME=value``)."""
    data = _read(f"/proc/{pid}/environ", ENVIRON_CAP)
    if not data and _may_be_in_exec(pid):
        # A process in the middle of its execve shows no environment yet: read again a moment later.
        for _ in range(_EXEC_RETRIES):
            time.sleep(0.001)
            data = _read(f"/proc/{pid}/environ", ENVIRON_CAP)
            if data:
                break
    if not data:
        return False
    entries = data.split(b"\0")
    if len(data) >= ENVIRON_CAP:
        entries.pop()  # cut at the cap: the last entry may be a part of a longer one
    return entry in entries


def _may_be_in_exec(pid: int) -> bool:
    """Whether *pid*, whose environment reads empty, may be a process inside its execve: started within
    the last second, and neither a kernel thread (which never has an environment) nor a zombie. A process
    that emptied its environment long ago is not waited for on every sweep."""
    if sys.platform == "win32":  # no /proc there: never asked
        return False
    stat = _read(f"/proc/{pid}/stat", 4096) or b""
    uptime = _read("/proc/uptime", 64) or b""
    fields = stat.rpartition(b")")[2].split()
    try:
        flags, started = int(fields[6]), int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = float(uptime.split()[0]) - started
    except (IndexError, ValueError, OSError):
        return False
    return fields[0] not in (b"Z", b"X") and not flags & _PF_KTHREAD and age < _YOUNG_S


def _describe(pid: int) -> Escaped:
    """What is cheap to know of *pid*: its command line, working directory, state and open files."""
    raw = _read(f"/proc/{pid}/cmdline", _CMDLINE_CAP) or b""
    argv = tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    cwd = None
    with contextlib.suppress(OSError):
        cwd = os.readlink(f"/proc/{pid}/cwd")
    stat = (_read(f"/proc/{pid}/stat", 4096) or b"").rpartition(b")")[2].split()
    state = _STATES.get(stat[0].decode("ascii", "replace"), stat[0].decode("ascii", "replace")) if stat else None
    return Escaped(pid, argv, cwd, state, _open_files(pid))


def _open_files(pid: int) -> tuple[str, ...]:
    """Up to ``_SHOWN_FILES`` files (not pipes, sockets or devices) that *pid* holds open."""
    folder = f"/proc/{pid}/fd"
    try:
        descriptors = sorted(os.listdir(folder), key=lambda name: int(name) if name.isdigit() else 0)
    except OSError:
        return ()
    files: list[str] = []
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            target = os.readlink(f"{folder}/{descriptor}")
            if target.startswith("/") and not target.startswith(("/dev/", "/proc/")) and target not in files:
                files.append(target)
        if len(files) >= _SHOWN_FILES:
            break
    return tuple(files)
