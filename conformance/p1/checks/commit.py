"""The governed commit and the origin (docs/spec/p1.md, section 9; p1-control-plane.md CP-17, CP-18): a push
only from verification_passed (COMMIT-2), a receipt only once commit_done is durable (COMMIT-5), one governed
commit pushed once (COMMIT-3), and no attempt left at commit_done at idle (COMMIT-4).

The governed push is the only change a worker makes to an origin. Every push attempt that reached one is a
plain update of a task's target branch: never another ref, never a deletion, never a forced update
(COMMIT-2). And once the last step is done, every ref of every origin is where the kit made or moved it and
the updates the origin's hook let land left it, and there is no other ref (COMMIT-3, CP-17), so a worker
that writes an origin behind its hook's back (a branch reset after the governed commit, a tag or branch of
its own) is seen there; an origin the kit cannot read safely was changed behind its hook's back too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.control_plane.state import ZERO
from resumekit.conformance.p1.model import Row, attempts
from resumekit.conformance.results import Mismatch

# Why a ref must be where it is, by who set it last.
_SET_BY = {
    "made": "where the kit made it",
    "kit": "where the kit moved it",
    "push": "at the commit the origin's hook let land",
}


def unreadable_origins(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3: every origin the kit read (at a request or once the last step was done) could be read safely:
    its files as the kit made them and pushes leave them, every git command within the kit's limits."""
    found = []
    for event in history.of("origin", "unreadable"):
        where, expected, actual = str(event.get("where")), str(event.get("expected")), str(event.get("found"))
        mismatch = _unreadable(str(event.get("repository")), where, expected, actual)
        found.append(dataclasses.replace(mismatch, event=event.seq))
    return found


def pushes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-2: a push reaches the origin only while the attempt's latest durable row is verification_passed.
    The origin cannot tell which worker pushed: with a second worker holding the same attempt, the push is in
    order if the attempt's latest row is verification_passed in either journal."""
    found = []
    for moment in history.moments("push"):
        task_id, attempt = moment.get("task_id"), moment.get("attempt")
        latest = None
        for read in history.reads_at(moment.get("request")):
            rows = [r for r in read.get("rows", ()) if r["task_id"] == task_id and r["attempt"] == attempt]
            if rows:
                latest = rows[-1]["phase"]
                if latest == "verification_passed":
                    break
        if latest != "verification_passed":
            note = "a push reached the origin while the attempt's latest row was not verification_passed"
            pointer = f"/tasks/{task_id}/attempts/{attempt}/push"
            found.append(Mismatch(pointer, "verification_passed", latest, "COMMIT-2", note))
    return found


