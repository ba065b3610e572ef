"""Benchmarks of the runner and the reference, each against its physical floor.

Run with ``nox -s bench``. Prints ratios; asserts nothing about wall-clock time.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resumekit.conformance import fixtures
from resumekit.conformance._process import LineProcess
from resumekit.conformance.adapters import PythonAdapter, process_factory
from resumekit.conformance.cli import auto_jobs
from resumekit.conformance.phase0 import crash
from resumekit.conformance.phase0.decisions import run_decision
from resumekit.reference import build_resume_plan
from resumekit.reference.durable import sync_fd as sync  # the floor uses the store's own primitive
from resumekit.reference.p1.journal import COLUMNS, Journal
from resumekit.reference.phase0.store import LedgerStore, encode_row
from tests import bench_p1
from tests.support import minimal_event


def best(repeats: int, work: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of *repeats* timings of *work*, in seconds of *clock*: the least disturbed one."""
    timings = []
    for _ in range(repeats):
        began = clock()
        work()
        timings.append(clock() - began)
    return min(timings)


# Answers every line with one canned line of a typical plan's size: the pipe round trip, nothing else.
_ECHO = (
    "import sys\n"
    'line = b\'{"seq":0,"result":{"plan":"\' + b\'x\' * 2300 + b\'"}}\\n\'\n'
    "for _ in iter(sys.stdin.buffer.readline, b''):\n"
    "    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()\n"
)


def pipe_floor(requests: list[bytes], repeats: int) -> float:
    """Seconds per round trip of the same request lines through a process that does no work."""
    process = LineProcess([sys.executable, "-c", _ECHO])
    try:

        def round_trips() -> None:
            for request in requests:
                process.send(request)
                process.receive(10.0)

        return best(repeats, round_trips) / len(requests)
    finally:
        process.kill()


def decisions(repeats: int) -> None:
    cases = list(fixtures.load_suite().select("strict", kinds=["decision"]))
    inproc = PythonAdapter(build_resume_plan, name="reference")  # type: ignore[arg-type]
    process = process_factory("reference")()
    process.start()
    try:
        t_in = best(repeats, lambda: [run_decision(c, inproc, "strict") for c in cases])
        t_sub = best(repeats, lambda: [run_decision(c, process, "strict") for c in cases])
    finally:
        process.close()
    projection = best(repeats, lambda: [build_resume_plan(c.events) for c in cases for _ in range(2)])
    n = len(cases)
    lines = [json.dumps({"cmd": "phase0.plan", "seq": 1, "events": list(c.events)}).encode() + b"\n" for c in cases]
    floor = pipe_floor(lines, repeats)
    print(f"decision cases: {n} (each asked twice)")
    print(f"  pipe floor:        {floor * 1e3:6.3f} ms per round trip (same requests, a process that does no work)")
    print(f"  in-process:        {n / t_in:8.0f} cases/s   {t_in / n * 1e3:6.3f} ms/case")
    print(f"  over the protocol: {n / t_sub:8.0f} cases/s   {t_sub / n * 1e3:6.3f} ms/case")
    overhead = (t_sub - t_in) / n
    print(f"  protocol overhead: {overhead * 1e3:6.3f} ms/case ({overhead / 2 * 1e3:.3f} ms per request)")
    own = t_in - projection
    print(f"  runner's own time: {own / n * 100 * 1e3:6.1f} ms per 100 cases (projection itself excluded)")


