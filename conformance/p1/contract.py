"""The P1 contract as the kit registers it: its kinds, fixture files, runners, spec and the gate table.

Importing this module loads only the case classes and the registry's value types; the readers and the
harness (the control plane, an HTTP server, SQLite, git) are imported when a load or a run first needs
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.cases import Case
from resumekit.conformance.contracts import CaseRunner, Contract, FileKind, Kind, RunContext, lazy_reader
from resumekit.conformance.p1.cases import MatrixCase, ScenarioCase, SoakCase
from resumekit.conformance.results import CaseResult, Summary
from resumekit.conformance.schemas import BASE

KINDS = (
    Kind("p1", ("p1.worker",), "a scenario: origins, tasks, scripted faults, the kit's steps and the outcomes"),
    Kind(
        "p1-campaign",
        ("p1.worker", "p1.failpoint-any"),
        "crash matrices and soaks of hundreds of worker runs, run only when named",
        opt_in=True,
        campaign=True,
    ),
)

# What a scenario's start steps ask of the worker beyond its kind's capabilities.
_STEP_CAPABILITIES = (("diskFault", "p1.disk-faults"), ("tool", "p1.tools"))


def step_capabilities(case: Case) -> tuple[str, ...]:
    """Capabilities a scenario needs beyond its kind's, for what its steps ask of the worker."""
    if not isinstance(case, ScenarioCase):
        return ()
    starts = [step["start"] for step in case.steps if "start" in step]
    return tuple(capability for name, capability in _STEP_CAPABILITIES if any(name in start for start in starts))


_READERS = "resumekit.conformance.p1.fixtures"
FILES = (
    FileKind("p1/scenarios", BASE + "golden/p1-scenarios.json", lazy_reader(_READERS, "read_scenarios")),
    FileKind("p1/failpoints", BASE + "golden/p1-failpoints.json", lazy_reader(_READERS, "read_failpoints")),
    FileKind("p1/crash-matrix", BASE + "golden/p1-crash-matrix.json", lazy_reader(_READERS, "read_crash_matrix")),
    FileKind("p1/soak", BASE + "golden/p1-soak.json", lazy_reader(_READERS, "read_soak")),
)


def runners(context: RunContext) -> Mapping[str, CaseRunner]:
    """The scenario and campaign runners, when the kit can start fresh worker processes (none otherwise)."""
    if context.factory is None:
        return {}
    from resumekit.conformance.p1 import harness

    factory, profile = context.factory, context.profile
    return {
        "p1": harness.scenario_runner(
            factory, profile=profile, power=context.power, keeper=context.keeper, budget=context.budget
        ),
        "p1-campaign": harness.campaign_runner(
            factory, profile=profile, seed=context.requested_seed, adapter_spec=context.adapter_spec
        ),
    }


GATES = Summary(key="gates", title="P1 gates", row_label="P1 gate", case_label="scenarios")


def gate_rows(results: Sequence[CaseResult], profile: str) -> tuple[Mapping[str, Any], ...]:
    """The gate table over the P1 results of a run (docs/spec/p1.md, section 17), as summary rows: each
    row's verdict is ``GateRow.verdict`` (failed, not run, passed or not claimed), and ``notRun`` counts
    the gate's scenarios that did not run, the not claimed ones included; ``failedBy`` says why each scenario
    of ``failed`` counts against the gate (``gates.Counted``). No P1 result, no table."""
    from resumekit.conformance.p1.gates import gate_table

    gates_of = {result.case_id: result.counts_toward for result in results if result.counts_toward}
    if not gates_of:
        return ()
    rows = []
    for row in gate_table(gates_of, results, profile=profile):
        rows.append(
            {
                "name": row.gate,
                "verdict": row.verdict,
                "cases": row.scenarios,
                "passed": row.passed,
                "failed": list(row.failed),
                "notRun": row.not_run,
                "clauses": list(row.clauses),
                "attested": row.attested,
                "failedBy": [counted.to_dict() for counted in row.failed_by],
            }
        )
    return tuple(rows)


def checks() -> list[tuple[str, tuple[str | None, ...], str]]:
    """Every check a P1 mismatch can name: the table of rules, the campaigns' checks and the table's own."""
    from resumekit.conformance.p1.checks import rules

    return rules.listing()


CONTRACT = Contract(
    name="p1",
    title="P1",
    kinds=KINDS,
    files=FILES,
    case_types=(ScenarioCase, MatrixCase, SoakCase),
    spec_files=("p1.md", "p1-control-plane.md"),
    kit_spec_files=("p1-control-plane.md",),
    runners=runners,
    summary=GATES,
    summarize=gate_rows,
    extra_capabilities=step_capabilities,
    checks=checks,
    # The task's format is the control plane's to serve (the kit's), and EVID-1 to EVID-4 say how the kit
    # gathers evidence: a worker can break none of them.
    kit_clauses=("TASK-1", "EVID-1", "EVID-2", "EVID-3", "EVID-4"),
    not_yet_covered={
        "KEY-3": "the reference's own key formula: other workers may use any key with the properties of KEY-1",
    },
)
