"""A moment check that raises errors its scenario: the check it was to make was not made (issue 19)."""

from __future__ import annotations

import shutil

import pytest

from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import process_factory
from resumekit.conformance.fixtures import load_file
from resumekit.conformance.p1 import harness
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.observer import Observer
from resumekit.conformance.results import Outcome

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _capture_completes() -> ScenarioCase:
    root = golden_dir()
    cases = [c for path in sorted((root / "p1" / "scenarios").glob("*.yaml")) for c in load_file(path, root)]
    case = next(c for c in cases if c.id == "p1-capture-completes")
    assert isinstance(case, ScenarioCase)
    return case


def test_the_reference_passes_the_scenario_when_every_check_runs() -> None:
    result = harness.run_scenario(_capture_completes(), process_factory("reference"), "strict")
    assert result.outcome is Outcome.PASSED, result.message


def test_a_first_request_check_that_raises_errors_the_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the exception went into the control plane's log, nothing read it, and CLEAN-1 went unchecked.
    def unreadable(self: Observer, worker: str, *, request: int | None = None) -> list[str]:
        raise PermissionError(13, "Permission denied", "workspaces")

    monkeypatch.setattr(Observer, "on_first_request", unreadable)
    result = harness.run_scenario(_capture_completes(), process_factory("reference"), "strict")
    assert result.outcome is Outcome.ERRORED, result
    assert result.message is not None
    assert "could not make 1 moment check(s): the first_request check raised PermissionError" in result.message


def _killed_at_claim() -> ScenarioCase:
    root = golden_dir()
    cases = load_file(root / "p1" / "failpoints.yaml", root)
    case = next(c for c in cases if c.id == "p1-crash-capture-server-claim-granted")
    assert isinstance(case, ScenarioCase)
    return case


def test_a_kit_side_kill_that_does_not_land_errors_the_scenario_and_blames_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the failed kill was suppressed and recorded as one that landed, so the worker that went on was
    # judged as killed there and failed FPT-3 for the rows it wrote after it.
    from resumekit.conformance._process import LineProcess, NotInTree

    def refused(self: LineProcess, pid: int) -> None:
        raise NotInTree(f"pid {pid!r} is not the adapter or one of its descendants")

    monkeypatch.setattr(LineProcess, "kill_member", refused)
    result = harness.run_scenario(_killed_at_claim(), process_factory("reference"), "strict")
    assert result.outcome is Outcome.ERRORED, result
    assert "could not kill the worker at its kill point: pid" in (result.message or ""), result.message
    kinds = [(event["actor"], event["kind"]) for event in result.history or ()]
    assert ("w1", "kill-failed") in kinds and ("w1", "killed") not in kinds, kinds
