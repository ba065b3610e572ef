"""The task cache (docs/spec/p1.md, section 6): after a power cut every cache is a whole version (CACHE-3); at
idle every cache is a regular JSON file mirroring its journal's last row (CACHE-1, CACHE-4), and a cache the kit
damaged between a kill and the restart changed no decision (CACHE-4).

The harness records, at each damage, the attempt the journal then held open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import COLUMNS, RANKS, TERMINAL, Row
from resumekit.conformance.results import Mismatch

_LOST = ("EXPIRED", "FENCED")  # a lease in these states was lost, not given up: the attempt is abandoned (LEASE-4)


def after_power_cuts(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CACHE-3: each cache the kit read just after a power cut was complete, old or new, never torn or empty."""
    found = []
    for event in history.of("kit", "caches-after-cut"):
        for name, (status, raw) in sorted(event.get("caches", {}).items()):
            if status in ("torn", "unreadable"):
                note = (
                    "after a power cut the cache was torn or empty: its temporary file was not synced before the "
                    "replace"
                )
                actual = raw[:80] if raw else "empty"
                pointer = f"/caches/{name}/after-power-cut"
                expected = "a complete cache, old or new"
                found.append(Mismatch(pointer, expected, actual, "CACHE-3", note, event=event.seq))
    return found


def at_idle(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CACHE-1 and CACHE-4, once the worker is idle: the cache of every task of the journal is a regular JSON
    file the kit can read, mirroring the task's last row."""
    found = []
    last_of: dict[str, Row] = {}
    for row in history.rows:
        last_of[row["task_id"]] = row
    for task_id, row in sorted(last_of.items()):
        status, cache = history.caches.get(task_id, ("absent", None))
        if status == "unreadable":
            found.append(
                _m(
                    "CACHE-1",
                    f"/caches/{task_id}",
                    "a regular JSON file",
                    cache,
                    "the cache is not a regular JSON file the kit can read (what it found instead is told)",
                )
            )
            continue
        want = {"cache_version": 1, **{name: row[name] for name in COLUMNS}}
        if status != "ok" or not isinstance(cache, dict) or {k: cache.get(k) for k in want} != want:
            found.append(
                _m(
                    "CACHE-4",
                    f"/caches/{task_id}",
                    {"seq": row["seq"], "phase": row["phase"]},
                    cache if status == "ok" else status,
                    "the cache does not mirror the journal's last row at idle",
                )
            )
    return found


def damaged(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CACHE-4, once the worker is idle: the attempt the journal held open when the kit damaged its task's cache
    went on from its journal row. It got a further row, of a higher rank than that row (RESUME-2) or terminal,
    unless its lease was lost (LEASE-4); an attempt left as it was with the lease still ACTIVE or released, or
    a row that goes back, is a decision the damaged cache made."""
    if not history.idle:
        return []
    state = {str(lease.get("lease_id")): lease.get("state") for lease in history.leases}
    found = []
    for damage in history.cache_damages:
        held = damage.get("open")
        if not isinstance(held, Mapping):
            continue  # the task had no open attempt: the idle check (CACHE-4's rebuild) covers it
        later = [
            row
            for row in history.rows
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
