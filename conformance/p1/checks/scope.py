"""Identity and scope (docs/spec/p1.md, section 3): every row carries an identity the control plane issued for its
attempt (SCOPE-1), a reuse joins two attempts the control plane issued with one binding (SCOPE-2), and nothing is
reused from an attempt that ended in ``reconciliation_required`` (SCOPE-5). And the fence of section 10 that the
journal's rows decide, as SCOPE-6's does: an attempt served with a generation below the branch's rows gets two rows
and no governed side effect (LEASE-6). What a reused row may name beyond that (SCOPE-3, SCOPE-4) and what an
attempt served against CP-5 or CP-7 may do (SCOPE-6, SCOPE-7) are ``resume``'s.

The rows say what the worker believes an attempt is; the control plane's log says what it issued. A worker that
stamps its rows with another attempt's fields makes the two disagree, and a reuse whose rows agree with each other
can still join attempts the control plane issued with different bindings: both are judged on what was issued.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance._text import clip
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.model import BINDING, Row, identity
from resumekit.conformance.results import Mismatch

_GOVERNED = ("push", "receipt", "submission")  # the moment checks of a governed side effect
# The log's entries that serve an attempt with an identity: an issue, and the deliveries CP-21's faults make.
_SERVING = ("attempt_issued", "replayed_delivery", "conflicting_delivery")


def _issued(log: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], list[tuple[Any, ...]]]:
    """(task_id, attempt) -> every identity the control plane served it with, the issued one first."""
    found: dict[tuple[Any, Any], list[tuple[Any, ...]]] = {}
    for entry in log:
        task = entry.get("task")
        if entry.get("kind") in _SERVING and isinstance(task, Mapping):
            ident = tuple(task.get(name) for name in IDENTITY)
            served = found.setdefault((ident[0], ident[1]), [])
            if ident not in served:
                served.append(ident)
    return found


def _cut(value: Any) -> Any:
    """A value the worker wrote, as a finding shows it: a text cut short, so that a megabyte stays out of it."""
    return clip(value, 80) if isinstance(value, str) else value


def _differs(names: Sequence[str], ours: Sequence[Any], theirs: Sequence[Any]) -> dict[str, list[Any]]:
    """Each field where *ours* and *theirs* differ -> [ours, theirs]."""
    return {name: [_cut(a), _cut(b)] for name, a, b in zip(names, ours, theirs, strict=True) if a != b}


def identities(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-1: the rows of one identity are the rows of one official attempt, so every row carries, field for
    field, an identity the control plane served its ``(task_id, attempt)`` with; one finding per identity."""
    served = _issued(history.log)
    found, seen = [], set()
    for row in history.rows:
        ident = identity(row)
        known = served.get(ident[:2], [])
        if ident in known or ident in seen:
            continue
        seen.add(ident)
        task_id, number, phase = (_cut(row[name]) for name in ("task_id", "attempt", "phase"))
        where = f"/journal/{task_id}/{number}/{row['seq']}/identity"
        shown = [_cut(value) for value in ident]
        if not known:
            note = (
                f"row seq {row['seq']!r} ({phase!r}) names attempt {number!r} of {task_id!r}, which the control "
                "plane never served: every row carries the identity of an official attempt"
            )
            found.append(_m("SCOPE-1", where, "an attempt the control plane served", shown, note))
            continue
        differs = _differs(IDENTITY, ident, known[0])
        note = (
            f"row seq {row['seq']!r} ({phase!r}) of attempt {number!r} of {task_id!r} carries "
            f"an identity the control plane never served that attempt with; field: [row, served] {differs!r}: every "
            "row carries its attempt's identity as served, byte for byte"
        )
        found.append(_m("SCOPE-1", where, dict(zip(IDENTITY, known[0], strict=True)), shown, note))
    return found


