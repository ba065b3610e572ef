"""Idempotency keys and result submission (docs/spec/p1.md, sections 7 and 8): a submission arrives only once its
result_pending row is durable, under its key, with its hash (SUB-1, SUB-2); one key per attempt, taken from the
row and never shared (KEY-1, KEY-2), one body per key (SUB-4); the stored result is the task's (TASK-2); a
result_submitted row rests on a 2xx answer to its key (SUB-7) or a 409 that was an exact match (SUB-5).

The observer reads the journal as a submission arrives; the control plane's log says what each 409 answer
carried (the task's state and its stored result as the answer showed them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch

EXACT_STATES = ("VERIFYING", "SUCCEEDED")  # the task states in which a 409 can be an exact match (SUB-5)


def arrivals(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-1 and SUB-2, for each submission, against the journal the kit read as it arrived."""
    found = []
    for moment in history.moments("submission"):
        reads = history.reads_at(moment.get("request"))
        rows = list(reads[0].get("rows", ())) if reads else []
        problem = _problem(
            rows, moment["task_id"], moment["attempt"], moment["key"], moment["result_hash"]
        )
        if problem is not None:
            found.append(dataclasses.replace(problem, event=reads[0].seq if reads else None))
    return found


def _problem(rows: Sequence[Row], task_id: str, attempt: int, key: str, digest: str) -> Mismatch | None:
    """What the journal *rows* (read as the submission arrived) say of it: SUB-1 when the attempt has no
    durable ``result_pending`` row at all, SUB-2 when the row holding its key holds another result hash. A
    durable row under another key is KEY-1's and KEY-2's to name (``keys``): the row was
    durable, the key was not taken from it."""
    mine = [r for r in rows if r["task_id"] == task_id and r["attempt"] == attempt]
    pending = [r for r in mine if r["phase"] == "result_pending"]
    where = f"/tasks/{task_id}/attempts/{attempt}/submission"
    if not pending:
        latest = mine[-1]["phase"] if mine else None
        return _m(
            "SUB-1",
            where,
            {"phase": "result_pending", "idempotency_key": key, "result_hash": digest},
            [{k: r[k] for k in ("phase", "idempotency_key", "result_hash")} for r in mine[-2:]],
            f"a submission of {task_id!r} attempt {attempt!r} under the key {key!r} arrived before its "
            f"result_pending row was durable: the attempt's latest durable row is {latest!r}",
        )
    holding = [r for r in pending if r["idempotency_key"] == key]
    if holding and not any(r["result_hash"] == digest for r in holding):
        row = holding[-1]
        return _m(
            "SUB-2",
            f"{where}/result_hash",
            row["result_hash"],
            digest,
            f"a submission under the key {key!r} carried the result_hash {digest!r}, not the "
            f"{row['result_hash']!r} of the durable result_pending row (seq {row['seq']!r}) that holds the key",
        )
    return None


def sent(history: Story, scenario: Scenario) -> list[Mismatch]:
    """KEY-1 and SUB-4 at the control plane: one key and one body per attempt, no key shared by two attempts."""
    found: list[Mismatch] = []
    used_keys: dict[tuple[str, int], set[str]] = {}
    bodies: dict[tuple[str, int], set[str]] = {}
    for submission in history.submissions:
        which = (str(submission["task_id"]), int(submission["attempt"]))
        used_keys.setdefault(which, set()).add(str(submission["key"]))
        bodies.setdefault(which, set()).add(str(submission["result_hash"]))
    for (task_id, number), used in sorted(used_keys.items()):
        where = f"/control-plane/{task_id}/{number}"
        if len(used) > 1:
            found.append(
                _m("KEY-1", f"{where}/keys", "one key per attempt", sorted(used), "an attempt used more than one key")
            )
        hashes = bodies[(task_id, number)]
        if len(hashes) > 1:
            note = "another body was sent under the key"
            found.append(_m("SUB-4", f"{where}/bodies", "one body per key", sorted(hashes), note))
    return found + _shared_key_checks(used_keys)


def _shared_key_checks(keys: Mapping[tuple[str, int], set[str]]) -> list[Mismatch]:
    """KEY-1: no key was sent by two attempts of a task."""
    found = []
    owners: dict[tuple[str, str], set[int]] = {}
    for (task_id, number), used in keys.items():
        for key in used:
            owners.setdefault((task_id, key), set()).add(number)
    for (task_id, key), numbers in sorted(owners.items()):
        if len(numbers) > 1:
            found.append(
                _m(
                    "KEY-1",
                    f"/control-plane/{task_id}/keys",
                    "a different key per attempt",
                    {key: sorted(numbers)},
                    "two attempts shared a key",
                )
            )
    return found


