"""Broken workers of the governed side effects' preconditions: the pre-push reads of the branch (COMMIT-1) and of
its leases (COMMIT-6), and nothing governed once an attempt is terminal (RESUME-2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote
from tests.broken.workers._base import _patched, _Tracked


class ConfirmsItsResultAfterSubmitting(_Tracked):
    """Once result_submitted is durable, sends the result once more with the row's key and body, "to make sure it
    arrived", after a renewal and before the release; it writes no row (RESUME-2: a terminal attempt gets nothing but
    the report and the release). The control plane answers the replay as it answered the first send, so no outcome
    a scenario expects changes unless it counts submissions."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        last = attempt.last
        if last.result_body is None or not self._renew(attempt):
            return
        body = {"attempt": last.attempt, "execution_digest": last.execution_digest, "lease_id": attempt.lease_id,
                "result_hash": last.result_hash, "result": json.loads(last.result_body)}
        headers = {"Idempotency-Key": str(last.idempotency_key)}
        self._request("POST", f"v1/tasks/{quote(last.task_id)}/result", body, headers)


class PushesWithoutReadingTheBranch(_Tracked):
    """Takes the target branch for its expected_branch_oid without reading it before the push (COMMIT-1): a branch
    moved away is met only by the origin's refusal, and the attempt ends in push_refused, not branch_moved."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        read = git.ls_remote
        expected = attempt.first.expected_branch_oid
        reads = {"count": 0}

        def assumed(cwd: Path, url: str, branch: str) -> str | None:
            reads["count"] += 1
            return expected if reads["count"] == 1 else read(cwd, url, branch)  # the read after a refusal stays

        with _patched(git, "ls_remote", assumed):
            super()._governed_commit(attempt, path, oid)


class SkipsTheLeaseReadBeforeThePush(_Tracked):
    """Never reads the branch's leases (``GET v1/leases``) before its push: its own renewal is all it checks, so a
    second ACTIVE lease on the branch goes unseen and the push is sent (COMMIT-6, strict)."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        def own_only(_: reference.Attempt) -> list[dict[str, Any]]:
            return [{"lease_id": attempt.lease_id, "state": "ACTIVE"}]

        with _patched(self, "_branch_leases", own_only):
            super()._governed_commit(attempt, path, oid)
