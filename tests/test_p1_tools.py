"""The reference's tool keeper (reference/p1/tools.py, p1.md WRK-5) with real processes and real kills.

A *writer* here rewrites a counter file every few milliseconds for up to 20 s; a writer that has stopped
leaves the file unchanged over a pause of many of its periods. Only the POSIX keeper runs here; the
Windows Job Object path is type-checked, not run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from resumekit.reference.p1.tools import KEEPERS, run_tool, wait_for_keepers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the keeper is POSIX; Windows uses a Job Object")

WRITER = (
    "import sys, time\n"
    "path, n = sys.argv[1], 0\n"
    "end = time.monotonic() + 20\n"
    "while time.monotonic() < end:\n"
    "    n += 1\n"
    "    open(path, 'w').write(str(n))\n"
    "    time.sleep(0.005)\n"
)
# A tool that leaves a writer behind and exits at once, as a careless build tool leaves a daemon.
LEAVER = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])\n"
    "sys.exit(3)\n"
)


def _until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.005)


def _stopped(*paths: Path, pause: float = 0.3) -> bool:
    """Whether the writers of *paths* have stopped: no count moves over many of their periods."""
    before = [path.read_text() for path in paths]
    time.sleep(pause)
    return [path.read_text() for path in paths] == before


def test_the_tool_runs_in_its_directory_and_a_writer_it_leaves_ends_with_it(tmp_path: Path) -> None:
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    state.mkdir()
    status = run_tool([sys.executable, "-c", LEAVER, WRITER, "left.txt"], work, state)
    assert status == 3
    left = work / "left.txt"
    # The writer may not have written before its group was killed; if it did, it has stopped.
    assert not left.exists() or _stopped(left)
    assert list((state / KEEPERS).iterdir()) == []  # the lock went with the keeper


def test_a_killed_worker_takes_its_tool_tree_with_it_before_the_next_start_goes_on(tmp_path: Path) -> None:
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    state.mkdir()
    tool = [sys.executable, "-c", LEAVER, WRITER, "left.txt"]
    tool_and_writer = [sys.executable, "-c", f"import subprocess, sys; subprocess.run({tool!r}); exec({WRITER!r})",
                       "own.txt"]
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from resumekit.reference.p1.tools import "
         "run_tool; run_tool(sys.argv[3:], Path(sys.argv[1]), Path(sys.argv[2]))", str(work), str(state),
         *tool_and_writer],
    )
    try:
        _until(lambda: (work / "own.txt").exists() and (work / "left.txt").exists())
        os.kill(worker.pid, signal.SIGKILL)  # the worker's pid only, as the kit kills it
        worker.wait()
        assert wait_for_keepers(state) == []  # the next start: every keeper has ended its group
        assert _stopped(work / "own.txt", work / "left.txt")
        assert list((state / KEEPERS).iterdir()) == []
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_keeper_that_never_started_leaves_a_lock_file_the_next_start_removes(tmp_path: Path) -> None:
    (tmp_path / KEEPERS).mkdir()
    (tmp_path / KEEPERS / "keeper-0123456789abcdef.lock").write_bytes(b"")
    assert wait_for_keepers(tmp_path) == []
    assert list((tmp_path / KEEPERS).iterdir()) == []
    assert wait_for_keepers(tmp_path / "elsewhere") == []  # no tool ever ran: nothing to wait for
