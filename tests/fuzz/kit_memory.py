"""The peak memory of the kit and of the processes it runs for itself, not of the adapter's tree.

The target (under 500 MB) is the kit's: its own process, the git commands it runs, the origin's hooks (run
by git inside the worker's push, so below the adapter in the tree) and its tool (run by the worker). The
adapter's memory is not limited, and a hostile worker's can be anything: ``wait4``'s ``ru_maxrss`` would
count it, since the kit reaps the adapter. So on Linux a thread reads ``/proc`` every ``INTERVAL_S`` while
the kit runs: the kit's descendants, less the adapter's subtree, plus every process in that subtree that
runs the kit's code (``KIT_SCRIPT``, ``KIT_MODULE``) and what those start. It keeps each process's high-water mark
(``VmHWM``) and the largest sum of the resident sizes (``VmRSS``) of those alive at one reading. A process
that lives less than one interval can be missed; one that grows to hundreds of MB lives longer than that.
Elsewhere (no ``/proc``) only ``wait4``'s figure is there, the adapter's tree included, and it says so.
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

INTERVAL_S = 0.02
KIT_SCRIPT = "resumekit_pre_receive.py"  # the origin's hooks run this file
KIT_MODULE = "resumekit.conformance.p1._tool"  # and the tool this module
PROC = Path("/proc")


class KitMemory:
    """Read /proc while the kit runs: ``peak_kb`` (the largest sum over the kit's own processes at one
    reading) and ``largest_kb`` (the largest high-water mark of one of them)."""

    def __init__(self, kit_pid: int, adapter_module: str) -> None:
        self.kit_pid = kit_pid
        self.adapter_module = adapter_module  # the adapter runs as ``python -m`` this: its subtree is not the kit's
        self.available = PROC.is_dir()
        self.peak_kb = 0
        self.largest_kb = 0
        self.seen: dict[int, str] = {}  # pid -> its command line, every process counted as the kit's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> KitMemory:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.sample()

    def sample(self) -> None:
        """One reading of /proc."""
        table = _processes()
        total = 0
        for pid in self.kit_processes(table):
            status = _status(pid)
            total += status.get("VmRSS", 0)
            self.largest_kb = max(self.largest_kb, status.get("VmHWM", 0))
            self.seen.setdefault(pid, " ".join(table[pid][1])[:200])
        self.peak_kb = max(self.peak_kb, total)

    def kit_processes(self, table: dict[int, tuple[int, list[str]]]) -> list[int]:
        """The pids of *table* (pid -> parent, argv) that are the kit's own."""
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        found: list[int] = []
        pending = [(self.kit_pid, True)] if self.kit_pid in table else []
        while pending:
            pid, kit = pending.pop()
            argv = table[pid][1]
            if _runs_module(argv, self.adapter_module):
                kit = False
            elif _runs_module(argv, KIT_MODULE) or any(arg.endswith(KIT_SCRIPT) for arg in argv):
                kit = True
            if kit:
                found.append(pid)
            pending.extend((child, kit) for child in children.get(pid, ()))
        return found


def _runs_module(argv: list[str], module: str) -> bool:
    """Whether *argv* runs ``-m module`` (the kit's own argv names the adapter's command in one argument)."""
    return any(first == "-m" and second == module for first, second in itertools.pairwise(argv))


def _processes() -> dict[int, tuple[int, list[str]]]:
    """Every process now: pid -> (parent pid, argv)."""
    table = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            stat = (PROC / entry.name / "stat").read_text()
            argv = (PROC / entry.name / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        table[int(entry.name)] = (parent, argv)
    return table


def _status(pid: int) -> dict[str, int]:
    """The memory lines of /proc/PID/status, in KiB."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found
