"""Broken workers of the governed commit and the lease: pushes, receipts and refs on the origin (COMMIT, LEASE)."""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _AtBoundary, _patched, _Tracked, _write_origin


class RecommitsAfterCommitDone(_Tracked):
    """Resumed with commit_done durable, pushes a new commit on top of C before the convergence check
    (COMMIT-3)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        last = attempt.last
        if last.phase == "commit_done" and last.seq not in self.mine and last.commit_oid is not None:
            root = self.config.workspace_root
            name = git.prepare_workspace(root, attempt.task)
            path = root / name
            again = git.run(
                [
                    "-c",
                    "user.name=bug",
                    "-c",
                    "user.email=bug@resumekit.invalid",
                    "commit-tree",
                    f"{last.commit_oid}^{{tree}}",
                    "-p",
                    last.commit_oid,
                    "-m",
                    "again",
                ],
                cwd=path,
            )
            git.push(path, str(attempt.task["origin_url"]), again.decode("ascii").strip(), last.target_branch)
            shutil.rmtree(path, ignore_errors=True)
        super()._converge(attempt)


class PollsUntilVisible(_Tracked):
    """Polls a not_visible receipt again within the attempt instead of ending it (COMMIT-4)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        for _ in range(10):
            try:
                super()._converge(attempt)
                return
            except reference.Reconcile as reason:
                if str(reason) != "receipt_not_visible":
                    raise
        super()._converge(attempt)


class IgnoresLostLease(_Tracked):
    """Takes every renewal for a success: goes on pushing and submitting with a lost lease (LEASE-4)."""

    def _renew(self, attempt: reference.Attempt) -> bool:
        super()._renew(attempt)
        attempt.lost = False
        return True


class ResetsTheBranchAfterItsCommit(_Tracked):
    """Once its commit task is submitted and released, sets the origin's target branch back to the base,
    writing the repository directly (COMMIT-3, CP-17): every request and row is the reference's."""

    def _finish(self, attempt: reference.Attempt) -> None:
        super()._finish(attempt)
        last = attempt.last
        if last.phase == "result_submitted" and last.commit_oid is not None:
            _write_origin(
                attempt, self.config.state_dir, "update-ref", f"refs/heads/{last.target_branch}", last.base_oid
            )


class CreatesARefOnTheOrigin(_Tracked):
    """Once its commit task is submitted, pushes a tag of the governed commit, and when the origin refuses
    it, writes the tag into the repository itself (COMMIT-2 and COMMIT-3, CP-17)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        super()._finish(attempt)
        last = attempt.last
        if last.phase != "result_submitted" or last.commit_oid is None:
            return
        tag, url = f"refs/tags/{last.task_id}-done", str(attempt.task["origin_url"])
        root = self.config.workspace_root
        name = git.prepare_workspace(root, attempt.task)  # a clone: it holds C, which the branch holds now
        try:
            with contextlib.suppress(git.GitError):  # the origin's hook refuses a creation
                git.run(["push", "--quiet", "--no-verify", url, f"{last.commit_oid}:{tag}"], cwd=root / name)
        finally:
            shutil.rmtree(root / name, ignore_errors=True)
        _write_origin(attempt, self.config.state_dir, "update-ref", tag, last.commit_oid)


class ForcesAfterARefusedPush(_Tracked):
    """When the plain push of its governed commit is refused, pushes it again with ``--force`` (COMMIT-2)."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        plain = git.push

        def push_then_force(where: Path, url: str, commit: str, branch: str) -> bool:
            if plain(where, url, commit, branch):
                return True
            try:
                git.run(["push", "--quiet", "--force", "--no-verify", url, f"{commit}:refs/heads/{branch}"], cwd=where)
            except git.GitError:
                return False
            return True

        with _patched(git, "push", push_then_force):
            super()._governed_commit(attempt, path, oid)


class RenewsByTheLocalClock(_AtBoundary):
    """Decides at each step boundary from its own monotonic clock whether its lease needs renewing, taking it
    for fresh while less than half a 30 s TTL has passed on that clock since it last renewed (LEASE-2,
    LEASE-3): the kit's clock moves without the worker's, so the lease expires under it. Before a governed
    side effect it still renews, as LEASE-3 (b) says."""

    HALF_TTL_S = 15.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renewed_at: dict[str, float] = {}  # lease_id -> time.monotonic() of its last successful renewal

    def _renew(self, attempt: reference.Attempt) -> bool:
        last = self.renewed_at.get(attempt.lease_id)
        if self.at_boundary and not attempt.lost and last is not None and time.monotonic() - last < self.HALF_TTL_S:
            return True  # young by the worker's own clock: no renewal, whatever CP time says
        renewed = super()._renew(attempt)
        if renewed:
            self.renewed_at[attempt.lease_id] = time.monotonic()
        return renewed


class AbandonsAtThePendingBoundary(_Tracked):
    """Takes a lease lost just before result_pending, with commit_done durable and the convergence check
    passed, for an abandonment without a row, as before the governed commit (COMMIT-4)."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        try:
            return super()._record(attempt, phase, **columns)
        except reference.Reconcile as reconcile:
            if phase != "result_pending" or reconcile.reason != "lease_not_converged":
                raise
            raise reference.Abandon from reconcile


class GivesUpRenewing(_Tracked):
    """Takes five unanswered renewals in a row (transport failures or 5xx) for a lost lease, although LEASE-4
    names no such loss (p1.md 0.4): it abandons an attempt whose lease is still ACTIVE."""

    TRIES = 5

    def _renew(self, attempt: reference.Attempt) -> bool:
        if attempt.lost:
            return False
        for _ in range(self.TRIES):
            self.control.check_stop()
            answer = self._request("POST", f"v1/leases/{quote(attempt.lease_id)}/renew", {})
            if not answer.transport_failure:
                return super()._renew(attempt)
            self.control.sleep(0.01)
        attempt.lost = True
        return False
