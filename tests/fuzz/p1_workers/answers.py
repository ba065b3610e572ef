"""Hostile workers of what a submission's answer means (SUB-3, SUB-6, OUT-1): a submission sent again after a
rejection or a hard failure under a key minted to look like another attempt's, and a result_submitted row whose
body and hash agree with each other and not with the result the control plane holds."""

from __future__ import annotations

import json
import secrets
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote
from resumekit.reference.p1.journal import Row
from resumekit.reference.p1.results import canonical_json, result_hash


def _send(worker: reference.Worker, attempt: reference.Attempt, pending: Row, key: str) -> None:
    """The attempt's submission of its ``result_pending`` row under *key*, after a renewal (LEASE-3)."""
    assert pending.result_body is not None
    body = {"attempt": pending.attempt, "execution_digest": pending.execution_digest, "lease_id": attempt.lease_id,
            "result_hash": pending.result_hash, "result": json.loads(pending.result_body)}
    if worker._renew(attempt):
        worker._request("POST", f"v1/tasks/{quote(pending.task_id)}/result", body, {"Idempotency-Key": key})


class ResendsARejectionUnderAFreshKey(reference.Worker):
    """After a rejection (400) sends the attempt's submission once more under a freshly minted key, as if it were
    another request, then writes result_rejected as it should (SUB-6: the request is not sent again)."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        if phase == "reconciliation_required" and columns.get("reason") == "result_rejected":
            _send(self, attempt, attempt.last, f"p1-result:{secrets.token_hex(32)}")
        return super()._record(attempt, phase, **columns)


class ResubmitsAConflictUnderAFreshKeyAtRestart(reference.Worker):
    """At a restart, sends the submission of an attempt that ended in ``result_conflict`` again under a freshly
    minted key before its report (OUT-1: no further submission after a hard failure, under any key)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        pending = [row for row in attempt.rows if row.phase == "result_pending"]
        if attempt.last.reason == "result_conflict" and pending and not attempt.lost:
            _send(self, attempt, pending[-1], f"p1-result:{secrets.token_hex(32)}")
        super()._finish(attempt)


class SubmittedRowCarriesAnotherBody(reference.Worker):
    """On a 201 writes ``result_submitted`` with another result body and that body's own hash, so the row is
    consistent in itself (JNL-2) but is not the ``result_pending`` row's (SUB-3)."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        pending = attempt.last
        other = {"forged": True, "of": pending.result_hash}
        self._record(attempt, "result_submitted", idempotency_key=pending.idempotency_key,
                     result_hash=result_hash(other), result_body=canonical_json(other), commit_oid=pending.commit_oid)
