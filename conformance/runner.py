"""Runs selected cases against an adapter and folds the verdicts into a Run."""

from __future__ import annotations

import dataclasses
import datetime
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from resumekit.conformance import __version__, _files, _process, contracts
from resumekit.conformance._schedule import Schedule
from resumekit.conformance.adapters import Adapter, AdapterStartError, Reply
from resumekit.conformance.cases import Case
from resumekit.conformance.contracts import CaseRunner, RunContext
from resumekit.conformance.results import CaseResult, Outcome, Run, Selection, Shard

INTERRUPT_GRACE_S = 5.0  # how long Ctrl-C waits for the running cases to end before it removes their folders


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
    killed, the scratch folder of every running case removed, and the Run holds what finished, marked
    interrupted.

    With *jobs* above 1 the cases run on that many threads at once. Every process kind makes its own
    scratch workspace and implementation processes, so those cases run side by side; the cases of a
    serial kind (``Kind.serial``) all go, one after another, through *adapter* on one thread, so each
    determinism check (the same question asked twice in a row) is exactly what it is with one job.
    Whatever order cases finish in, the reporter hears of them, and the Run lists them, in the order of
    *cases*.
    """
    info = adapter.implementation
    started, clock = _now(), time.perf_counter()
    chosen = list(cases)
    one = _case_runner(adapter, profile, runners or {}, known_failures or {})
    results, interrupted = _gather(chosen, one, jobs, reporter or _Silent())
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


def _case_runner(
    adapter: Adapter, profile: str, runners: Mapping[str, CaseRunner], known_failures: Mapping[str, str]
) -> Callable[[Case], CaseResult]:
    """What runs one case: the runner of its kind, the result marked if ``--expect`` named the case."""
    # The kinds *adapter* alone can run (``Kind.in_process``), then the caller's, which may replace them.
    by_kind = {**contracts.runners(RunContext(adapter, profile)), **runners}
    info = adapter.implementation

    def one(case: Case) -> CaseResult:
        result = _run_one(case, by_kind, info.capabilities, info.profiles)
        if case.id in known_failures:
            result = dataclasses.replace(result, known_failure=known_failures[case.id])
        return result

    return one


def _gather(
    chosen: Sequence[Case], one: Callable[[Case], CaseResult], jobs: int, reporter: Reporter
) -> tuple[list[CaseResult], bool]:
    """The results of *chosen* in order, told to *reporter* as they come, and whether Ctrl-C ended the run.

    Each case runs on a thread of a ``Schedule``, under its deadline (``Case.deadline_s``) for all the kit
    does for it, even with one job: a case the kit cannot finish is abandoned, and the run goes on.
    """
    results: list[CaseResult] = []
    schedule = Schedule(chosen, one, jobs, result_for)
    try:
        for index, case in enumerate(chosen):
            reporter.case_started(case)
            result = schedule.result(index)
            results.append(result)
            reporter.case_finished(result)
    except KeyboardInterrupt:
        _files.stop(schedule.threads())  # from now on a case thread starts no process and makes no folder
        _process.kill_all()
        # Every running case's scratch folder goes: each case removes its own as it ends; after the grace,
        # the kit kills what a thread started before it saw the stop, and removes what is left.
        stopped = schedule.interrupt(INTERRUPT_GRACE_S)
        _process.kill_all()
        _files.interrupt(stopped)
        return results, True
    finally:  # interrupted, or a runner raised: start no further case
        schedule.cancel()
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


def _timed(result: CaseResult, seconds: float) -> CaseResult:
    return dataclasses.replace(result, duration=seconds)
