"""The crash harness: real processes, killed for real, and the ledger they leave behind.

Fault model: a process crash. The writer is killed with SIGKILL (TerminateProcess on Windows), so
data it handed to the operating system survives and nothing in its own buffers does. This proves
recovery from a process crash, not durability across power loss or a kernel crash.

With a ``PowerLoss`` (``resumekit run --fault-model power-loss``, Linux) the same cases run under a
simulated power cut instead: the workspace is a FUSE layer (``resumekit.conformance.powerloss``) that
keeps only what was synced, every kill is followed by a cut, and at every acknowledgement the kit
reads the durable view of the ledger (``phase0.ledger-file``) to see that the row was synced first.

This module binds the harnesses into the runner of each Phase 0 process kind (``runners``). They
live beside it: ``failpoints`` (crash), ``ledger_faults`` (ledger-fault), ``schedule`` (schedule),
``exit_marker`` (the orderly-exit control every case that kills needs first), and ``session``, the
dealings with the implementation's processes that all of them share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resumekit.conformance.cases import Case
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.fault_models import PROCESS_CRASH
from resumekit.conformance.phase0.cases import CrashCase, ScheduleCase
from resumekit.conformance.phase0.exit_marker import MARKER_NEVER_WRITTEN, MarkerControl, orderly_exit_problem
from resumekit.conformance.phase0.failpoints import run_crash
from resumekit.conformance.phase0.ledger_faults import expected_torn_tail, run_ledger_fault
from resumekit.conformance.phase0.schedule import STREAMS, KillProgress, run_schedule, stream_kills
from resumekit.conformance.phase0.session import RUN_ID, SESSION_ID, Factory
from resumekit.conformance.powerloss import PowerLoss, unavailable
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.conformance.runner import result_for

FAULT_MODEL = PROCESS_CRASH


def process_runners(
    factory: Factory,
    *,
    profile: str,
    seed: int,
    kills: int,
    adapter_spec: str,
    on_kill: KillProgress | None = None,
    power: PowerLoss | None = None,
    jobs: int = 1,
) -> dict[str, Callable[[Any], CaseResult]]:
    """The case runners for the crash kinds, bound to a maker of fresh implementation processes.

    The cases that kill (crash, schedule) first need the positive control of the marker to pass.
    With *power* they run under simulated power cuts; where the layer cannot run, they are not run,
    with the reason.
    """
    control = MarkerControl(factory)
    option = " --fault-model power-loss" if power is not None else ""

    def not_run(case: Case) -> CaseResult | None:
        if power is None:
            return None
        reason = unavailable()
        if reason is None:
            return None
        return result_for(case, Outcome.NOT_RUN, message=f"power loss cannot be simulated here: {reason}",
                          fault_model=POWER_LOSS_MODEL)

    def crash(case: CrashCase) -> CaseResult:
        return not_run(case) or control.verdict(case) or run_crash(case, factory, profile, power)

    def schedule(case: ScheduleCase) -> CaseResult:
        replay = f'resumekit run --adapter "{adapter_spec}" --only {case.id} --seed {seed} --kills {kills}{option}'
        return (
            not_run(case)
            or control.verdict(case)
            or run_schedule(
                case, factory, profile, seed=seed, kills=kills, replay=replay, on_kill=on_kill, jobs=jobs, power=power
            )
        )

    return {
        "crash": crash,
        "ledger-fault": lambda case: run_ledger_fault(case, factory, profile),
        "schedule": schedule,
    }


__all__ = [
    "FAULT_MODEL",
    "MARKER_NEVER_WRITTEN",
    "POWER_LOSS_MODEL",
    "RUN_ID",
    "SESSION_ID",
    "STREAMS",
    "Factory",
    "KillProgress",
    "PowerLoss",
    "expected_torn_tail",
    "orderly_exit_problem",
    "process_runners",
    "run_crash",
    "run_ledger_fault",
    "run_schedule",
    "stream_kills",
]
