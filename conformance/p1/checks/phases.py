"""What is true when a row of a phase is written (docs/spec/p1.md, PHASE-1), where the kit can see it: a
``claimed`` row holds the task as the claim answer served it, and a ``commit_done`` row follows the push that put
its commit on the target branch. What the worker checked of its workspace (``verification_passed``) it alone
sees; the columns of the later phases are JNL-2's and SUB-7's to judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker, parsed_json
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch

# The log's entries that carry a task as the control plane served it: each attempt issued (CP-6), and the
# attempts it served against CP-5 or CP-7 (a replayed or a conflicting delivery).
_SERVING = ("attempt_issued", "replayed_delivery", "conflicting_delivery")


def claimed_as_served(history: Story, scenario: Scenario) -> list[Mismatch]:
    """PHASE-1: each ``claimed`` row's ``task`` is a task the control plane served for that attempt, member for
    member (a worker stores the task as served, members it does not know included)."""
    served: dict[tuple[Any, Any], list[Any]] = {}
    for entry in history.log:
        task = entry.get("task")
        if entry.get("kind") in _SERVING and isinstance(task, Mapping):
            served.setdefault((task.get("task_id"), task.get("attempt")), []).append(dict(task))
    first = _claimed_rows(history.rows, served)
    return first + on_second_worker(lambda story, _: _claimed_rows(story.rows, served), history, scenario)


def _claimed_rows(rows: Sequence[Row], served: Mapping[tuple[Any, Any], Sequence[Any]]) -> list[Mismatch]:
    found = []
    for row in rows:
        if row["phase"] != "claimed":
            continue
        candidates = served.get((row["task_id"], row["attempt"]), [])
        held = parsed_json(row["task"])
        if held is None or held not in candidates:
            found.append(_not_as_served(row, held, candidates))
    return found


def _not_as_served(row: Row, held: Any, candidates: Sequence[Any]) -> Mismatch:
    where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/task"
    if not candidates:
        note = f"a claimed row of attempt {row['attempt']!r} of {row['task_id']!r}, which no claim answer served"
        return _m("PHASE-1", where, "an attempt the claim answer granted", row["task"], note)
    expected = candidates[-1]
    differs = sorted(
        name for name in set(expected) | set(held if isinstance(held, Mapping) else {})
        if not isinstance(held, Mapping) or held.get(name, _ABSENT) != expected.get(name, _ABSENT)
    )
    note = (
        f"the claimed row of attempt {row['attempt']!r} of {row['task_id']!r} does not hold the task as served "
        f"(members that differ: {differs!r}): the row holds the task as the claim answer carried it, members it "
        "does not know included and none added"
    )
    return _m("PHASE-1", where, expected, row["task"], note)


_ABSENT = object()


def commit_done_landed(history: Story, scenario: Scenario) -> list[Mismatch]:
    """PHASE-1: a ``commit_done`` row is written once the origin's target branch holds its commit, so the origin's
    hook let a push of that commit to that branch land before the first read of the journal that holds the row."""
    found = []
    for row in history.rows:
        if row["phase"] != "commit_done":
            continue
        seen = _first_read_holding(history.events, row)
        if seen is None:
            continue
        ref = f"refs/heads/{row['target_branch']}"
        landed = any(
            e.seq < seen and e.actor == "control-plane" and e.kind == "push" and e.get("accepted") is True
            and e.get("repository") == row["repository"] and e.get("ref") == ref and e.get("new") == row["commit_oid"]
            for e in history.events
        )
        if not landed:
            note = (
                f"the commit_done row (seq {row['seq']!r}) of attempt {row['attempt']!r} of {row['task_id']!r} was "
                f"written before any push of {row['commit_oid']!r} to {ref} landed on the origin: the row records "
                "that the target branch holds the governed commit"
            )
            where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/commit_oid"
            found.append(_m("PHASE-1", where, f"a push of it to {ref} before the row", None, note))
    return found


def _first_read_holding(events: Sequence[Event], row: Row) -> int | None:
    """The event of the first read of the (first) journal that holds *row*."""
    for event in events:
        if event.actor != "journal" or event.kind != "read" or event.get("journal") != "first":
            continue
        if any(held.get("seq") == row["seq"] and held.get("phase") == row["phase"] for held in event.get("rows", ())):
            return event.seq
    return None
