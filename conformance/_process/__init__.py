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

On Linux an adapter process of a P1 case starts below a subreaper of the kit's (``reapers``, forked by the
server of ``subreaper``): the adapter is the subreaper's child, not the kit's, in the same session and
group of its own, with the same pipes; every process orphaned below it is reparented to the subreaper, so
that the case's end finds it whatever its environment says. macOS and Windows have no child subreaper:
there the adapter's group or job is all that ends what it started.

The package's modules, each re-exported here or used by those that are: ``errors`` (what the plumbing
raises), ``lines`` (reading the pipes), ``line_process`` (the adapter process and its tree), ``pids``
(pids the kit did not start), ``reapers`` and ``subreaper`` (the subreaper of each adapter process of a
P1 case, Linux: the kit's side, and the server that forks them), ``procfs`` (reading /proc), ``signs``
(what makes a process one of a case's, and the kit's hold on it), ``escaped`` (the processes of a case,
below its subreapers or marked in their environment, that outlived its adapters: found on Linux, named and
killed) and ``windows`` (the Job Object, on Windows only). A name one of them shares with another keeps
its leading underscore: it is the plumbing's own, and a reader class's name is what its tests are
labelled by.
"""

from __future__ import annotations

from resumekit.conformance._process.errors import LineTooLong, NotInTree, ProcessGone, ReadTimeout
from resumekit.conformance._process.escaped import (
    MARKER,
    Escaped,
    Sweep,
    cannot_look,
    marked_pids,
    new_token,
    sweep_marked,
)
from resumekit.conformance._process.line_process import LineProcess, kill_all
from resumekit.conformance._process.lines import (
    MAX_LINE,
    STDERR_TAIL_BYTES,
    STDERR_TAIL_LINES,
    _SelectedLines,
    _ThreadedLines,
)
from resumekit.conformance._process.pids import MAX_PID, pid_alive, plausible_pid, wait_pid_gone

__all__ = [
    "MARKER",
    "MAX_LINE",
    "MAX_PID",
    "STDERR_TAIL_BYTES",
    "STDERR_TAIL_LINES",
    "Escaped",
    "LineProcess",
    "LineTooLong",
    "NotInTree",
    "ProcessGone",
    "ReadTimeout",
    "Sweep",
    "_SelectedLines",
    "_ThreadedLines",
    "cannot_look",
    "kill_all",
    "marked_pids",
    "new_token",
    "pid_alive",
    "plausible_pid",
    "sweep_marked",
    "wait_pid_gone",
]
