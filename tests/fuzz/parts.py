"""The parts of the campaign (fixtures, adapters, store, scale; p1 lives in ``p1.py``) and what they share."""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.fuzz import behaviours, guards, mutations, store
from tests.fuzz.campaign import Tally, classify_fixture, classify_run
from tests.support import ROOT, python_command

PARTS = ("fixtures", "adapters", "store", "scale", "p1")
MEMORY_TARGET_MB = 500


class Context:
    """What every part shares: the work folder, the decoys and the tag of the campaign's processes."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.tag = uuid.uuid4().hex
        self.decoy_tree = guards.make_decoy_tree(work / "decoy")
        self.decoy_digest = guards.tree_digest(self.decoy_tree)
        self.golden_digest = guards.tree_digest(mutations.GOLDEN)
        self.decoy = guards.Decoy()
        self.findings_dir = work / "findings"
        self.findings_dir.mkdir(exist_ok=True)
        self.system_tmp = Path(tempfile.gettempdir())
        self.system_tmp_before = self._system_tmp_listing()

    def env(self, scratch: Path) -> dict[str, str]:
        scratch.mkdir(parents=True, exist_ok=True)
        # The try's TMPDIR has the system's /tmp mode (everyone's, sticky), so that a kit that changes the mode
        # of the folder its scratch folders are made in is seen doing it (``tmpdir_changed``).
        os.chmod(scratch, guards.TMPDIR_MODE)
        return {
            **os.environ,
            guards.TAG: self.tag,
            "TMPDIR": str(scratch),
            "TEMP": str(scratch),
            "TMP": str(scratch),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }

    def outside_writes(self) -> int:
        """1 if the decoy tree or the bundled golden tree changed since the last check (and re-arm)."""
        changed = 0
        for attribute, root in (("decoy_digest", self.decoy_tree), ("golden_digest", mutations.GOLDEN)):
            now = guards.tree_digest(root)
            if now != getattr(self, attribute):
                changed = 1
                setattr(self, attribute, now)
        return changed

    def _system_tmp_listing(self) -> set[str]:
        return {p.name for p in self.system_tmp.glob("resumekit-*")}

    def system_scratch_left(self) -> list[str]:
        return sorted(self._system_tmp_listing() - self.system_tmp_before)


# -- fixtures ---------------------------------------------------------------------------------------


class Pool:
    """Long-lived fixture workers (``tests.fuzz.worker``), each killed and replaced on a hang."""

    def __init__(self, context: Context, size: int, timeout: float) -> None:
        self.context, self.timeout = context, timeout
        self.workers: list[dict[str, Any]] = [self._start(n) for n in range(size)]

    def _start(self, n: int) -> dict[str, Any]:
        scratch = self.context.work / "scratch" / f"worker-{n}"
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=self.context.env(scratch),
            start_new_session=True,
        )
        return {"n": n, "process": process, "job": None, "scratch": scratch}

    def _kill(self, worker: dict[str, Any]) -> None:
        process = worker["process"]
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()
        process.wait()

    def submit(self, job: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Hand *job* to an idle worker, waiting for one; return the jobs that finished meanwhile."""
        finished: list[tuple[dict[str, Any], dict[str, Any]]] = []
        while True:
            idle = [w for w in self.workers if w["job"] is None]
            if idle:
                worker = idle[0]
                worker["job"], worker["started"] = job, time.monotonic()
                request = {"tree": job["tree"], "report": job["report"], "files": job.get("files", [])}
                assert worker["process"].stdin is not None
                worker["process"].stdin.write(json.dumps(request).encode() + b"\n")
                worker["process"].stdin.flush()
                return finished
            finished += self.poll(0.2)

    def poll(self, wait: float) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        finished = []
        busy = {w["process"].stdout.fileno(): w for w in self.workers if w["job"] is not None}
        if not busy:
            return []
        ready, _, _ = select.select(list(busy), [], [], wait)
        for fd in ready:
            worker = busy[fd]
            line = worker["process"].stdout.readline()
            if line:
                finished.append((worker["job"], json.loads(line)))
            else:
                code = worker["process"].wait()
                finished.append((worker["job"], {"died": f"exit status {code}"}))
                self.workers[worker["n"]] = self._start(worker["n"])
                continue
            worker["job"] = None
        now = time.monotonic()
        for worker in list(self.workers):
            if worker["job"] is not None and now - worker["started"] > self.timeout:
                self._kill(worker)
                finished.append((worker["job"], {"hang": self.timeout}))
                self.workers[worker["n"]] = self._start(worker["n"])
        return finished

    def drain(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        finished = []
        while any(w["job"] is not None for w in self.workers):
            finished += self.poll(0.2)
        return finished

    def close(self) -> int:
        """End every worker; return the peak memory (KiB) of any of them."""
        for worker in self.workers:
            assert worker["process"].stdin is not None
            worker["process"].stdin.close()
        for worker in self.workers:
            try:
                worker["process"].wait(30)
            except subprocess.TimeoutExpired:
                self._kill(worker)
        import resource  # POSIX only, imported here so that the tests collect on Windows

        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss

    def scratch_left(self) -> int:
        return sum(len(guards.scratch_left(w["scratch"])) for w in self.workers if w["job"] is None)


def _hypothesis_draw(data: Any) -> mutations.Draw:
    from hypothesis import strategies as st

    class HypothesisDraw:
        def integer(self, low: int, high: int) -> int:
            return int(data.draw(st.integers(low, high)))

        def choice(self, options: Any) -> Any:
            return options[data.draw(st.integers(0, len(options) - 1))]

    return HypothesisDraw()


def fixtures(context: Context, tally: Tally, arguments: argparse.Namespace) -> None:
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    pool = Pool(context, arguments.workers, arguments.job_timeout)
    deadline = time.monotonic() + arguments.budget
    trees = context.work / "trees"
    count = [0]

    def record(done: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        for job, result in done:
            mutation: mutations.Mutation = job["mutation"]
            names = sorted({Path(n).name for n in mutation.files} | {Path(n).name for n, _ in mutation.specials})
            category, reason = classify_fixture(result, names)
            what = f"{mutation.operator} {mutation.target}: {mutation.detail}"
            tree = Path(job["tree"])
            if guards.tree_digest(tree) != job["digest"]:
                tally.outside_writes += 1
                tally.findings.append({"category": "outside write", "what": what, "reason": "the golden tree changed"})
            if category in ("accepted wrongly", "unclear error", "traceback", "hang"):
                kept = context.findings_dir / f"fixture-{job['n']}"
                mutation.write_files(kept)
                tally.add(category, what, reason, kept=str(kept), snippet=mutation.snippet(400))
            else:
                tally.add(category, what)
            tally.peak_kb = max(tally.peak_kb, int(result.get("peakKb", 0)))
            shutil.rmtree(tree, ignore_errors=True)
            shutil.rmtree(Path(job["report"]).parent, ignore_errors=True)
        tally.scratch_left += pool.scratch_left()

    @settings(
        max_examples=arguments.mutations,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(arguments.seed)
    @given(st.data())
    def campaign(data: Any) -> None:
        if time.monotonic() > deadline:
            return
        mutation = mutations.mutate(_hypothesis_draw(data))
        n = count[0]
        count[0] += 1
        tree = trees / str(n)
        mutation.write(tree)
        job: dict[str, Any] = {
            "n": n,
            "tree": str(tree),
            "report": str(context.work / "reports" / str(n) / "report.json"),
            "mutation": mutation,
            "digest": guards.tree_digest(tree),
            "files": [str(tree / name) for name, _ in mutation.specials],
        }
        record(pool.submit(job))
        if count[0] % 100 == 0:
            print(f"  fixtures: {count[0]} trees, {dict(tally.counts)}", flush=True)

    try:
        campaign()
        record(pool.drain())
    finally:
        tally.peak_kb = max(tally.peak_kb, pool.close())
    left = guards.reap_orphans(context.tag)
    tally.orphans += len(left)


# -- adapters ---------------------------------------------------------------------------------------


def _wait(process: subprocess.Popen[bytes], guard: float) -> tuple[int | None, int]:
    """Wait for *process* up to *guard* seconds; its exit code (None on a hang) and peak memory (KiB)."""
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_maxrss
        time.sleep(0.05)
    with_group_kill(process)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return None, usage.ru_maxrss


def with_group_kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


def run_behaviour(context: Context, behaviour: behaviours.Behaviour, folder: Path, guard: float) -> dict[str, Any]:
    """Run the kit against one misbehaving adapter; its category, reason, seconds and peak memory."""
    folder.mkdir(parents=True)
    argument = behaviour.argument.format(
        decoy_file=context.decoy_tree / "precious.jsonl", decoy_pid=context.decoy.pid, flag=folder / "flag"
    )
    adapter = python_command("-m", "tests.broken.adapters", behaviour.mode, *([argument] if argument else []))
    report = folder / "report.json"
    command = [
        sys.executable, "-m", "resumekit.conformance", "run", "-q", "--report-json", str(report),
        "--adapter", adapter, "--timeout", str(behaviour.timeout), *behaviour.selection,
    ]
    output_file = folder / "output.txt"
    began = time.monotonic()
    with open(output_file, "wb") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=context.env(folder / "tmp"),
            start_new_session=True,
        )
        code, peak = _wait(process, guard)
    output = output_file.read_text(encoding="utf-8", errors="replace")
    document: dict[str, Any] = {}
    if report.is_file():
        try:
            document = json.loads(report.read_text(encoding="utf-8"))
        except ValueError:
            document = {}
    category, reason = classify_run(code, output, document, behaviour.expect, behaviour.evidence)
    return {"category": category, "reason": reason, "seconds": time.monotonic() - began, "peakKb": peak}


def adapters(context: Context, tally: Tally, arguments: argparse.Namespace) -> None:
    for number, behaviour in enumerate(behaviours.BEHAVIOURS):
        if behaviour.posix_only and sys.platform == "win32":
            continue
        folder = context.work / "adapters" / str(number)
        outcome = run_behaviour(context, behaviour, folder, arguments.guard)
        category, seconds, peak = outcome["category"], outcome["seconds"], outcome["peakKb"]
        tally.add(category, behaviour.name, outcome["reason"], seconds=round(seconds, 1))
        tally.peak_kb = max(tally.peak_kb, peak)
        _guards_after(context, tally, folder / "tmp", behaviour.name)
        print(f"  adapters: {behaviour.name:<45} {category:<20} {seconds:6.1f} s  {peak / 1024:5.0f} MB", flush=True)
        if category not in ("accepted wrongly", "unclear error", "traceback", "hang"):
            shutil.rmtree(folder, ignore_errors=True)


def _guards_after(context: Context, tally: Tally, scratch: Path, what: str) -> None:
    if context.outside_writes():
        tally.outside_writes += 1
        tally.findings.append({"category": "outside write", "what": what})
    changed = guards.tmpdir_changed(scratch)
    if changed:
        tally.outside_writes += 1
        tally.findings.append({"category": "outside write", "what": what, "reason": changed})
    if not context.decoy.check():
        tally.unrelated_kills += 1
        tally.findings.append({"category": "unrelated kill", "what": what})
    left = guards.reap_orphans(context.tag, grace=3.0)
    if left:
        tally.orphans += len(left)
        tally.findings.append({"category": "orphans", "what": what, "reason": f"{len(left)} left"})
    names = guards.scratch_left(scratch)
    if names:
        tally.scratch_left += len(names)
        tally.findings.append({"category": "scratch left", "what": what, "reason": ", ".join(names[:5])})


# -- store ------------------------------------------------------------------------------------------


def store_part(context: Context, tally: Tally, arguments: argparse.Namespace) -> None:
    sizes = tuple(int(s) for s in arguments.writer_rows.split(","))
    for number, attempt in enumerate(store.tries(arguments.writer_trials, sizes)):
        folder = context.work / "store" / str(number)
        workspace, cwd, scratch = folder / "ws", folder / "cwd", folder / "tmp"
        for path in (workspace, cwd):
            path.mkdir(parents=True)
        began = time.monotonic()
        adapter = None
        try:
            adapter = store.Adapter(cwd, context.env(scratch), context.decoy_tree)
            category, reason = attempt.run(adapter, workspace)
        except (store.ProcessGone, store.ReadTimeout, ValueError) as error:
            category, reason = "traceback", f"the adapter failed: {error}"
            if adapter is not None:
                reason += "\n" + adapter.stderr()[-1500:]
        finally:
            if adapter is not None:
                adapter.close()
        if any(cwd.iterdir()):
            category, reason = "accepted wrongly", f"wrote into its working folder: {sorted(os.listdir(cwd))}"
        tally.add(category, attempt.name, reason)
        _guards_after(context, tally, scratch, attempt.name)
        print(f"  store: {attempt.name:<45} {category:<20} {time.monotonic() - began:6.1f} s", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    # The kit's own process code reaps these adapters without a usage record, so this part's peak is not
    # told apart; the total's (every child of the campaign) includes it.




# -- scale ------------------------------------------------------------------------------------------

# CPU time of the loading process, not wall time: the ratio is about the loader's work, and a busy
# machine stretches wall time unevenly. The cache is off, so both loads do the whole work.
_LOAD = (
    "import sys, time; from pathlib import Path; from resumekit.conformance.fixtures import load_suite\n"
    "began = time.process_time(); suite = load_suite(Path(sys.argv[1]))\n"
    "print(len(suite.cases), time.process_time() - began)\n"
)


def scale(context: Context, tally: Tally, arguments: argparse.Namespace) -> None:
    """Load a decision file of 1,000 cases and one of 10,000: the second may take at most 10 times as long.

    The larger load gets 60 times the smaller one's CPU time in wall time (and at least two minutes): past that it is
    stopped, and loading is recorded as not linear.
    """
    import yaml

    source = yaml.safe_load((mutations.GOLDEN / mutations.COMPANION).read_bytes())
    timings: dict[int, float] = {}
    for count in (1000, 10_000):
        cases = []
        for n in range(count):
            case = dict(source["cases"][n % len(source["cases"])])
            case["id"] = f"scale-{n}"
            cases.append(case)
        tree = context.work / "scale" / str(count)
        path = tree / "phase0" / "decisions" / "scale.yaml"
        path.parent.mkdir(parents=True)
        path.write_bytes(mutations._dump({**source, "cases": cases}))
        limit = max(120.0, 60 * timings[1000]) if timings else arguments.guard
        try:
            done = subprocess.run(
                [sys.executable, "-c", _LOAD, str(tree)], capture_output=True, text=True, cwd=ROOT,
                env={**context.env(tree.parent / "tmp"), "RESUMEKIT_NO_CACHE": "1"}, timeout=limit,
            )
        except subprocess.TimeoutExpired:
            if timings:
                tally.scale_ratio = limit / timings[1000]
                reason = f"10,000 cases: stopped after {limit:.0f} s, 60 times the {timings[1000]:.1f} s of 1,000"
                tally.add("accepted wrongly", "loading is not linear in the number of cases", reason)
            else:
                tally.add("hang", f"loading {count} cases", f"more than {limit:.0f} s")
            return
        if done.returncode != 0:
            tally.add("traceback", f"loading {count} cases", done.stderr[-1500:])
            return
        loaded, seconds = done.stdout.split()
        timings[count] = float(seconds)
        print(f"  scale: {loaded} cases loaded in {float(seconds):.2f} s", flush=True)
        tally.add("accepted correctly", f"loading {count} cases")
    ratio = timings[10_000] / timings[1000]
    tally.scale_ratio = ratio
    print(f"  scale: 10,000 cases took {ratio:.1f} times as long as 1,000 (linear: about 10)", flush=True)
    if ratio > 10 * 1.5:  # a margin for a noisy machine; quadratic would be about 100
        tally.add("accepted wrongly", "loading is not linear in the number of cases", f"ratio {ratio:.1f}")