def stored_result(history: Story, scenario: Scenario) -> list[Mismatch]:
    """TASK-2: the result the control plane stored is the one the kit computed, unless the scenario scripts it."""
    found = []
    for task_id, facts in history.tasks.items():
        stored = facts.get("stored")
        if stored and task_id in history.expected and not facts.get("scripted_result"):
            want = result_hash(history.expected[task_id])
            if stored.get("result_hash") != want:
                found.append(
                    _m(
                        "TASK-2",
                        f"/control-plane/{task_id}/stored",
                        history.expected[task_id],
                        stored.get("result"),
                        "the stored result is not the task's result",
                    )
                )
    return found


def keys(history: Story, scenario: Scenario) -> list[Mismatch]:
    """KEY-2: every submission carries the key of its attempt's result_pending row, which result_submitted repeats."""
    found = []
    pending: dict[tuple[str, int], str] = {}
    for row in history.rows:
        if row["phase"] == "result_pending" and row["idempotency_key"]:
            pending.setdefault((row["task_id"], row["attempt"]), row["idempotency_key"])
    for submission in history.submissions:
        which = (str(submission["task_id"]), int(submission["attempt"]))
        if which in pending and submission["key"] != pending[which]:
            found.append(
                _m(
                    "KEY-2",
                    f"/control-plane/{which[0]}/{which[1]}/key",
                    pending[which],
                    submission["key"],
                    f"{which[0]!r} attempt {which[1]!r} was submitted under the key {submission['key']!r}, not the "
                    f"key {pending[which]!r} its durable result_pending row holds: the key is taken from the row, "
                    "never minted again",
                )
            )
    # The journal sees what the control plane may not: a key written in result_pending but never sent, which
    # a later attempt (reusing the row, or not) must not carry again (KEY-1, KEY-2).
    holders: dict[tuple[str, str], list[int]] = {}
    for (task_id, number), key in pending.items():
        holders.setdefault((task_id, key), []).append(number)
    for (task_id, key), numbers in sorted(holders.items()):
        if len(numbers) > 1:
            found.append(
                _m(
                    "KEY-2" if _reused_pending(history.rows, task_id, key) else "KEY-1",
                    f"/journal/{task_id}/result_pending/idempotency_key",
                    "a different key per attempt; a reused result_pending carries the new attempt's key",
                    {key: sorted(numbers)},
                    "two attempts' result_pending rows hold the same key",
                )
            )
    for row in history.rows:
        which = (row["task_id"], row["attempt"])
        if row["phase"] == "result_submitted" and which in pending and row["idempotency_key"] != pending[which]:
            found.append(
                _m(
                    "KEY-2",
                    f"/journal/{which[0]}/{which[1]}/result_submitted",
                    pending[which],
                    row["idempotency_key"],
                    f"result_submitted of {which[0]!r} attempt {which[1]!r} carries the key "
                    f"{row['idempotency_key']!r}, not the key {pending[which]!r} of its result_pending row",
                )
            )
    return found


def _reused_pending(rows: Sequence[Row], task_id: str, key: str) -> bool:
    """Whether a reused result_pending row of the task holds *key*: then a shared key breaks KEY-2, not KEY-1."""
    return any(
        row["task_id"] == task_id
        and row["phase"] == "result_pending"
        and row["reused_from"] is not None
        and row["idempotency_key"] == key
        for row in rows
    )


