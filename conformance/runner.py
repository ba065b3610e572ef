"""Runs selected cases against an adapter and folds the verdicts into a Run."""

from __future__ import annotations

import dataclasses
import datetime
import platform
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from resumekit.conformance import __version__, _process, contracts
from resumekit.conformance.adapters import Adapter, AdapterStartError, Reply
from resumekit.conformance.cases import Case
from resumekit.conformance.contracts import CaseRunner, RunContext
from resumekit.conformance.results import CaseResult, Outcome, Run, Selection, Shard


class Reporter(Protocol):
    """Told about each case as the run goes."""

    def case_started(self, case: Case) -> None: ...

    def case_finished(self, result: CaseResult) -> None: ...


class _Silent:
    def case_started(self, case: Case) -> None:
        pass

    def case_finished(self, result: CaseResult) -> None:
        pass


def result_for(case: Case, outcome: Outcome, **fields: Any) -> CaseResult:
    """A result carrying the case's identity."""
    return CaseResult(
        case_id=case.id,
        kind=case.kind,
        outcome=outcome,
        clauses=case.clauses,
        profile=case.profile,
        source=case.source,
        counts_toward=case.counts_toward,
        **fields,
    )


def start_failed(case: Case, error: AdapterStartError, **fields: Any) -> CaseResult:
    """The result of a case whose implementation process could not be started."""
    return result_for(
        case,
        Outcome.ERRORED,
        message=f"cannot start the implementation: {error.message}",
        stderr_tail=error.stderr_tail or None,
        **fields,
    )


def errored(case: Case, reply: Reply, what: str) -> CaseResult:
    """The result for a reply that gave no usable answer."""
    return result_for(
        case,
        Outcome.ERRORED,
        message=f"{what}: {reply.message}",
        stderr_tail=reply.stderr_tail or None,
        transcript=reply.transcript,
    )


def missing_claims(case: Case, capabilities: Sequence[str], profiles: Sequence[str]) -> str | None:
    """Why the implementation's claims do not cover *case*, or None."""
    needed = contracts.required_capabilities(case)
    missing = [c for c in needed if c not in capabilities]
    if missing:
        return f"needs capabilities {missing}, which the implementation does not claim"
    if case.profile not in profiles:
        return f"belongs to the {case.profile!r} profile, which the implementation does not claim"
    return None


def platform_facts() -> dict[str, str]:
    """The machine a run happened on."""
    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run(
    cases: Iterable[Case],
    adapter: Adapter,
    *,
    profile: str,
    reporter: Reporter | None = None,
    runners: Mapping[str, CaseRunner] | None = None,
    seed: int | None = None,
    golden_digest: str = "",
    selection: Selection | None = None,
    known_failures: Mapping[str, str] | None = None,
    golden_root: str = "",
    jobs: int = 1,
    shard: Shard | None = None,
) -> Run:
    """Run every case, each by the runner for its kind: those the registered contracts build for *adapter*
    alone, and *runners* (the process kinds', say) over them.

    *profile* is the profile answers are compared in; *selection* records what was asked for (the
    verdict reads its scope from it). *known_failures* maps case ids to the reason they are expected
    to fail (``--expect``). A KeyboardInterrupt ends the run early: every process the kit started is
    killed, and the Run holds what finished, marked interrupted.

    With *jobs* above 1 the cases run on that many threads at once. Every process kind makes its own
    scratch workspace and implementation processes, so those cases run side by side; the cases of a
    serial kind (``Kind.serial``) all go, one after another, through *adapter* on one thread, so each
    determinism check (the same question asked twice in a row) is exactly what it is with one job.
    Whatever order cases finish in, the reporter hears of them, and the Run lists them, in the order of
    *cases*.
    """
    reporter = reporter or _Silent()
    # The kinds *adapter* alone can run (``Kind.in_process``), then the caller's, which may replace them.
    by_kind = contracts.runners(RunContext(adapter, profile))
    by_kind.update(runners or {})
    info = adapter.implementation
    started, clock = _now(), time.perf_counter()
    chosen = list(cases)

    def one(case: Case) -> CaseResult:
        result = _run_one(case, by_kind, info.capabilities, info.profiles)
        if known_failures and case.id in known_failures:
            result = dataclasses.replace(result, known_failure=known_failures[case.id])
        return result

    results, interrupted = _gather(chosen, one, jobs, reporter)
    return Run(
        implementation=info,
        profile=profile,
        results=tuple(results),
        summaries=contracts.summaries({case.kind for case in chosen}, results, profile),
        started=started,
        finished=_now(),
        duration=time.perf_counter() - clock,
        platform=platform_facts(),
        kit_version=__version__,
        seed=seed,
        golden_digest=golden_digest,
        selection=selection,
        interrupted=interrupted,
        selected=len(chosen),
        golden_root=golden_root,
        jobs=max(1, jobs),
        shard=shard,
    )


