"""The P1 harness: the case runners the CLI binds to an adapter, for scenarios and for campaigns.

A scenario runs for real (``scenario``): the kit builds its world (``world``), starts the simulated control
plane, drives worker processes (``worker``) through the scenario's steps (``verbs``), kills them with real
signals, watches the workspace root (``watch``) and judges from evidence it collects itself. The campaigns
run many scenarios each: the crash matrices and the cache tear sweep (``matrix``), and the soak (``soak``).
Under simulated power loss every kill is a power cut of the kit's FUSE layer over the state directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.history import ReportBudget
from resumekit.conformance.keep import Keeper
from resumekit.conformance.p1 import links
from resumekit.conformance.p1.cases import ScenarioCase, SoakCase
from resumekit.conformance.p1.matrix import run_matrix
from resumekit.conformance.p1.scenario import run_scenario
from resumekit.conformance.p1.soak import SHRINK_STEPS, SOAK_FAULTS, run_soak, soak_steps
from resumekit.conformance.p1.verbs import SETTLE_ROUNDS
from resumekit.conformance.p1.watch import WATCH_INTERVAL_S
from resumekit.conformance.p1.worker import ANY_FAILPOINT, WAIT_SLICE_MS, Factory
from resumekit.conformance.p1.world import DECOY_FILES, KILL_MODEL, NO_CRASH_MODEL, SCENARIO_BUDGET
from resumekit.conformance.powerloss import PowerLoss, unavailable
from resumekit.conformance.results import CaseResult, Outcome
from resumekit.conformance.runner import result_for


def scenario_runner(
    factory: Factory,
    *,
    profile: str,
    power: PowerLoss | None = None,
    keeper: Keeper | None = None,
    budget: ReportBudget | None = None,
) -> Callable[[Any], CaseResult]:
    """The case runner for P1 scenarios, bound to a maker of fresh worker adapters.

    With *power* the scenarios that kill run under simulated power loss; where the layer cannot run,
    those are not run, with the reason (the others run as usual). A scenario that plants symbolic links
    is not run, with the reason, where this machine refuses them (``links``). With *keeper* (``--keep-failed``) the
    world of each scenario that fails or errs is kept.
    """

    def run(case: ScenarioCase) -> CaseResult:
        refused = links.refused() if links.needs_links(case.steps) else links.fifo_refused(case.steps)
        if refused is not None:
            return result_for(case, Outcome.NOT_RUN, message=refused)
        if power is not None and _kills(case):
            reason = unavailable()
            if reason is not None:
                message = f"power loss cannot be simulated here: {reason}"
                return result_for(case, Outcome.NOT_RUN, message=message, fault_model=POWER_LOSS_MODEL)
            return run_scenario(case, factory, profile, power, keeper=keeper, budget=budget)
        return run_scenario(case, factory, profile, keeper=keeper, budget=budget)

    return run


def _kills(case: ScenarioCase) -> bool:
    """Whether a scenario kills its worker: a kill step, or a kit-side kill point among its faults."""
    steps = any("kill" in step for step in case.steps)
    faults = [*case.faults, *(step["fault"] for step in case.steps if "fault" in step)]
    return steps or any(fault.get("fault") == "KillPoint" for fault in faults)


def campaign_runner(
    factory: Factory, *, profile: str, seed: int | None = None, adapter_spec: str = "ADAPTER"
) -> Callable[[Any], CaseResult]:
    """The case runner for P1 campaigns (the crash matrix, the soak), bound to a maker of fresh worker
    adapters; *seed* (the run's --seed, if given) replaces a soak's own."""

    def run(case: Any) -> CaseResult:
        if isinstance(case, SoakCase):
            return run_soak(case, factory, profile, case.seed if seed is None else seed, adapter_spec)
        return run_matrix(case, factory, profile)

    return run


__all__: Sequence[str] = (
    "ANY_FAILPOINT",
    "DECOY_FILES",
    "KILL_MODEL",
    "NO_CRASH_MODEL",
    "SCENARIO_BUDGET",
    "SETTLE_ROUNDS",
    "SHRINK_STEPS",
    "SOAK_FAULTS",
    "WAIT_SLICE_MS",
    "WATCH_INTERVAL_S",
    "Factory",
    "campaign_runner",
    "run_matrix",
    "run_scenario",
    "run_soak",
    "scenario_runner",
    "soak_steps",
)
