"""The golden fixtures as pytest items: what the resumekit pytest plugin loads once it is asked to run.

Kept apart from the plugin's entry module so that a pytest run that does not ask for resumekit never
imports the runner, the schemas or YAML.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import contracts, report
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import Adapter, AdapterStartError, ProcessAdapter, open_adapter, process_factory
from resumekit.conformance.cases import Case
from resumekit.conformance.fixtures import FixtureError, load_file
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.conformance.runner import missing_claims

_STATE = pytest.StashKey["_State"]()


class _State:
    """The session's adapter, opened at the first golden item and closed at the end."""

    def __init__(self, spec: str, profile: str, timeout: float, seed: int, kills: int) -> None:
        self.spec, self.profile, self.timeout, self.seed, self.kills = spec, profile, timeout, seed, kills
        self.adapter: Adapter | None = None
        self.start_error: str | None = None
        self.runners: dict[str, Any] = {}

    def connect(self) -> Adapter | None:
        """The adapter, or None when it cannot start (``start_error`` then says why)."""
        if self.start_error is not None:
            return None
        if self.adapter is None:
            try:
                self.adapter = open_adapter(self.spec, timeout=self.timeout)
            except AdapterStartError as error:
                self.start_error = f"resumekit cannot start {self.spec!r}: {error}"
                return None
            factory = None
            if isinstance(self.adapter, ProcessAdapter):
                factory = process_factory(self.spec, timeout=self.timeout, budget=self.adapter.budget)
            context = contracts.RunContext(
                self.adapter,
                self.profile,
                factory=factory,
                adapter_spec=self.spec,
                seed=self.seed,
                kills=self.kills,
            )
            self.runners = contracts.runners(context)
        return self.adapter


def configure(config: pytest.Config) -> None:
    spec = config.getoption("resumekit_adapter") or "python:resumekit.reference:build_resume_plan"
    seed = config.getoption("resumekit_seed")
    worker = getattr(config, "workerinput", None)  # a pytest-xdist worker: the controller chose the seed
    if seed is None and isinstance(worker, dict) and isinstance(worker.get(_SEED_KEY), int):
        seed = worker[_SEED_KEY]
    config.stash[_STATE] = _State(
        spec,
        config.getoption("resumekit_profile"),
        config.getoption("resumekit_timeout"),
        seed if seed is not None else random.SystemRandom().randrange(2**32),
        config.getoption("resumekit_kills"),
    )
    root = str(golden_dir())
    if not any(Path(arg.split("::")[0]).resolve().is_relative_to(golden_dir().resolve()) for arg in config.args if arg):
        config.args.append(root)


_SEED_KEY = "resumekit_seed"


def configure_node(node: Any) -> None:
    """Hand the controller's seed to a pytest-xdist worker as it starts."""
    state = node.config.stash.get(_STATE, None)
    if state is not None:
        node.workerinput[_SEED_KEY] = state.seed


def report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    return f"resumekit: adapter {state.spec!r}, profile {state.profile}, crash schedule seed {state.seed}"


def unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.adapter is not None:
        state.adapter.close()


def collect_file(file_path: Path, parent: pytest.Collector) -> GoldenFile | None:
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    if not file_path.resolve().is_relative_to(golden_dir().resolve()):
        return None
    collected: GoldenFile = GoldenFile.from_parent(parent, path=file_path)
    return collected


class GoldenFile(pytest.File):
    """One fixture file; a broken one is a collection error naming its line, case and pointer."""

    def collect(self) -> Iterator[GoldenItem]:
        try:
            cases = load_file(self.path, golden_dir())
        except FixtureError as error:
            raise self.CollectError(f"invalid resumekit fixture: {error}") from None
        state: _State = self.config.stash[_STATE]
        kinds = self.config.getoption("resumekit_kind")
        opt_in = contracts.opt_in_kinds()
        for case in cases:
            # As `resumekit run --kind`: the opt-in kinds (campaigns of hundreds of runs) only when named.
            wanted = case.kind in kinds if kinds else case.kind not in opt_in
            if wanted and case.runs_in(state.profile):
                yield GoldenItem.from_parent(self, name=case.id, case=case)


class GoldenFailure(Exception):
    """A golden case that did not pass, carrying its verdict."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.case_id)
        self.result = result


class GoldenItem(pytest.Item):
    """One golden case, run against the configured implementation."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        for clause in case.clauses:
            self.user_properties.append(("clause", clause))

    def runtest(self) -> None:
        state: _State = self.config.stash[_STATE]
        adapter = state.connect()
        if adapter is None:
            raise GoldenFailure(
                CaseResult(self.case.id, self.case.kind, Outcome.ERRORED, self.case.clauses, message=state.start_error)
            )
        info = adapter.implementation
        reason = missing_claims(self.case, info.capabilities, info.profiles)
        if reason is None and self.case.kind not in state.runners:
            reason = f"{self.case.kind!r} cases need a process adapter (an adapter command, or 'reference')"
        if reason is not None:
            pytest.skip(f"not claimed: {reason}")
        kind = contracts.kind(self.case.kind)
        if kind is not None and kind.seeded:  # in the JUnit report, with the command to replay it
            self.user_properties.append(("seed", str(state.seed)))
        result = state.runners[self.case.kind](self.case)
        if result.outcome in (Outcome.SKIPPED, Outcome.NOT_CLAIMED, Outcome.NOT_RUN):
            pytest.skip(f"{result.outcome.value}: {result.message}")
        if result.outcome is not Outcome.PASSED:
            raise GoldenFailure(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, GoldenFailure):
            result = excinfo.value.result
            where = f"{self.path}:{self.case.source.line}" if self.case.source.line else str(self.path)
            return f"{where}: golden case {self.case.id!r}: {self.case.description}\n{report.format_result(result)}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.case.source.line - 1 if self.case.source.line else None
        return self.path, line, f"golden: {self.case.id}"