def _gather(
    chosen: Sequence[Case], one: Callable[[Case], CaseResult], jobs: int, reporter: Reporter
) -> tuple[list[CaseResult], bool]:
    """The results of *chosen* in order, told to *reporter* as they come, and whether Ctrl-C ended the run."""
    results: list[CaseResult] = []
    futures = _in_parallel(chosen, one, jobs) if jobs > 1 else []
    try:
        for index, case in enumerate(chosen):
            reporter.case_started(case)
            result = futures[index].result() if futures else one(case)
            results.append(result)
            reporter.case_finished(result)
    except KeyboardInterrupt:
        _process.kill_all()
        return results, True
    finally:  # interrupted, or a runner raised: start no further case
        for future in futures:
            future.cancel()
    return results, False


def _run_one(
    case: Case, by_kind: Mapping[str, CaseRunner], capabilities: Sequence[str], profiles: Sequence[str]
) -> CaseResult:
    begun = time.perf_counter()
    reason = missing_claims(case, capabilities, profiles)
    if reason is not None:
        result = result_for(case, Outcome.NOT_CLAIMED, message=reason)
    elif case.kind not in by_kind:
        result = result_for(case, Outcome.NOT_CLAIMED, message=f"this adapter cannot run {case.kind!r} cases")
    else:
        result = by_kind[case.kind](case)
    return _timed(result, time.perf_counter() - begun)


def _in_parallel(chosen: Sequence[Case], one: Callable[[Case], CaseResult], jobs: int) -> list[Future[CaseResult]]:
    """Start *chosen* on up to *jobs* daemon threads; one future per case, in the order of *chosen*.

    The cases of serial kinds form one unit, run in order on one thread; every other case is a unit of its
    own, those of kinds whose single cases take longest (``Kind.first``) started first, so that the run
    does not end waiting on one. A unit's exception fails its own future, which the caller meets in order.
    """
    futures: list[Future[CaseResult]] = [Future() for _ in chosen]
    kinds = {case.kind: contracts.kind(case.kind) for case in chosen}
    serial = {name for name, kind in kinds.items() if kind is not None and kind.serial}
    first = {name for name, kind in kinds.items() if kind is not None and kind.first}
    in_order = [index for index, case in enumerate(chosen) if case.kind in serial]
    rest = [index for index, case in enumerate(chosen) if case.kind not in serial]
    rest.sort(key=lambda index: 0 if chosen[index].kind in first else 1)  # stable: selection order within
    units: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
    for unit in ([in_order] if in_order else []) + [[index] for index in rest]:
        units.put(unit)
    workers = min(jobs, len(rest) + (1 if in_order else 0))

    def work() -> None:
        while True:
            try:
                unit = units.get_nowait()
            except queue.Empty:
                return
            for index in unit:
                future = futures[index]
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(one(chosen[index]))
                except BaseException as error:  # handed to the caller, who meets it in order
                    future.set_exception(error)

    for number in range(workers):
        threading.Thread(target=work, name=f"resumekit-job-{number + 1}", daemon=True).start()
    return futures


def _timed(result: CaseResult, seconds: float) -> CaseResult:
    return dataclasses.replace(result, duration=seconds)
