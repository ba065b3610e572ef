"""What the worker knows of one attempt, and the two ways an attempt ends early (LEASE-4, PHASE-4)."""

from __future__ import annotations

import json

from resumekit.reference.p1.journal import IDENTITY_FIELDS

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

    from resumekit.reference.p1.journal import Row

__all__ = ["Abandon", "Attempt", "Backoff", "Reconcile"]

# The spec bounds a retry's backoff to 10 ms .. 1 s and leaves the curve to the worker. The reference stays
# in the lower part: a run of unknown answers costs it about a second, not several, and the kit's
# scenarios of long silences wait for the reference no longer than they must.
_BACKOFF_START_S = 0.05
_BACKOFF_MAX_S = 0.25


class Abandon(Exception):
    """The attempt's lease is lost where LEASE-4 says the attempt is abandoned: no row, go on."""


class Reconcile(Exception):
    """The attempt ends in ``reconciliation_required`` with this reason (PHASE-4)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Attempt:
    """One attempt as this process knows it: its rows, and what this process did for it."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.workspace: str | None = None  # made by this process
        self.commit_oid: str | None = None  # C built in this process's workspace
        self.converged = False
        self.lost = False

    @property
    def last(self) -> Row:
        return self.rows[-1]

    @property
    def first(self) -> Row:
        return self.rows[0]

    @property
    def task(self) -> dict[str, Any]:
        served = json.loads(self.first.task or "{}")
        return served if isinstance(served, dict) else {}

    @property
    def identity(self) -> dict[str, Any]:
        return {name: getattr(self.first, name) for name in IDENTITY_FIELDS}

    @property
    def lease_id(self) -> str:
        return self.first.lease_id


class Backoff:
    """Waits that double from 50 ms up to 250 ms between retries of one request."""

    def __init__(self) -> None:
        self.delay = _BACKOFF_START_S
        self.waits: list[float] = []

    def next(self) -> float:
        current = self.delay
        self.delay = min(self.delay * 2, _BACKOFF_MAX_S)
        return current
