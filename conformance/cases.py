"""What every golden case is, whichever contract it belongs to."""

from __future__ import annotations

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

    def runs_in(self, profile: str) -> bool:
        """Strict is a superset of core: a core case runs in both profiles."""
        return self.profile == "core" or profile == "strict"
