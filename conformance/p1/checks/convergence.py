"""Where a scenario converged (docs/spec/p1.md, section 13 and FPT-4): each task's expected outcome, the
scenario's ``expect``, and a worker that said idle while an attempt, neither terminal nor abandoned, still held
its lease (OUT-2); and no submission of an attempt once its hard failure is durable (OUT-1).

An expected outcome that differs names the rule the scenario sets up for it: the first of the scenario's own
clauses that an expectation of its kind can stand for (``STANDS_FOR``), or no clause where it cites none of
them; never a clause of a situation that did not happen (a count of submissions is SUB-6's only in a scenario
of a 4xx answer). A finding of no clause, under ``/expect``, fails only the scenario's own gates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import HARD_FAILURES, TERMINAL, Row, attempts
from resumekit.conformance.results import Mismatch

# What the task's outcome (its final phase, state, stored result, where each attempt ended) can stand for.
_OUTCOME = (
    "FPT-4", "OUT-1", "SUB-3", "SUB-4", "SUB-5", "SUB-6", "SUB-7", "COMMIT-1", "COMMIT-4", "COMMIT-6", "LEASE-3",
    "LEASE-4", "LEASE-6", "RESUME-2", "RESUME-3", "RESUME-4", "RESUME-6", "SCOPE-5", "SCOPE-6", "SCOPE-7",
    "JNL-7", "JNL-8", "CACHE-4", "PHASE-4", "TASK-4",
)  # fmt: skip
# What forbids a governed side effect, or one more of it: a count of pushes or submissions can stand for these.
_NO_MORE = (
    "LEASE-4", "LEASE-6", "RESUME-2", "RESUME-4", "SCOPE-5", "SCOPE-6", "SCOPE-7", "JNL-7", "JNL-8", "OUT-1",
)  # fmt: skip
# Each expectation -> the clauses a mismatch of it may name, whichever of them the scenario cites first.
STANDS_FOR: dict[str, tuple[str, ...]] = {
    "final": _OUTCOME,
    "state": _OUTCOME,
    "stored": _OUTCOME,
    "ended": _OUTCOME,
    "reason": ("PHASE-4", *_OUTCOME),
    "attempts": ("RESUME-4", "LEASE-1", "WRK-2", "SCOPE-1", "SCOPE-6", "SCOPE-7", "LEASE-6", "RESUME-1", "FPT-4"),
    "pushes": ("COMMIT-1", "COMMIT-3", "COMMIT-6", "TASK-3", "FPT-4", *_NO_MORE),
    "submissions": ("SUB-4", "SUB-5", "SUB-6", "SUB-7", "PHASE-5", *_NO_MORE),
    "reused": ("SCOPE-3", "SCOPE-4", "SCOPE-5", "RESUME-2"),
}
# Every clause an outcome may name (the rule's row in checks/rules.py lists these, OUT-2 and None).
CLAUSES = tuple(sorted({clause for clauses in STANDS_FOR.values() for clause in clauses}))


def standing_for(expectation: str, cites: Sequence[str]) -> str | None:
    """The clause a mismatch of *expectation* names in a scenario that cites *cites*: the first of them it can
    stand for, or None."""
    return next((clause for clause in cites if clause in STANDS_FOR[expectation]), None)


def outcomes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """Each task's expected convergence (FPT-4, the scenario's `expect`)."""
    expect, names = scenario.expect, scenario.names
    found = []
    groups = attempts(history.rows)
    for name, outcome in expect.items():
        task_id = names[name]
        mine = [group for ident, group in groups.items() if ident[0] == task_id]
        found += _task_outcome(task_id, f"/expect/{name}", outcome, mine, history)
    return [_labelled(item, scenario.cites) for item in found]


def _labelled(found: Mismatch, cites: Sequence[str]) -> Mismatch:
    """*found* naming the scenario's rule for its expectation (the pointer's last part), OUT-2's left as it is."""
    if found.clause == "OUT-2":
        return found
    return dataclasses.replace(found, clause=standing_for(found.pointer.rsplit("/", 1)[-1], cites))


