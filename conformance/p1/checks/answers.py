"""What a worker does with the answer its result submission got (docs/spec/p1.md, section 8): a 200 or 201 is
success, written as ``result_submitted`` with the ``result_pending`` row's values (SUB-3); a 4xx other than 403
and 409 is a hard failure, ``result_rejected``, and the request is not sent again (SUB-6).

An answer counts only where it reached the process that sent the request: the control plane's log says whether
it answered, dropped or held back the answer and whether it killed the worker first (a kill point), and a
process's answer ``idle`` to a wait says it has finished with what it got. A 403 is a lost lease (LEASE-4) and a
409 is SUB-5's, so neither is a rejection.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import Row
from resumekit.conformance.p1.views import CONTROL_PLANE
from resumekit.conformance.results import Mismatch

SUCCESS = (200, 201)  # SUB-3: the answers that are success
NOT_REJECTIONS = (403, 409)  # the 4xx answers SUB-6 leaves to LEASE-4 and SUB-5
_CARRIED = ("result_hash", "result_body", "commit_oid")  # what result_submitted repeats (the key is KEY-2's)


@dataclass(frozen=True)
class _Sent:
    """One result submission as the control plane logged it: its event, request, process, attempt and answer."""

    seq: int
    request: Any
    worker: str | None
    task_id: str
    attempt: int
    status: int
    delivered: bool  # answered (neither dropped nor held back) and not killed at a kill point first

    @property
    def rejected(self) -> bool:
        return 400 <= self.status < 500 and self.status not in NOT_REJECTIONS


def _sent(history: Story) -> list[_Sent]:
    """Every submission the control plane took for one (its ``submission`` moment names the attempt), in order."""
    named = {moment.get("request"): moment for moment in history.moments("submission")}
    found = []
    for event in history.of(CONTROL_PLANE, "request"):
        moment = named.get(event.get("request"))
        if event.get("endpoint") != "result" or moment is None:
            continue
        status = event.get("status")
        found.append(
            _Sent(
                event.seq,
                event.get("request"),
                event.get("worker"),
                str(moment.get("task_id")),
                int(moment["attempt"]),
                status if isinstance(status, int) else 0,
                event.get("answer") == "answer" and event.get("kill_point") is None,
            )
        )
    return found


def _idle_after(history: Story, worker: str | None, seq: int) -> bool:
    """Whether *worker* answered a wait with ``idle`` after event *seq*: then it had done all it does on what it
    got by then."""
    for event in history.of(worker, "state") if worker is not None else ():
        answer = event.get("answer")
        if event.seq > seq and isinstance(answer, Mapping) and answer.get("state") == "idle":
            return True
    return False


def _elsewhere(history: Story) -> set[str]:
    """The processes that keep another journal than the one *history* judges (a scenario's second worker)."""
    return {
        str(read.get("worker"))
        for read in history.of("journal", "read")
        if read.get("why") == "start" and read.get("journal") != history.journal
    }


def _rows_of(rows: Sequence[Row], task_id: str, attempt: int) -> list[Row]:
    return [row for row in rows if row["task_id"] == task_id and row["attempt"] == attempt]


def _ended(rows: Sequence[Row]) -> str | None:
    """An attempt's last row as a note names it."""
    if not rows:
        return None
    last = rows[-1]
    return f"reconciliation_required: {last['reason']}" if last["phase"] == "reconciliation_required" else last["phase"]


def _judged(history: Story) -> Iterator[_Sent]:
    """The delivered submissions of this journal's processes, each whose process said idle after it."""
    elsewhere = _elsewhere(history)
    for sent in _sent(history):
        if sent.delivered and sent.worker not in elsewhere and _idle_after(history, sent.worker, sent.seq):
            yield sent


def successes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-3: an attempt whose submission got a 200 or 201, once the process that got it said idle, has its
    ``result_submitted`` row; and every ``result_submitted`` row repeats its ``result_pending`` row's hash, body
    and commit."""
    found = []
    seen: set[tuple[str, int]] = set()
    for sent in _judged(history):
        which = (sent.task_id, sent.attempt)
        if sent.status not in SUCCESS or which in seen:
            continue
        seen.add(which)
        mine = _rows_of(history.rows, *which)
        if not any(row["phase"] == "result_submitted" for row in mine):
            note = (
                f"the submission of {sent.task_id!r} attempt {sent.attempt!r} (request {sent.request!r}) was answered "
                f"{sent.status!r}, and {sent.worker!r} said idle after it, but the journal holds no result_submitted "
                f"row of the attempt: its last row is {_ended(mine)!r}"
            )
            where = f"/tasks/{sent.task_id}/attempts/{sent.attempt}/result_submitted"
            found.append(_m("SUB-3", where, "result_submitted", _ended(mine), note))
    return found + _carried(history.rows)


def _carried(rows: Sequence[Row]) -> list[Mismatch]:
    """SUB-3: each ``result_submitted`` row holds its attempt's ``result_pending`` hash, body and commit."""
    found = []
    for row in rows:
        if row["phase"] != "result_submitted":
            continue
        pending = [r for r in _rows_of(rows, row["task_id"], row["attempt"]) if r["phase"] == "result_pending"]
        if not pending:
            continue  # no result_pending row: PHASE-3's to name
        for column in _CARRIED:
            if row[column] != pending[-1][column]:
                note = (
                    f"result_submitted of {row['task_id']!r} attempt {row['attempt']!r} (seq {row['seq']!r}) holds "
                    f"another {column} than its result_pending row (seq {pending[-1]['seq']!r})"
                )
                where = f"/journal/{row['task_id']}/{row['attempt']}/result_submitted/{column}"
                found.append(_m("SUB-3", where, pending[-1][column], row[column], note))
    return found


def rejections(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-6: a submission answered with a 4xx other than 403 and 409 is not sent again by the process that got
    the answer, which ends the attempt in ``result_rejected`` before it says idle; and a ``result_rejected`` row
    rests on such an answer to one of the attempt's submissions."""
    sent = _sent(history)
    found = []
    for rejected in (s for s in sent if s.delivered and s.rejected):
        found += _sent_again(rejected, sent)
    for rejected in _judged(history):
        mine = _rows_of(history.rows, rejected.task_id, rejected.attempt)
        if rejected.rejected and not any(_is_rejection(row) for row in mine):
            note = (
                f"request {rejected.request!r} of {rejected.task_id!r} attempt {rejected.attempt!r} was answered "
                f"{rejected.status!r}, and {rejected.worker!r} said idle after it with the attempt's last row "
                f"{_ended(mine)!r}: a 4xx other than 403 and 409 ends it in result_rejected"
            )
            where = f"/tasks/{rejected.task_id}/attempts/{rejected.attempt}/submission/reason"
            found.append(_m("SUB-6", where, "reconciliation_required: result_rejected", _ended(mine), note))
    return found + _unfounded(history.rows, sent)


def _sent_again(rejected: _Sent, sent: Sequence[_Sent]) -> list[Mismatch]:
    """SUB-6: the submissions of the same attempt that the process which got the rejection sent after it."""
    again = [
        later.request for later in sent
        if later.seq > rejected.seq and later.worker == rejected.worker
        and (later.task_id, later.attempt) == (rejected.task_id, rejected.attempt)
    ]  # fmt: skip
    if not again:
        return []
    note = (
        f"{rejected.worker!r} sent the submission of {rejected.task_id!r} attempt {rejected.attempt!r} again "
        f"(request {again[0]!r}) after request {rejected.request!r} was answered {rejected.status!r}: a "
        "rejection is a hard failure, never sent again"
    )
    where = f"/tasks/{rejected.task_id}/attempts/{rejected.attempt}/submission/again"
    return [_m("SUB-6", where, "no further submission", again, note)]


def _is_rejection(row: Row) -> bool:
    return bool(row["phase"] == "reconciliation_required" and row["reason"] == "result_rejected")


def _unfounded(rows: Sequence[Row], sent: Sequence[_Sent]) -> list[Mismatch]:
    """SUB-6: a ``result_rejected`` row of an attempt none of whose submissions was answered with a 4xx other
    than 403 and 409 (a lost lease, a 409, a 5xx or no submission at all is no rejection)."""
    found = []
    for row in rows:
        if not _is_rejection(row):
            continue
        mine = [s for s in sent if (s.task_id, s.attempt) == (row["task_id"], row["attempt"])]
        if any(s.rejected for s in mine):
            continue
        statuses = [s.status for s in mine]
        note = (
            f"{row['task_id']!r} attempt {row['attempt']!r} ended in result_rejected (seq {row['seq']!r}), but its "
            f"submissions were answered {statuses!r} (0: no answer): only a 4xx other than 403 and 409 is a rejection"
        )
        where = f"/journal/{row['task_id']}/{row['attempt']}/reconciliation_required"
        found.append(_m("SUB-6", where, "a 4xx other than 403 and 409", statuses, note))
    return found
