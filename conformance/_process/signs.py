"""What makes a process one of a case's, and the kit's hold on each such process (Linux): read in /proc.

Two signs, either enough: the case's marker in the environment the process started with (``_carries``), and a
place below one of the case's reapers (``reapers``), which the process cannot leave. A process that shows one
is held by a pidfd, opened before the sign is read again, so that a signal never hits a stranger that took a
pid meanwhile. A process below a reaper in a session that a process below the reaper made has its process
group stopped and killed with it: a group stops as a whole, atomically with any fork in it, so that a member
whose pid never stays the same long enough to be read stops too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable, Sequence

from resumekit.conformance._process import procfs, reapers
from resumekit.conformance._process.pids import pidfd_open, ready_pidfds
from resumekit.conformance._process.reapers import Reaper

ENVIRON_CAP = 1 << 20  # bytes of a process's environment read at most
POLL_S = 0.01  # how often a wait polls, where no pidfd can be awaited
_EXEC_RETRIES = 50  # reads, a millisecond apart, of the environment of a process caught inside its execve
_PF_KTHREAD = 0x00200000  # the flag of a kernel thread in /proc/<pid>/stat
_YOUNG_S = 1.0  # a process started this recently may still be inside its execve


class _Signs:
    """The signs of one case: its marker's environment entry (``NAME=token``) and its reapers."""

    def __init__(self, entry: bytes, held: Sequence[Reaper] = ()) -> None:
        self.entry = entry
        self.reapers = [reaper for reaper in held if reaper.alive()]  # one that has exited has nothing below it
        self.roots = frozenset(reaper.reaper for reaper in self.reapers)
        self.groups: set[int] = set()  # the process groups stopped so far
        self._below: dict[int, int] = {}  # what the last scan found below the reapers, each with its reaper

    def scan(self, *, stop: bool = False) -> list[int]:
        """Every process that shows a sign now, those below a reaper first. With *stop*, the group of each child
        of a reaper is stopped as soon as it is read (``procfs.below``)."""
        self._below = procfs.below(self.roots, self._stop if stop else None) if self.roots else {}
        skipped = self._below.keys() | reapers.running()  # the reapers: never marked, their environment shut
        marked = (pid for pid in procfs.pids() if pid not in skipped and _carries(pid, self.entry))
        return [*self._below, *marked]

    def hidden(self, held: Iterable[int]) -> bool:
        """Whether a reaper whose adapter was released still runs though the last scan found none of the *held*
        processes below it: it has a child the scans could not hold (one whose pid never stays the same long
        enough), or is about to exit, having none."""
        seen = {self._below[pid] for pid in held if pid in self._below}
        return any(reaper.lingers() and reaper.reaper not in seen for reaper in self.reapers)

    def read(self, pid: int) -> tuple[bool, bool]:
        """Whether *pid* carries the marker, and whether it is below a reaper, each read anew."""
        return _carries(pid, self.entry), bool(self.roots) and procfs.descends(pid, self.roots)

    def group(self, pid: int) -> int | None:
        """The process group of *pid*, if every member of it is below a reaper too: a group of a session that a
        process below a reaper made (not the kit's, not a reaper's own)."""
        found = procfs.group(pid)
        return None if found is None else self._ours(*found)

    def _ours(self, group: int, session: int) -> int | None:
        if sys.platform == "win32":  # never asked there
            return None
        if group <= 1 or session <= 1 or session in self.roots or session == os.getsid(0) or group == os.getpgid(0):
            return None
        return group

    def _stop(self, pid: int, fields: list[bytes]) -> None:
        if sys.platform == "win32":  # never called there
            return
        found = procfs.group_of(fields)
        group = None if found is None else self._ours(*found)
        if group is not None and group not in self.groups:
            self.groups.add(group)
            signal_groups([group], signal.SIGSTOP)

    def stop_groups(self, groups: Iterable[int]) -> None:
        """Stop each of *groups* not stopped yet."""
        if sys.platform == "win32":  # never called there
            return
        added = set(groups) - self.groups
        self.groups |= added
        signal_groups(added, signal.SIGSTOP)


def signal_groups(groups: Iterable[int], number: signal.Signals) -> None:
    """Send *number* to each process group of *groups*. A group's id is not given to another process while the
    group has a member: only a group whose last member ended in the instant before could have been reused,
    once the pids have wrapped around."""
    if sys.platform == "win32":
        return
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, number)


class _Handle:
    """One process of the case, held by a pidfd where the system has them, so that a signal never hits a
    stranger."""

    def __init__(self, pid: int, signs: _Signs, pidfd: int | None, marked: bool, below: bool) -> None:
        self.pid, self.signs, self.pidfd = pid, signs, pidfd
        self.marked, self.below = marked, below
        self.group = signs.group(pid) if below else None
        self._gone = False

    @classmethod
    def open(cls, pid: int, signs: _Signs) -> _Handle | None:
        """A handle on *pid* if it is a live process that shows a sign of the case; None otherwise."""
        pidfd = pidfd_open(pid)
        if pidfd == -1:
            return None  # gone already
        marked, below = signs.read(pid)  # read after the pidfd was opened: the pidfd is this process of the case
        if not (marked or below):
            if pidfd is not None:
                os.close(pidfd)
            return None
        return cls(pid, signs, pidfd, marked, below)

    def ours(self) -> bool:
        return any(self.signs.read(self.pid))

    def send(self, number: signal.Signals) -> None:
        """Send signal *number* to this process, if it is still the case's."""
        if self._gone:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pidfd is not None and sys.platform == "linux":
                signal.pidfd_send_signal(self.pidfd, number)
            elif self.ours():
                os.kill(self.pid, number)

    def gone(self) -> bool:
        """Whether the process has ended (a zombie counts: it runs nothing any more)."""
        if not self._gone:
            if self.pidfd is not None:
                self._gone = bool(ready_pidfds([self.pidfd], 0.0))
            else:
                self._gone = not self.ours()
        return self._gone

    def close(self) -> None:
        """Close the pidfd, if any."""
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            os.close(pidfd)


def wait_gone(handles: Iterable[_Handle], deadline: float) -> None:
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


def _carries(pid: int, entry: bytes) -> bool:
    """Whether process *pid* was started with the environment entry *entry* (``NAME=value``)."""
    data = procfs.read(f"/proc/{pid}/environ", ENVIRON_CAP)
    # A process in the middle of its execve shows no environment yet: read again a moment later. One whose
    # environment cannot be read (another user's, not dumpable) is not the kit's to see, and one that is
    # ending shows none either: it is not waited for once it is a zombie.
    for _ in range(_EXEC_RETRIES):
        if data != b"" or not _may_be_in_exec(pid):
            break
        time.sleep(0.001)
        data = procfs.read(f"/proc/{pid}/environ", ENVIRON_CAP)
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
    fields = procfs.stat(pid)
    uptime = procfs.read("/proc/uptime", 64) or b""
    try:
        flags, started = int(fields[6]), int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = float(uptime.split()[0]) - started
    except (IndexError, ValueError, OSError):
        return False
    return fields[0] not in (b"Z", b"X") and not flags & _PF_KTHREAD and age < _YOUNG_S
