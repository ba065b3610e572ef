"""Choices the kit makes for one system, run on any: the Windows ones with ``windows=True`` (which program,
how the Action's args split, how the adapter enters its Job Object, how long the ledger lock is waited for),
git's read-only files and the hooks' sh, and the open-file limit against --jobs (macOS)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from resumekit.conformance import _descriptors, github_action
from resumekit.conformance._process import line_process, windows
from resumekit.conformance.adapters.factory import find_program
from resumekit.conformance.doctor import diagnose
from resumekit.conformance.p1 import origin
from resumekit.reference.phase0 import store
from tests.support import ROOT

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# -- the choices made for Windows, run on any system -------------------------------------------------------


def test_an_adapter_named_without_an_extension_is_found_along_pathext_on_windows() -> None:
    shims = {"npx": "C:\\Program Files\\nodejs\\npx.CMD", "tsx": "C:\\work\\node_modules\\.bin\\tsx.cmd"}
    assert find_program(["npx", "tsx", "adapter.ts"], windows=True, which=shims.get) == [
        "C:\\Program Files\\nodejs\\npx.CMD", "tsx", "adapter.ts"]
    # A name with its extension, a name not found (the start says so), any other system: as given.
    assert find_program(["node.exe", "a.js"], windows=True, which=shims.get) == ["node.exe", "a.js"]
    assert find_program(["nowhere", "x"], windows=True, which=shims.get) == ["nowhere", "x"]
    assert find_program(["npx", "tsx"], windows=False, which=shims.get) == ["npx", "tsx"]
    assert find_program([], windows=True, which=shims.get) == []


def test_the_actions_args_keep_a_windows_path_on_windows() -> None:
    text = "--golden C:\\fixtures\\p1 --only 'p1-*' --only \"a b\" #not-a-comment"
    assert github_action.split_args(text, windows=True) == [
        "--golden", "C:\\fixtures\\p1", "--only", "p1-*", "--only", "a b", "#not-a-comment"]
    # Elsewhere a POSIX shell's split, as before: a backslash escapes.
    assert github_action.split_args(text, windows=False) == [
        "--golden", "C:fixturesp1", "--only", "p1-*", "--only", "a b", "#not-a-comment"]
    for on_windows in (True, False):
        with pytest.raises(ValueError, match="No closing quotation"):
            github_action.split_args("--only 'p1", windows=on_windows)


class _Job:
    """A job that says what was asked of it, in order (the choice under test is the order)."""

    def __init__(self, refuses: bool = False) -> None:
        self.asked: list[tuple[str, int]] = []
        self.refuses = refuses

    def add(self, process_handle: int) -> None:
        self.asked.append(("add", process_handle))
        if self.refuses:
            raise OSError(5, "Access is denied")

    def resume(self, process_handle: int) -> None:
        self.asked.append(("resume", process_handle))


def test_the_adapter_starts_suspended_on_windows_and_runs_only_once_in_the_job() -> None:
    assert windows.start_options(True) == {"creationflags": windows.CREATE_SUSPENDED}
    assert windows.start_options(False) == {"start_new_session": True}
    job = _Job()
    windows.admit(job, 7)
    assert job.asked == [("add", 7), ("resume", 7)]
    refusing = _Job(refuses=True)
    with pytest.raises(OSError, match="Access is denied"):
        windows.admit(refusing, 7)
    assert refusing.asked == [("add", 7)]  # never resumed: it ran nothing, and the kit kills it


def test_an_adapter_the_job_refuses_is_killed_and_its_start_fails() -> None:
    # The kit's side on any system: a real process, a job that refuses it.
    popen = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with pytest.raises(OSError, match="the kit's Job Object refused the adapter"):
            line_process._admit_or_kill(_Job(refuses=True), popen)
        assert popen.poll() is not None and popen.stdin is not None and popen.stdin.closed
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait()


@needs_git
def test_the_origins_the_kit_builds_leave_nothing_once_its_process_ends(tmp_path: Path) -> None:
    # Git writes its objects read-only; Windows deletes no read-only file, so rmtree(ignore_errors=True) left
    # every run's origins in %TEMP%. What runs here is the removal every system uses.
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        from resumekit.conformance.p1.origin import create_origin
        origin = create_origin(Path(sys.argv[1]) / "origin", {"README.md": "hello\\n"})
        print(sorted(p.name for p in Path(sys.argv[1]).iterdir()))
    """)
    temp = tmp_path / "temp"
    temp.mkdir()
    ran = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(temp), "TEMP": str(temp), "TMP": str(temp)}, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["['origin',", "'temp']"]
    assert list(temp.iterdir()) == []  # the seed went at once, the templates when the process ended


