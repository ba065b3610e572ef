"""Processes that escaped the adapter's tree: found below the case's subreapers or by a marker in their
environment, named, and killed.

Every adapter process the kit starts for a P1 case carries ``RESUMEKIT_CASE_TOKEN=<a random token of the
case>`` in its environment, as its first entry (``adapters.factory.with_marker``); whatever it starts
inherits the entry unless it is given another environment. On Linux each also starts below a subreaper of
its own (``reapers``), registered under the token, to which every process orphaned below the adapter is
reparented. Once the case's adapters and their trees have ended, ``sweep_marked`` looks for every process
of the case (``signs``: below one of its subreapers, or carrying the token), gives it a grace to end by
itself (a worker's keeper ends its tools asynchronously), then stops, names and kills each one left, and
ends the case's subreapers, each of which kills whatever is still below it.

What each OS allows:

- **Linux**: a process cannot leave the tree below a subreaper: the kit reads each process's parent in
  ``/proc/<pid>/stat``, the newest first, so that one forking on and on is read before it has moved on.
  ``/proc/<pid>/environ`` shows the memory that holds the environment a process was started with, for
  every process the kit may read (the same user and dumpable; root reads all). The kit reads it
  defensively: a process may vanish between the listing and the read, a read may be refused (another
  user, a setuid program, ``PR_SET_DUMPABLE`` cleared: not seen), and at most ``ENVIRON_CAP`` bytes are
  read (the marker is put first so that it is within them). A zombie's environment reads empty: it is
  dead already. The marker is a second sign, and a weak one alone: a process started with its environment
  rebuilt (``env -i``) does not carry it, and one that writes over those bytes in its own memory erases it
  (``setenv`` does not: it puts the new entry elsewhere). Waiting uses pidfds (Linux 5.3 and later), which
  become readable when the process ends: no sleep; without them the wait polls every ``POLL_S``. A kill
  goes through a pidfd opened *before* the sign is read again, so a pid reused meanwhile by a stranger is
  never hit; without pidfds the sign is read again just before ``kill``, which leaves a small window. A
  marked process is signalled alone, never its group: a group may hold a process the kit did not mark. A
  process below a subreaper in a session made below it (not the kit's, not a subreaper's) has its group
  signalled too: every member of such a group is below the subreaper as well, and a group stops as a
  whole, atomically with any fork in it. Each round stops (SIGSTOP) the processes it finds, so that none
  can fork an unseen child, and scans again, until a scan finds nothing new and no subreaper has a child
  left that the scans could not hold; then every stopped one is killed (SIGKILL).
- **macOS and Windows**: there is no child subreaper, and no portable way to read another process's
  environment (on macOS only the undocumented ``KERN_PROCARGS2`` sysctl layout, on Windows only another
  process's memory through its PEB, an undocumented layout), and the kit uses neither: ``sweep_marked``
  looks at nothing and says so (``Sweep.looked`` False, with the reason). What still holds there is the
  end of the adapter's tree: on macOS the kill of its process group, which a process that left the group
  (``setsid``, ``setpgid``) escapes unseen; on Windows the end of its Job Object, which takes every
  descendant, since the kit's job allows no breakaway (but for one started in the instant before the
  adapter joined the job).

Everywhere: a process started outside the adapter's tree (through a service, the task scheduler, WMI, a
daemon reached over a socket) is found only by the marker, on Linux, if it carries it; the orphans of an
adapter that killed its own subreaper go to init and are found by the marker alone too.
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

from resumekit.conformance._process import procfs, reapers
from resumekit.conformance._process.signs import (  # noqa: F401 (ENVIRON_CAP, POLL_S, _may_be_in_exec: named here)
    ENVIRON_CAP,
    POLL_S,
    _carries,
    _Handle,
    _may_be_in_exec,
    _Signs,
    signal_groups,
    wait_gone,
)

MARKER = "RESUMEKIT_CASE_TOKEN"  # the environment variable that marks the processes of one case
_CMDLINE_CAP = 1 << 16  # bytes of a command line read at most
_SHOWN_CHARS = 240  # characters of a command line a description shows
_SHOWN_WORD = 80  # characters of one word of it
_SHOWN_FILES = 4  # open files a description names at most
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
    """Why the kit cannot look for the processes of a case on this system, or None where it can."""
    if sys.platform == "darwin":
        return "macOS offers no portable way to read another process's environment, and no child subreaper"
    if sys.platform == "win32":
        return "Windows offers no portable way to read another process's environment, and no child subreaper"
    if not sys.platform.startswith("linux"):
        return f"reading another process's environment is not written for {sys.platform!r}"
    if not os.path.isdir("/proc/self"):
        return "/proc is not mounted"
    return None


@dataclasses.dataclass(frozen=True)
class Escaped:
    """One process of the case that outlived the grace: what it was, which sign showed it for the case's, and
    whether the kill ended it."""

    pid: int
    argv: tuple[str, ...]
    cwd: str | None
    state: str | None
    files: tuple[str, ...]
    ended: bool = True
    marked: bool = True  # it carried the case's marker
    below: bool = False  # it was below a reaper of the case (Linux)

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

    def signs(self, name: str = MARKER) -> str:
        """How the kit knew it for one of the case's processes, as the middle of a sentence."""
        below = "it descended from an adapter process of the case (the case's subreaper adopted it)"
        if self.below and self.marked:
            return f"{below} and carried the case's {name}"
        if self.below:
            return f"{below}, without the case's {name} in its environment,"
        return f"it carried the case's {name}"


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What one sweep saw: whether it could look, the processes of the case that ended within the grace, and
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
    return [pid for pid in procfs.pids() if _carries(pid, entry)]


