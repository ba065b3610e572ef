"""The governed commit and the origin (docs/spec/p1.md, section 9; p1-control-plane.md CP-17, CP-18): a push
only from verification_passed (COMMIT-2), a receipt only once commit_done is durable (COMMIT-5), one governed
commit pushed once (COMMIT-3), and no attempt left at commit_done at idle (COMMIT-4).

The governed push is the only change a worker makes to an origin. Every push attempt that reached one is a
plain update of a task's target branch: never another ref, never a deletion, never a forced update
(COMMIT-2). And once the last step is done, every ref of every origin is where the kit made or moved it and
the updates the origin's hook let land left it, and there is no other ref (COMMIT-3, CP-17), so a worker
that writes an origin behind its hook's back (a branch reset after the governed commit, a tag or branch of
its own) is seen there; an origin the kit cannot read safely was changed behind its hook's back too.

No report is believed on its word. The origin's hook runs inside the worker's push and the worker can read its
policy, so it can call the kit's own paths with their secret: every report that a ref moved is held to the push
the control plane let land and to the branch as the kit's own git read it then (COMMIT-3), every commit a
target branch gained is the governed commit the kit computes (TASK-4), and an attempt goes from commit_done to
result_pending only after the control plane logged its receipt confirmed (COMMIT-4).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1 import views
from resumekit.conformance.p1.checks import _prepush
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


def confirmed_first(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-4: an attempt goes on from commit_done to result_pending only once the receipt it reported for its
    Job was answered ``confirmed`` with its commit C, so the control plane logged that receipt before any reading
    of a journal that holds the attempt's result_pending; and a reused result_pending of a commit task is
    submitted only after such a receipt in its own attempt (SCOPE-3). A receipt the worker never sent, or sent
    after, leaves condition (1) unchecked whatever the leases say."""
    receipts = [e for e in history.of(views.CONTROL_PLANE, "receipt") if e.get("visibility") == "confirmed"]
    submitted: dict[tuple[Any, Any], Event] = {}  # (task_id, attempt) -> the first submission the log shows of it
    for event in history.of(views.CONTROL_PLANE, "moment"):
        if event.get("check") == "submission":
            submitted.setdefault((event.get("task_id"), event.get("attempt")), event)
    found = []
    for journal in ("first", "second"):
        for key, (oid, read, how) in _converged(views.journal_reads(history.events, journal)).items():
            seen = submitted.get(key) if how == "reused" else read
            if seen is None:
                continue  # a reused result_pending not submitted yet: nothing it went on to
            before = [e for e in receipts if e.seq < seen.seq and (e.get("task_id"), e.get("attempt")) == key
                      and e.get("commit_oid") == oid]
            if not before:
                found.append(_unconfirmed(journal, key, oid, how, seen))
    return found


def _converged(reads: Sequence[Event]) -> dict[tuple[Any, Any], tuple[Any, Event, str]]:
    """(task_id, attempt) of each attempt that reached result_pending with a commit -> its commit, the first
    reading that showed it, and how: ``after commit_done`` in the attempt, or ``reused``."""
    found: dict[tuple[Any, Any], tuple[Any, Event, str]] = {}
    for read in reads:
        for ident, group in attempts([dict(r) for r in read.get("rows", ())]).items():
            key = (ident[0], ident[1])
            if key in found:
                continue
            done = [r for r in group if r["phase"] == "commit_done"]
            for row in group:
                if row["phase"] != "result_pending" or row["commit_oid"] is None:
                    continue
                if row["reused_from"] is not None:
                    found[key] = (row["commit_oid"], read, "reused")
                elif done and done[0]["seq"] < row["seq"]:
                    found[key] = (done[-1]["commit_oid"], read, "after commit_done")
                break
    return found


def _unconfirmed(journal: str, key: tuple[Any, Any], oid: Any, how: str, seen: Event) -> Mismatch:
    task_id, attempt = key
    whose = "" if journal == "first" else " of the second worker"
    if how == "reused":
        note = (
            f"attempt {attempt} of {task_id!r}{whose} submitted its reused result_pending, but the control plane had "
            f"logged no receipt of that attempt confirmed with {oid!r}: the convergence check (COMMIT-4) must pass "
            "in the attempt before its result is submitted (SCOPE-3)"
        )
    else:
        note = (
            f"attempt {attempt} of {task_id!r}{whose} went on from commit_done to result_pending, but the control "
            f"plane had logged no receipt of that attempt confirmed with {oid!r} before the kit read it: the "
            "convergence check needs the Job's receipt answered confirmed first"
        )
    pointer = ("" if journal == "first" else "/second-worker") + f"/journal/{task_id}/{attempt}/receipt"
    expected = f"a receipt of attempt {attempt} answered confirmed with {oid!r}, before {seen.seq}"
    return dataclasses.replace(_m("COMMIT-4", pointer, expected, None, note), event=seen.seq)


def landed(history: Story, scenario: Scenario) -> list[Mismatch]:
    """TASK-4 at the origin: every commit a commit task's target branch gained above its expected_branch_oid, as
    the kit read the branch once the last step was done, is the governed commit C the kit computes for an
    attempt of that task, or a commit the kit itself put there. The hook checks a pushed commit's parent, not its
    tree, so a commit of another tree on C's parent lands as C would, and its worker may still submit C's body:
    only the kit's own C tells them apart. A branch that gained a commit while the kit computed none is judged
    so too: nothing shows that commit is C."""
    made = {oid for refs in history.kit_refs.values() for oid in refs.values()}
    made |= {str(u.get("new")) for u in history.ref_updates if u.get("by") == "kit"}
    found = []
    for task_id, gained in sorted(history.commits.items()):
        mine = sorted({str(g.get("commit")) for g in history.governed if g.get("task_id") == task_id})
        for index, oid in enumerate(gained):
            if oid in mine or oid in made:
                continue
            note = (
                f"the target branch of {task_id!r} gained {oid!r}, which is not the governed commit the kit "
                "computes from the attempt's base_oid and payload (TASK-4): the origin holds a commit no payload "
                "asked for, whatever result the worker submitted"
            )
            expected = mine or "a governed commit the kit computed"
            found.append(_m("TASK-4", f"/origin/{task_id}/commits/{index}", expected, oid, note))
    return found


