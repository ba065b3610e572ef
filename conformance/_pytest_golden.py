"""The golden fixtures as pytest items: what the resumekit pytest plugin loads once it is asked to run.

Kept apart from the plugin's entry module so that a pytest run that does not ask for resumekit never
imports the runner, the schemas or YAML. Every case is an item whose node id is
``golden/<path inside the golden set>::<case id>``, wherever the kit is installed, so test history and
JUnit names stay the same across virtual environments and Python versions. Each item hands its result
to the session (``_pytest_verdict``), which gives the verdict `resumekit run` would give.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import contracts, report
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import Adapter, AdapterStartError, ProcessAdapter, open_adapter, process_factory
from resumekit.conformance.cases import Case
from resumekit.conformance.fixtures import FixtureError, load_file
from resumekit.conformance.results import CaseResult, Implementation, Outcome
from resumekit.conformance.runner import missing_claims, result_for

STATE = pytest.StashKey["State"]()
_SEED_KEY = "resumekit_seed"
NODE_PREFIX = "golden/"  # node ids, JUnit class names and files: golden/<path inside the golden set>
DEFAULT_ADAPTER = "python:resumekit.reference:build_resume_plan"
# What a certification cannot count as passed, and --resumekit-certify fails: the implementation declined
# the case, or the kit could not run it here.
_NOT_DONE = (Outcome.SKIPPED, Outcome.NOT_RUN)


class State:
    """The session's options and adapter, the adapter opened at the first golden item and closed at the end."""

    def __init__(self, config: pytest.Config, seed: int) -> None:
        self.spec: str = config.getoption("resumekit_adapter") or DEFAULT_ADAPTER
        self.profile: str = config.getoption("resumekit_profile")  # as asked for
        self.timeout: float = config.getoption("resumekit_timeout")
        self.kills: int = config.getoption("resumekit_kills")
        self.kinds: tuple[str, ...] = tuple(config.getoption("resumekit_kind") or ())
        self.certify: bool = bool(config.getoption("resumekit_certify"))
        self.seed = seed
        self.adapter: Adapter | None = None
        self.start_error: str | None = None
        self.runners: dict[str, Any] = {}
        self.compared = self.profile  # the profile answers are compared in, once the implementation is known

    def connect(self) -> Adapter | None:
        """The adapter, or None when it cannot start (``start_error`` then says why)."""
        if self.start_error is not None or self.adapter is not None:
            return self.adapter
        try:
            self.adapter = open_adapter(self.spec, timeout=self.timeout)
        except AdapterStartError as error:
            self.start_error = f"resumekit cannot start {self.spec!r}: {error}"
            return None
        # As `resumekit run`: an implementation that does not claim the profile asked for is compared in core.
        info = self.adapter.implementation
        self.compared = self.profile if self.profile in info.profiles else "core"
        factory = None
        if isinstance(self.adapter, ProcessAdapter):
            factory = process_factory(self.spec, timeout=self.timeout, budget=self.adapter.budget)
        context = contracts.RunContext(
            self.adapter, self.compared, factory=factory, adapter_spec=self.spec, seed=self.seed, kills=self.kills
        )
        self.runners = contracts.runners(context)
        return self.adapter

    @property
    def implementation(self) -> Implementation | None:
        return self.adapter.implementation if self.adapter is not None else None


def configure(config: pytest.Config) -> None:
    seed = config.getoption("resumekit_seed")
    worker = getattr(config, "workerinput", None)  # a pytest-xdist worker: the controller chose the seed
    if seed is None and isinstance(worker, dict) and isinstance(worker.get(_SEED_KEY), int):
        seed = worker[_SEED_KEY]
    config.stash[STATE] = State(config, seed if seed is not None else random.SystemRandom().randrange(2**32))
    root = golden_dir().resolve()
    config.args[:] = [_golden_arg(arg, root) for arg in config.args]
    if not any(Path(arg.split("::")[0]).resolve().is_relative_to(root) for arg in config.args if arg):
        config.args.append(str(root))


def _golden_arg(arg: str, root: Path) -> str:
    """A node id as the plugin prints it (``golden/...yaml::id``), given back, made a path pytest can collect.

    A path of the user's own called ``golden/`` is left alone.
    """
    path, sep, rest = arg.partition("::")
    if not path.startswith(NODE_PREFIX) or Path(path).exists():
        return arg
    return str(root / path[len(NODE_PREFIX) :]) + sep + rest