def bindings(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-2: a reused row joins two attempts of one task that the control plane issued with an identical
    binding, the eight fields equal; judged on the attempts as issued, whatever the rows say of them."""
    served = _issued(history.log)
    by_seq = {row["seq"]: row for row in history.rows}
    found = []
    for row in history.rows:
        source = by_seq.get(row["reused_from"]) if row["reused_from"] is not None else None
        if source is None or source["task_id"] != row["task_id"]:
            continue  # an unknown source or another task's is SCOPE-3's
        ours, theirs = served.get((row["task_id"], row["attempt"])), served.get((source["task_id"], source["attempt"]))
        if not ours or not theirs:
            continue  # an attempt never served is SCOPE-1's
        differs = _differs(BINDING, _binding(ours[0]), _binding(theirs[0]))
        if not differs:
            continue
        note = (
            f"row seq {row['seq']!r} of attempt {row['attempt']!r} of {row['task_id']!r} reuses row seq "
            f"{source['seq']!r} of attempt {source['attempt']!r}, but the control plane issued the two attempts "
            f"with different bindings; field: [reusing attempt, source attempt] {differs!r}: an identical binding "
            "is all eight fields equal, job_id and generation included"
        )
        where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/reused_from"
        found.append(_m("SCOPE-2", where, "a source attempt issued with an identical binding", differs, note))
    return found


def _binding(ident: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value for name, value in zip(IDENTITY, ident, strict=True) if name != "attempt")


def reconciled_sources(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-5 (strict): no row reuses a row of an attempt whose ``reconciliation_required`` row the journal held
    before the reusing row was written."""
    rows = history.rows
    by_seq = {row["seq"]: row for row in rows}
    ended = {identity(row): row for row in rows if row["phase"] == "reconciliation_required"}
    found = []
    for row in rows:
        source = by_seq.get(row["reused_from"]) if row["reused_from"] is not None else None
        end = ended.get(identity(source)) if source is not None else None
        if source is None or end is None or end["seq"] > row["seq"]:
            continue
        task_id = _cut(row["task_id"])
        note = (
            f"row seq {row['seq']!r} ({_cut(row['phase'])!r}) of attempt {_cut(row['attempt'])!r} of {task_id!r} "
            f"reuses row seq {source['seq']!r} of attempt {_cut(source['attempt'])!r}, which had ended in "
            f"reconciliation_required ({_cut(end['reason'])!r}, seq {end['seq']!r}): rows of an attempt that ended "
            "so are never reused"
        )
        where = f"/journal/{task_id}/{_cut(row['attempt'])}/{row['seq']}/reused_from"
        found.append(_m("SCOPE-5", where, "no reuse of a reconciled attempt", row["reused_from"], note))
    return found


def stale_generations(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-6 (strict): an attempt whose first row came after a row of a higher generation on its
    ``(repository, target_branch)`` is fenced: its rows are ``claimed`` then ``reconciliation_required``
    (``stale_generation``), and no push, receipt or submission of it reaches the kit."""
    fenced = _fenced(history.rows)
    found = []
    for ident, (group, above) in fenced.items():
        phases = [_cut(row["phase"] if row["reason"] is None else f"{row['phase']}: {row['reason']}") for row in group]
        governed = [
            {"check": entry.get("check"), "request": entry.get("request")}
            for check in _GOVERNED
            for entry in history.moments(check)
            if (entry.get("task_id"), entry.get("attempt")) == ident[:2]
        ]
        wanted = ["claimed", "reconciliation_required: stale_generation"]
        if phases == wanted and not governed:
            continue
        task_id = _cut(ident[0])
        note = (
            f"attempt {_cut(ident[1])!r} of {task_id!r} (generation {_cut(ident[-1])!r}) was first written after row "
            f"seq {above['seq']!r} of {_cut(above['task_id'])!r}, generation {above['generation']!r} on the same "
            f"branch: a stale generation the worker fences itself, with no governed side effect; its rows "
            f"{phases!r}, governed sends {governed!r}"
        )
        actual = {"rows": phases, "governed": governed}
        found.append(_m("LEASE-6", f"/journal/{task_id}/{_cut(ident[1])}/stale_generation", wanted, actual, note))
    return found


def _fenced(rows: Sequence[Row]) -> dict[tuple[Any, ...], tuple[list[Row], Row]]:
    """Each attempt whose first row came after a row of a higher generation on its branch: its rows, and the
    highest such row before it."""
    top: dict[tuple[Any, Any], Row] = {}
    fenced: dict[tuple[Any, ...], tuple[list[Row], Row]] = {}
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        ident, branch = identity(row), (row["repository"], row["target_branch"])
        above = top.get(branch)
        if ident in fenced:
            fenced[ident][0].append(row)
        elif ident not in seen and above is not None and _generation(above) > _generation(row):
            fenced[ident] = ([row], above)
        seen.add(ident)
        if above is None or _generation(row) > _generation(above):
            top[branch] = row
    return fenced


def _generation(row: Row) -> int:
    value = row["generation"]
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def second_worker_identities(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-1 over the journal of a scenario's second worker."""
    return on_second_worker(identities, history, scenario)
