"""The pytest session's verdict: the golden items' results gathered into the Run `resumekit run` would make.

Each golden item's report carries its result as plain data, which pytest-xdist sends from a worker to the
controller with the rest of the report. Where the session ends (the controller, or the only process), the
results are folded into a Run: the cases a `resumekit run` with the same profile and kinds would select,
each with its result, and any case without one (left out by ``-k``, ``-m``, node ids or a stop) makes the
run a subset. The session ends with that Run's summary and verdict line; ``--resumekit-certify`` fails it
unless the verdict is a certification.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import __version__, contracts
from resumekit.conformance import report as rk_report
from resumekit.conformance._pytest_golden import STATE, GoldenItem, State
from resumekit.conformance._report_files import write as write_report
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.fixtures import FixtureError, Suite, load_suite
from resumekit.conformance.results import CaseResult, Implementation, Run, Selection
from resumekit.conformance.runner import platform_facts

RESULT = "resumekit_result"  # the report attributes pytest-xdist carries to the controller
IMPLEMENTATION = "resumekit_implementation"


class Gathered:
    """What the session's end needs: every result by case id, who answered, when it began."""

    def __init__(self) -> None:
        self.results: dict[str, CaseResult] = {}
        self.implementation: Implementation | None = None
        self.started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.clock = time.perf_counter()
        self.run: Run | None = None
        self.problem: str | None = None  # why there is no verdict, or a report could not be written


NAME = "resumekit-verdict"


class VerdictPlugin:
    """The hooks of a resumekit session that gather the results and give the verdict."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gathered = Gathered()
        self.worker = hasattr(config, "workerinput")  # a pytest-xdist worker: the controller gives the verdict

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Put a golden item's result on its call report, as plain data pytest-xdist can send."""
        made: pytest.TestReport = yield
        if isinstance(item, GoldenItem) and made.when == "call" and item.result is not None:
            setattr(made, RESULT, item.result.to_dict())
            info = item.config.stash[STATE].implementation
            if info is not None:
                setattr(made, IMPLEMENTATION, info.to_dict())
        return made

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the result a report carries (from this process or a pytest-xdist worker)."""
        data = getattr(report, RESULT, None)
        if data is None or self.worker:
            return
        result = rk_report.result_from_dict(data)
        self.gathered.results[result.case_id] = result
        info = getattr(report, IMPLEMENTATION, None)
        if info is not None and self.gathered.implementation is None:
            self.gathered.implementation = rk_report.implementation_from_dict(info)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Fold the results into the session's Run; under --resumekit-certify, fail the session unless it certifies."""
        if self.worker:
            return
        state, gathered = self.config.stash[STATE], self.gathered
        try:
            suite = load_suite()
        except (FixtureError, FileNotFoundError) as error:
            gathered.problem = f"no verdict: the golden set cannot be loaded: {error}"
        else:
            gathered.run = fold(state, gathered, suite, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
            gathered.problem = _write_json(self.config, gathered.run)
        certified = gathered.run is not None and gathered.run.certified
        failed = gathered.problem is not None or (state.certify and not certified)
        if failed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The run's summary and verdict line, as `resumekit run` ends, and what --resumekit-certify made of it."""
        if self.worker:
            return
        run, write = self.gathered.run, terminalreporter.write_line
        terminalreporter.section("resumekit verdict")
        if run is not None:
            for line in rk_report.format_summary(run).lstrip("\n").splitlines():
                write(line)
        if self.gathered.problem is not None:
            write(self.gathered.problem, red=True)
        if self.config.stash[STATE].certify and (run is None or not run.certified):
            write("--resumekit-certify: the session fails, as the run is not a certification", red=True)


def fold(state: State, gathered: Gathered, suite: Suite, *, interrupted: bool) -> Run:
    """The Run of the session: the cases `resumekit run` would select, each with its result if it has one."""
    chosen = suite.select(state.profile, (), state.kinds or None)
    results = tuple(gathered.results[case.id] for case in chosen if case.id in gathered.results)
    narrowed: tuple[str, ...] = ()
    if len(results) < len(chosen):
        left = len(chosen) - len(results)
        narrowed = (f"pytest ran {len(results)} of the {len(chosen)} selected cases ({left} left out by -k, -m, "
                    "node ids or an early stop)",)  # fmt: skip
    info = gathered.implementation or Implementation(name="unknown", version="", language="", adapter=state.spec)
    profile = state.profile if state.profile in info.profiles else "core"
    golden = os.environ.get("RESUMEKIT_GOLDEN") or "bundled"  # another golden set, named as --golden would be
    seeded = any(getattr(contracts.kind(result.kind), "seeded", False) for result in results)
    selection = Selection(
        profile=state.profile, kinds=state.kinds, kills=state.kills, timeout=state.timeout, seed=state.seed,
        golden=golden, narrowed_by=narrowed,
    )  # fmt: skip
    return Run(
        implementation=info,
        profile=profile,
        results=results,
        summaries=contracts.summaries({case.kind for case in chosen}, results, profile),
        started=gathered.started,
        finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        duration=time.perf_counter() - gathered.clock,
        platform=platform_facts(),
        kit_version=__version__,
        seed=state.seed if seeded else None,
        golden_digest=suite.digest,
        selection=selection,
        interrupted=interrupted,
        selected=len(chosen),
        golden_root=str(golden_dir().resolve()),
    )


def _write_json(config: pytest.Config, run: Run) -> str | None:
    """Write --resumekit-report-json; why it could not be written, or None."""
    path: Path | None = config.getoption("resumekit_report_json")
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_report(path, json.dumps(rk_report.to_json(run), indent=2, ensure_ascii=False) + "\n")
    except OSError as error:
        return f"cannot write the JSON report {str(path)!r}: {error.strerror or error}"
    return None
