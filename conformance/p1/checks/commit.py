"""The governed commit and the origin (docs/spec/p1.md, section 9; p1-control-plane.md CP-17, CP-18): an
origin the kit cannot read safely was changed behind its hook's back (COMMIT-3)."""

from __future__ import annotations

import dataclasses

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.origin_checks import unreadable
from resumekit.conformance.results import Mismatch


def unreadable_origins(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3: every origin the kit read (at a request or once the last step was done) could be read safely:
    its files as the kit made them and pushes leave them, every git command within the kit's limits."""
    found = []
    for event in history.of("origin", "unreadable"):
        where, expected, actual = str(event.get("where")), str(event.get("expected")), str(event.get("found"))
        mismatch = unreadable(str(event.get("repository")), where, expected, actual)
        found.append(dataclasses.replace(mismatch, event=event.seq))
    return found
