"""--jobs and --shard: the same verdicts in the same order however a run is spread, and merging shards."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import contracts, fixtures, report, runner, schemas, shards
from resumekit.conformance.adapters import PythonAdapter
from resumekit.conformance.cli import COMMANDS, EXIT_SUBSET, EXIT_USAGE, _parser
from resumekit.conformance.progress import ProgressReporter
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.reference import build_resume_plan
from tests.support import run_resumekit

# A selection of every kind: decisions, crash failpoints, ledger faults, the schedule, P1 scenarios.
SELECTION = (
    "--only", "before-call-*", "--only", "after-call-*", "--only", "crash-p1", "--only", "crash-p9",
    "--only", "torn-last-row-then-append", "--only", "corrupt-middle-row-garbage",
    "--only", "random-crash-schedule", "--only", "p1-crash-capture-before-claimed-row",
    "--only", "p1-crash-commit-before-claimed-row",
    "--kills", "6", "--seed", "11",
)  # fmt: skip


resumekit = run_resumekit


def verdicts(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["id"], r["kind"], r["outcome"]) for r in document["results"]]


@pytest.fixture(scope="module")
def one_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("jobs") / "jobs1.json"
    code, document, output = resumekit(path, "--adapter", "reference", *SELECTION, "--jobs", "1")
    assert code == EXIT_SUBSET, output  # --only: a subset run, which passed
    return document


def test_two_jobs_give_the_verdicts_of_one_in_selection_order(one_job: dict[str, Any], tmp_path: Path) -> None:
    code, two, output = resumekit(tmp_path / "jobs2.json", "--adapter", "reference", *SELECTION, "--jobs", "2")
    assert code == EXIT_SUBSET, output
    assert schemas.first_violation(schemas.RUN_REPORT, two) is None
    assert {r["kind"] for r in two["results"]} == {"decision", "crash", "ledger-fault", "schedule", "p1"}
    assert verdicts(two) == verdicts(one_job)
    assert (one_job["jobs"], two["jobs"]) == (1, 2)
    suite = fixtures.load_suite()
    chosen = {r["id"] for r in one_job["results"]}
    assert [r["id"] for r in two["results"]] == [c.id for c in suite.select("strict") if c.id in chosen]
    assert two["summaries"] == one_job["summaries"]
    assert all(r["countsToward"] for r in two["results"] if r["kind"] == "p1")


def test_three_shards_merged_equal_the_unsharded_run(one_job: dict[str, Any], tmp_path: Path) -> None:
    paths = []
    for index in (1, 2, 3):
        path = tmp_path / f"shard{index}.json"
        code, document, output = resumekit(path, "--adapter", "reference", *SELECTION, "--shard", f"{index}/3")
        assert code == EXIT_SUBSET, output  # a passing shard is a subset run (issue 21, item 4)
        assert schemas.first_violation(schemas.RUN_REPORT, document) is None
        assert document["shard"]["index"] == index and 0 < len(document["results"]) < len(one_job["results"])
        paths.append(path)
    merged_path = tmp_path / "merged.json"
    code, out, err = _cli("merge", *map(str, reversed(paths)), "-o", str(merged_path))
    assert code == EXIT_SUBSET, err  # the shards of a subset selection merge into a subset run, never more
    merged = json.loads(merged_path.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, merged) is None
    assert verdicts(merged) == verdicts(one_job)
    assert merged["certified"] is False and merged["scope"] == "subset" == one_job["scope"]
    assert merged["summary"] == one_job["summary"] and merged["verdict"]["status"] == one_job["verdict"]["status"]
    assert merged["summaries"] == one_job["summaries"]
    assert merged["seed"] == one_job["seed"] == 11
    assert [s["index"] for s in merged["mergedFrom"]] == [1, 2, 3]
    assert "SUBSET" in out

    # Overlap, gap, and shards of another certification are each refused with their own message.
    documents = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    problems = {
        "overlap: ": [documents[0], documents[0], documents[1], documents[2]],
        "gap: shard(s) 3/3 missing": documents[:2],
        "different seeds": [documents[0], documents[1], _with(documents[2], ("shard", "seed"), 12)],
        "different kit versions": [documents[0], documents[1], _with(documents[2], ("resumekit", "version"), "9")],
        "different golden fixtures": [
            documents[0],
            documents[1],
            _with(documents[2], ("resumekit", "goldenDigest"), "0" * 64),
        ],
        "different implementations": [
            documents[0],
            documents[1],
            _with(documents[2], ("implementation", "version"), "2.0"),
        ],
        "not a shard report": [one_job],
        "gap: 1 selected case(s)": [documents[0], documents[1], _without_first_result(documents[2])],
    }
    for message, group in problems.items():
        with pytest.raises(shards.ShardError, match=message.replace("(", r"\(").replace(")", r"\)")):
            shards.merge([(f"r{n}.json", document) for n, document in enumerate(group)])


def _with(document: dict[str, Any], where: tuple[str, str], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(document))
    copy[where[0]][where[1]] = value
    return copy


def _without_first_result(document: dict[str, Any]) -> dict[str, Any]:
    copy = json.loads(json.dumps(document))
    copy["results"] = copy["results"][1:]
    return copy


def _cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_shards_deal_every_case_to_exactly_one_shard() -> None:
    ids = [case.id for case in fixtures.load_suite().select("strict")]
    for count in (1, 2, 3, 7, len(ids) + 5):
        parts = [shards.owned(ids, index, count) for index in range(1, count + 1)]
        assert sum(len(part) for part in parts) == len(ids)
        assert set().union(*parts) == set(ids)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert shards.parse("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(shards.ShardError):
            shards.parse(bad)


def test_shard_needs_a_seed_and_jobs_accepts_auto() -> None:
    code, _, err = _cli("run", "--adapter", "reference", "--kind", "crash", "--shard", "1/2")
    assert code == EXIT_USAGE and "--seed" in err
    assert _parser().parse_args(["run", "--jobs", "auto"]).jobs >= 1
    assert _parser().parse_args(["run", "--jobs", "0"]).jobs >= 1
    # The default uses the machine: one case per CPU and two more, to fill what waiting cases leave.
    assert _parser().parse_args(["run"]).jobs == (os.cpu_count() or 1) + 2
    assert _parser().parse_args(["run", "--jobs", "1"]).jobs == 1
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--jobs", "-1"])


class _Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def case_started(self, case: fixtures.Case) -> None:
        self.events.append(f"start {case.id}")

    def case_finished(self, result: CaseResult) -> None:
        self.events.append(f"end {result.case_id}")


def _claims_the_crash_kind() -> PythonAdapter:
    """The in-process reference, said to claim the crash kind, whose runner a test then supplies."""
    adapter = PythonAdapter(build_resume_plan, name="reference")  # type: ignore[arg-type]
    adapter.implementation = adapter.implementation.__class__(
        name="reference", version="", language="python", capabilities=contracts.kind("crash").capabilities,  # type: ignore[union-attr]
        profiles=("core", "strict"),
    )  # fmt: skip
    return adapter


def test_parallel_results_and_progress_follow_the_selection_whatever_finishes_first() -> None:
    import threading
    import time

    suite = fixtures.load_suite()
    crash_cases = suite.select("strict", kinds=["crash"])
    cases = suite.select("strict", kinds=["decision"])[:20] + crash_cases
    seen_threads: set[str] = set()

    def slow_first(case: fixtures.Case) -> CaseResult:
        seen_threads.add(threading.current_thread().name)
        # The earlier a case is selected, the later it finishes.
        time.sleep(0.01 * (len(crash_cases) - crash_cases.index(case)))  # type: ignore[arg-type]
        return runner.result_for(case, Outcome.PASSED)

    adapter = _claims_the_crash_kind()
    recorder = _Recorder()
    run = runner.run(cases, adapter, profile="strict", reporter=recorder, runners={"crash": slow_first}, jobs=4)
    assert [r.case_id for r in run.results] == [c.id for c in cases]
    assert recorder.events == [e for c in cases for e in (f"start {c.id}", f"end {c.id}")]
    assert len(seen_threads) > 1 and run.jobs == 4
    assert all(r.ok for r in run.results)
    text = io.StringIO()
    progress = ProgressReporter(text.write)
    runner.run(cases, adapter, profile="strict", reporter=progress, runners={"crash": slow_first}, jobs=3)
    progress.finish()
    assert text.getvalue().splitlines()[0].startswith("decision")
    # One line per kind, in selection order, each counting its cases, though the crash cases finished last first.
    assert [line.split()[:3] for line in text.getvalue().splitlines()] == [
        ["decision", "20", "passed"],
        ["crash", str(len(crash_cases)), "passed"],
    ]


def test_the_heaviest_cases_start_first_and_equals_in_selection_order() -> None:
    from resumekit.conformance._schedule import Schedule

    suite = fixtures.load_suite()
    p1 = suite.select("strict", kinds=["p1"])
    heavy = next(case for case in p1 if case.id == "p1-submit-timeout-after-store-replays")  # an answer held 6 s
    light = [case for case in p1 if case.weight == min(c.weight for c in p1)][:3]
    schedule_case = suite.select("strict", kinds=["schedule"])[0]
    chosen = [*light[:2], heavy, light[2], schedule_case]
    assert heavy.weight > light[0].weight > 0  # a worker's start, at the least
    began: list[str] = []

    def one(case: fixtures.Case) -> CaseResult:
        began.append(case.id)
        return runner.result_for(case, Outcome.PASSED)

    schedule = Schedule(chosen, one, 1, runner.result_for)
    assert [schedule.result(index).case_id for index in range(len(chosen))] == [case.id for case in chosen]
    # A kind whose single cases take longest first, then the heaviest, then the rest as they were selected.
    assert began == [schedule_case.id, heavy.id, light[0].id, light[1].id, light[2].id]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_case_past_its_deadline_is_abandoned_its_processes_ended_and_the_run_goes_on(jobs: int) -> None:
    import dataclasses
    import sys
    import threading

    from resumekit.conformance._process import LineProcess

    crash = fixtures.load_suite().select("strict", kinds=["crash"])[:3]
    base = type(crash[0])

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Quick(base):  # type: ignore[valid-type,misc]
        @property
        def deadline_s(self) -> float:
            return 0.5

    cases = [Quick(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)}) for c in crash]
    never = threading.Event()
    started: list[LineProcess] = []

    def hangs_on_the_second(case: fixtures.Case) -> CaseResult:
        if case.id == cases[1].id:
            started.append(LineProcess([sys.executable, "-c", "import time; time.sleep(120)"]))
            never.wait()  # the kit's own work that never ends
        return runner.result_for(case, Outcome.PASSED)

    adapter = _claims_the_crash_kind()
    run = runner.run(cases, adapter, profile="strict", runners={"crash": hangs_on_the_second}, jobs=jobs)
    assert [r.outcome for r in run.results] == [Outcome.PASSED, Outcome.ERRORED, Outcome.PASSED]
    assert "did not end within its deadline of 0.5 s" in (run.results[1].message or "")
    (process,) = started
    assert process.wait(10) is not None  # ended with its case, not left to run on


@pytest.mark.parametrize("option", ["--badge", "--report-html", "-o"])
def test_merge_refuses_an_output_it_cannot_write_before_it_reads_a_shard(option: str, tmp_path: Path) -> None:
    shard = tmp_path / "shard1.json"  # never read: the outputs are checked first
    outputs = {"-o": str(tmp_path / "merged.json"), option: str(tmp_path)}  # a directory where a file must go
    code, out, err = _cli("merge", str(shard), *[word for pair in outputs.items() for word in pair])
    assert code == EXIT_USAGE, (out, err)
    assert "is a directory" in err and (option if option != "-o" else "--output") in err, err
    assert "Traceback" not in err


def test_a_shard_with_a_case_not_run_says_failed_as_its_exit_status_does(one_job: dict[str, Any]) -> None:
    import dataclasses

    from resumekit.conformance.results import Shard

    run = report.from_json(one_job)
    shard = Shard(1, 2, tuple(r.case_id for r in run.results))
    passing = dataclasses.replace(run, shard=shard)
    assert report.headline(passing).startswith("SHARD 1/2 PASSED") and not report.shard_failed(passing)
    first, *rest = run.results
    not_run = dataclasses.replace(passing, results=(dataclasses.replace(first, outcome=Outcome.NOT_RUN), *rest))
    assert report.headline(not_run).startswith("SHARD 1/2 FAILED") and report.shard_failed(not_run)
