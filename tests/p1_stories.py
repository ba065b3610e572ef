"""Histories of P1 cases written by hand, for the tests of the rules (``conformance/p1/checks``).

A rule reads nothing but the events the harness recorded, so a test writes those events itself: a
``Told`` appends them in order, by the same actors and kinds the harness uses (the journal's reads, the
control plane's log entries, the kit's own changes and readings, what a worker process did), and
``judged`` runs one rule of the table over them, as the verdict would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks import rules
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import COLUMNS
from resumekit.conformance.results import Mismatch


def row(seq: int, phase: str, attempt: int = 1, **columns: Any) -> dict[str, Any]:
    """A whole journal row of task ``t-1`` (binding d-1, j, acme/w, main, generation 1), lease ``lease-<attempt>``."""
    made: dict[str, Any] = dict.fromkeys(COLUMNS)
    made.update(seq=seq, task_id="t-1", attempt=attempt, execution_digest="d-1", job_id="j", repository="acme/w",
                base_oid="a" * 40, expected_branch_oid="a" * 40, target_branch="main", generation=1, phase=phase,
                lease_id=f"lease-{attempt}")
    made.update(columns)
    return made


class Told:
    """A history written event by event; each method appends one event and returns the builder."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def by(self, actor: str, kind: str, **data: Any) -> Told:
        """Any event: *actor* did or saw *kind*."""
        self.events.append(Event(len(self.events), float(len(self.events)), actor, kind, MappingProxyType(data)))
        return self

    def kit(self, kind: str, **data: Any) -> Told:
        """A change the kit made or a reading it took."""
        return self.by("kit", kind, **data)

    def logged(self, kind: str, **entry: Any) -> Told:
        """One entry of the control plane's log (CP-19), as it made it."""
        return self.by("control-plane", kind, **entry)

    def read(
        self, rows: Sequence[Mapping[str, Any]], why: str = "final", journal: str = "first", **context: Any
    ) -> Told:
        """A read of the first (or ``second``) worker's journal: at a worker's ``start``, a ``moment``, a ``wait``,
        the ``final`` one once the last step was done."""
        return self.by("journal", "read", journal=journal, why=why, rows=[dict(r) for r in rows], **context)

    def at_end(self, **readings: Any) -> Told:
        """What the kit read of the control plane, the caches and the tasks once the last step was done."""
        made: dict[str, Any] = {"tasks": {}, "leases": [], "commits": {}, "expected": {}, "caches": {},
                                "last_wait": None, "retry_after_ms": 0}
        return self.kit("at-end", **{**made, **readings})

    def origins(self, **readings: Any) -> Told:
        """What the kit read of the origins once the last step was done (``origin_refs`` None: not read)."""
        made: dict[str, Any] = {"origin_refs": None, "kit_refs": {}, "ref_updates": [], "fast_forward": []}
        return self.kit("origins-at-end", **{**made, **readings})

    def settings(self, reported: Mapping[str, Sequence[Mapping[str, Any]]] | None, **rest: Any) -> Told:
        """The journal settings the kit gathered (``reported`` None: the adapter does not claim p1.journal)."""
        if reported is None:
            return self.kit("journal-settings", settings=None)
        made: dict[str, Any] = {"wrote": [], "logged": False, "header": None, "header_of": [], "unreadable": {}}
        return self.kit("journal-settings", settings={"reported": dict(reported), **made, **rest})

    def story(self, profile: str = "strict") -> Story:
        """The history as the rules read it."""
        return Story(self.events, profile)


def judged(
    name: str,
    told: Told,
    profile: str = "strict",
    expect: Mapping[str, Mapping[str, Any]] | None = None,
    names: Mapping[str, str] | None = None,
    cites: Sequence[str] = (),
) -> list[Mismatch]:
    """The findings of the rule *name* over *told*, in *profile*, as the verdict takes them (for a scenario that
    cites *cites*); each must carry one of the clauses the rule's row lists (so every test of a rule checks its
    row too)."""
    scenario = Scenario(expect or {}, names or {}, profile, tuple(cites))
    found = rules.named(name, told.story(profile), scenario)
    listed = rules.BY_NAME[name].clauses
    for mismatch in found:
        assert mismatch.clause in listed, f"{name} found {mismatch.clause!r}, which its row does not list: {listed}"
    return found


def clauses(found: Sequence[Mismatch]) -> list[str | None]:
    """The clause of each finding, in order."""
    return [mismatch.clause for mismatch in found]
