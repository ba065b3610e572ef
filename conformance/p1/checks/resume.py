"""Resume (docs/spec/p1.md, section 11): an orderly stop ends the worker through its exit path, status 0
(RESUME-5)."""

from __future__ import annotations

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch


def orderly_stops(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-5: ``p1.worker.stop`` ends the worker with status 0."""
    found = []
    for event in history.of(None, "stopped"):
        code = event.get("exitCode")
        if code != 0:
            note = "an orderly stop did not exit 0"
            found.append(Mismatch("/stop/exitCode", 0, code, "RESUME-5", note, event=event.seq))
    return found
