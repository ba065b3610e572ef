"""The subreaper of each adapter process of a P1 case (``_process/reapers.py``, ``subreaper.py``; Linux): the
adapter is below it and spoken to as before, the kit's kills and exit statuses are the adapter's, and what the
adapter leaves behind is found there whatever its environment says, named and killed, with the kit alive or
dead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance._process import (
    MARKER,
    LineProcess,
    NotInTree,
    ProcessGone,
    escaped,
    kill_all,
    new_token,
    procfs,
    reapers,
)
from resumekit.conformance._process.pids import ready_pidfds, wait_pid_gone
from tests.fuzz.p1_workers import procs

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="subreapers are Linux's (prctl)")

# Says its pid, parent, session and group, and every descriptor it holds but its listing's own, then echoes
# its stdin line by line.
ECHO = (
    "import os, sys\n"
    "held = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
    "print(os.getpid(), os.getppid(), os.getsid(0), os.getpgid(0), *held[:-1], flush=True)\n"
    "for line in sys.stdin:\n"
    "    print(line.strip(), flush=True)\n"
)


@pytest.fixture
def token() -> Iterator[str]:
    case = new_token()
    yield case
    escaped.sweep_marked(case, 0.0)  # whatever a test left of the case goes, and its reapers end


def _started(process: LineProcess) -> list[int]:
    return [int(word) for word in process.receive(30).split()]


def _leaves(body: str, probe: str, *, rebuilt: bool) -> str:
    """An adapter that leaves a daemon of ``tests.fuzz.p1_workers.procs`` (its environment rebuilt, or its
    own), says ``left`` once the daemon has said so in *probe* (and that it erased its marker, if it does),
    and waits for its stdin to close."""
    program = procs._DAEMON.format(probe=probe, life=60, body=body)
    env = "{}" if rebuilt else "None"
    said = "erased" if body is procs._OVERWRITES else "daemon"
    return (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {program!r}, {probe!r}], env={env}, check=True)\n"
        f"while {said!r} not in open({probe!r}).read():\n"
        "    time.sleep(0.01)\n"
        "print('left', flush=True)\n"
        "sys.stdin.read()\n"
    )


def _daemon(probe: str) -> int:
    return int(Path(probe).read_text().split()[1])


def _gone(probe: str) -> bool:
    """Whether no process of the daemon is left: none in its process group (the same however often it forks),
    none naming the probe on its command line."""
    try:
        os.killpg(int(Path(probe).read_text().split()[2]), 0)
    except ProcessLookupError:
        return _running_with(probe) == []
    return False


def _running_with(text: str) -> list[int]:
    """The processes whose command line holds *text*."""
    return [pid for pid in procfs.pids() if text.encode() in (procfs.read(f"/proc/{pid}/cmdline", 1 << 16) or b"")]


def test_the_adapter_is_the_reapers_child_in_a_session_of_its_own_and_spoken_to_as_before(token: str) -> None:
    process = LineProcess([sys.executable, "-c", ECHO], case_token=token)
    assert process._reaper is not None
    reaper = process._reaper.reaper
    pid, parent, session, group, *held = _started(process)
    assert (pid, parent, session, group) == (process.pid, reaper, pid, pid)
    assert held == [0, 1, 2], "the adapter holds a descriptor of the kit's or its reaper's"
    assert reaper != os.getpid() and os.getsid(reaper) == reaper  # the kit is not the reaper, nor in its session
    assert procfs.parent(procfs.parent(reaper) or 0) == os.getpid()  # its server is the kit's child
    process.send(b"hello\n", 10)
    assert process.receive(10) == b"hello\n"
    assert process.owns(pid) and not process.owns(reaper)
    with pytest.raises(NotInTree):
        process.kill_member(reaper)
    assert process.poll() is None
    process.kill_member(pid)  # crash injection: the adapter itself, not its reaper
    assert process.wait(30) == -signal.SIGKILL
    assert procfs.parent(reaper) is not None, "the reaper went with the adapter"
    process.kill()
    assert wait_pid_gone(pid, 30)  # reaped by its reaper
    assert process._reaper._await_reaper(30)  # nothing was left below it: it ended by itself


def test_exit_statuses_and_start_failures_are_the_adapters(token: str) -> None:
    process = LineProcess(
        [sys.executable, "-c", "import sys; sys.stderr.write('bye\\n'); sys.exit(4)"], case_token=token
    )
    with pytest.raises(ProcessGone, match="exited with 4"):
        process.receive(30)
    assert process.stop(5) == 4
    assert "bye" in process.stderr_tail()
    with pytest.raises(ProcessGone, match=r"cannot start \['no-such-command-here'\]: \[Errno 2\] No such file"):
        LineProcess(["no-such-command-here"], case_token=token)
    with pytest.raises(ProcessGone, match="embedded null byte"):
        LineProcess([sys.executable, "-c", "pass"], env={"A": "a\0b"}, case_token=token)


@pytest.mark.parametrize(
    ("body", "rebuilt"),
    [(procs._SLEEPS, True), (procs._OVERWRITES, False), (procs._HOPS, True)],
    ids=["environment-rebuilt", "marker-overwritten", "fork-loop"],
)
def test_a_daemon_the_marker_does_not_show_is_found_below_the_reaper_named_and_killed(
    token: str, body: str, rebuilt: bool, tmp_path: Path
) -> None:
    probe = str(tmp_path / "probe")
    Path(probe).touch()
    env = {MARKER: token, **os.environ}
    process = LineProcess([sys.executable, "-c", _leaves(body, probe, rebuilt=rebuilt)], env=env, case_token=token)
    assert process.receive(60) == b"left\n"
    daemon = _daemon(probe)
    if body is procs._OVERWRITES:
        assert f"erased {daemon}" in Path(probe).read_text()
    assert escaped.marked_pids(token) == [process.pid], "the daemon still shows the marker"
    process.kill()
    assert wait_pid_gone(process.pid, 30)  # else a loaded machine lets the sweep find the killed adapter, marked
    sweep = escaped.sweep_marked(token, 0.0)
    assert sweep.looked and sweep.ended == ()
    (left,) = sweep.escaped
    assert left.ended and left.below and not left.marked, left
    assert left.argv[-1] == probe and (left.pid == daemon or body is procs._HOPS), (left, daemon)
    assert "without the case's RESUMEKIT_CASE_TOKEN in its environment" in left.signs(), left.signs()
    assert _gone(probe)
    assert process._reaper is not None and not process._reaper.alive()


def test_a_marked_process_below_the_reaper_says_both(token: str, tmp_path: Path) -> None:
    probe = str(tmp_path / "probe")
    Path(probe).touch()
    env = {MARKER: token, **os.environ}
    process = LineProcess(
        [sys.executable, "-c", _leaves(procs._SLEEPS, probe, rebuilt=False)], env=env, case_token=token
    )
    assert process.receive(60) == b"left\n"
    process.kill()
    (left,) = escaped.sweep_marked(token, 0.0).escaped
    assert left.marked and left.below and left.pid == _daemon(probe)
    assert left.signs().endswith("(the case's subreaper adopted it) and carried the case's RESUMEKIT_CASE_TOKEN")


_KIT = """
import os, sys
from resumekit.conformance._process import LineProcess
process = LineProcess([sys.executable, "-c", sys.argv[1]], case_token="a-kit-that-dies")
assert process.receive(60) == b"left\\n"
print(process._reaper.reaper, flush=True)
sys.stdin.read()
"""


def test_when_the_kit_dies_its_reaper_kills_what_is_below_it(tmp_path: Path) -> None:
    probe = str(tmp_path / "probe")
    Path(probe).touch()
    kit = subprocess.Popen(
        [sys.executable, "-c", _KIT, _leaves(procs._SLEEPS, probe, rebuilt=True)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert kit.stdout is not None
        reaper = int(kit.stdout.readline())
        daemon = _daemon(probe)
        held = [os.pidfd_open(pid) for pid in (reaper, daemon)]  # readable once each has ended
        assert os.getpgid(daemon) != os.getpgid(kit.pid)
        kit.kill()  # no exit path of the kit runs: only the end of the reaper's control pipe tells it
        assert kit.wait(30) == -signal.SIGKILL
        assert ready_pidfds(held[1:], 30) == held[1:], "the daemon outlived the kit"
        assert ready_pidfds(held[:1], 30) == held[:1], "the reaper outlived the kit"
        assert _gone(probe)
        for fd in held:
            os.close(fd)
    finally:
        if kit.poll() is None:
            kit.kill()
            kit.wait()


def test_the_request_refuses_what_subprocess_refuses(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        reapers.request([], {}, None)
    with pytest.raises(ValueError, match="illegal environment variable name"):
        reapers.request(["x"], {"A=B": "c"}, None)
    blob = reapers.request(["x", "y"], {"A": "1", "B": ""}, tmp_path)
    assert blob[8:] == os.fsencode(tmp_path) + b"\0002\0x\0y\0A=1\0B="
    assert int.from_bytes(blob[:8], "big") == len(blob) - 8
    assert reapers.request(["x"], {}, None)[8:] == b"\0" + b"1\0x"


def test_the_working_directory_is_the_adapters(token: str, tmp_path: Path) -> None:
    process = LineProcess(
        [sys.executable, "-c", "import os; print(os.getcwd(), flush=True)"], cwd=tmp_path, case_token=token
    )
    assert process.receive(30).decode().strip() == str(tmp_path)
    process.kill()
    with pytest.raises(ProcessGone, match=f"No such file or directory: {str(tmp_path / 'gone')!r}"):
        LineProcess([sys.executable, "-c", "pass"], cwd=tmp_path / "gone", case_token=token)


def test_an_adapter_that_kills_its_reaper_is_still_killed_and_awaited(token: str) -> None:
    # It may (it runs as the same user): its exit status is then lost, and said so, but nothing hangs.
    kills = "import os, sys; os.kill(os.getppid(), 9); print('done', flush=True); sys.stdin.read()"
    process = LineProcess([sys.executable, "-c", kills], case_token=token)
    assert process.receive(30) == b"done\n"
    assert process._reaper is not None and process._reaper._await_reaper(30)
    pid = process.pid
    assert process.poll() is None and process.owns(pid)
    process.kill()  # the group kill still reaches it
    assert process.poll() == reapers.LOST_STATUS
    assert wait_pid_gone(pid, 30)


def test_a_server_that_died_is_started_again(token: str) -> None:
    first = LineProcess([sys.executable, "-c", ECHO], case_token=token)
    first.kill()
    (server,) = reapers._SERVER
    server.popen.kill()
    server.popen.wait(30)
    again = LineProcess([sys.executable, "-c", ECHO], case_token=token)
    assert _started(again)[0] == again.pid
    assert reapers._SERVER[0] is not server
    again.kill()


def test_an_interrupted_run_or_an_abandoned_case_has_its_reapers_kill_what_is_below_them(
    token: str, tmp_path: Path
) -> None:
    probe = str(tmp_path / "probe")
    Path(probe).touch()
    leaves = _leaves(procs._SLEEPS, probe, rebuilt=True)
    process = LineProcess([sys.executable, "-c", leaves], case_token=token)
    assert process.receive(60) == b"left\n"
    assert process._reaper is not None
    held = [os.pidfd_open(pid) for pid in (_daemon(probe), process._reaper.reaper)]
    try:
        assert kill_all(owner=threading.get_ident()) == 1  # as the runner does for a case it abandoned
        assert ready_pidfds(held[:1], 30) == held[:1], "the daemon outlived its abandoned case"
        assert ready_pidfds(held[1:], 30) == held[1:], "the reaper outlived its abandoned case"
        assert _gone(probe)
    finally:
        for fd in held:
            os.close(fd)


def test_the_kit_sees_what_a_process_runs_and_where(tmp_path: Path) -> None:
    # What the control plane holds the tool's announcement to (its pid and grandchild): read from /proc.
    child = subprocess.Popen([sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
                             cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        # Popen may return while the exec is still under way (its command line not yet set): wait for a word.
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        assert procfs.running(child.pid, b"-c") == {"runs": True, "cwd": str(tmp_path.resolve())}
        assert procfs.running(child.pid, b"resumekit.conformance.p1._tool") == {"runs": False,
                                                                               "cwd": str(tmp_path.resolve())}
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert procfs.running(child.pid, b"-c") is None  # gone (and reaped)
    assert [procfs.running(pid, b"-c") for pid in (None, True, 0, -1, "1")] == [None] * 5
