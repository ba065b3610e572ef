"""The P1 checks of a result submission: what the journal held as it arrived (SUB-1, with SUB-2 for a body
that is not its row's), and the 409 answers a ``result_submitted`` row rests on (SUB-5).

Pure: the observer reads the journal as a submission arrives and the harness reads, from the control plane's
log, what each 409 answer carried (the task's state and its stored result as the answer showed them); this
module only judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch

EXACT_STATES = ("VERIFYING", "SUCCEEDED")  # the task states in which a 409 can be an exact match (SUB-5)


def submission_problem(rows: Sequence[Row], task_id: str, attempt: int, key: str, digest: str) -> Mismatch | None:
    """What the journal *rows* (read as the submission arrived) say of it: SUB-1 when the attempt has no
    durable ``result_pending`` row at all, SUB-2 when the row holding its key holds another result hash. A
    durable row under another key is KEY-1's and KEY-2's to name (``effect_checks.key_checks``): the row was
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


def exact_match(answer: Mapping[str, Any] | None, row: Row) -> bool:
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


def exact_match_checks(ev: Evidence) -> list[Mismatch]:
    """SUB-5: a ``result_submitted`` row whose attempt's submissions got no 2xx answer and only 409 answers rests
    on those 409s, so one of them must have been an exact match. A 409 whose answer the kit did not record is
    none (no evidence passes); an attempt with no 409 is SUB-7's to judge (a read, ``submitted_backing``). And
    a ``result_conflict`` row must not follow a 409 that was an exact match (``refused_match_checks``)."""
    found = refused_match_checks(ev)
    for row in ev.rows:
        if row["phase"] != "result_submitted":
            continue
        mine = [s for s in ev.submissions if s["task_id"] == row["task_id"] and s["attempt"] == row["attempt"]]
        conflicts = [s for s in mine if int(s["status"]) == 409]
        if not conflicts or any(200 <= int(s["status"]) < 300 for s in mine):
            continue
        if any(exact_match(s.get("answer"), row) for s in conflicts):
            continue
        found.append(_not_exact(row, [s.get("answer") for s in conflicts]))
    return found


def refused_match_checks(ev: Evidence) -> list[Mismatch]:
    """SUB-5: an attempt that ended in ``result_conflict`` after a 409 that was an exact match for its
    ``result_pending`` row (by the ``state`` and ``stored`` the answer carried) refused a match it had to take.
    The stored key plays no part in the match (p1.md 0.4)."""
    found = []
    for row in ev.rows:
        if row["phase"] != "reconciliation_required" or row["reason"] != "result_conflict":
            continue
        ident = (row["task_id"], row["attempt"])
        pending = [r for r in ev.rows if (r["task_id"], r["attempt"]) == ident and r["phase"] == "result_pending"]
        answers = [
            s.get("answer")
            for s in ev.submissions
            if (s["task_id"], s["attempt"]) == ident and int(s["status"]) == 409
        ]
        matched = [a for a in answers if a is not None and pending and exact_match(a, pending[-1])]
        if matched:
            note = (
                f"{row['task_id']!r} attempt {row['attempt']!r} ended in result_conflict, but a 409 it got was an "
                f"exact match: this attempt's result hash {pending[-1]['result_hash']!r}, the task "
                f"{matched[0].get('state')!r} (the stored key is no part of the match)"
            )
            where = f"/journal/{row['task_id']}/{row['attempt']}/reconciliation_required"
            found.append(_m("SUB-5", where, "result_submitted", "reconciliation_required: result_conflict", note))
    return found


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
