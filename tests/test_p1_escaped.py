"""Processes that escape the adapter's tree (issue 19, p1.md WRK-5): marked in their environment, found after
the case, named and killed; and never a process the kit did not mark.

The scanner (``_process/escaped.py``) is tested with real children; the P1 harness with the reference, which
passes with the check on (its keepers end its tools and git), and with a broken worker whose daemon
double-forks and leaves the session, which fails WRK-5 by name and is gone after the run.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance._process import MARKER, Sweep, escaped, new_token, pid_alive
from resumekit.conformance.adapters import ProcessAdapter, process_factory
from resumekit.conformance.adapters.factory import with_marker
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1 import ending, harness, worker
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.results import Outcome
from tests.support import python_command, run_resumekit

linux = pytest.mark.skipif(sys.platform != "linux", reason="the kit reads other processes' environments on Linux only")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SLEEPER = "import sys; sys.stdin.read()"  # runs until its stdin closes (or it is killed)
TAG = "RESUMEKIT_TEST_ESCAPED_TAG"  # marks the processes of one test's run, to look for them afterwards
GUARD = 300


def _child(token: str | None, name: str = MARKER) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop(MARKER, None)
    if token is not None:
        env[name] = token
    return subprocess.Popen([sys.executable, "-c", SLEEPER], stdin=subprocess.PIPE, env=env)


def _ended(pid: int) -> bool:
    """Whether *pid* runs no more: gone, or a zombie its new parent (init, a subreaper) has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return not pid_alive(pid)
    return stat.rpartition(b")")[2].split()[:1] in ([b"Z"], [b"X"])


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(10)


# -- the scanner ---------------------------------------------------------------------------------------


@linux
def test_a_marked_child_is_found_stopped_named_and_killed(children: list[subprocess.Popen[bytes]]) -> None:
    token = new_token()
    marked = _child(token)
    children.append(marked)
    assert escaped.marked_pids(token) == [marked.pid]
    sweep = escaped.sweep_marked(token, 0.2)
    assert sweep.looked and sweep.ended == ()
    (left,) = sweep.escaped
    assert left.pid == marked.pid and left.ended
    assert left.argv == (sys.executable, "-c", SLEEPER) and left.cwd == os.getcwd()
    assert left.state == "sleeping", left
    assert f"pid {marked.pid}" in left.describe() and "sys.stdin.read()" in left.describe()
    assert marked.wait(10) == -signal.SIGKILL


@linux
def test_a_process_without_the_marker_is_never_touched(children: list[subprocess.Popen[bytes]]) -> None:
    token = new_token()
    unmarked, other_case, same_name_elsewhere = _child(None), _child(new_token()), _child(token, name=TAG)
    marked = _child(token)
    children.extend([unmarked, other_case, same_name_elsewhere, marked])
    sweep = escaped.sweep_marked(token, 0.0)
    assert [left.pid for left in sweep.escaped] == [marked.pid]
    assert marked.wait(10) == -signal.SIGKILL
    for bystander in (unmarked, other_case, same_name_elsewhere):
        assert bystander.poll() is None, "a process the kit did not mark was killed"
        assert escaped.sweep_marked(token, 0.0).escaped == ()


@linux
def test_a_marked_process_that_ends_within_the_grace_is_let_be_and_awaited(
    children: list[subprocess.Popen[bytes]],
) -> None:
    token = new_token()
    ending = _child(token)
    children.append(ending)
    assert ending.stdin is not None
    closer = threading.Timer(0.2, ending.stdin.close)  # it ends by itself, as a keeper ends a tool's group
    closer.start()
    started = time.monotonic()
    sweep = escaped.sweep_marked(token, 30.0)
    closer.join()
    assert sweep.ended == (ending.pid,) and sweep.escaped == ()
    assert time.monotonic() - started < 15.0  # awaited as it ended, not after the whole grace
    assert ending.wait(10) == 0


