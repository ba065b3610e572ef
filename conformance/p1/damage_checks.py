"""The P1 checks of what the kit damaged or laid out to be left alone: a cache it damaged between a kill and
the restart changes no decision (CACHE-4), and the decoy trees outside the workspace root never change
(CLEAN-2).

Pure: the harness records, at each damage, the attempt the journal then held open, and lists the decoy trees
before the first step and after the last; this module only judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import RANKS, TERMINAL, Row
from resumekit.conformance.results import Mismatch

_LOST = ("EXPIRED", "FENCED")  # a lease in these states was lost, not given up: the attempt is abandoned (LEASE-4)
_SHOWN = 5  # changed decoy paths a message names before it counts the rest


def cache_damage_checks(ev: Evidence) -> list[Mismatch]:
    """CACHE-4, once the worker is idle: the attempt the journal held open when the kit damaged its task's cache
    went on from its journal row. It got a further row, of a higher rank than that row (RESUME-2) or terminal,
    unless its lease was lost (LEASE-4); an attempt left as it was with the lease still ACTIVE or released, or
    a row that goes back, is a decision the damaged cache made."""
    if not ev.idle:
        return []
    state = {str(lease.get("lease_id")): lease.get("state") for lease in ev.leases}
    found = []
    for damage in ev.cache_damages:
        held = damage.get("open")
        if not isinstance(held, Mapping):
            continue  # the task had no open attempt: the idle check (CACHE-4's rebuild) covers it
        later = [
            row
            for row in ev.rows
            if row["task_id"] == held["task_id"] and row["attempt"] == held["attempt"] and row["seq"] > held["seq"]
        ]
        problem = _went_on(held, later, state.get(str(held["lease_id"])))
        if problem is not None:
            found.append(_decided_by_the_cache(damage, held, problem))
    return found


def _went_on(held: Mapping[str, Any], later: Sequence[Row], lease: Any) -> str | None:
    """Why the attempt did not go on from *held*, its journal's last row at the damage; None when it did."""
    if not later:
        if lease in _LOST:
            return None
        return f"the worker wrote no further row for it, and its lease {held['lease_id']!r} is {lease!r}"
    first = later[0]
    if first["phase"] in TERMINAL or RANKS.get(first["phase"], 0) > RANKS.get(held["phase"], 0):
        return None
    return f"the worker's next row for it is {first['phase']!r} (seq {first['seq']!r}), which goes back"


def _decided_by_the_cache(damage: Mapping[str, Any], held: Mapping[str, Any], problem: str) -> Mismatch:
    task, number, phase = held["task_id"], held["attempt"], held["phase"]
    note = (
        f"after the kit made the cache of {task!r} {damage.get('how')!r}, with attempt {number!r} at "
        f"{phase!r} (seq {held['seq']!r}) in the journal, {problem}: the cache, not the journal, decided"
    )
    return _m(
        "CACHE-4",
        f"/caches/{task}/damaged-{damage.get('how')}",
        f"attempt {number!r} goes on from its journal row {phase!r}",
        problem,
        note,
    )


def decoy_checks(ev: Evidence) -> list[Mismatch]:
    """CLEAN-2: nothing outside the workspace root changed; the finding names each changed path of the decoys."""
    changes = dict(ev.decoy_changes)
    if not changes and not ev.decoy_changed:
        return []
    if not changes:
        return [_m("CLEAN-2", "/decoy", "unchanged", "changed", "something outside the workspace root changed")]
    shown = [f"{path!r} ({what})" for path, what in list(changes.items())[:_SHOWN]]
    more = f" and {len(changes) - _SHOWN} more" if len(changes) > _SHOWN else ""
    note = f"{len(changes)} path(s) outside the workspace root changed: {', '.join(shown)}{more}"
    return [_m("CLEAN-2", "/decoy", "unchanged", changes, note)]
