"""Each deliberately wrong projection fails, and fails only on cases that cover the clause it breaks."""

from __future__ import annotations

import pytest

from resumekit.conformance.adapters import PythonAdapter, load_python
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.results import Outcome
from resumekit.conformance.runner import run
from tests.broken.decisions import BROKEN, CORE_SITUATIONS


def _run(name: str, profile: str = "strict") -> dict[str, tuple[Outcome, tuple[str, ...], tuple[str, ...]]]:
    function, _ = BROKEN[name]
    adapter = PythonAdapter(function, name=name)
    cases = load_suite().select(profile, kinds=["decision"])
    finished = run(cases, adapter, profile=profile)
    return {r.case_id: (r.outcome, r.clauses, tuple(m.clause or "" for m in r.mismatches)) for r in finished.results}


def test_the_reference_passes_every_decision_case_in_both_profiles() -> None:
    adapter = load_python("resumekit.reference:build_resume_plan")
    for profile in ("core", "strict"):
        cases = load_suite().select(profile, kinds=["decision"])
        finished = run(cases, adapter, profile=profile)
        failing = [r.case_id for r in finished.results if r.outcome is not Outcome.PASSED]
        assert failing == [], profile
        assert finished.certified


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_projection_is_caught_on_the_cases_of_its_clause(name: str) -> None:
    _, clauses = BROKEN[name]
    results = _run(name)
    failed = {case_id: info for case_id, info in results.items() if info[0] is not Outcome.PASSED}
    assert failed, f"{name} broke {clauses} and no case caught it"
    assert all(outcome is Outcome.FAILED for outcome, _, _ in failed.values()), "a wrong answer is failed, not errored"
    for case_id, (_, cited, _) in failed.items():
        assert set(cited) & set(clauses), f"{case_id} failed for {name} but cites none of {clauses}"


# For the rules that apply only where a case has a certain shape, the failing cases are exactly those.
def _offset_differs(case: DecisionCase) -> bool:
    return case.expected_high_water is not None and case.expected_high_water != len(case.events)


def _has_partial(case: DecisionCase) -> bool:
    return any(event["partial"] for event in case.events)


EXACTLY = {"offset_ignored": _offset_differs, "high_water_skips_partials": _has_partial}


@pytest.mark.parametrize("name", sorted(EXACTLY))
def test_a_broken_rule_fails_exactly_the_cases_where_it_applies(name: str) -> None:
    applies = EXACTLY[name]
    cases = {case.id: case for case in load_suite().select("strict", kinds=["decision"])}
    failed = {case_id for case_id, info in _run(name).items() if info[0] is not Outcome.PASSED}
    expected = {case_id for case_id, case in cases.items() if applies(case)}  # type: ignore[arg-type]
    assert expected and failed == expected


def test_a_core_projection_passes_core_and_fails_every_strict_case() -> None:
    results = _run("core_claims_strict")
    strict_cases = {
        case.id
        for case in load_suite().select("strict", kinds=["decision"])
        if isinstance(case, DecisionCase) and (case.profile == "strict" or case.expect_strict is not None)
    }
    failed = {case_id for case_id, info in results.items() if info[0] is not Outcome.PASSED}
    assert failed == strict_cases
    assert set(_run("core_claims_strict", "core")) and all(
        outcome is Outcome.PASSED for outcome, _, _ in _run("core_claims_strict", "core").values()
    )


def test_mismatches_point_at_the_fields_the_broken_rule_decides() -> None:
    results = _run("offset_ignored")
    failed = [mismatch_clauses for outcome, _, mismatch_clauses in results.values() if outcome is Outcome.FAILED]
    assert failed
    # A missing offset check shows as a missing reason (PLAN-5) and a missing diagnostic (PLAN-10).
    assert all({"PLAN-5", "PLAN-10"} <= set(clauses) for clauses in failed)


def test_a_projection_that_raises_is_errored_with_its_traceback() -> None:
    def explode(events: list[object], **_: object) -> dict[str, object]:
        raise RuntimeError("boom")

    finished = run(
        load_suite().select("core", only=["prefix-*"]), PythonAdapter(explode, name="explode"), profile="core"
    )
    assert {r.outcome for r in finished.results} == {Outcome.ERRORED}
    assert "RuntimeError('boom')" in (finished.results[0].message or "")
    assert not finished.certified


def test_a_schema_invalid_plan_is_errored_with_the_pointer() -> None:
    def sloppy(events: list[object], **_: object) -> dict[str, object]:
        return {"disposition": "probably_fine"}

    finished = run(load_suite().select("core", only=["prefix-*"]), PythonAdapter(sloppy, name="sloppy"), profile="core")
    result = finished.results[0]
    assert result.outcome is Outcome.ERRORED
    assert "plan-envelope.json" in (result.message or "")


@pytest.mark.parametrize("name", CORE_SITUATIONS)
def test_a_core_rule_broken_in_a_strict_situation_is_caught_by_core(name: str) -> None:
    """Duplicate calls, second responses, early responses: core cases test the core clauses there too."""
    _, clauses = BROKEN[name]
    results = _run(name, "core")
    failed = {case_id: info for case_id, info in results.items() if info[0] is not Outcome.PASSED}
    assert failed, f"{name} breaks {clauses} and --profile core certified it"
    for case_id, (outcome, cited, _) in failed.items():
        assert outcome is Outcome.FAILED, case_id
        assert set(cited) & set(clauses), f"{case_id} failed for {name} but cites none of {clauses}"


def test_a_core_run_compares_with_the_core_expectation_and_says_so() -> None:
    adapter = load_python("resumekit.reference:build_resume_plan")
    cases = load_suite().select("core", only=["duplicate-call-dangling-keeps-first-args"])
    [core] = run(cases, adapter, profile="core").results
    [strict] = run(cases, adapter, profile="strict").results
    assert (core.outcome, core.expectation) == (Outcome.PASSED, "core")
    assert (strict.outcome, strict.expectation) == (Outcome.PASSED, "strict")
    # A strict answer to a core request is wrong in core: it blocks where the core clauses do not.
    [crossed] = run(cases, PythonAdapter(BROKEN["core_claims_strict"][0], name="core"), profile="strict").results
    assert crossed.outcome is Outcome.FAILED and crossed.expectation == "strict"