@linux
def test_a_marked_process_left_by_a_double_fork_is_found() -> None:
    token = new_token()
    program = (
        "import os, sys, time\n"
        "if os.fork():\n    os._exit(0)\n"
        "os.setsid()\n"
        "if os.fork():\n    os._exit(0)\n"
        "os.write(int(sys.argv[1]), b'up')\n"
        "time.sleep(60)\n"
    )
    read_end, write_end = os.pipe()
    try:
        subprocess.run(
            [sys.executable, "-c", program, str(write_end)],
            env={**os.environ, MARKER: token},
            pass_fds=(write_end,),
            check=True,
            timeout=30,
        )
        os.close(write_end)
        write_end = -1
        assert select.select([read_end], [], [], 30)[0] and os.read(read_end, 2) == b"up"
        (pid,) = escaped.marked_pids(token)
        sweep = escaped.sweep_marked(token, 0.0)
        assert [left.pid for left in sweep.escaped] == [pid] and sweep.escaped[0].ended
        assert _ended(pid) and escaped.marked_pids(token) == []
    finally:
        escaped.sweep_marked(token, 0.0)
        os.close(read_end)
        if write_end != -1:
            os.close(write_end)


def test_where_the_kit_cannot_look_it_says_so_and_kills_nothing(
    monkeypatch: pytest.MonkeyPatch, children: list[subprocess.Popen[bytes]]
) -> None:
    token = new_token()
    marked = _child(token)
    children.append(marked)
    for platform in ("darwin", "win32"):
        with monkeypatch.context() as patch:
            patch.setattr(escaped.sys, "platform", platform)
            sweep = escaped.sweep_marked(token, 0.0)
            found = escaped.marked_pids(token)
        assert sweep == Sweep(looked=False, reason=sweep.reason) and found == []
        assert "no portable way to read another process's environment" in sweep.reason, sweep
    assert marked.poll() is None


def test_the_marker_goes_first_in_the_adapter_environment_and_replaces_an_inherited_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MARKER, "an-outer-kit")
    for factory in (process_factory("reference"), process_factory(python_command("-c", "pass"))):
        adapter = with_marker(factory, "abc")()
        assert isinstance(adapter, ProcessAdapter) and adapter.env is not None
        assert next(iter(adapter.env.items())) == (MARKER, "abc")
        assert [name for name in adapter.env if name.upper() == MARKER] == [MARKER]
        assert adapter.process is None  # made, not started


# -- the P1 harness -------------------------------------------------------------------------------------


def _scenario(case_id: str) -> ScenarioCase:
    (case,) = [c for c in load_suite().cases if c.id == case_id]
    assert isinstance(case, ScenarioCase)
    return case


@needs_git
@linux
@pytest.mark.parametrize(
    "case_id",
    [
        "p1-capture-completes",
        "p1-strict-tool-tree-dies-with-the-worker",
        "p1-strict-tool-tree-dies-with-the-worker-before-a-commit",
        "p1-tool-runs-to-its-end-and-changes-no-result",
    ],
)
def test_the_reference_passes_with_the_check_on(case_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps: list[Sweep] = []
    marked_at_close: list[tuple[int, list[int]]] = []
    sweep, close = ending.sweep_marked, worker.Worker.close

    def spied_sweep(token: str, grace: float, **kwargs: Any) -> Sweep:
        sweeps.append(sweep(token, grace, **kwargs))
        return sweeps[-1]

    def spied_close(self: worker.Worker) -> None:
        if self.adapter is not None and self.adapter.process is not None:
            marked_at_close.append((self.adapter.process.pid, escaped.marked_pids(self.world.case_token)))
        close(self)

    monkeypatch.setattr(ending, "sweep_marked", spied_sweep)
    monkeypatch.setattr(worker.Worker, "close", spied_close)
    result = harness.run_scenario(_scenario(case_id), process_factory("reference"), "strict")
    assert result.outcome is Outcome.PASSED, (result.message, result.mismatches)
    (seen,) = sweeps
    assert seen.looked and seen.escaped == (), seen
    # The check was on: the adapter the kit closed last carried the case's marker.
    pid, marked = marked_at_close[-1]
    assert pid in marked, (pid, marked)


def _daemon_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, dict[str, Any], str]:
    tag = new_token()
    monkeypatch.setenv(TAG, tag)  # inherited by the kit, its adapters and the daemons they start
    adapter = python_command("-m", "tests.broken.workers", "leaves-a-daemon")
    try:
        ran = run_resumekit(
            tmp_path / "report.json",
            "--kind",
            "p1",
            "--adapter",
            adapter,
            "--only",
            "p1-capture-completes",
            *args,
            guard=GUARD,
        )
        # The kit ended the daemon before the verdict: none is left, though it would write for 30 s more.
        assert escaped.marked_pids(tag, name=TAG) == [], "a daemon of the broken worker outlived the run"
    finally:
        escaped.sweep_marked(tag, 0.0, name=TAG)
    return ran