def receipts(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-5 (strict): a receipt arrives only once its commit_done is durable. A reused result_pending
    carries an earlier attempt's commit_done, and SCOPE-3 has the new attempt report its receipt after it
    (COMMIT-4): the commit is durable in the attempt's rows either way."""
    found = []
    for moment in history.moments("receipt"):
        task_id, attempt, oid = moment.get("task_id"), moment.get("attempt"), moment.get("commit_oid")
        reads = history.reads_at(moment.get("request"))
        read = reads[0].get("rows", ()) if reads else ()
        rows = [r for r in read if r["task_id"] == task_id and r["attempt"] == attempt]
        carried = any(
            r["phase"] == "result_pending" and r["reused_from"] is not None and r["commit_oid"] == oid for r in rows
        )
        if not carried and (
            not rows or (rows[-1]["phase"] != "commit_done" and "commit_done" not in {r["phase"] for r in rows})
        ):
            note = "a receipt arrived before commit_done was durable"
            pointer = f"/tasks/{task_id}/attempts/{attempt}/receipt"
            latest = rows[-1]["phase"] if rows else None
            found.append(Mismatch(pointer, "commit_done durable", latest, "COMMIT-5", note))
    return found


def pushed_once(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3 at the origin: no push attempt after an accepted one of the same ref, one commit per branch."""
    found: list[Mismatch] = []
    accepted_refs: dict[tuple[str, str], int] = {}
    for index, push in enumerate(history.pushes):
        pushed = (str(push.get("repository", "")), str(push.get("ref", "")))
        if pushed in accepted_refs:
            found.append(
                _m(
                    "COMMIT-3",
                    f"/origin/pushes/{index}",
                    "no push attempt after an accepted one",
                    push,
                    "a governed commit was pushed again",
                )
            )
        if push.get("accepted"):
            accepted_refs.setdefault(pushed, index)
    for task_id, gained in history.commits.items():
        if len(gained) > 1:
            found.append(
                _m(
                    "COMMIT-3",
                    f"/origin/{task_id}/commits",
                    "at most one",
                    list(gained),
                    "the branch gained more than one commit",
                )
            )
    return found


def left_open(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-4, once the worker is idle: no attempt whose governed commit is recorded was left at it."""
    return _commit_left_open(attempts(history.rows))


def _commit_left_open(groups: Mapping[tuple[Any, ...], Sequence[Row]]) -> list[Mismatch]:
    """COMMIT-4: an attempt whose governed commit is recorded is never abandoned (LEASE-4 abandons only before
    ``commit_done`` or at ``result_pending``), so at idle none has ``commit_done`` as its last row: the worker
    claims the next attempt only after this one is terminal or abandoned (WRK-2), and a restart resumes it first
    (RESUME-1)."""
    return [
        _m(
            "COMMIT-4",
            f"/journal/{ident[0]}/{ident[1]}/last",
            ["result_pending", "reconciliation_required"],
            "commit_done",
            "an attempt with its governed commit recorded was left without the convergence check's outcome at idle",
        )
        for ident, group in groups.items()
        if group[-1]["phase"] == "commit_done"
    ]


def origin_pushes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-2 at the origin: every push attempt that reached it updates a task's target branch, is no
    deletion, and is a fast-forward to a governed commit, never a forced update (its old value an ancestor
    of its new one). A creation is left to the hook, which refuses it (CP-18)."""
    found = []
    targets = _target_refs(history.tasks)
    for index, push in enumerate(history.pushes):
        repository, ref = str(push.get("repository")), str(push.get("ref"))
        old, new = str(push.get("old")), str(push.get("new"))
        where = f"/origin/pushes/{index}"
        if ref not in targets.get(repository, set()):
            found.append(
                _m(
                    "COMMIT-2",
                    f"{where}/ref",
                    sorted(targets.get(repository, set())),
                    ref,
                    f"a push of {ref!r} reached the origin of {repository!r}, and no task has it for its target "
                    "branch: a worker pushes no other ref (CP-17)",
                )
            )
        elif new == ZERO:
            found.append(
                _m("COMMIT-2", f"{where}/new", "the governed commit", new,
                   f"a push deleting {ref!r} reached the origin of {repository!r}")
            )
        elif old != ZERO:
            found += _forward_check(where, repository, ref, old, new, history.fast_forward)
    return found


def _forward_check(
    where: str, repository: str, ref: str, old: str, new: str, placed: Mapping[tuple[str, str, str], bool | None]
) -> list[Mismatch]:
    """COMMIT-2 for one update of a target branch: a fast-forward of *old* to the governed commit, never forced."""
    if (repository, old, new) not in placed:
        note = f"the kit did not place the push of {new!r} to {ref!r}, so nothing shows it was a fast-forward"
    elif placed[(repository, old, new)] is None:
        note = (
            f"a push of {new!r} to {ref!r} reached the origin of {repository!r}, an object that is neither on the "
            "origin nor the governed commit of an attempt: no update to C"
        )
    elif placed[(repository, old, new)] is False:
        note = (
            f"a forced update of {ref!r} reached the origin of {repository!r}: {old!r} is not an ancestor of "
            f"{new!r}, and a plain push never sends such an update"
        )
    else:
        return []
    return [_m("COMMIT-2", where, f"a fast-forward of {old!r} to the governed commit", new, note)]


def origin_refs(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3 and CP-17 after the last step: every origin's refs are exactly those the kit made, each where
    the kit and the updates the origin's hook let land left it. Origins that were not read never pass."""
    if not history.origin_refs:
        return [
            _m(
                "COMMIT-3",
                "/origin/refs",
                "every ref of every origin, read after the last step",
                history.origin_refs,
                "the kit read no origin's refs, so nothing shows that the governed push was the only change",
            )
        ]
    found = []
    repositories = set(history.kit_refs) | set(history.origin_refs) | _task_repositories(history.tasks)
    for repository in sorted(repositories):
        made, seen = history.kit_refs.get(repository), history.origin_refs.get(repository)
        if made is None or seen is None:
            found.append(
                _m(
                    "COMMIT-3",
                    f"/origin/{repository}/refs",
                    "the refs the kit made and those read after the last step",
                    {"made": made, "read": seen},
                    f"the origin of {repository!r} cannot be judged: the kit "
                    + ("did not read its refs" if seen is None else "does not know the refs it made there"),
                )
            )
            continue
        want = _expected_refs(repository, made, history.ref_updates)
        for ref in sorted(set(want) | set(seen)):
            expected, by = want.get(ref, (None, ""))
            actual = seen.get(ref)
            if expected != actual:
                where = f"/origin/{repository}/{ref}"
                found.append(_m("COMMIT-3", where, expected, actual, _ref_note(repository, ref, expected, actual, by)))
    return found


def _expected_refs(
    repository: str, made: Mapping[str, str], updates: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[str, str]]:
    """Where each ref of *repository* must be at the end, and who set it last (``made``, ``kit``, ``push``):
    as the kit made them, then each change the kit made or the origin's hook let land, in order (an update to
    the zero object name removes the ref)."""
    want = {ref: (oid, "made") for ref, oid in made.items()}
    for update in updates:
        if update.get("repository") != repository:
            continue
        ref, new = str(update.get("ref")), str(update.get("new"))
        if new == ZERO:
            want.pop(ref, None)
        else:
            want[ref] = (new, str(update.get("by")))
    return want


def _unreadable(repository: str, where: str, expected: str, found: str) -> Mismatch:
    """COMMIT-3 for an origin the kit could not read: a file git reads blindly (its ``config``, ``HEAD``, an
    alternates file, a loose ref) is not the regular file of a bounded size the kit made or a push leaves, or
    a git command of the kit on the origin was stopped by its memory, time or output limit. The origin is the
    kit's and a worker changes it only through the governed push (CP-17), so the worker changed it behind
    the hook's back, and no ref of it can be judged."""
    note = (
        f"the origin of {repository!r} cannot be read safely ({where}: {found}; the kit expects {expected}): "
        "a worker changes the origin only through the governed push, never by writing the repository (CP-17)"
    )
    part = "git" if where.startswith("git ") else where
    return _m("COMMIT-3", f"/origin/{repository}/{part}", expected, found, note)


def _ref_note(repository: str, ref: str, expected: str | None, actual: str | None, by: str) -> str:
    """What is wrong with one ref of an origin, in words."""
    if expected is None:
        return (
            f"{ref!r} on the origin of {repository!r} names {actual!r}, but neither the kit nor an update the "
            "origin's hook let land made that ref: a worker pushes no other ref and changes the origin only "
            "through the governed push (CP-17)"
        )
    if actual is None:
        return (
            f"{ref!r} on the origin of {repository!r} is gone; it must be {_SET_BY.get(by, by)}, {expected!r}: "
            "a worker changes the origin only through the governed push (CP-17)"
        )
    return (
        f"{ref!r} on the origin of {repository!r} is at {actual!r}, not {_SET_BY.get(by, by)}, {expected!r}: "
        "something changed it behind the origin's hook, and a worker changes the origin only through the "
        "governed push (CP-17)"
    )


def _served(tasks: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every attempt the control plane served, of every task (the current one where no list is given)."""
    served = []
    for facts in tasks.values():
        listed = facts.get("attempts")
        for task in listed if isinstance(listed, Sequence) else [facts.get("task")]:
            if isinstance(task, Mapping):
                served.append(task)
    return served


def _task_repositories(tasks: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The repositories the tasks name: an origin of each must have been read and judged."""
    return {str(task["repository"]) for task in _served(tasks) if "repository" in task}


def _target_refs(tasks: Mapping[str, Mapping[str, Any]]) -> dict[str, set[str]]:
    """repository -> the full names of the target branches its tasks' attempts govern."""
    targets: dict[str, set[str]] = {}
    for task in _served(tasks):
        if "repository" in task and "target_branch" in task:
            targets.setdefault(str(task["repository"]), set()).add(f"refs/heads/{task['target_branch']}")
    return targets