def test_a_store_waits_a_moment_for_a_lock_windows_releases_late(tmp_path: Path) -> None:
    assert store.lock_patience("win32") > 0 and store.lock_patience("linux") == store.lock_patience("darwin") == 0
    lock = tmp_path / "run.lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)
    holder, fd = os.open(lock, flags), os.open(lock, flags)
    tries: list[bool] = []

    def try_lock(descriptor: int) -> bool:
        """The store's real try; the holder lets go after the third refusal, as a killed process's lock goes."""
        tries.append(store._try_lock(descriptor))
        if len(tries) == 3:
            store._unlock_and_close(holder)
        return tries[-1]

    try:
        assert store._try_lock(holder)
        assert not store._lock(fd, 0.0)  # POSIX: one try, then busy
        assert store._lock(fd, 60.0, try_lock)
        assert tries == [False, False, False, True]
    finally:
        store._unlock_and_close(fd)
        if len(tries) < 3:
            store._unlock_and_close(holder)


@needs_git
def test_doctor_says_whether_git_can_run_the_origins_hooks(tmp_path: Path) -> None:
    assert origin.hooks_problem() is None
    # An sh that is not there, as on a machine with MinGit: the push cannot run its hook, and doctor says why.
    problem = origin.hooks_problem(shell=str(tmp_path / "no-sh"))
    assert problem is not None and "cannot run the origins' hooks" in problem and "MinGit" in problem, problem
    assert "pre-receive" in problem, problem  # git's own words
    lines: list[str] = []
    assert diagnose("reference", timeout=10.0, write=lines.append) == 0
    assert "[ok] git runs the P1 origins' hooks (an sh is there)\n" in lines


# -- open files against --jobs (macOS: a soft limit of 256) ------------------------------------------------

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX only: Windows has no open-file limit to set")


def _limited(soft: int, hard: int) -> Callable[[], None]:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return limit


def test_jobs_fit_under_an_open_file_limit() -> None:
    assert _descriptors.jobs_within(24, 256) == 6  # macOS's default soft limit, 24 cores
    assert _descriptors.jobs_within(2, 256) == 2
    assert _descriptors.jobs_within(24, 10) == 1
    assert _descriptors.needed(24) == 24 * _descriptors.PER_JOB + _descriptors.RESERVE


@posix
def test_a_run_raises_its_open_file_limit_for_its_jobs() -> None:
    code = "from resumekit.conformance._descriptors import raised_limit; print(raised_limit(24))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         preexec_fn=_limited(256, 4096))
    assert ran.stdout.strip() == str(_descriptors.needed(24)), ran.stderr


@posix
def test_a_run_whose_limit_cannot_be_raised_runs_fewer_cases_at_once_and_says_so(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "run", "--only", "prefix-before-function-call",
         "--jobs", "24", "--report-json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=120, preexec_fn=_limited(256, 256), cwd=ROOT,
    )
    assert "--jobs 24 lowered to 6: this process may open 256 files" in ran.stderr, ran.stderr
    document = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [r["outcome"] for r in document["results"]] == ["passed"]
