"""Benchmarks of the runner and the reference, each against its physical floor.

Run with ``nox -s bench``. Prints ratios; asserts nothing about wall-clock time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from resumekit.conformance import fixtures, runner
from resumekit.conformance._process import LineProcess
from resumekit.conformance.adapters import PythonAdapter, process_factory
from resumekit.conformance.phase0 import crash
from resumekit.reference import build_resume_plan
from resumekit.reference.durable import sync_fd as sync  # the floor uses the store's own primitive
from resumekit.reference.phase0.store import LedgerStore, encode_row
from tests.support import minimal_event


def best(repeats: int, work: Callable[[], object]) -> float:
    """The fastest of *repeats* timings of *work*, in seconds: the least disturbed one."""
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        timings.append(time.perf_counter() - began)
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
        t_in = best(repeats, lambda: [runner.run_decision(c, inproc, "strict") for c in cases])
        t_sub = best(repeats, lambda: [runner.run_decision(c, process, "strict") for c in cases])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=500)
    arguments = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpu(s)\n")
    decisions(arguments.repeats)
    print()
    crash_cycle(arguments.repeats)
    print()
    appends(arguments.rows, arguments.repeats)


if __name__ == "__main__":
    main()