def backing(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-7: a result_submitted row only on a 2xx answer to its key or on an exact match; SUB-4 where the
    attempt's last submission got a 5xx or no answer, which leave the outcome unknown."""
    found = []
    for row in history.rows:
        if row["phase"] != "result_submitted":
            continue
        stored: Mapping[str, Any] | None = history.tasks.get(row["task_id"], {}).get("stored")
        answered = any(
            s["task_id"] == row["task_id"] and s["key"] == row["idempotency_key"] and 200 <= int(s["status"]) < 300
            for s in history.submissions
        )
        exact = (
            stored is not None
            and stored.get("attempt") == row["attempt"]
            and stored.get("result_hash") == row["result_hash"]
        )
        if not (answered or exact):
            found.append(_unbacked(row, stored, history.submissions))
    return found


def _unbacked(row: Row, stored: Mapping[str, Any] | None, submissions: Sequence[Mapping[str, Any]]) -> Mismatch:
    """A result_submitted row the control plane does not back: after a 5xx or a transport failure (status 0)
    to the attempt's last submission it broke SUB-4, which asks for the same submission again; else SUB-7."""
    where = f"/journal/{row['task_id']}/{row['attempt']}/result_submitted"
    mine = [int(s["status"]) for s in submissions if s["task_id"] == row["task_id"] and s["attempt"] == row["attempt"]]
    held = "nothing" if stored is None else f"attempt {stored.get('attempt')!r}'s result"
    if mine and (mine[-1] == 0 or mine[-1] >= 500):
        note = (
            f"result_submitted after its last submission was answered {mine[-1]!r} (0: no answer), which leaves "
            f"the outcome unknown: the control plane holds {held}, and the same submission was not sent again"
        )
        return _m("SUB-4", where, "the same submission sent again until a 2xx or a 409", {"statuses": mine}, note)
    note = f"result_submitted without the control plane holding the result: it holds {held}"
    return _m("SUB-7", where, "a 2xx answer or an exact match", stored, note)


def exact_match(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-5: a ``result_submitted`` row whose attempt's submissions got no 2xx answer and only 409 answers rests
    on those 409s, so one of them must have been an exact match. A 409 whose answer the kit did not record is
    none (no evidence passes); an attempt with no 409 is SUB-7's to judge (a read, ``backing``). And
    a ``result_conflict`` row must not follow a 409 that was an exact match (``_refused_match``)."""
    found = _refused_match(history)
    for row in history.rows:
        if row["phase"] != "result_submitted":
            continue
        mine = [s for s in history.submissions if s["task_id"] == row["task_id"] and s["attempt"] == row["attempt"]]
        conflicts = [s for s in mine if int(s["status"]) == 409]
        if not conflicts or any(200 <= int(s["status"]) < 300 for s in mine):
            continue
        if any(_exact_match(s.get("answer"), row) for s in conflicts):
            continue
        found.append(_not_exact(row, [s.get("answer") for s in conflicts]))
    return found


def _refused_match(history: Story) -> list[Mismatch]:
    """SUB-5: an attempt that ended in ``result_conflict`` after a 409 that was an exact match for its
    ``result_pending`` row (by the ``state`` and ``stored`` the answer carried) refused a match it had to take.
    The stored key plays no part in the match (p1.md 0.4)."""
    found = []
    for row in history.rows:
        if row["phase"] != "reconciliation_required" or row["reason"] != "result_conflict":
            continue
        ident = (row["task_id"], row["attempt"])
        pending = [r for r in history.rows if (r["task_id"], r["attempt"]) == ident and r["phase"] == "result_pending"]
        answers = [
            s.get("answer")
            for s in history.submissions
            if (s["task_id"], s["attempt"]) == ident and int(s["status"]) == 409
        ]
        matched = [a for a in answers if a is not None and pending and _exact_match(a, pending[-1])]
        if matched:
            note = (
                f"{row['task_id']!r} attempt {row['attempt']!r} ended in result_conflict, but a 409 it got was an "
                f"exact match: this attempt's result hash {pending[-1]['result_hash']!r}, the task "
                f"{matched[0].get('state')!r} (the stored key is no part of the match)"
            )
            where = f"/journal/{row['task_id']}/{row['attempt']}/reconciliation_required"
            found.append(_m("SUB-5", where, "result_submitted", "reconciliation_required: result_conflict", note))
    return found


def _exact_match(answer: Mapping[str, Any] | None, row: Row) -> bool:
    """SUB-5: whether a 409 *answer* (its ``state`` and ``stored`` as the worker got them) is an exact match for
    the attempt's row: this attempt's result, with the row's hash, and the task VERIFYING or SUCCEEDED; the stored
    key is not compared (p1.md 0.4)."""
    if not isinstance(answer, Mapping) or answer.get("state") not in EXACT_STATES:
        return False
    stored = answer.get("stored")
    return (
        isinstance(stored, Mapping)
        and stored.get("attempt") == row["attempt"]
        and stored.get("result_hash") == row["result_hash"]
    )


def _not_exact(row: Row, answers: Sequence[Mapping[str, Any] | None]) -> Mismatch:
    """The SUB-5 finding for *row*: each 409 answer it rests on, and what made the first one no exact match."""
    first = answers[0] if isinstance(answers[0], Mapping) else {}
    stored = first.get("stored") if isinstance(first.get("stored"), Mapping) else None
    if not first:
        why = "the kit recorded nothing of the answer, which shows no exact match"
    elif first.get("state") not in EXACT_STATES:
        why = f"the task was {first.get('state')!r}, not VERIFYING or SUCCEEDED"
    elif stored is None:
        why = "the control plane held no stored result"
    elif stored.get("attempt") != row["attempt"]:
        why = f"the stored result is attempt {stored.get('attempt')!r}'s"
    else:
        why = f"the stored result_hash is {stored.get('result_hash')!r}, not the row's {row['result_hash']!r}"
    note = (
        f"result_submitted for {row['task_id']!r} attempt {row['attempt']!r} rests on {len(answers)} 409 "
        f"answer(s) and no 2xx, and none was an exact match: in the first, {why}"
    )
    return _m(
        "SUB-5",
        f"/journal/{row['task_id']}/{row['attempt']}/result_submitted",
        {"state": list(EXACT_STATES), "stored": {"attempt": row["attempt"], "result_hash": row["result_hash"]}},
        list(answers),
        note,
    )


def second_worker_backing(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-7 over the journal of a scenario's second worker."""
    return on_second_worker(backing, history, scenario)