def _task_outcome(
    task_id: str, where: str, outcome: Mapping[str, Any], mine: Sequence[Sequence[Row]], history: Story
) -> list[Mismatch]:
    """One task's expected outcome; *mine* holds the rows of each of its attempts, in order."""
    final = mine[-1] if mine else []
    found = _final_outcome(where, outcome, final[-1] if final else None)
    if found and final:
        found += _held_at_idle(where, final[-1], history)
    found += _control_plane_outcome(task_id, where, outcome, history)
    if "attempts" in outcome and len(mine) != outcome["attempts"]:
        found.append(_m("SCOPE-1", f"{where}/attempts", outcome["attempts"], len(mine), "attempts with rows"))
    found += _side_effect_counts(task_id, where, outcome, history)
    if isinstance(outcome.get("second_worker"), Mapping):
        found += _second_outcome(task_id, f"{where}/second_worker", outcome["second_worker"], history.second_rows)
    if "ended" in outcome:
        ended = [_ending(group[-1]) for group in mine]
        if ended != list(outcome["ended"]):
            found.append(_m("FPT-4", f"{where}/ended", list(outcome["ended"]), ended, "where each attempt ended"))
    if "reused" in outcome:
        reused = any(row["reused_from"] is not None for row in final)
        if reused != outcome["reused"]:
            found.append(
                _m(
                    "SCOPE-3",
                    f"{where}/reused",
                    outcome["reused"],
                    reused,
                    "whether the final attempt reused a row",
                )
            )
    return found


def _ending(last: Row) -> str:
    """An attempt's last row as ``ended`` names it: the phase, and a reconciliation's reason after ': '."""
    return f"{last['phase']}: {last['reason']}" if last["phase"] == "reconciliation_required" else str(last["phase"])


def _final_outcome(where: str, outcome: Mapping[str, Any], last: Row | None, journal: str = "") -> list[Mismatch]:
    """The phase and the reason the task's final attempt ended with; *last* is its last row, *journal*
    names a journal other than the first worker's in the notes."""
    found = []
    if "final" in outcome and (last is None or last["phase"] != outcome["final"]):
        note = f"the task's final attempt{journal} ended elsewhere"
        found.append(_m("FPT-4", f"{where}/final", outcome["final"], last["phase"] if last else None, note))
    if "reason" in outcome and (last is None or last["reason"] != outcome["reason"]):
        note = f"another reconciliation reason{journal}"
        found.append(_m("PHASE-4", f"{where}/reason", outcome["reason"], last["reason"] if last else None, note))
    return found


def _held_at_idle(where: str, last: Row, history: Story) -> list[Mismatch]:
    """OUT-2, told beside a task that did not converge: the worker said idle while the final attempt, not
    terminal, still held a lease that was never lost (LEASE-4), so the attempt was not abandoned either."""
    if not history.idle or last["phase"] in TERMINAL:
        return []
    lease_id = last["lease_id"]
    lost = any(
        entry["kind"] == "lease"
        and entry["lease"].get("lease_id") == lease_id
        and (entry["event"] == "revived" or entry["lease"].get("state") != "ACTIVE")
        for entry in history.lease_log
    )
    held = any(lease.get("lease_id") == lease_id and lease.get("state") == "ACTIVE" for lease in history.leases)
    if lost or not held:
        return []
    return [
        _m(
            "OUT-2",
            f"{where}/idle",
            "every attempt terminal or abandoned",
            {"task_id": last["task_id"], "attempt": last["attempt"], "phase": last["phase"], "lease": "ACTIVE"},
            "the worker said idle while this attempt, neither terminal nor abandoned, still held its lease",
        )
    ]