@needs_git
@linux
def test_a_daemon_that_leaves_the_session_fails_wrk_5_by_name_and_is_gone_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, document, output = _daemon_run(tmp_path, monkeypatch)
    assert code == 1, output
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    (outlived,) = [m for m in result["mismatches"] if m.get("clause") == "WRK-5"]
    assert outlived["pointer"] == "/processes/outlived/0", outlived
    actual = outlived["actual"]
    assert "a daemon that outlives it" in actual["command"] and actual["command"].endswith("/workspaces"), actual
    assert _ended(actual["pid"])
    message = result["message"]
    assert f"WRK-5: pid {actual['pid']}, command " in message and "outlived it" in message, message
    assert "RESUMEKIT_CASE_TOKEN" in message, message


@needs_git
@linux
def test_in_the_core_profile_the_daemon_is_killed_and_said_but_does_not_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, document, output = _daemon_run(tmp_path, monkeypatch, "--profile", "core")
    assert code == 3, output  # WRK-5 is strict: a passed subset run
    (result,) = document["results"]
    assert result["outcome"] == "passed", result
    assert "the kit killed 1 process(es) the worker left running, which WRK-5 (strict)" in result["message"]


@linux
def test_only_a_young_process_is_read_again_for_its_environment(children: list[subprocess.Popen[bytes]]) -> None:
    # A process inside its execve reads with an empty environment for a moment: the sweep reads a young one
    # again rather than take it for unmarked. The init process, started long before, is not waited for.
    young = _child(new_token())
    children.append(young)
    assert escaped._may_be_in_exec(young.pid)
    assert not escaped._may_be_in_exec(1)
    young.kill()
    young.wait()
    assert not escaped._may_be_in_exec(young.pid)  # gone: nothing to wait for


# -- processes the marker does not show: found below the case's subreaper --------------------------------


@needs_git
@linux
@pytest.mark.parametrize("attack", ["environment-rebuilt", "marker-overwritten", "fork-loop"])
def test_a_daemon_hidden_from_the_marker_fails_wrk_5_by_name_and_is_gone_after_the_run(
    attack: str, tmp_path: Path
) -> None:
    # The hostile workers of the campaign (tests/fuzz/p1_workers/procs.py): each leaves a daemon that names the
    # probe file on its command line, started with an environment made from nothing, or writing over its marker
    # in place, or forking on and on; none carries the case's marker where /proc reads it.
    probe = tmp_path / "probe"
    adapter = python_command("-m", "tests.fuzz.p1_workers", attack, str(probe))
    try:
        code, document, output = run_resumekit(
            tmp_path / "report.json",
            "--kind",
            "p1",
            "--adapter",
            adapter,
            "--only",
            "p1-capture-completes",
            guard=GUARD,
        )
        said = probe.read_text(encoding="utf-8")
        group = int(said.split()[2])  # the daemon's process group: the same however often it forks
        left = _running_with(str(probe)), _group_alive(group)
    finally:
        _kill_group(probe)  # never left by the test, whatever the kit did
    assert said.startswith("daemon ") and ("erased " in said or attack != "marker-overwritten"), said
    assert left == ([], False), f"a daemon of {attack} outlived the run: {left}"
    assert code == 1, output
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    outlived = [m for m in result["mismatches"] if m.get("clause") == "WRK-5"]
    # A daemon that forks every 2 ms may be caught mid-hop, parent and child both alive: each is named.
    assert len(outlived) == 1 or (attack == "fork-loop" and len(outlived) == 2), outlived
    for found in outlived:
        actual = found["actual"]
        assert "# resumekit fuzz: a process hidden from the case" in actual["command"], actual
        assert _ended(actual["pid"])
    note = "descended from an adapter process of the case (the case's subreaper adopted it), without the case's"
    assert note in result["message"], result["message"]


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_group(probe: Path) -> None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        os.killpg(int(probe.read_text(encoding="utf-8").split()[2]), signal.SIGKILL)


def _running_with(text: str) -> list[int]:
    """The processes whose command line holds *text*."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
    return found
