"""Broken workers of the result submission: its row, its key and the answers it trusts (SUB, KEY)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote
from resumekit.reference.p1.journal import attempts
from resumekit.reference.p1.results import idempotency_key
from tests.broken.workers._base import _patched, _Tracked


class SubmitsBeforePending(_Tracked):
    """Sends the submission first and commits result_pending after it (SUB-1)."""

    def _pending(self, attempt: reference.Attempt) -> None:
        first, last = attempt.first, attempt.last
        key = idempotency_key(first.task_id, first.attempt, first.execution_digest)
        assert last.result_body is not None
        body = {
            "attempt": first.attempt,
            "execution_digest": first.execution_digest,
            "lease_id": attempt.lease_id,
            "result_hash": last.result_hash,
            "result": json.loads(last.result_body),
        }
        self._failpoint("before_result_submit")
        self._renew(attempt)
        answer = self._request("POST", f"v1/tasks/{quote(first.task_id)}/result", body, {"Idempotency-Key": key})
        super()._pending(attempt)
        if answer.status in (200, 201):
            self._submitted(attempt)


class NewKeyOnRestart(_Tracked):
    """Mints a new key for an attempt it resumes at result_pending after a restart (KEY-1, KEY-2)."""

    def _submit(self, attempt: reference.Attempt) -> None:
        pending = attempt.last
        if pending.seq not in self.mine:
            attempt.rows[-1] = pending.replace(idempotency_key=f"p1-result:{secrets.token_hex(32)}")
        super()._submit(attempt)


class NewKeyOnSecondRecovery(_Tracked):
    """Mints a new key when a recovery at result_pending was itself killed before it made progress
    (KEY-2): a single crash never shows it; the crash matrix's crash during recovery does."""

    def _submit(self, attempt: reference.Attempt) -> None:
        pending = attempt.last
        if pending.seq not in self.mine and self.journal.recoveries(pending.task_id, pending.attempt, pending.seq) >= 2:
            attempt.rows[-1] = pending.replace(idempotency_key=f"p1-result:{secrets.token_hex(32)}")
        super()._submit(attempt)


class AcceptsAny409(_Tracked):
    """Takes every 409 answer to a submission for an exact match (SUB-5)."""

    def _exact_match(self, attempt: reference.Attempt, body: dict[str, Any]) -> bool:
        return body.get("error") == "conflict" or super()._exact_match(attempt, body)


class AcceptsSameBodyInAnyState(_Tracked):
    """Takes a 409 holding this attempt's exact body for an exact match whatever the task's state (SUB-5)."""

    def _exact_match(self, attempt: reference.Attempt, body: dict[str, Any]) -> bool:
        if body.get("state") not in ("VERIFYING", "SUCCEEDED"):
            body = dict(body, state="VERIFYING")
        return super()._exact_match(attempt, body)


class ReusesTheOldKey(_Tracked):
    """Reuses an earlier attempt's result_pending row with that attempt's key instead of its own (SCOPE-3, KEY-2)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        earlier = [
            row
            for group in attempts(self.journal.rows())
            if group[0].task_id == first.task_id
            and group[0].attempt < first.attempt
            and group[0].binding == first.binding
            for row in group
            if row.phase == "result_pending"
        ]
        if not earlier:
            return super()._reuse(attempt)
        old_key = max(earlier, key=lambda row: row.seq).idempotency_key
        with _patched(reference, "idempotency_key", lambda *_args: old_key):
            return super()._reuse(attempt)


class MatchesTheKeyToo(_Tracked):
    """Takes a 409 for an exact match only when the stored result also carries its own key, which SUB-5 does
    not ask (p1.md 0.4): a result stored under another key with this attempt's body is refused."""

    def _exact_match(self, attempt: reference.Attempt, body: dict[str, Any]) -> bool:
        stored = body.get("stored")
        own = isinstance(stored, dict) and stored.get("idempotency_key") == attempt.last.idempotency_key
        return own and super()._exact_match(attempt, body)
