"""What every golden case is, whichever contract it belongs to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.results import Source

Event = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """What every golden case has: an id, the clauses it checks, its profile and where it is written."""

    id: str
    description: str
    clauses: tuple[str, ...]
    profile: str
    source: Source

    kind = "case"
    answer_name = "answer"  # what an implementation's answer to the case is called in a report

    def compared_expectation(self, profile: str) -> Mapping[str, Any] | None:
        """The whole expectation a failed comparison in *profile* was made against, for a side-by-side view.

        None (the default) when a case's failures are single checks rather than one answer compared whole.
        """
        return None

    @property
    def counts_toward(self) -> tuple[str, ...]:
        """The rows of its contract's summary table this case counts towards (P1: its gates); none by default."""
        return ()

    @property
    def deadline_s(self) -> float:
        """Seconds all the kit does for the case may take before the runner abandons it (a backstop: every
        wait inside a case has a deadline of its own, far below this one)."""
        return 900.0

    @property
    def weight(self) -> float:
        """A rough guess, in seconds, of how long the case waits on real time, used only to start the heaviest
        cases of a run first so that it does not end waiting on one; never part of a verdict (0 by default)."""
        return 0.0

    def runs_in(self, profile: str) -> bool:
        """Strict is a superset of core: a core case runs in both profiles."""
        return self.profile == "core" or profile == "strict"
