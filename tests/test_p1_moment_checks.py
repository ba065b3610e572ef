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