def crash_cycle(repeats: int) -> None:
    case = next(c for c in fixtures.load_suite().cases if c.id == "crash-p9")
    factory = process_factory("reference")

    def start_twice() -> None:
        # The least a crash cycle can cost: two processes started and answering hello, then killed.
        for _ in range(2):
            adapter = factory()
            adapter.start()
            adapter.kill()

    floor = best(repeats, start_twice)
    cycle = best(repeats, lambda: crash.run_crash(case, factory, "strict"))  # type: ignore[arg-type]
    bare = best(repeats, lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    print("crash cycle (crash-p9: 4 appends, kill, reopen, read, plan twice, snapshot):")
    print(f"  bare interpreter start:                {bare * 1e3:7.1f} ms")
    print(f"  floor, start the implementation twice: {floor * 1e3:7.1f} ms")
    print(f"  one crash cycle:                       {cycle * 1e3:7.1f} ms   {cycle / floor:.2f}x the floor")


def kill_cycle(kills: int, repeats: int) -> None:
    """One kill of the random crash schedule against its floor: two bare interpreter starts.

    A kill cycle starts the implementation (an interpreter), kills it, and the next cycle starts it
    again; two bare starts of the same interpreter are the least a cycle of any Python implementation
    could cost.
    """
    case = next(c for c in fixtures.load_suite().cases if c.kind == "schedule")
    factory = process_factory("reference")
    bare = best(max(repeats * 4, 20), lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))

    def schedule() -> None:
        result = crash.run_schedule(case, factory, "strict", seed=1, kills=kills, replay="")  # type: ignore[arg-type]
        if result.outcome.value != "passed":
            raise SystemExit(f"the schedule did not pass: {result.message}")

    cycle = best(max(1, repeats // 2), schedule) / kills
    floor = 2 * bare
    print(f"random crash schedule, one job ({kills} kills, best of {max(1, repeats // 2)}):")
    print(f"  floor, two bare interpreter starts: {floor * 1e3:6.1f} ms")
    print(f"  one kill cycle:                     {cycle * 1e3:6.1f} ms   {cycle / floor:.2f}x the floor")


def _ledger_rows(count: int) -> list[bytes]:
    """JSON Lines of a realistic ledger: user text, thinking, a tool call and its result, an answer."""
    rows = []
    for index in range(count):
        step = index % 5
        if step == 0:
            fields: dict[str, Any] = {"role": "user", "author": "user", "content": {"kind": "text", "text": "x" * 60}}
        elif step == 1:
            fields = {"role": "model", "author": "agent", "content": {"kind": "thinking", "text": "y" * 60}}
        elif step == 2:
            args = {"command": "ls -la", "cwd": "/work"}
            content = {"kind": "function_call", "id": f"call-{index}", "name": "shell", "args": args}
            fields = {"role": "model", "author": "agent", "content": content}
        elif step == 3:
            result = {"stdout": "a\nb\n", "code": 0}
            content = {"kind": "function_response", "id": f"call-{index - 1}", "name": "shell", "result": result}
            fields = {"role": "tool", "author": "tool", "content": content}
        else:
            fields = {"role": "model", "author": "agent", "content": {"kind": "text", "text": "z" * 60}}
        event = minimal_event(id=f"evt-{index:07d}", ts=1767225600000 + index, **fields)
        rows.append(json.dumps(event, separators=(",", ":")).encode() + b"\n")
    return rows


def _plan_against_parse(rows: list[bytes], runs: int) -> tuple[float, float, float]:
    """The best times to parse *rows*, to plan them (the default, no copy), and to plan them with copies."""
    events = [json.loads(row) for row in rows]
    timings: dict[str, list[float]] = {"parse": [], "plan": [], "copies": []}
    for _ in range(runs):  # interleaved, so that a busy moment of the machine slows all three alike
        for name, work in (
            ("parse", lambda: [json.loads(row) for row in rows]),
            ("plan", lambda: build_resume_plan(events)),
            ("copies", lambda: build_resume_plan(events, copy_events=True)),
        ):
            began = time.process_time()  # CPU time: on a shared machine the wall clock measures the neighbours
            work()
            timings[name].append(time.process_time() - began)
    return min(timings["parse"]), min(timings["plan"]), min(timings["copies"])


def projection_curve(sizes: list[int], repeats: int) -> None:
    """Planning a ledger against parsing its rows with json.loads, from 10k to 1M events."""
    print("reference projection (strict) against json.loads of the same rows (best CPU time of each, interleaved):")
    print(f"  {'events':>9} {'parse':>9} {'plan':>9} {'ratio':>6} {'plan, copy_events':>18} {'ratio':>6}")
    per_event: list[tuple[float, float, float]] = []
    for size in sizes:
        parse, plan, copies = _plan_against_parse(_ledger_rows(size), max(1, repeats if size <= 100_000 else 2))
        per_event.append((parse / size, plan / size, copies / size))
        print(f"  {size:>9} {parse * 1e3:7.0f} ms {plan * 1e3:6.0f} ms {plan / parse:5.2f}x "
              f"{copies * 1e3:15.0f} ms {copies / parse:5.2f}x")  # fmt: skip
    if len(per_event) > 1:
        # The interpreter's own allocation grows faster than linearly on a large heap: json.loads too.
        spreads = [max(column) / min(column) for column in zip(*per_event, strict=True)]
        print("  linearity, largest over smallest time per event (1.00x is exactly linear): "
              f"parse {spreads[0]:.2f}x, plan {spreads[1]:.2f}x, plan with copies {spreads[2]:.2f}x")  # fmt: skip


def appends(rows: int, repeats: int) -> None:
    event = minimal_event(content={"kind": "text", "text": "x" * 80})
    row = encode_row(event)

    def raw(directory: Path) -> None:
        with open(directory / "raw.jsonl", "ab") as handle:
            for _ in range(rows):
                handle.write(row)
                handle.flush()
                sync(handle.fileno())

    def reference(directory: Path) -> None:
        with LedgerStore(directory, "s", "r") as ledger:
            for index in range(rows):
                ledger.append(dict(event, id=f"e{index}"))

    samples: dict[str, list[float]] = {"raw": [], "reference": []}
    # Interleaved, so that a disk that speeds up or slows down during the run affects both alike.
    for _ in range(repeats):
        for name, work in (("raw", raw), ("reference", reference)):
            with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
                began = time.perf_counter()
                work(Path(scratch))
                samples[name].append(time.perf_counter() - began)
    t_raw, t_ref = statistics.median(samples["raw"]), statistics.median(samples["reference"])
    print(f"durable appends ({rows} rows, median of {repeats}, on the disk of the current directory):")
    print(f"  raw write+fsync loop: {rows / t_raw:8.0f} rows/s")
    print(f"  reference store:      {rows / t_ref:8.0f} rows/s   {t_raw / t_ref:.2f}x the raw loop")


_HELLO = b'{"seq":1,"cmd":"hello","protocol":1,"kit":{"name":"resumekit","version":"0"}}\n'
# The least a protocol server can do: start, read the hello line, answer it.
_BARE_HELLO = "import sys\nsys.stdin.buffer.readline()\nsys.stdout.buffer.write(b'{}\\n'); sys.stdout.flush()\n"


def start_to_hello(repeats: int) -> None:
    """The reference adapter from start to its hello answer, against a bare interpreter doing the same."""
    factory = process_factory("reference")
    reference = factory()

    def hello(argv: list[str], env: dict[str, str] | None) -> None:
        process = LineProcess(argv, env=env)
        try:
            process.send(_HELLO)
            process.receive(10.0)
        finally:
            process.kill()

    argv, env = reference.argv, reference.env
    runs = max(repeats * 4, 20)
    bare = best(runs, lambda: hello([sys.executable, "-c", _BARE_HELLO], None))
    ours = best(runs, lambda: hello(argv, env))
    isolated = best(runs, lambda: hello([sys.executable, "-I", "-S", "-c", _BARE_HELLO], None))
    print(f"start to hello (best of {runs}, through the kit's own process plumbing):")
    print(f"  bare interpreter (-I -S):      {isolated * 1e3:6.1f} ms")
    print(f"  bare interpreter answering:    {bare * 1e3:6.1f} ms   (the floor: same interpreter, site on)")
    print(
        f"  reference adapter:             {ours * 1e3:6.1f} ms   {ours / bare:.2f}x the floor, "
        f"{(ours - bare) * 1e3:+.1f} ms"
    )


def _journal_rows(count: int) -> list[dict[str, Any]]:
    """Realistic checkpoint rows: whole attempts, each from claimed to result_submitted."""
    phases = (
        "claimed",
        "workspace_prepared",
        "verification_passed",
        "commit_done",
        "result_pending",
        "result_submitted",
    )
    task = json.dumps({"task_id": "t", "payload": {"files": {"a.txt": "x" * 200}}})
    rows = []
    for index in range(count):
        attempt, phase = divmod(index, len(phases))
        row: dict[str, Any] = {
            "task_id": "task-1",
            "attempt": attempt + 1,
            "execution_digest": "d" * 64,
            "job_id": "job-1",
            "repository": "repo",
            "base_oid": "b" * 40,
            "expected_branch_oid": "b" * 40,
            "target_branch": "main",
            "generation": 1,
            "phase": phases[phase],
            "lease_id": f"lease-{attempt}",
        }
        if phase == 0:
            row["task"] = task
        if phase >= 1:
            row["workspace"] = "/workspaces/task-1"
        if phase >= 3:
            row["commit_oid"] = "c" * 40
        if phase >= 4:
            row.update(idempotency_key="k" * 64, result_hash="h" * 64, result_body='{"ok": true}')
        rows.append(row)  # fmt: skip
    return rows


def journal_inserts(rows: int, repeats: int) -> None:
    """Checkpoint inserts per second of the reference journal against a raw synchronous=FULL loop."""
    values = _journal_rows(rows)
    inserted = COLUMNS[1:]
    sql = f"INSERT INTO checkpoints ({', '.join(inserted)}) VALUES ({', '.join('?' * len(inserted))})"
    table = "CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY, " + ", ".join(f"{c}" for c in inserted) + ")"

    def raw(directory: Path) -> None:
        # The floor: the same rows, the same journal mode and synchronous level, one transaction each.
        db = sqlite3.connect(directory / "raw.sqlite3", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA fullfsync=ON")
        db.execute(table)
        try:
            for row in values:
                db.execute("BEGIN IMMEDIATE")
                db.execute(sql, tuple(row.get(name) for name in inserted))
                db.execute("COMMIT")
        finally:
            db.close()

    journals: dict[Path, Journal] = {}

    def open_journal(directory: Path) -> None:
        journals[directory] = Journal(directory)

    def reference(directory: Path) -> None:
        journal = journals.pop(directory)
        try:
            for row in values:
                journal.append(row)  # the checkpoint row alone, not the cache replace that follows it
        finally:
            journal.close()

    samples: dict[str, list[float]] = {"raw": [], "reference": []}
    for _ in range(repeats):  # interleaved, so that the disk's moods affect both alike
        for name, work in (("raw", raw), ("reference", reference)):
            with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
                if name == "reference":
                    open_journal(Path(scratch))  # opening (settings, schema) is not an insert
                began = time.perf_counter()
                work(Path(scratch))
                samples[name].append(time.perf_counter() - began)
    t_raw, t_ref = statistics.median(samples["raw"]), statistics.median(samples["reference"])
    print(f"journal checkpoint inserts ({rows} rows, WAL, synchronous=FULL, median of {repeats}, current disk):")
    print(f"  raw insert+commit loop: {rows / t_raw:8.0f} rows/s")
    print(f"  reference journal:      {rows / t_ref:8.0f} rows/s   {t_raw / t_ref:.2f}x the raw loop (target >= 0.8x)")


_LOADING_HEADER = (
    "schema_version: 1\nkind: phase0/decisions\n"
    "envelope: {invocationId: i, runId: r, sessionId: s, turnId: t, ts: 1, partial: false}\ncases:\n"
)
_LOADING_CASE = """  - id: case-{n:05d}
    description: A user message, a call and its response are safe to replay.
    clauses: [OP-1, OP-3]
    profile: core
    events:
      - {{id: e1, role: user, author: user, content: {{kind: text, text: "list the files {n}"}}}}
      - {{id: e2, role: model, author: agent, content: {{kind: function_call, id: t1, name: Bash, args: {{n: {n}}}}}}}
      - {{id: e3, role: tool, author: tool, content: {{kind: function_response, id: t1, name: Bash, result: {{}}}}}}
    expect:
      disposition: safe_replay
      requiresVerification: false
      sourceRuntimeEventHighWater: 3
      rejectionReasons: []
      operations:
        - {{toolCallId: t1, toolName: Bash, status: succeeded, callRuntimeEventId: e2, responseRuntimeEventId: e3,
           responseIsError: false}}
      diagnostics: []
      replay: [e1, e2, e3]
"""


def fixture_loading(repeats: int) -> None:
    """Loading and validating N cases from one file, at 1,000 and 10,000: linear means about 10x."""
    timings: dict[int, tuple[float, float]] = {}
    saved = os.environ.get("RESUMEKIT_CACHE_DIR")
    with tempfile.TemporaryDirectory() as scratch:
        for count in (1_000, 10_000):
            root = Path(scratch, f"golden-{count}")
            root.mkdir()
            text = _LOADING_HEADER + "".join(_LOADING_CASE.format(n=n) for n in range(count))
            (root / "cases.yaml").write_text(text, encoding="utf-8")
            assert len(fixtures.load_suite(root, cache=False).cases) == count
            cold = best(
                max(2, repeats // 2), lambda root=root: fixtures.load_suite(root, cache=False), clock=time.process_time
            )
            os.environ["RESUMEKIT_CACHE_DIR"] = str(Path(scratch, "cache"))
            fixtures.load_suite(root)
            warm = best(repeats, lambda root=root: fixtures.load_suite(root), clock=time.process_time)
            timings[count] = (cold, warm)
    # The scratch cache is gone: what runs next (resumekit list, the certification) uses the user's own.
    if saved is None:
        os.environ.pop("RESUMEKIT_CACHE_DIR", None)
    else:
        os.environ["RESUMEKIT_CACHE_DIR"] = saved
    # CPU seconds: on a shared machine the wall clock mostly measures the neighbours.
    print("fixture loading (one file of N decision cases; parse, schema and clause checks; best CPU seconds):")
    for count, (cold, warm) in timings.items():
        print(f"  {count:6d} cases: {cold:6.2f} s ({cold / count * 1e3:.2f} ms a case), from the cache {warm:5.2f} s")
    ratio = timings[10_000][0] / timings[1_000][0]
    print(f"  10,000 / 1,000: {ratio:.1f}x (linear is 10x; the target is under 10x plus noise)")
    started = {}
    for label, extra in (("cached", {}), ("no cache", {"RESUMEKIT_NO_CACHE": "1"})):
        env = {**os.environ, **extra}
        argv = [sys.executable, "-m", "resumekit.conformance", "list"]
        subprocess.run(argv, capture_output=True, check=True, env=env)
        started[label] = best(
            repeats, lambda argv=argv, env=env: subprocess.run(argv, capture_output=True, check=True, env=env)
        )
    print(
        f"  resumekit list (bundled golden set): {started['cached']:.3f} s cached, "
        f"{started['no cache']:.3f} s without (target under 0.25 s)"
    )


def _certify(jobs: int, kinds: list[str], seed: int) -> tuple[float, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        argv = [sys.executable, "-m", "resumekit.conformance", "run", "--adapter", "reference", "-q"]
        argv += [f"--kind={kind}" for kind in kinds]
        argv += ["--seed", str(seed), "--jobs", str(jobs), "--report-json", str(report)]
        began, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - began
        _LAST_CPU[0] = _children_cpu() - cpu
        # 3: every selected case passed, in a run that selects some kinds only (Phase 0 alone, say).
        if done.returncode not in (0, 3):
            print(done.stdout[-3000:], done.stderr[-3000:])
            raise SystemExit(f"the certification at --jobs {jobs} did not pass")
        return wall, json.loads(report.read_text(encoding="utf-8"))


_LAST_CPU = [0.0]  # user plus system CPU of the last certification and every process it started


def _children_cpu() -> float:
    try:
        import resource
    except ImportError:  # Windows: not measured
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def certification(seed: int, full: bool) -> None:
    """Wall time of a certification of the reference at --jobs 1, 2 and the default, side by side."""
    phase0 = ["decision", "crash", "ledger-fault", "schedule"]
    selections = [("phase 0", phase0)] + ([("full (phase 0 and P1)", [*phase0, "p1"])] if full else [])
    print(f"certification of the reference (resumekit run --adapter reference, seed {seed}, wall time):")
    for label, kinds in selections:
        one, report_one = _certify(1, kinds, seed)
        cpu_one = _LAST_CPU[0]
        two, _ = _certify(2, kinds, seed)
        by_kind: dict[str, float] = {}
        for result in report_one["results"]:
            by_kind[result["kind"]] = by_kind.get(result["kind"], 0.0) + result["durationSeconds"]
        longest = max(result["durationSeconds"] for result in report_one["results"])
        # Two jobs never beat the longest case; half of the one-job time is beaten only where the cases
        # mostly wait (on processes, git, loopback HTTP) rather than compute.
        floor = max(longest, one / 2)
        print(
            f"  {label}: --jobs 1 {one:6.1f} s   --jobs 2 {two:6.1f} s   speed-up {one / two:.2f}x "
            f"(max(longest case, half of --jobs 1) = {floor:.1f} s: {two / floor:.2f}x it)"
        )
        jobs = auto_jobs()
        default = two if jobs == 2 else _certify(0, kinds, seed)[0]
        print(f"    the default (--jobs auto, {jobs} here, as the README runs it): {default:.1f} s")
        print("    by kind at --jobs 1: " + ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in by_kind.items()))
        p1_times = [r["durationSeconds"] for r in report_one["results"] if r["kind"] == "p1"]
        if p1_times:
            print(f"    P1 scenario at --jobs 1: median {statistics.median(p1_times):.2f} s of {len(p1_times)}")
        if cpu_one:
            print(f"    CPU at --jobs 1 (the kit, workers and git; user plus system): {cpu_one:.1f} s")
        if "p1" in by_kind:
            print(
                f"    P1 matrix: {by_kind['p1']:.1f} s over {sum(r['kind'] == 'p1' for r in report_one['results'])} "
                "scenarios at --jobs 1"
            )


def _claims(port: int, path: str, count: int) -> None:
    """*count* empty claims, each on a new connection, as a worker sends them."""
    import http.client

    for _ in range(count):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
        connection.getresponse().read()
        connection.close()


def control_plane_requests(count: int, repeats: int) -> None:
    """Empty claims per second the control plane answers, against a bare HTTP server on the same loopback."""
    import http.server
    import threading

    from resumekit.conformance.p1.control_plane.server import ControlPlane

    class Bare(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"task": null, "retry_after_ms": 20}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    bare = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bare)
    threading.Thread(target=bare.serve_forever, daemon=True).start()
    floor = best(repeats, lambda: _claims(bare.server_address[1], "/w/w1/v1/claims", count)) / count
    bare.shutdown()
    bare.server_close()
    with tempfile.TemporaryDirectory() as scratch, ControlPlane(log_path=Path(scratch) / "log.jsonl") as plane:
        path = plane.base_url("w1")[len(f"http://127.0.0.1:{plane.port}") :] + "v1/claims"
        ours = best(repeats, lambda: _claims(plane.port, path, count)) / count
    print(f"control plane ({count} empty claims on new connections, best of {repeats}):")
    print(f"  bare HTTP server (the floor): {1 / floor:8.0f} requests/s")
    print(f"  the kit's control plane:      {1 / ours:8.0f} requests/s   {ours / floor:.2f}x the floor's time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-full", action="store_true", help="certify Phase 0 only (the full run takes minutes)")
    parser.add_argument("--kills", type=int, default=40, help="kills of the schedule timed for the kill cycle")
    parser.add_argument(
        "--sizes", default="10000,100000,1000000", help="ledger sizes of the projection curve, comma-separated"
    )
    arguments = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpu(s)\n")
    bench_p1.cli_start(arguments.repeats)
    print()
    bench_p1.p1_scenarios(arguments.repeats)
    print()
    decisions(arguments.repeats)
    print()
    crash_cycle(arguments.repeats)
    print()
    start_to_hello(arguments.repeats)
    print()
    kill_cycle(arguments.kills, arguments.repeats)
    print()
    projection_curve([int(size) for size in arguments.sizes.split(",")], arguments.repeats)
    print()
    appends(arguments.rows, arguments.repeats)
    print()
    journal_inserts(arguments.rows, arguments.repeats)
    print()
    fixture_loading(arguments.repeats)
    print()
    control_plane_requests(500, arguments.repeats)
    print()
    certification(arguments.seed, full=not arguments.no_full)
    if not arguments.no_full:
        print()
        bench_p1.node_beside_reference(Path(__file__).resolve().parent.parent)


if __name__ == "__main__":
    main()
