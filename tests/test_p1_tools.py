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
# A tool that leaves a writer behind and exits as soon as the writer has written, as a careless build
# tool leaves a daemon.
LEAVER = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    time.sleep(0.005)\n"
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


def _moves(path: Path, within: float = 20.0) -> bool:
    """Whether the writer of *path* still writes: its count moves before *within* seconds have passed (on a
    busy machine a live writer may miss many of its periods, so this waits for the move, not a pause)."""
    before, end = path.read_text(), time.monotonic() + within
    while time.monotonic() < end:
        if path.read_text() != before:
            return True
        time.sleep(0.01)
    return False


def test_the_tool_runs_in_its_directory_and_a_writer_it_leaves_ends_with_it(tmp_path: Path) -> None:
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    state.mkdir()
    status = run_tool([sys.executable, "-c", LEAVER, WRITER, "left.txt"], work, state)
    assert status == 3
    assert _stopped(work / "left.txt")  # it had written before the tool exited, and the group kill stopped it
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


# A writer that also stops as soon as its flag file is gone, so that a test can end one that outlived a kill.
FLAGGED_WRITER = (
    "import os, sys, time\n"
    "path, flag, n = sys.argv[1], sys.argv[2], 0\n"
    "end = time.monotonic() + 20\n"
    "while time.monotonic() < end and os.path.exists(flag):\n"
    "    n += 1\n"
    "    open(path, 'w').write(str(n))\n"
    "    time.sleep(0.005)\n"
)
# A process that runs one long git command as the worker runs git: with or without its command group.
GIT_WORKER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from resumekit.reference.p1 import git\n"
    "from resumekit.reference.p1.tools import CommandGroup\n"
    "state, work, alias, grouped = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4] == 'grouped'\n"
    "if grouped:\n"
    "    git.PROCESS_GROUP.set(CommandGroup(state).pgid)\n"
    "git.run(['-c', 'alias.long=!' + alias, 'long'], cwd=work)\n"
)


def _git_writer_outlives_a_kill(tmp_path: Path, grouped: bool) -> bool:
    """Kill a process in the middle of a git command that runs a writer; whether the writer goes on."""
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    state.mkdir()
    script, flag, ticks = tmp_path / "writer.py", tmp_path / "flag", work / "ticks.txt"
    script.write_text(FLAGGED_WRITER, encoding="utf-8")
    flag.write_text("run\n", encoding="utf-8")
    alias = f"'{sys.executable}' '{script}' '{ticks}' '{flag}'"
    worker = subprocess.Popen(
        [sys.executable, "-c", GIT_WORKER, str(state), str(work), alias, "grouped" if grouped else "plain"]
    )
    try:
        _until(ticks.exists)
        os.kill(worker.pid, signal.SIGKILL)  # the worker's pid only, as the kit kills it
        worker.wait()
        assert wait_for_keepers(state) == []  # the next start waits for the command group's keeper
        # A killed writer never moves again, so the short pause of _stopped shows it; a live one moves
        # however long the machine keeps it waiting, so the control awaits the move.
        return _moves(ticks) if not grouped else not _stopped(ticks)
    finally:
        flag.unlink()  # ends a writer that outlived the kill
        if worker.poll() is None:
            worker.kill()
            worker.wait()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="a command group needs Popen's process_group (3.11)")
def test_a_git_command_in_the_command_group_ends_with_a_killed_worker(tmp_path: Path) -> None:
    assert not _git_writer_outlives_a_kill(tmp_path, grouped=True)
    assert list((tmp_path / "state" / KEEPERS).iterdir()) == []


def test_a_git_command_run_as_a_plain_child_outlives_a_killed_worker(tmp_path: Path) -> None:
    # The control: without the command group the same kill leaves git's writer running, so the test above
    # can fail.
    assert _git_writer_outlives_a_kill(tmp_path, grouped=False)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="a command group needs Popen's process_group (3.11)")
def test_one_keeper_serves_every_command_and_ends_when_the_worker_closes_the_group(tmp_path: Path) -> None:
    from resumekit.reference.p1.tools import CommandGroup

    group = CommandGroup(tmp_path)
    pgid = group.pgid()
    assert pgid is not None and group.pgid() == pgid
    assert len(list((tmp_path / KEEPERS).iterdir())) == 1
    group.close()
    assert list((tmp_path / KEEPERS).iterdir()) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
