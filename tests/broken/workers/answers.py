"""Broken workers of what a submission's answer means: success (SUB-3), a rejection (SUB-6), and a hard failure
that stays one in every later process (OUT-1)."""

from __future__ import annotations

import json
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.attempt import Abandon, Reconcile
from resumekit.reference.p1.client import Answer, quote
from tests.broken.workers._base import _Tracked


class TakesOnlyCreatedAsSuccess(_Tracked):
    """Writes ``result_submitted`` on a 201 only: a 200, the control plane's replay of the result it stored under
    the key, it takes for a submission some earlier process recorded, and gives the attempt up without a row
    (SUB-3)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replayed = False  # the last request was a submission answered 200

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        answer = super()._request(method, path, body, headers)
        self.replayed = method == "POST" and path.endswith("/result") and answer.status == 200
        return answer

    def _submitted(self, attempt: reference.Attempt) -> None:
        if self.replayed:
            raise Abandon("a 200 replay: taken for a submission recorded before")
        super()._submitted(attempt)


class RejectsOnALostLease(_Tracked):
    """Gives a pending result up as rejected (``result_rejected``) when its lease is lost at ``result_pending``,
    taking the 4xx that refused its renewal for a refusal of the result, and never reads the task back (SUB-6:
    only a 4xx answer to the submission other than 403 and 409 is a rejection)."""

    def _read_back(self, attempt: reference.Attempt) -> None:
        raise Reconcile("result_rejected")


class ResubmitsAConflictAtRestart(_Tracked):
    """At a restart, sends the submission of an attempt that ended in ``result_conflict`` once more, under the
    row's key after a renewal, to see whether the conflict is gone, before it reports the attempt (OUT-1: no
    further submission after a hard failure, in any later process)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        last = attempt.last
        pending = [row for row in attempt.rows if row.phase == "result_pending"]
        earlier = last.seq not in self.mine  # written by a process before this one
        if earlier and last.reason == "result_conflict" and pending and self._renew(attempt):
            row = pending[-1]
            assert row.result_body is not None and row.idempotency_key is not None
            body = {"attempt": row.attempt, "execution_digest": row.execution_digest, "lease_id": attempt.lease_id,
                    "result_hash": row.result_hash, "result": json.loads(row.result_body)}
            self._request("POST", f"v1/tasks/{quote(row.task_id)}/result", body,
                          {"Idempotency-Key": row.idempotency_key})
        super()._finish(attempt)
