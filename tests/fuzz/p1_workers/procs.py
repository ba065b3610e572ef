"""Hostile workers of the processes a case leaves behind, each hidden from the case's marker: a daemon started
with its environment rebuilt, one that writes over the marker in its own environment, and one that forks on
and on so that its pid never stays the same (WRK-5). Each daemon names the campaign's probe file (argument
1) on its command line, so that a test can find it by that alone, and appends ``daemon PID GROUP`` to it (its
process group stays the same however it forks; the one that writes over its marker appends ``erased PID``
too, once /proc no longer shows it); each keeps the campaign's tag,
so that the campaign's guard counts it if it outlives the try, and ends by itself after ``LIFE_S`` if nothing
kills it. Linux only: the marker overwritten is the one /proc shows.
"""

from __future__ import annotations

import os
import subprocess
import sys

from resumekit.reference.p1 import worker as reference
from tests.fuzz.guards import TAG
from tests.fuzz.p1_workers._base import argument

LIFE_S = 90  # a daemon's life at most, if nothing kills it

# Forks, leaves the session, forks again: nobody's child, in no group of the worker's. Then each daemon does
# its own thing, given as {body}, until LIFE_S has passed.
_DAEMON = """# resumekit fuzz: a process hidden from the case's marker, for {probe!r}
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
until = time.monotonic() + {life}
with open(sys.argv[1], "a", encoding="utf-8") as probe:
    probe.write(f"daemon {{os.getpid()}} {{os.getpgid(0)}}\\n")
{body}
"""

_SLEEPS = """
while time.monotonic() < until:
    time.sleep(0.2)
"""

# Writes over the bytes of RESUMEKIT_CASE_TOKEN=... in its own environment block, the memory /proc/<pid>/environ
# reads (from env_start, the 50th field of /proc/self/stat), then sleeps.
_OVERWRITES = (
    """
import ctypes
stat = open("/proc/self/stat", "rb").read().rpartition(b")")[2].split()
start = int(stat[47])  # env_start, the 50th field
block = open("/proc/self/environ", "rb").read()
at = block.find(b"RESUMEKIT_CASE_TOKEN=")
if at >= 0:
    size = block.index(b"\\0", at) - at
    ctypes.memmove(start + at, b"X" * size, size)
    if b"RESUMEKIT_CASE_TOKEN=" not in open("/proc/self/environ", "rb").read():
        with open(sys.argv[1], "a", encoding="utf-8") as probe:
            probe.write(f"erased {os.getpid()}\\n")
"""
    + _SLEEPS
)

# Forks and lets the parent end, again and again: every pid it had is gone a moment later.
_HOPS = """
while time.monotonic() < until:
    if os.fork():
        os._exit(0)
    time.sleep(0.002)
"""


def _rebuilt_environment() -> dict[str, str]:
    """An environment made from nothing, as ``env -i`` makes one: the campaign's tag alone, if it runs."""
    return {TAG: os.environ[TAG]} if TAG in os.environ else {}


class _LeavesAHiddenDaemon(reference.Worker):
    """At every startup leaves a daemon (``body``) that the case's marker does not show (WRK-5)."""

    body = _SLEEPS
    rebuilt = True  # started with an environment made from nothing

    def _startup(self) -> None:
        program = _DAEMON.format(probe=argument(0), life=LIFE_S, body=self.body)
        subprocess.run(
            [sys.executable, "-c", program, argument(0)],
            env=_rebuilt_environment() if self.rebuilt else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=30,
        )
        super()._startup()


class RebuildsTheEnvironment(_LeavesAHiddenDaemon):
    """Its daemon starts with an environment made from nothing: no marker of the case."""


class OverwritesTheMarker(_LeavesAHiddenDaemon):
    """Its daemon starts with the marker and writes over it in place, where /proc reads the environment."""

    body = _OVERWRITES
    rebuilt = False


class ForksOnAndOn(_LeavesAHiddenDaemon):
    """Its daemon, started with an environment made from nothing, forks and ends its parent every 2 ms."""

    body = _HOPS
