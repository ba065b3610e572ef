"""The P1 checks of the side effects the kit saw at the control plane and the origin: one governed commit,
pushed once (COMMIT-3); one key per attempt, never shared (KEY-1, KEY-2) and one body per key (SUB-4); the
stored result is the task's (TASK-2); no side effect with a lost lease (LEASE-4), for a result_submitted row
the control plane does not back (SUB-7), or for an attempt served against CP-5 or CP-7 (SCOPE-6, SCOPE-7);
no request to the kit's own paths (CP-22).

Pure: the harness reads the control plane's log and the origins; this module only judges what they saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch


def side_effect_checks(ev: Evidence) -> list[Mismatch]:
    """COMMIT-3, KEY-1, SUB-2/SUB-4, CP-10 and the expected result hash."""
    return _push_checks(ev) + _submission_key_checks(ev.submissions) + _stored_result_checks(ev)


def _push_checks(ev: Evidence) -> list[Mismatch]:
    """COMMIT-3 at the origin: no push attempt after an accepted one of the same ref, one commit per branch."""
    found: list[Mismatch] = []
    accepted_refs: dict[tuple[str, str], int] = {}
    for index, push in enumerate(ev.pushes):
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
    for task_id, gained in ev.commits.items():
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


def _submission_key_checks(submissions: Sequence[Mapping[str, Any]]) -> list[Mismatch]:
    """KEY-1 and SUB-4 at the control plane: one key and one body per attempt, no key shared by two attempts."""
    found: list[Mismatch] = []
    keys: dict[tuple[str, int], set[str]] = {}
    bodies: dict[tuple[str, int], set[str]] = {}
    for submission in submissions:
        which = (str(submission["task_id"]), int(submission["attempt"]))
        keys.setdefault(which, set()).add(str(submission["key"]))
        bodies.setdefault(which, set()).add(str(submission["result_hash"]))
    for (task_id, number), used in sorted(keys.items()):
        where = f"/control-plane/{task_id}/{number}"
        if len(used) > 1:
            found.append(
                _m("KEY-1", f"{where}/keys", "one key per attempt", sorted(used), "an attempt used more than one key")
            )
        sent = bodies[(task_id, number)]
        if len(sent) > 1:
            found.append(
                _m("SUB-4", f"{where}/bodies", "one body per key", sorted(sent), "another body was sent under the key")
            )
    return found + _shared_key_checks(keys)


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


def _stored_result_checks(ev: Evidence) -> list[Mismatch]:
    """TASK-2: the result the control plane stored is the one the kit computed, unless the scenario scripts it."""
    found = []
    for task_id, facts in ev.tasks.items():
        stored = facts.get("stored")
        if stored and task_id in ev.expected and not facts.get("scripted_result"):
            want = result_hash(ev.expected[task_id])
            if stored.get("result_hash") != want:
                found.append(
                    _m(
                        "TASK-2",
                        f"/control-plane/{task_id}/stored",
                        ev.expected[task_id],
                        stored.get("result"),
                        "the stored result is not the task's result",
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


def key_checks(ev: Evidence) -> list[Mismatch]:
    """KEY-2: every submission carries the key of its attempt's result_pending row, which result_submitted repeats."""
    found = []
    pending: dict[tuple[str, int], str] = {}
    for row in ev.rows:
        if row["phase"] == "result_pending" and row["idempotency_key"]:
            pending.setdefault((row["task_id"], row["attempt"]), row["idempotency_key"])
    for submission in ev.submissions:
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
                    "KEY-2" if _reused_pending(ev.rows, task_id, key) else "KEY-1",
                    f"/journal/{task_id}/result_pending/idempotency_key",
                    "a different key per attempt; a reused result_pending carries the new attempt's key",
                    {key: sorted(numbers)},
                    "two attempts' result_pending rows hold the same key",
                )
            )
    for row in ev.rows:
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


def lease_checks(ev: Evidence) -> list[Mismatch]:
    """LEASE-4 (EVID-4): no push and no submission reached the kit while the attempt's lease was not ACTIVE, and
    none from a worker that was told the lease was lost, even once a replayed delivery made it ACTIVE again."""
    found = [
        _m(
            "LEASE-4",
            f"/control-plane/{revival['task_id']}/{revival['attempt']}/revived/{revival['journal']}",
            [],
            list(revival["governed"]),
            f"governed side effects for an abandoned attempt: the control plane had told this worker that lease "
            f"{revival['lease_id']!r} was lost ({revival['told']}) before a replayed delivery made it ACTIVE again",
        )
        for revival in ev.revivals
        if revival["governed"]
    ]
    for index, push in enumerate(ev.pushes):
        lease = push.get("lease")
        state = lease.get("state") if isinstance(lease, Mapping) else None
        if push.get("task_id") is not None and state is not None and state != "ACTIVE":
            found.append(
                _m("LEASE-4", f"/origin/pushes/{index}", "ACTIVE", state, "a push reached the origin with a lost lease")
            )
    for submission in ev.submissions:
        if int(submission["status"]) == 403:
            found.append(
                _m(
                    "LEASE-4",
                    f"/control-plane/{submission['task_id']}/{submission['attempt']}/submission",
                    "a lease ACTIVE at CP time",
                    "answered 403",
                    "a submission reached the control plane with a lost lease",
                )
            )
    return found


def submitted_backing(ev: Evidence) -> list[Mismatch]:
    """SUB-7: a result_submitted row only on a 2xx answer to its key or on an exact match."""
    found = []
    for row in ev.rows:
        if row["phase"] != "result_submitted":
            continue
        stored: Mapping[str, Any] | None = ev.tasks.get(row["task_id"], {}).get("stored")
        answered = any(
            s["task_id"] == row["task_id"] and s["key"] == row["idempotency_key"] and 200 <= int(s["status"]) < 300
            for s in ev.submissions
        )
        exact = (
            stored is not None
            and stored.get("attempt") == row["attempt"]
            and stored.get("result_hash") == row["result_hash"]
        )
        if not (answered or exact):
            found.append(
                _m(
                    "SUB-7",
                    f"/journal/{row['task_id']}/{row['attempt']}/result_submitted",
                    "a 2xx answer or an exact match",
                    stored,
                    "result_submitted without the control plane holding the result",
                )
            )
    return found
