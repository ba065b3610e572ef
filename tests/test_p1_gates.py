"""How a P1 gate's verdict is earned (docs/spec/p1.md, section 17), and campaigns that must visit something.

Every gate is checked against absent and empty evidence: no results, results that were not claimed, not run
on this machine or skipped, and scenarios that failed or errored without citing one of the gate's clauses.
None of them may read ``passed``. A crash matrix whose loop visited no crash point, and a soak that killed no
worker at a failpoint or fired no control-plane fault, fail (FPT-5, FPT-4) instead of passing with nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from resumekit.conformance import report
from resumekit.conformance.p1 import matrix, soak
from resumekit.conformance.p1.cases import MatrixCase, SoakCase
from resumekit.conformance.p1.contract import GATES as GATE_SUMMARY
from resumekit.conformance.p1.contract import gate_rows
from resumekit.conformance.p1.gates import GATES, GateRow, gate_table
from resumekit.conformance.p1.world import Unreached
from resumekit.conformance.results import (
    CaseResult,
    Implementation,
    Mismatch,
    Outcome,
    Run,
    Selection,
    Source,
    SummaryTable,
)

EVERY_GATE = tuple(GATES)

# Clauses of no gate: the kit's exit marker (CRASH-2, Phase 0's crash clause) and the capability claims (ADP-1).
NO_GATE_CLAUSES = ("CRASH-2", "ADP-1")


def _result(outcome: Outcome, *mismatches: Mismatch, case_id: str = "s", gates: Sequence[str] = EVERY_GATE,
            message: str | None = None) -> CaseResult:
    return CaseResult(case_id, "p1", outcome, mismatches=mismatches, message=message, counts_toward=tuple(gates))


def _rows(results: Sequence[CaseResult], profile: str = "core") -> dict[str, GateRow]:
    gates_of = {result.case_id: result.counts_toward for result in results}
    return {row.gate: row for row in gate_table(gates_of, results, profile=profile)}


def _verdicts(results: Sequence[CaseResult]) -> dict[str, str]:
    return {str(row["name"]): str(row["verdict"]) for row in gate_rows(results, "core")}


def test_no_clause_of_the_cases_below_belongs_to_a_gate() -> None:
    for gate, (core, strict, _) in GATES.items():
        assert not set(NO_GATE_CLAUSES) & set(core + strict), gate


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_no_results_pass_no_gate(gate: str) -> None:
    row = _rows([])[gate]
    assert (row.verdict, row.scenarios, row.passed) == ("not run", 0, 0)
    assert gate_rows([], "core") == ()  # and the report carries no gate table at all


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_only_results_of_other_gates_pass_no_gate(gate: str) -> None:
    others = [g for g in EVERY_GATE if g != gate]
    row = _rows([_result(Outcome.PASSED, gates=others)])[gate]
    assert (row.verdict, row.scenarios, row.passed) == ("not run", 0, 0)


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_only_not_claimed_results_make_a_gate_not_claimed(gate: str) -> None:
    results = [_result(Outcome.NOT_CLAIMED, case_id=f"s{n}", message="needs p1.worker") for n in range(3)]
    row = _rows(results)[gate]
    assert (row.verdict, row.scenarios, row.passed, row.not_claimed) == ("not claimed", 3, 0, 3)
    assert _verdicts(results)[gate] == "not claimed"


@pytest.mark.parametrize("gate", EVERY_GATE)
@pytest.mark.parametrize("outcome", [Outcome.NOT_RUN, Outcome.SKIPPED])
def test_only_results_that_did_not_run_make_a_gate_not_run(gate: str, outcome: Outcome) -> None:
    results = [_result(outcome, message="no FUSE on this machine")]
    row = _rows(results)[gate]
    assert (row.verdict, row.passed, row.not_run) == ("not run", 0, 1)
    assert _verdicts(results)[gate] == "not run"


@pytest.mark.parametrize("gate", EVERY_GATE)
@pytest.mark.parametrize("outcome", [Outcome.NOT_RUN, Outcome.SKIPPED])
def test_a_scenario_that_did_not_run_beside_passed_ones_keeps_the_gate_from_passing(
    gate: str, outcome: Outcome
) -> None:
    results = [_result(Outcome.PASSED, case_id="a"), _result(outcome, case_id="b", message="no FUSE")]
    row = _rows(results)[gate]
    assert (row.verdict, row.passed, row.not_run) == ("not run", 1, 1)


@pytest.mark.parametrize("gate", EVERY_GATE)
@pytest.mark.parametrize("clause", [*NO_GATE_CLAUSES, None])
def test_a_failed_scenario_fails_its_gates_whatever_its_mismatches_cite(gate: str, clause: str | None) -> None:
    wrong = Mismatch("/exit", "no exit marker", "an exit marker", clause, "the kill was no crash")
    results = [_result(Outcome.PASSED, case_id="a"), _result(Outcome.FAILED, wrong, case_id="b")]
    row = _rows(results)[gate]
    assert (row.verdict, row.failed, row.passed) == ("failed", ("b",), 1)
    assert _verdicts(results)[gate] == "failed"


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_a_failed_scenario_without_mismatches_and_an_errored_one_fail_their_gates(gate: str) -> None:
    for outcome in (Outcome.FAILED, Outcome.ERRORED):
        row = _rows([_result(outcome, message="the worker hung")])[gate]
        assert (row.verdict, row.failed, row.passed) == ("failed", ("s",), 0), outcome


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_a_gate_passes_when_a_scenario_ran_and_every_claimed_one_passed(gate: str) -> None:
    results = [_result(Outcome.PASSED, case_id="a"), _result(Outcome.NOT_CLAIMED, case_id="b", message="strict")]
    row = _rows(results)[gate]
    assert (row.verdict, row.scenarios, row.passed, row.not_claimed, row.failed) == ("passed", 2, 1, 1, ())
    assert row.to_dict()["verdict"] == "passed"


@pytest.mark.parametrize("gate", EVERY_GATE)
def test_a_failed_clause_of_a_gate_in_another_scenario_still_fails_it(gate: str) -> None:
    core, _, _ = GATES[gate]
    others = [g for g in EVERY_GATE if g != gate]
    broken = Mismatch("/somewhere", "right", "wrong", core[0], "broken on every scenario")
    results = [_result(Outcome.PASSED, case_id="mine", gates=(gate,)), _result(Outcome.FAILED, broken, gates=others)]
    row = _rows(results)[gate]
    assert (row.verdict, row.failed) == ("failed", ("s",))


@pytest.mark.parametrize("clause", [None, "SUB-6"])
def test_an_outcome_mismatch_fails_only_the_scenarios_own_gates_whatever_it_cites(clause: str | None) -> None:
    # An expected outcome names the scenario's rule for it, or no clause (checks/convergence.py): either way it
    # is a finding of that scenario, so it counts against its own gates and no gate of its clause.
    outcome = Mismatch("/expect/task/submissions", 1, 2, clause, "submissions that reached the control plane")
    own = "CRASH_RECOVERY_CONVERGENCE"
    rows = _rows([_result(Outcome.FAILED, outcome, gates=(own,))])
    assert {gate for gate, row in rows.items() if row.verdict == "failed"} == {own}


# The four findings of issue 19, each as it was reproduced.


def test_a_worker_that_does_not_claim_p1_journal_passes_no_gate() -> None:
    missing = Mismatch("/p1.journal", "claimed", "not claimed", "ADP-1", "no p1.journal: the JNL-5 evidence is missing")
    gates = {"a": EVERY_GATE[:5], "b": EVERY_GATE[4:]}
    results = [_result(Outcome.FAILED, missing, case_id=case, gates=named) for case, named in gates.items()]
    verdicts = _verdicts(results)
    assert set(verdicts) == set(EVERY_GATE) and set(verdicts.values()) == {"failed"}, verdicts


def test_a_scenario_failed_on_crash_2_fails_its_gates() -> None:
    marker = Mismatch("/exitMarker", "absent", "present", "CRASH-2", "the exit path ran: the kill was no crash")
    verdicts = _verdicts([_result(Outcome.FAILED, marker, gates=("CRASH_RECOVERY_CONVERGENCE",))])
    assert verdicts["CRASH_RECOVERY_CONVERGENCE"] == "failed"
    assert "passed" not in verdicts.values(), verdicts


def test_a_scenario_the_kit_could_not_run_passes_no_gate() -> None:
    verdicts = _verdicts([_result(Outcome.NOT_RUN, message="power loss needs FUSE")])
    assert set(verdicts.values()) == {"not run"}, verdicts


def _certified_run(results: tuple[CaseResult, ...]) -> Run:
    table = SummaryTable("p1", GATE_SUMMARY, gate_rows(results, "core"))
    implementation = Implementation(name="w", version="1", language="x", capabilities=("phase0.projection",))
    return Run(implementation, "core", results, "start", "end", 1.0, selection=Selection(profile="core"),
               summaries=(table,))


def test_an_unclaimed_kinds_gates_are_not_claimed_beside_a_certified_verdict() -> None:
    decision = CaseResult("d", "decision", Outcome.PASSED)
    scenarios = tuple(_result(Outcome.NOT_CLAIMED, case_id=f"p{n}", message="needs p1.worker") for n in range(2))
    run = _certified_run((decision, *scenarios))
    assert run.verdict.certified, run.verdict
    rows = run.summaries[0].rows
    assert {row["verdict"] for row in rows} == {"not claimed"}, rows
    text, markdown = report.format_summary(run), report.to_markdown(run)
    assert f"{EVERY_GATE[0]:<44}{'not claimed':>12}" in text, text
    assert f"| {EVERY_GATE[0]} | not claimed |" in markdown
    junit = report.to_junit(run)
    assert "not claimed: none of its scenarios is claimed" in junit, junit


# Campaigns that visit nothing.


# What a P1 case needs beyond its campaign's own fields; no world is built from it here.
_SCENARIO: dict[str, Any] = {
    "description": "",
    "profile": "core",
    "gates": ("CRASH_RECOVERY_CONVERGENCE",),
    "repositories": {},
    "tasks": {"capture": {"kind": "source_capture"}},
    "faults": (),
    "steps": (),
    "expect": {},
}


def _matrix(**fields: Any) -> MatrixCase:
    base: dict[str, Any] = {
        **_SCENARIO,
        "id": "m",
        "clauses": ("FPT-5",),
        "source": Source("crash-matrix.yaml", 1),
        "issue": ("capture",),
        "task": "capture",
        "crashes": 1,
        "kit_points": ("server_result_stored",),
    }
    return MatrixCase(**{**base, **fields})


def _never_blocks(case: Any, factory: Any, profile: str, steps: Sequence[Mapping[str, Any]],
                  blocked: list[str] | None, *rest: Any, **more: Any) -> CaseResult:
    """A run_steps whose worker goes idle before every armed failpoint, and which runs nothing else."""
    if any("fault" in step for step in steps):
        raise AssertionError("a matrix whose loop visited nothing must not go on to the kit's kill points")
    raise Unreached


@pytest.mark.parametrize(
    "fields", [{}, {"crashes": 2, "kit_points": ()}, {"tear": "before_result_submit", "kit_points": ()}]
)
def test_a_crash_matrix_that_visits_no_point_fails_on_fpt_5(monkeypatch: pytest.MonkeyPatch,
                                                           fields: dict[str, Any]) -> None:
    monkeypatch.setattr(matrix, "run_steps", _never_blocks)
    result = matrix.run_matrix(_matrix(**fields), lambda: None, "core")  # type: ignore[arg-type]
    assert result.outcome is Outcome.FAILED, result
    assert "never blocked at any failpoint site it was armed at" in result.message, result.message
    assert [m.clause for m in result.mismatches] == ["FPT-5"], result.mismatches


def test_a_two_crash_matrix_whose_recovery_never_blocks_fails_on_fpt_5(monkeypatch: pytest.MonkeyPatch) -> None:
    def first_crash_only(case: Any, factory: Any, profile: str, steps: Sequence[Mapping[str, Any]],
                         blocked: list[str] | None, *rest: Any, **more: Any) -> CaseResult:
        assert blocked is not None
        blocked.append("after_claimed_row")  # the first crash blocks, its recovery never does
        raise Unreached

    monkeypatch.setattr(matrix, "run_steps", first_crash_only)
    case = _matrix(crashes=2, kit_points=(), first=("after_claimed_row",))
    result = matrix.run_matrix(case, lambda: None, "core")  # type: ignore[arg-type]
    assert result.outcome is Outcome.FAILED, result
    assert "recovery" in result.message and "0 crash points" in result.message, result.message
    assert [m.clause for m in result.mismatches] == ["FPT-5"], result.mismatches


def _soak_case() -> SoakCase:
    return SoakCase(
        **_SCENARIO,
        id="soak",
        clauses=("FPT-4", "FPT-5"),
        source=Source("soak.yaml", 1),
        issue=("capture", "capture-2"),
        seed=7,
        rounds=4,
        faults_per_round=2,
        max_hit=40,
        budget=60.0,
    )


def _soak_run(blocks: int, unfired: int | None) -> Any:
    def run_steps(case: Any, factory: Any, profile: str, steps: Sequence[Mapping[str, Any]],
                  blocked: list[str] | None, stats: dict[str, int] | None = None, **more: Any) -> CaseResult:
        assert blocked is not None and stats is not None
        blocked.extend(["after_claimed_row"] * blocks)
        scripted = sum(1 for step in steps if "fault" in step)
        stats.update(kills=case.rounds, unfired=scripted if unfired is None else unfired)
        return CaseResult(case.id, case.kind, Outcome.PASSED, counts_toward=case.gates)

    return run_steps


@pytest.mark.parametrize(
    ("blocks", "unfired", "clause", "words"),
    [(0, 0, "FPT-5", "no worker kill was at a failpoint"), (2, None, "FPT-4", "no control-plane fault fired")],
)
def test_a_soak_that_crashed_nothing_or_fired_no_fault_fails(
    monkeypatch: pytest.MonkeyPatch, blocks: int, unfired: int | None, clause: str, words: str
) -> None:
    monkeypatch.setattr(soak, "run_steps", _soak_run(blocks, unfired))
    monkeypatch.setattr(soak, "_shrink", lambda *args: _soak_case().rounds)
    case = _soak_case()
    assert sum(1 for step in soak.soak_steps(case, case.seed) if "fault" in step) > 0  # faults were scripted
    result = soak.run_soak(case, lambda: None, "core", case.seed, "reference")  # type: ignore[arg-type]
    assert result.outcome is Outcome.FAILED, result
    assert words in (result.message or ""), result.message
    assert clause in [m.clause for m in result.mismatches], result.mismatches


def test_a_soak_with_kills_at_failpoints_and_fired_faults_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(soak, "run_steps", _soak_run(2, 0))
    case = _soak_case()
    result = soak.run_soak(case, lambda: None, "core", case.seed, "reference")  # type: ignore[arg-type]
    assert result.outcome is Outcome.PASSED, result
    assert "2 at a failpoint" in (result.message or ""), result.message