def sweep_marked(token: str, grace: float, *, name: str = MARKER) -> Sweep:
    """End every process of the case of *token*, marked with it or below one of its reapers: those that end
    within *grace* seconds are let be; every one still there after it is stopped, described and killed, and
    named in ``Sweep.escaped``. The case's reapers are ended after (each kills what is left below it)."""
    if not token:
        raise ValueError("an empty token marks nothing the kit may kill")
    held = reapers.take(token)
    try:
        reason = cannot_look()
        if reason is not None or sys.platform == "win32":
            return Sweep(looked=False, reason=reason or "")
        return _sweep(_Signs(f"{name}={token}".encode(), held), grace)
    finally:
        for reaper in held:
            reaper.end()


def _sweep(signs: _Signs, grace: float) -> Sweep:
    if sys.platform == "win32":  # never called there (cannot_look): Windows has no SIGKILL
        return Sweep(looked=False)
    with contextlib.ExitStack() as stack:
        first = [handle for handle in (_Handle.open(pid, signs) for pid in signs.scan()) if handle is not None]
        for handle in first:
            stack.callback(handle.close)
        wait_gone(first, time.monotonic() + max(0.0, grace))
        ended = tuple(handle.pid for handle in first if handle.gone())
        caught = _stop_all(signs, [h for h in first if not h.gone()], stack)
        for handle in caught:
            handle.send(signal.SIGKILL)
        signal_groups(signs.groups, signal.SIGKILL)
        wait_gone(caught, time.monotonic() + KILL_WAIT_S)
        escaped = tuple(dataclasses.replace(seen, ended=handle.gone()) for handle, seen in caught.items())
    return Sweep(looked=True, ended=ended, escaped=escaped)


def _stop_all(signs: _Signs, left: list[_Handle], stack: contextlib.ExitStack) -> dict[_Handle, Escaped]:
    """Describe and stop every process of the case still there (and the process groups of those below a reaper),
    scanning again until nothing new turns up, and no reaper has a child the scans could not read."""
    caught: dict[_Handle, Escaped] = {}
    if sys.platform == "win32":  # never called there (cannot_look): Windows has no SIGSTOP
        return caught
    known = {handle.pid for handle in left}
    fresh, rounds, deadline = left, 0, time.monotonic() + KILL_WAIT_S
    while rounds < _MAX_ROUNDS:
        for handle in fresh:
            caught[handle] = dataclasses.replace(_describe(handle.pid), marked=handle.marked, below=handle.below)
            handle.send(signal.SIGSTOP)
        signs.stop_groups(handle.group for handle in fresh if handle.group is not None)
        fresh, stopped = [], len(signs.groups)
        for pid in signs.scan(stop=True):
            found = None if pid in known else _Handle.open(pid, signs)
            if found is not None:
                stack.callback(found.close)
                known.add(pid)
                fresh.append(found)
        if fresh:
            rounds += 1
        elif time.monotonic() > deadline:
            break
        elif len(signs.groups) == stopped and not signs.hidden(known):
            break  # nothing new, no group newly stopped (whose members the next scan would find), nothing hidden
    for handle in fresh:  # still coming after every round: killed undescribed rather than left
        caught[handle] = Escaped(handle.pid, (), None, None, (), marked=handle.marked, below=handle.below)
    signs.stop_groups(handle.group for handle in fresh if handle.group is not None)
    return caught


def _describe(pid: int) -> Escaped:
    """What is cheap to know of *pid*: its command line, working directory, state and open files."""
    raw = procfs.read(f"/proc/{pid}/cmdline", _CMDLINE_CAP) or b""
    argv = tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    cwd = None
    with contextlib.suppress(OSError):
        cwd = os.readlink(f"/proc/{pid}/cwd")
    stat = (procfs.read(f"/proc/{pid}/stat", 4096) or b"").rpartition(b")")[2].split()
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
