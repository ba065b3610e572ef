"""The Phase 0 crash contract as the kit registers it: its kinds, fixture files, runners and spec.

Importing this module loads only the case classes and the registry's value types; the readers, the
decision runner and the crash harness are imported when a run or a load first needs them.
"""

from __future__ import annotations

from collections.abc import Mapping

from resumekit.conformance._defaults import DEFAULT_KILLS
from resumekit.conformance.contracts import CaseRunner, Contract, FileKind, Kind, RunContext, lazy_reader
from resumekit.conformance.phase0.cases import CrashCase, DecisionCase, LedgerFaultCase, ScheduleCase
from resumekit.conformance.schemas import BASE

KINDS = (
    Kind(
        "decision",
        ("phase0.projection",),
        "a committed prefix and the plan the spec demands for it",
        in_process=True,
        serial=True,
    ),
    Kind(
        "crash",
        ("phase0.store", "phase0.crash", "phase0.projection"),
        "a failpoint: append a committed prefix, kill the writer, reopen and decide",
    ),
    Kind("ledger-fault", ("phase0.store", "phase0.ledger-file"), "damaged ledger bytes, and what a read must report"),
    Kind(
        "schedule",
        ("phase0.store", "phase0.crash"),
        "a long append stream whose writer is killed at seeded random moments",
        first=True,
        seeded=True,
    ),
)


_READERS = "resumekit.conformance.phase0.fixtures"
FILES = (
    FileKind("phase0/decisions", BASE + "golden/decisions.json", lazy_reader(_READERS, "read_decisions")),
    FileKind("phase0/failpoints", BASE + "golden/failpoints.json", lazy_reader(_READERS, "read_failpoints")),
    FileKind("phase0/ledger-faults", BASE + "golden/ledger-faults.json", lazy_reader(_READERS, "read_ledger_faults")),
    FileKind(
        "phase0/crash-schedule", BASE + "golden/crash-schedule.json", lazy_reader(_READERS, "read_crash_schedule")
    ),
)


def runners(context: RunContext) -> Mapping[str, CaseRunner]:
    """Decisions through the run's adapter; the process kinds when the kit can start fresh processes."""
    from resumekit.conformance.phase0.decisions import run_decision

    built: dict[str, CaseRunner] = {
        "decision": lambda case: run_decision(case, context.adapter, context.profile)  # type: ignore[arg-type]
    }
    if context.factory is None:
        return built
    from resumekit.conformance.phase0 import crash

    built.update(
        crash.process_runners(
            context.factory,
            profile=context.profile,
            seed=context.seed,
            kills=context.kills if context.kills is not None else DEFAULT_KILLS,
            adapter_spec=context.adapter_spec,
            on_kill=context.on_kill,
            power=context.power,
            jobs=context.jobs,
        )
    )
    return built


CONTRACT = Contract(
    name="phase0",
    title="Phase 0",
    kinds=KINDS,
    files=FILES,
    case_types=(DecisionCase, CrashCase, LedgerFaultCase, ScheduleCase),
    spec_files=("phase0.md",),
    runners=runners,
    kit_clauses=("GRADE-1",),  # how the kit grades a failed plan (phase0/grades.py), not a rule for a runtime
    not_yet_covered={
        "STORE-8": "needs two adapter processes on one run, which the protocol does not drive; the reference's "
        "tests run two writers on one run",
    },
)
