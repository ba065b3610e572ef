"""The reference P1 worker: one attempt at a time, every step recorded before the next (p1.md).

``Worker.run`` is the whole life of one worker process: startup cleanup (CLEAN-1) before any request,
the journal opened and the caches rebuilt, every attempt of the journal resumed or finished in the
order of its ``claimed`` row (RESUME-1), then the claim loop. An attempt is driven by its last durable
row alone (RESUME-2); the cache is only ever written. Each row goes through :meth:`Worker._record`,
which holds the four failpoint sites around it (FPT-1), the stop check (RESUME-5) and the renewal of
the step boundary (LEASE-3).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from resumekit.reference.p1 import git
from resumekit.reference.p1.attempt import Abandon, Attempt, Backoff, Reconcile
from resumekit.reference.p1.cache import CacheError, rebuild, remove_temporaries, write_cache
from resumekit.reference.p1.cleanup import remove_stale_workspaces, remove_tree
from resumekit.reference.p1.client import Answer, ControlPlane, quote
from resumekit.reference.p1.control import Control, StopRequested
from resumekit.reference.p1.journal import (
    BINDING_FIELDS,
    HARD_FAILURES,
    IDENTITY_FIELDS,
    RANK,
    TERMINAL,
    Journal,
    JournalError,
    Row,
    attempts,
)
from resumekit.reference.p1.results import (
    canonical_json,
    commit_body,
    idempotency_key,
    result_hash,
    source_capture_body,
)
from resumekit.reference.p1.tools import CommandGroup, ToolError, run_tool, wait_for_keepers

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["RECOVERY_CAP", "Worker", "WorkerConfig"]

RECOVERY_CAP = 5


class WorkerConfig:
    """Where the worker's control plane, workspaces and state are (ADP-2's config)."""

    __slots__ = ("control_plane_url", "state_dir", "workspace_root")

    def __init__(self, control_plane_url: str, workspace_root: Path, state_dir: Path) -> None:
        self.control_plane_url = control_plane_url
        self.workspace_root = workspace_root
        self.state_dir = state_dir


def _log(message: str) -> None:
    print(f"p1 worker: {message}", file=sys.stderr, flush=True)


class Worker:
    def __init__(self, config: WorkerConfig, control: Control | None = None,
                 settings: list[dict[str, Any]] | None = None) -> None:
        self.config = config
        self.control = control if control is not None else Control()
        self.settings = settings if settings is not None else []
        self.cp = ControlPlane(config.control_plane_url)
        self._journal: Journal | None = None
        self.on_request: Callable[[str, str], None] | None = None  # tests observe the order of requests

    # -- the process ------------------------------------------------------------------------------

    def run(self) -> int:
        """The worker's whole life; its exit status (0 after an orderly stop, non-zero on a fatal error)."""
        code = 1
        commands = CommandGroup(self.config.state_dir)  # WRK-5: git ends with this process
        context = git.PROCESS_GROUP.set(commands.pgid)
        try:
            self._startup()
            self._claim_loop()
        except StopRequested:
            code = 0
        except (JournalError, CacheError) as error:
            _log(f"fatal: {error}")  # JNL-8: no further request, a non-zero exit
        except Exception:
            import traceback  # only on the way out: not a cost of every start

            _log("fatal: " + traceback.format_exc())
        finally:
            if self._journal is not None:
                try:
                    self._journal.close()
                except Exception as error:  # pragma: no cover - nothing left to do with it
                    _log(f"closing the journal: {error}")
            commands.close()
            git.PROCESS_GROUP.reset(context)
            self.control.exited(code)
        return code

    @property
    def journal(self) -> Journal:
        assert self._journal is not None
        return self._journal

    def _failpoint(self, name: str) -> None:
        self.control.failpoint(name)

    def _startup(self) -> None:
        root = self.config.workspace_root
        for name in wait_for_keepers(self.config.state_dir):  # WRK-5: tools of a dead process end first
            _log(f"the tool keeper of {name} has not ended; cleaning up anyway")
        for name in remove_stale_workspaces(root, before_remove=lambda _: self._failpoint("cleanup_before_remove")):
            _log(f"removed the stale workspace {name}")
        self._journal = Journal(self.config.state_dir, self.settings, disk=self.control.disk)
        remove_temporaries(self.config.state_dir)
        rows = self.journal.rows()
        rebuild(self.config.state_dir, rows)
        for group in attempts(rows):
            attempt = Attempt(list(group))
            if attempt.last.phase in TERMINAL:
                self._finish(attempt)
            elif self._superseded(attempt) or self._abandoned(attempt):
                # RESUME-1: never resumed (SCOPE-7, LEASE-4), but released before the first claim, which gives
                # back a lease revived since; the release is the request about the attempt the kit waits for
                self._release(attempt.lease_id)
            else:
                self._resume(attempt, count_recovery=True)

    def _claim_loop(self) -> None:
        backoff = Backoff()
        while True:
            self.control.check_stop()
            answer = self._request("POST", "v1/claims", {})
            if answer.status != 200:
                self.control.sleep(backoff.next())
                continue
            backoff = Backoff()
            task, lease = answer.body.get("task"), answer.body.get("lease")
            if not isinstance(task, dict) or not isinstance(lease, dict):
                self.control.set_idle(True)
                retry = answer.body.get("retry_after_ms")
                wait_ms = retry if isinstance(retry, int) and not isinstance(retry, bool) else 50
                self.control.sleep(min(max(wait_ms, 1), 5000) / 1000)
                continue
            self.control.set_idle(False)
            self._served(task, lease)

    # -- requests ---------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        if self.on_request is not None:
            self.on_request(method, path)
        return self.cp.request(method, path, body, headers)

    def _renew(self, attempt: Attempt) -> bool:
        """Renew the attempt's lease; False once it is lost (LEASE-2, LEASE-4). CP time only."""
        if attempt.lost:
            return False
        backoff = Backoff()
        while True:
            self.control.check_stop()
            answer = self._request("POST", f"v1/leases/{quote(attempt.lease_id)}/renew", {})
            if answer.transport_failure:
                self.control.sleep(backoff.next())
                continue
            lease = answer.body.get("lease")
            now = answer.now_ms
            if answer.status == 200 and isinstance(lease, dict) and lease.get("state") == "ACTIVE":
                expires = lease.get("expires_at_ms")
                if now is None or not isinstance(expires, int) or now < expires:
                    return True
            attempt.lost = True
            _log(f"lease {attempt.lease_id} of {attempt.first.task_id}/{attempt.first.attempt} is lost")
            return False

    def _until_answered(self, method: str, path: str, body: dict[str, Any] | None = None,
                        tries: int = 20) -> Answer:
        """A request that is no governed side effect, resent on transport failures."""
        backoff = Backoff()
        answer = Answer(0, {})
        for _ in range(tries):
            answer = self._request(method, path, body)
            if not answer.transport_failure:
                return answer
            self.control.sleep(backoff.next())
        return answer

    # -- rows -------------------------------------------------------------------------------------

    def _record(self, attempt: Attempt, phase: str, **columns: Any) -> Row:
        """Write one row at a step boundary, then its cache, with the four failpoint sites (FPT-1)."""
        self.control.check_stop()
        self._failpoint(f"before_{phase}_row")
        self.control.check_stop()
        if phase in ("workspace_prepared", "verification_passed", "source_capture_done", "commit_done",
                     "result_pending") and not self._renew(attempt):
            if phase == "result_pending" and attempt.last.phase == "commit_done":
                raise Reconcile("lease_not_converged")  # COMMIT-4: a lost lease after commit_done
            # LEASE-4: abandoned, no row; at the commit_done boundary too, even with C on the origin
            # (p1.md 0.4): the next official attempt adopts it.
            raise Abandon
        values = {**attempt.identity, "phase": phase, "lease_id": attempt.lease_id, **columns}
        row = self.journal.append(values)
        attempt.rows.append(row)
        self._failpoint(f"after_{phase}_row")
        write_cache(self.config.state_dir, row, before_replace=lambda: self._failpoint(f"before_{phase}_cache"),
                    disk=self.control.disk)
        self._failpoint(f"after_{phase}_cache")
        return row

    @staticmethod
    def _kind(attempt: Attempt) -> str:
        return str(attempt.task.get("kind"))

    def _abandoned(self, attempt: Attempt) -> bool:
        """LEASE-4: a process recorded this attempt's lease as lost; a lease that renews again changes nothing."""
        first = attempt.first
        return self.journal.abandoned(first.task_id, first.attempt, attempt.lease_id)

    def _abandon(self, attempt: Attempt, why: str) -> None:
        """Give the attempt up; a lost lease is recorded before the next request, for every later process."""
        first = attempt.first
        if attempt.lost and not self._abandoned(attempt):
            self.journal.append_abandonment(first.task_id, first.attempt, attempt.lease_id)
        _log(f"attempt {first.task_id}/{first.attempt} abandoned: {why}")
        self._drop_workspace(attempt)

    def _superseded(self, attempt: Attempt) -> bool:
        first = attempt.first
        return any(row.task_id == first.task_id and row.attempt > first.attempt for row in self.journal.rows())

    # -- one served task --------------------------------------------------------------------------

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        try:
            identity = tuple(task[name] for name in IDENTITY_FIELDS)
            lease_id = str(lease["lease_id"])
        except KeyError as error:
            _log(f"a served task lacks {error}; ignored")
            return
        rows = self.journal.rows()
        same = [row for row in rows if row.identity == identity]
        if same:  # RESUME-4: duplicate delivery
            attempt = Attempt(same)
            if attempt.last.phase in TERMINAL or self._superseded(attempt) or self._abandoned(attempt):
                # SCOPE-7: a superseded attempt served again gets no row either; LEASE-4: nor an abandoned one
                self._release(lease_id)
            else:
                self._resume(attempt, count_recovery=False)
            return
        task_id, number = task["task_id"], task["attempt"]
        if any(row.task_id == task_id and row.attempt > number for row in rows):
            self._release(lease_id)  # SCOPE-7: never a row or a side effect for a superseded attempt
            return
        conflict = any(row.task_id == task_id and row.attempt == number for row in rows)
        stale = any(row.repository == task["repository"] and row.target_branch == task["target_branch"]
                    and row.generation > task["generation"] for row in rows)
        attempt = Attempt([])
        claimed = {**{name: task[name] for name in IDENTITY_FIELDS}, "phase": "claimed", "lease_id": lease_id,
                   "task": canonical_json(task)}
        self.control.check_stop()
        self._failpoint("before_claimed_row")
        self.control.check_stop()
        row = self.journal.append(claimed)
        attempt.rows.append(row)
        self._failpoint("after_claimed_row")
        write_cache(self.config.state_dir, row, before_replace=lambda: self._failpoint("before_claimed_cache"),
                    disk=self.control.disk)
        self._failpoint("after_claimed_cache")
        if conflict:
            self._conclude(attempt, "identity_conflict")  # SCOPE-6
        elif stale:
            self._conclude(attempt, "stale_generation")  # LEASE-6
        else:
            self._drive(attempt)

    def _resume(self, attempt: Attempt, *, count_recovery: bool) -> None:
        """Go on with a non-terminal attempt from its last durable row (RESUME-2, RESUME-6)."""
        if not self._renew(attempt):
            self._lease_lost(attempt)
            return
        last = attempt.last
        if count_recovery:
            if self.journal.recoveries(last.task_id, last.attempt, last.seq) >= RECOVERY_CAP:
                self._conclude(attempt, "recovery_cap")
                return
            self.journal.append_recovery(last.task_id, last.attempt, last.seq)
        self._drive(attempt)

    def _lease_lost(self, attempt: Attempt) -> None:
        phase = attempt.last.phase
        if phase == "commit_done":
            self._conclude(attempt, "lease_not_converged")
        elif phase == "result_pending":
            self._drive(attempt)  # the submission step reads back (SUB-7)
        else:
            self._abandon(attempt, "its lease is lost (LEASE-4)")

    def _conclude(self, attempt: Attempt, reason: str) -> None:
        try:
            self._record(attempt, "reconciliation_required", reason=reason)
        except Abandon:  # pragma: no cover - the row needs no lease
            return
        self._finish(attempt)

    def _drive(self, attempt: Attempt) -> None:
        try:
            while attempt.last.phase not in TERMINAL:
                phase = attempt.last.phase
                if phase == "claimed" and self._reuse(attempt):
                    continue
                if RANK[phase] <= 3:
                    self._replay(attempt)
                elif phase == "source_capture_done":
                    self._pending(attempt)
                elif phase == "commit_done":
                    self._converge(attempt)
                    self._pending(attempt)
                elif phase == "result_pending":
                    self._submit(attempt)
        except (Abandon, git.GitError) as error:
            self._abandon(attempt, str(error) or "its lease is lost (LEASE-4)")
            return
        except Reconcile as reconcile:
            self._record(attempt, "reconciliation_required", reason=reconcile.reason)
        self._finish(attempt)

    # -- steps ------------------------------------------------------------------------------------

    def _reuse(self, attempt: Attempt) -> bool:
        """SCOPE-3: the second row of the attempt from an earlier attempt with an identical binding."""
        first = attempt.first
        binding = tuple(getattr(first, name) for name in BINDING_FIELDS)
        earlier = [group for group in attempts(self.journal.rows())
                   if group[0].task_id == first.task_id and group[0].attempt < first.attempt
                   and group[0].binding == binding
                   and not any(row.phase == "reconciliation_required" for row in group)]  # SCOPE-5
        reusable = ("source_capture_done", "result_pending")
        candidates = [row for group in earlier for row in group if row.phase in reusable]
        if not candidates:
            return False
        pending = [row for row in candidates if row.phase == "result_pending"]
        source = max(pending or candidates, key=lambda row: row.seq)
        columns: dict[str, Any] = {"result_hash": source.result_hash, "result_body": source.result_body,
                                   "commit_oid": source.commit_oid, "reused_from": source.seq}
        if source.phase == "result_pending":
            columns["idempotency_key"] = idempotency_key(first.task_id, first.attempt, first.execution_digest)
        self._record(attempt, source.phase, **columns)
        return True

    def _replay(self, attempt: Attempt) -> None:
        """From ``claimed``, ``workspace_prepared`` or ``verification_passed``: a new workspace (RESUME-3)."""
        task = attempt.task
        kind = task.get("kind")
        if kind not in ("source_capture", "commit"):
            raise Reconcile("task_invalid")
        root = self.config.workspace_root
        try:
            name = git.prepare_workspace(root, task)
        except git.GitError as error:
            _log(f"cannot prepare a workspace: {error}")
            raise Abandon from error
        attempt.workspace = name
        path = root / name
        if attempt.last.phase == "claimed":
            self._record(attempt, "workspace_prepared", workspace=name)
        if not git.verify_workspace(path, str(task["base_oid"])):
            _log(f"the workspace {name} does not verify")
            raise Abandon
        if attempt.last.phase == "workspace_prepared":
            self._record(attempt, "verification_passed")
        self._run_tool(path)
        base = str(task["base_oid"])
        if kind == "source_capture":
            body = source_capture_body(base, git.capture_files(path, base))
            self._record(attempt, "source_capture_done", result_body=canonical_json(body),
                         result_hash=result_hash(body))
            return
        try:
            oid = git.build_commit(path, base, task["payload"])
        except git.TaskInvalid as error:
            _log(str(error))
            raise Reconcile("task_invalid") from error
        attempt.commit_oid = oid
        self._governed_commit(attempt, path, oid)

    def _run_tool(self, path: Path) -> None:
        """Capability p1.tools: the adapter's tool, in the verified workspace, waited for; it ends with this
        process whatever happens (WRK-5). Its status does not matter to the attempt; failing to run it does."""
        if self.control.tool is None:
            return
        try:
            status = run_tool(self.control.tool, path, self.config.state_dir)
        except ToolError as error:
            _log(f"the tool did not run: {error}")
            raise Abandon from error
        if status != 0:
            _log(f"the tool exited with status {status}")

    def _branch_leases(self, attempt: Attempt) -> list[dict[str, Any]]:
        first = attempt.first
        path = f"v1/leases?repository={quote(first.repository)}&target_branch={quote(first.target_branch)}"
        answer = self._until_answered("GET", path)
        leases = answer.body.get("leases") if answer.status == 200 else None
        if not isinstance(leases, list):
            raise Reconcile("lease_not_converged")
        return [lease for lease in leases if isinstance(lease, dict)]

    def _governed_commit(self, attempt: Attempt, path: Path, oid: str) -> None:
        """COMMIT-1, COMMIT-2, COMMIT-6: adopt C, or push it once, or end in reconciliation."""
        first = attempt.first
        url = str(attempt.task["origin_url"])
        self._failpoint("before_push")
        try:
            head = git.ls_remote(path, url, first.target_branch)
        except git.GitError as error:
            _log(f"cannot read the origin: {error}")
            raise Abandon from error
        if head != oid:
            if head != first.expected_branch_oid:
                raise Reconcile("branch_moved")
            active = [lease for lease in self._branch_leases(attempt) if lease.get("state") == "ACTIVE"]
            if not any(lease.get("lease_id") == attempt.lease_id for lease in active):
                attempt.lost = True
                raise Abandon
            if len(active) != 1:
                raise Reconcile("lease_conflict")  # COMMIT-6
            if not self._renew(attempt):
                raise Abandon
            if not git.push(path, url, oid, first.target_branch):
                try:
                    head = git.ls_remote(path, url, first.target_branch)
                except git.GitError:
                    head = None
                if head != oid:
                    raise Reconcile("push_refused")
        body = commit_body(oid, first.target_branch)
        self._record(attempt, "commit_done", commit_oid=oid, result_body=canonical_json(body),
                     result_hash=result_hash(body))

    def _converge(self, attempt: Attempt) -> None:
        """COMMIT-4 with COMMIT-6's reading: a confirmed receipt, and the branch's one ACTIVE lease at C."""
        first, last = attempt.first, attempt.last
        oid = last.commit_oid
        if attempt.lost or oid is None:
            raise Reconcile("lease_not_converged")
        self._failpoint("before_receipt")
        receipt_body = {"task_id": first.task_id, "attempt": first.attempt, "lease_id": attempt.lease_id,
                        "commit_oid": oid}
        backoff = Backoff()
        while True:
            if not self._renew(attempt):
                raise Reconcile("lease_not_converged")
            answer = self._request("PUT", f"v1/jobs/{quote(first.job_id)}/receipt", receipt_body)
            if not answer.transport_failure:
                break
            self.control.sleep(backoff.next())
        if answer.status == 403:
            attempt.lost = True
            raise Reconcile("lease_not_converged")
        if answer.status != 200:
            raise Reconcile("receipt_conflict")
        receipt = answer.body.get("receipt")
        if not isinstance(receipt, dict) or receipt.get("visibility") != "confirmed" \
                or receipt.get("commit_oid") != oid:
            raise Reconcile("receipt_not_visible")
        # COMMIT-4, read as COMMIT-6 reads it: the branch's only ACTIVE lease is this attempt's, at C. A
        # second ACTIVE lease here fails the lease condition (lease_not_converged); lease_conflict is
        # COMMIT-6's answer before the push only.
        active = [lease for lease in self._branch_leases(attempt) if lease.get("state") == "ACTIVE"]
        if len(active) != 1 or active[0].get("lease_id") != attempt.lease_id \
                or active[0].get("current_head_oid") != oid:
            raise Reconcile("lease_not_converged")
        attempt.converged = True

    def _pending(self, attempt: Attempt) -> None:
        first, last = attempt.first, attempt.last
        self._record(
            attempt,
            "result_pending",
            idempotency_key=idempotency_key(first.task_id, first.attempt, first.execution_digest),
            result_hash=last.result_hash,
            result_body=last.result_body,
            commit_oid=last.commit_oid,
        )

    def _exact_match(self, attempt: Attempt, body: dict[str, Any]) -> bool:
        """SUB-5: this attempt's result, byte-equal, stored, and the task VERIFYING or SUCCEEDED."""
        pending = attempt.last
        stored = body.get("stored")
        if body.get("state") not in ("VERIFYING", "SUCCEEDED") or not isinstance(stored, dict):
            return False
        result = stored.get("result")
        try:
            same_body = canonical_json(result) == pending.result_body
        except (TypeError, ValueError):
            return False
        attempt_number = stored.get("attempt")
        return (isinstance(attempt_number, int) and attempt_number == pending.attempt
                and stored.get("result_hash") == pending.result_hash and same_body)

    def _submitted(self, attempt: Attempt) -> None:
        pending = attempt.last
        self._record(attempt, "result_submitted", idempotency_key=pending.idempotency_key,
                     result_hash=pending.result_hash, result_body=pending.result_body, commit_oid=pending.commit_oid)

    def _read_back(self, attempt: Attempt) -> None:
        """SUB-7: with the lease lost at ``result_pending``, only an exact match is written."""
        answer = self._until_answered("GET", f"v1/tasks/{quote(attempt.first.task_id)}")
        if answer.status == 200 and self._exact_match(attempt, answer.body):
            self._submitted(attempt)
            return
        raise Abandon

    def _submit(self, attempt: Attempt) -> None:
        pending = attempt.last
        if self._kind(attempt) == "commit" and pending.reused_from is not None and not attempt.converged \
                and not attempt.lost:
            self._converge(attempt)  # SCOPE-3: a reused commit result only after COMMIT-4 in this attempt
        if attempt.lost:
            self._read_back(attempt)
            return
        assert pending.result_body is not None and pending.idempotency_key is not None
        body = {"attempt": pending.attempt, "execution_digest": pending.execution_digest,
                "lease_id": attempt.lease_id, "result_hash": pending.result_hash,
                "result": json.loads(pending.result_body)}
        headers = {"Idempotency-Key": pending.idempotency_key}
        backoff = Backoff()
        while True:
            self._failpoint("before_result_submit")
            if not self._renew(attempt):
                self._read_back(attempt)
                return
            answer = self._request("POST", f"v1/tasks/{quote(pending.task_id)}/result", body, headers)
            if answer.status in (200, 201):
                self._submitted(attempt)
                return
            if answer.transport_failure:
                self.control.sleep(backoff.next())  # SUB-4: same key, same body
                continue
            if answer.status == 409:
                if self._exact_match(attempt, answer.body):
                    self._submitted(attempt)
                    return
                raise Reconcile("result_conflict")
            if answer.status == 403:
                attempt.lost = True
                self._read_back(attempt)
                return
            raise Reconcile("result_rejected")

    # -- terminal attempts ------------------------------------------------------------------------

    def _finish(self, attempt: Attempt) -> None:
        """Report a ``reconciliation_required`` attempt, then release the lease (PHASE-4, LEASE-5)."""
        last = attempt.last
        if last.phase == "reconciliation_required":
            self._failpoint("before_report")
            state = "FAILED" if last.reason in HARD_FAILURES else "RECONCILIATION_REQUIRED"
            self._until_answered("POST", f"v1/tasks/{quote(last.task_id)}/report",
                                 {"attempt": last.attempt, "lease_id": attempt.lease_id, "state": state,
                                  "reason": last.reason})
        self._failpoint("before_release")
        self._release(attempt.lease_id)
        self._drop_workspace(attempt)

    def _release(self, lease_id: str) -> None:
        self._until_answered("POST", f"v1/leases/{quote(lease_id)}/release", {})

    def _drop_workspace(self, attempt: Attempt) -> None:
        if attempt.workspace is None:
            return
        path = self.config.workspace_root / attempt.workspace
        attempt.workspace = None
        try:
            remove_tree(self.config.workspace_root, path)
        except Exception as error:
            _log(f"cannot remove the workspace {path.name}: {error}")