def _control_plane_outcome(task_id: str, where: str, outcome: Mapping[str, Any], history: Story) -> list[Mismatch]:
    """The task's state at the control plane, and whether it stored the task's result."""
    found = []
    facts = history.tasks.get(task_id, {})
    if "state" in outcome and facts.get("state") != outcome["state"]:
        found.append(
            _m("FPT-4", f"{where}/state", outcome["state"], facts.get("state"), "the control plane's task state")
        )
    if "stored" in outcome:
        stored: Mapping[str, Any] | None = facts.get("stored")
        ok = (
            stored is not None
            and task_id in history.expected
            and stored.get("result_hash") == result_hash(history.expected[task_id])
        )
        if ok != outcome["stored"]:
            found.append(_m("FPT-4", f"{where}/stored", outcome["stored"], stored, "the control plane's stored result"))
    return found


def _side_effect_counts(task_id: str, where: str, outcome: Mapping[str, Any], history: Story) -> list[Mismatch]:
    """How many of the task's pushes the origin accepted, and how many submissions reached the control plane."""
    found = []
    if "pushes" in outcome:
        accepted = [p for p in history.pushes if p.get("accepted") and p.get("task_id") == task_id]
        if len(accepted) != outcome["pushes"]:
            found.append(
                _m(
                    "COMMIT-3",
                    f"{where}/pushes",
                    outcome["pushes"],
                    len(accepted),
                    "accepted pushes of the governed commit",
                )
            )
    if "submissions" in outcome:
        sent = [s for s in history.submissions if s["task_id"] == task_id]
        if len(sent) != outcome["submissions"]:
            found.append(
                _m(
                    "SUB-6",
                    f"{where}/submissions",
                    outcome["submissions"],
                    len(sent),
                    "submissions that reached the control plane",
                )
            )
    return found


def _second_outcome(task_id: str, where: str, outcome: Mapping[str, Any], rows: Sequence[Row]) -> list[Mismatch]:
    """Where the task's final attempt ended in the second worker's journal, and how many attempts it has
    there (no rows at all: ``attempts: 0``)."""
    mine = [group for ident, group in attempts(rows).items() if ident[0] == task_id]
    found = _final_outcome(where, outcome, mine[-1][-1] if mine else None, " in the second worker's journal")
    if "attempts" in outcome and len(mine) != outcome["attempts"]:
        found.append(
            _m(
                "SCOPE-1",
                f"{where}/attempts",
                outcome["attempts"],
                len(mine),
                "attempts with rows in the second worker's journal",
            )
        )
    return found


def hard_failures(history: Story, scenario: Scenario) -> list[Mismatch]:
    """OUT-1: no submission of an attempt, under any key and from any process, reaches the control plane while
    the journal (as the kit read it when the submission arrived) holds the attempt's ``reconciliation_required``
    row with a hard-failure reason. A submission the kit read no journal for is SUB-1's to name."""
    found = []
    for moment in history.moments("submission"):
        which = (moment.get("task_id"), moment.get("attempt"))
        held = [
            row
            for read in history.reads_at(moment.get("request"))
            for row in read.get("rows", ())
            if (row.get("task_id"), row.get("attempt")) == which
            and row.get("phase") == "reconciliation_required"
            and row.get("reason") in HARD_FAILURES
        ]
        if held:
            note = (
                f"a submission of {which[0]!r} attempt {which[1]!r} arrived (request {moment.get('request')!r}, by "
                f"{moment.get('worker')!r}, under the key {moment.get('key')!r}) while the journal held the attempt's "
                f"hard failure, reconciliation_required: {held[0].get('reason')} (seq {held[0].get('seq')!r}): a hard "
                "failure gets no further submission, under any key, in any later process"
            )
            where = f"/tasks/{which[0]}/attempts/{which[1]}/submission"
            found.append(_m("OUT-1", where, "no submission after a hard failure", moment.get("request"), note))
    return found
