"""The fault models a result can name, in one wording, and the exception that ends a harnessed case early.

Every result says which fault model it exercised (docs/certifying.md, "Fault models"); the Phase 0 and
P1 harnesses take their words from here so that a report reads the same whichever contract ran.
"""

from __future__ import annotations

import os

from resumekit.conformance.results import CaseResult

PROCESS_CRASH = (
    "process crash (TerminateProcess); not power loss" if os.name == "nt" else "process crash (SIGKILL); not power loss"
)
POWER_LOSS = "power loss (simulated, unsynced writes dropped)"
NONE_SCRIPTED = "none: scripted control-plane faults only"


class Abort(Exception):
    """Ends a case early with its result: raised deep in a harness, caught where the case began."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.message or result.outcome.value)
        self.result = result
