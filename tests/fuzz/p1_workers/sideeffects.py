"""Hostile workers around the preconditions of a governed side effect: a read of the leases before the push that
shows nothing of the branch (COMMIT-6), and a receipt sent again once the attempt is terminal (RESUME-2). Each does
all the work of the scenario as the reference does, so only the check of the clause can fail it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote


class _OwnLeaseAfterARead(reference.Worker):
    """Sends one ``GET v1/leases`` of its choosing before the push, ignores the answer, and takes its own lease for
    the branch's only ACTIVE one."""

    def _leases_query(self, attempt: reference.Attempt) -> str:
        raise NotImplementedError

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        def own_only(_: reference.Attempt) -> list[dict[str, Any]]:
            self._until_answered("GET", f"v1/leases?{self._leases_query(attempt)}")
            return [{"lease_id": attempt.lease_id, "state": "ACTIVE"}]

        setattr(self, "_branch_leases", own_only)  # noqa: B010
        try:
            super()._governed_commit(attempt, path, oid)
        finally:
            delattr(self, "_branch_leases")


class ReadsTheLeasesOfAnotherBranch(_OwnLeaseAfterARead):
    """Reads the leases of a branch of its own naming, answered 200 with none, and pushes (COMMIT-6)."""

    def _leases_query(self, attempt: reference.Attempt) -> str:
        return f"repository={quote(attempt.first.repository)}&target_branch=elsewhere"


class ReadsTheLeasesWithATwiceNamedBranch(_OwnLeaseAfterARead):
    """Names its branch twice in the read, which the control plane answers 400, and pushes (COMMIT-6)."""

    def _leases_query(self, attempt: reference.Attempt) -> str:
        first = attempt.first
        branch = quote(first.target_branch)
        return f"repository={quote(first.repository)}&target_branch={branch}&target_branch={branch}"


class SendsTheReceiptAgainWhenSubmitted(reference.Worker):
    """Once result_submitted of a commit attempt is durable, renews and reports the Job's receipt once more, which
    the control plane answers confirmed as before: a terminal attempt gets only the report and the release
    (RESUME-2)."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        last = attempt.last
        if last.commit_oid is None or not self._renew(attempt):
            return
        body = {"task_id": last.task_id, "attempt": last.attempt, "lease_id": attempt.lease_id,
                "commit_oid": last.commit_oid}
        self._request("PUT", f"v1/jobs/{quote(last.job_id)}/receipt", body)