def configure_node(node: Any) -> None:
    """Hand the controller's seed to a pytest-xdist worker as it starts."""
    state = node.config.stash.get(STATE, None)
    if state is not None:
        node.workerinput[_SEED_KEY] = state.seed


def report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(STATE, None)
    if state is None:
        return None
    certify = "; --resumekit-certify: the session fails unless the run certifies" if state.certify else ""
    return f"resumekit: adapter {state.spec!r}, profile {state.profile}, crash schedule seed {state.seed}{certify}"


def unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.adapter is not None:
        state.adapter.close()


def node_id(file_path: Path) -> str | None:
    """``golden/<path inside the golden set>`` for a fixture file, or None when it is not in the golden set."""
    root, resolved = golden_dir().resolve(), file_path.resolve()
    if file_path.suffix not in (".yaml", ".yml") or not resolved.is_relative_to(root):
        return None
    return NODE_PREFIX + resolved.relative_to(root).as_posix()


def collect_file(file_path: Path, parent: pytest.Collector) -> GoldenFile | None:
    nodeid = node_id(file_path)
    if nodeid is None:
        return None
    collected: GoldenFile = GoldenFile.from_parent(parent, path=file_path, nodeid=nodeid)
    return collected


def wanted(case: Case, state: State) -> bool:
    """Whether a `resumekit run` with the session's profile and --kind would select *case*."""
    # The opt-in kinds (campaigns of hundreds of runs) only when named.
    in_kinds = case.kind in state.kinds if state.kinds else case.kind not in contracts.opt_in_kinds()
    return in_kinds and case.runs_in(state.profile)


class GoldenFile(pytest.File):
    """One fixture file; a broken one is a collection error naming its line, case and pointer."""

    def collect(self) -> Iterator[GoldenItem]:
        try:
            cases = load_file(self.path, golden_dir())
        except FixtureError as error:
            raise self.CollectError(f"invalid resumekit fixture: {error}") from None
        state: State = self.config.stash[STATE]
        for case in cases:
            if wanted(case, state):
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
        self.result: CaseResult | None = None  # the verdict, for the session's own (``_pytest_verdict``)
        for clause in case.clauses:
            self.user_properties.append(("clause", clause))

    def runtest(self) -> None:
        state: State = self.config.stash[STATE]
        begun = time.perf_counter()
        result = self._verdict(state)
        self.result = result = dataclasses.replace(result, duration=time.perf_counter() - begun)
        if result.outcome is Outcome.NOT_CLAIMED:
            pytest.skip(f"not claimed: {result.message}")
        if result.outcome in _NOT_DONE and not state.certify:
            # Not a pass either: the session's verdict counts it against certification.
            pytest.skip(f"{result.outcome.value}, which counts against certification: {result.message}")
        if result.outcome is not Outcome.PASSED:
            raise GoldenFailure(result)

    def _verdict(self, state: State) -> CaseResult:
        """The case's result, as `resumekit run` would have it."""
        adapter = state.connect()
        if adapter is None:
            return result_for(self.case, Outcome.ERRORED, message=state.start_error)
        info = adapter.implementation
        reason = missing_claims(self.case, info.capabilities, info.profiles)
        if reason is None and self.case.kind not in state.runners:
            reason = f"this adapter cannot run {self.case.kind!r} cases (they need an adapter command, or 'reference')"
        if reason is not None:
            return result_for(self.case, Outcome.NOT_CLAIMED, message=reason)
        kind = contracts.kind(self.case.kind)
        if kind is not None and kind.seeded:  # in the JUnit report, with the command to replay it
            self.user_properties.append(("seed", str(state.seed)))
        result: CaseResult = state.runners[self.case.kind](self.case)
        return result

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, GoldenFailure):
            result = excinfo.value.result
            line = self.case.source.line
            where = f"{self.path}:{line}" if line else str(self.path)
            return f"{where}: golden case {self.case.id!r}: {self.case.description}\n{report.format_result(result)}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.case.source.line - 1 if self.case.source.line else None
        return self.path, line, f"golden: {self.case.id}"

    @property
    def location(self) -> tuple[str, int | None, str]:
        # What failure headers and JUnit's `file` show: the stable name, not a path inside a virtualenv.
        _, line, text = self.reportinfo()
        return self.parent.nodeid if self.parent is not None else self.nodeid, line, text