def ref_reports(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3 and CP-18: every report on the kit's own path that a ref moved is borne out by what the kit saw
    itself. The post-receive half of the hook reports only an update its pre-receive half asked about and the
    control plane let land, and only once git moved the ref, so each report names an update the control plane
    accepted (logged with the branch at its old value as the kit's git read it), not claimed by an earlier
    report, and the kit's git read the branch at its new value when the report arrived. The worker can read the
    paths' secret in the origin's policy, so a report that is not borne out was made by it: the origin was
    written behind the hook's back and the report says otherwise."""
    accepted: list[Event] = []
    found = []
    reports = 0
    for event in history.events:
        if event.actor != views.CONTROL_PLANE:
            continue
        if event.kind == "push" and event.get("accepted"):
            accepted.append(event)
        elif event.kind == "origin_ref_updated":
            update = _update(event)
            match = next((e for e in accepted if _update(e) == update), None)
            reports += 1
            if match is not None:
                accepted.remove(match)
            problem = _unborne(match, event)
            if problem is not None:
                repository, ref = str(event.get("repository")), str(event.get("ref"))
                expected = f"an update of {ref!r} the control plane let land, the branch read at its new value"
                actual = {name: event.get(name) for name in ("old", "new", "read")}
                note = f"the report that {ref!r} on the origin of {repository!r} moved is not borne out: {problem}"
                mismatch = _m("COMMIT-3", f"/origin/{repository}/reports/{reports - 1}", expected, actual, note)
                found.append(dataclasses.replace(mismatch, event=event.seq))
    return found


def _update(event: Event) -> tuple[Any, ...]:
    return tuple(event.get(name) for name in ("repository", "ref", "old", "new"))


def _unborne(match: Event | None, report: Event) -> str | None:
    """Why a report that a ref moved is not what the kit saw, or None when it is."""
    if match is None:
        return "the control plane let no such update land (its hook never asked about it, or it was refused)"
    if match.get("read") != match.get("old"):
        return f"when the hook asked, the kit read the branch at {match.get('read')!r}, not at {match.get('old')!r}"
    if report.get("read") != report.get("new"):
        read, new = report.get("read"), report.get("new")
        return f"when the report arrived, the kit read the branch at {read!r}, not at {new!r}"
    return None


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


def lease_read(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-6 (strict): before the push, the worker reads the branch's leases (``GET v1/leases``, CP-15) and
    pushes only when the branch has exactly one ACTIVE lease, its own; a read given up without an answer ends the
    attempt without a push. So every push attempt of an attempt that reached an origin follows a read of that
    branch's leases answered 200, made since the attempt's lease was granted and since the process that renewed it
    last before the push began: a worker that checks only its own renewal sends its push past a second ACTIVE
    lease unseen."""
    log = history.log
    found = []
    judged: set[tuple[Any, Any, Any]] = set()
    for moment in history.moments("push"):
        key, request = (moment.get("task_id"), moment.get("attempt")), moment.get("request")
        if not isinstance(request, int) or (*key, request) in judged:
            continue
        judged.add((*key, request))
        start = _prepush.since(log, key, request)
        if not any(start < number < request for number in _prepush.lease_reads(log, key)):
            task_id, attempt = key
            note = (
                f"a push of attempt {attempt} of {task_id!r} reached the origin (request {request!r}) with no read of "
                "the branch's leases answered 200 before it in the attempt: strict reads the branch as a whole, "
                "exactly one ACTIVE lease, the attempt's own, before the push"
            )
            where = f"/tasks/{task_id}/attempts/{attempt}/push/leases"
            found.append(_m("COMMIT-6", where, "GET v1/leases of the branch answered 200 before the push", None, note))
    return found


def branch_read(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-1: with C built, the worker reads the target branch before it pushes; at another value than
    expected_branch_oid or C it ends in branch_moved without a push. The read itself is not seen (a ``git
    ls-remote`` of a file URL runs no hook of the origin), so its consequence is judged: after the kit moved the
    branch away while the worker was settled (blocked at a failpoint, idle or down) and before the attempt had
    pushed, with no later change of the branch, the attempt's read shows the moved branch, so no push of it reaches
    the origin and it never ends in push_refused (the outcome of a push the read should have prevented)."""
    found = []
    for move in history.of(views.CONTROL_PLANE, "branch_moved"):
        if not move.get("done") or move.get("request") is not None or not _prepush.settled(history.events, move.seq):
            continue
        branch = (move.get("repository"), move.get("branch"))
        if _prepush.branch_changed_after(history, branch, move.seq):
            continue
        earlier = [e for e in views.journal_reads(history.events, "first") if e.seq < move.seq]
        before = [dict(r) for r in earlier[-1].get("rows", ())] if earlier else []
        for key in _prepush.attempts_of(history, branch, move.get("new")):
            if _prepush.pushed_or_past(history, before, key, move.seq):
                continue
            problem = _prepush.unread(history, key, move.seq)
            if problem is not None:
                found.append(_prepush.moved_unread(key, move, problem))
    return found
