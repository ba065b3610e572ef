"""Benchmarks of the command line's start and of single P1 scenarios, each against its physical floor.

Part of ``nox -s bench`` (``tests/bench.py`` calls these). A P1 scenario's floor is what no kit can save:
the two interpreters it starts (the adapter and the worker, the worker importing its code), the git
commands the worker runs in its workspaces, and one synchronous=FULL journal commit plus one synced cache
replace per checkpoint row. The worker's git commands are counted and timed in one extra run with a git on
PATH that notes each call's folder and time around the real one (POSIX only; elsewhere they are left out of
the floor); a push counts as a bare command, since most of its time is the origin's hooks, the kit's own.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from resumekit.reference.durable import sync_fd
from tests.support import node_adapter_command

KIT = [sys.executable, "-m", "resumekit.conformance"]
# The checkpoint rows of a task that completes: claimed, workspace_prepared, verification_passed, the
# kind's own (source_capture_done or commit_done), result_pending, result_submitted (docs/spec/p1.md, PHASE-1).
ROWS_OF_A_COMPLETED_TASK = 6


def _quiet(argv: Sequence[str], env: dict[str, str] | None = None) -> None:
    subprocess.run(list(argv), capture_output=True, check=True, env=env, timeout=300)


def _best(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return min(times)


def cli_start(repeats: int) -> None:
    """`resumekit --version`, `--help` and `list` from start to exit, against a bare interpreter start."""
    runs = max(repeats * 2, 10)
    _quiet([*KIT, "list"])  # the golden cache is built once; the figures are of the cached start
    bare = _best(runs, lambda: _quiet([sys.executable, "-c", "pass"]))
    print(f"command line start (best of {runs}; the floor: a bare interpreter start, {bare * 1e3:.1f} ms):")
    for label, argv, goal in (
        ("resumekit --version", ["--version"], 0.1),
        ("resumekit --help", ["--help"], None),
        ("resumekit list", ["list"], 0.2),
    ):
        took = _best(runs, lambda argv=argv: _quiet([*KIT, *argv]))
        aim = f" (goal <= {goal:.1f} s)" if goal is not None else ""
        print(f"  {label:20} {took * 1e3:6.1f} ms   {took / bare:5.2f}x the floor{aim}")


def _scenario_seconds(case: str, env: dict[str, str] | None = None) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "r.json"
        argv = [*KIT, "run", "--adapter", "reference", "--kind", "p1", "--only", case, "--jobs", "1", "-q"]
        done = subprocess.run(
            [*argv, "--report-json", str(report)], capture_output=True, text=True, env=env, timeout=600
        )
        if done.returncode != 3:  # a subset run that passed
            raise SystemExit(f"{case} did not pass:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        (result,) = json.loads(report.read_text(encoding="utf-8"))["results"]
        return float(result["durationSeconds"])


def _worker_git(case: str) -> tuple[int, float] | None:
    """How many git commands the worker runs in its workspaces in one run of *case*, and the seconds they took
    (a push counted as none: its time is mostly the origin's hooks, which are the kit's); None where not
    counted."""
    real = shutil.which("git")
    if real is None or sys.platform == "win32":
        return None
    with tempfile.TemporaryDirectory() as scratch:
        shim, calls = Path(scratch, "bin"), Path(scratch, "calls")
        shim.mkdir()
        # Each call's folder, its first argument that is no option, and its nanoseconds around the real git.
        (shim / "git").write_text(
            "#!/bin/sh\nbegan=$(date +%s%N)\n"
            f'"{real}" "$@"\nstatus=$?\n'
            'verb=$(for a in "$@"; do case "$a" in -c) ;; -*) ;; *=*) ;; *) echo "$a"; break;; esac; done)\n'
            f'printf "%s %s %s\\n" "$PWD" "$verb" $(( $(date +%s%N) - began )) >> "{calls}"\n'
            "exit $status\n",
            encoding="utf-8",
        )
        (shim / "git").chmod(0o755)
        env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"}
        _scenario_seconds(case, env)
        lines = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    # The worker works in its workspaces (root/workspaces/task-...); the kit in its origins and scratch.
    mine = [line.rsplit(" ", 2) for line in lines if f"{os.sep}workspaces" in line.rsplit(" ", 2)[0]]
    return len(mine), sum(int(ns) for _, verb, ns in mine if verb != "push") / 1e9


def _interpreter_start(code: str, repeats: int) -> float:
    return _best(repeats, lambda: _quiet([sys.executable, "-c", code]))


def _git_floor(repeats: int) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        _quiet(["git", "init", "--quiet", scratch])
        return _best(repeats, lambda: _quiet(["git", "-C", scratch, "rev-parse", "--git-dir"]))


def _row_floor(repeats: int) -> float:
    """One synchronous=FULL commit of a checkpoint-sized row, and one synced replace of a small file."""
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
        db = sqlite3.connect(Path(scratch, "j.sqlite3"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, body TEXT)")
        body = "x" * 400

        def one_row() -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (body) VALUES (?)", (body,))
            db.execute("COMMIT")
            temporary, final = Path(scratch, "cache.tmp"), Path(scratch, "cache.json")
            with open(temporary, "wb") as handle:
                handle.write(body.encode())
                handle.flush()
                sync_fd(handle.fileno())
            os.replace(temporary, final)

        try:
            return statistics.median(_best(1, one_row) for _ in range(max(repeats * 4, 20)))
        finally:
            db.close()


def p1_scenarios(repeats: int, cases: Sequence[str] = ("p1-capture-completes", "p1-commit-completes")) -> None:
    """The median time of single P1 scenarios at --jobs 1, each against the floor of what it must do."""
    adapter = _interpreter_start("import sys; sys.stdout.write('hello')", repeats * 4)
    worker = _interpreter_start("import resumekit.reference.p1.worker", repeats * 4)
    git, row = _git_floor(repeats * 4), _row_floor(repeats)
    print(f"single P1 scenarios (median of {repeats} runs at --jobs 1, the case's own time; floors measured here):")
    print(
        f"  floors: interpreter start {adapter * 1e3:.1f} ms, worker start {worker * 1e3:.1f} ms, "
        f"bare git command {git * 1e3:.1f} ms, one FULL journal commit and synced cache replace {row * 1e3:.1f} ms"
    )
    for case in cases:
        counted_git = _worker_git(case)
        commands, git_s = counted_git if counted_git is not None else (0, 0.0)
        floor = adapter + worker + max(git_s, commands * git) + ROWS_OF_A_COMPLETED_TASK * row
        took = statistics.median(_scenario_seconds(case) for _ in range(repeats))
        counted = f"{commands} git in {git_s * 1e3:.0f} ms" if counted_git is not None else "git not counted"
        print(
            f"  {case:24} {took * 1e3:6.0f} ms   floor {floor * 1e3:5.0f} ms "
            f"(2 starts, {counted}, {ROWS_OF_A_COMPLETED_TASK} rows)   {took / floor:.2f}x the floor (goal <= 2x)"
        )


def _p1_core(adapter: str, cwd: Path) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "r.json"
        argv = [
            *KIT,
            "run",
            "--adapter",
            adapter,
            "--kind",
            "p1",
            "--profile",
            "core",
            "-q",
            "--report-json",
            str(report),
        ]
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=1800)
        wall = time.perf_counter() - began
        if done.returncode != 3:
            raise SystemExit(f"P1 core through {adapter!r} did not pass:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return wall, len(json.loads(report.read_text(encoding="utf-8"))["results"])


def node_beside_reference(root: Path) -> None:
    """P1 in core at the default --jobs: the Node.js example worker beside the bundled reference."""
    node = shutil.which("node")
    if node is None or not (root / "tests" / "node_worker" / "node_modules").is_dir():
        print("P1 core, Node.js example beside the reference: not measured (node or its dependencies missing)")
        return
    command = node_adapter_command(node)
    reference, cases = _p1_core("reference", root)
    example, _ = _p1_core(command, root)
    print(f"P1 core at the default --jobs ({os.cpu_count()} here), {cases} scenarios, wall time:")
    print(f"  reference (Python):       {reference:6.1f} s")
    print(f"  Node.js example worker:   {example:6.1f} s   {example / reference:.2f}x the reference")
