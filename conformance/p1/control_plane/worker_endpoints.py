"""The worker's endpoints of the control plane (docs/spec/p1-control-plane.md CP-8 to CP-16), pure.

One handler per endpoint, gathered in ``WORKER_HANDLERS``: claim, task, result (CP-9's order of rules,
CP-10's one stored result), report, renew, release, leases and the Job's receipt (CP-16). A claim or a
submission a scripted fault fired on is answered through the fault's hooks (``state.Fault``). Each handler
takes the ``State``, the request and its ``Plan`` and returns an ``Outcome``, writing what changed to the
``Log``.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import parse_qs

from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.control_plane.lifecycle import end_lease, grant, set_task_state, store_result
from resumekit.conformance.p1.control_plane.state import (
    KEY_RE,
    OID_RE,
    REPORT_STATES,
    SUBMISSION_SCHEMA,
    Fault,
    Handler,
    Heads,
    Log,
    Outcome,
    Plan,
    Request,
    State,
    TaskRec,
    branch_leases,
    conflict_answer,
    error_answer,
    fire_kill_point,
    is_int,
    lease_view,
    ok_answer,
    take,
)


def _clock(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    return Outcome(*ok_answer(state, 200), [])


def stale_tasks(claim_faults: list[Fault]) -> set[str]:
    """The tasks a claim may serve at a stale generation: those its faults name (``Fault.stale_task``)."""
    return {task_id for task_id in (fault.stale_task() for fault in claim_faults) if task_id is not None}


def pick(state: State, stale: set[str]) -> str | None:
    """The task a claim serves (CP-8): the first QUEUED attempt, in order of issue, whose branch has no ACTIVE
    lease and whose generation is not below the branch's highest granted one (unless its task is in *stale*)."""
    for task_id, attempt in state.issue_order:
        rec = state.tasks[task_id]
        if rec.state != "QUEUED" or rec.current["attempt"] != attempt:
            continue
        served = rec.current
        key = (served["repository"], served["target_branch"])
        if any(lease.data["state"] == "ACTIVE" for lease in branch_leases(state, *key)):
            continue
        if served["generation"] < state.highest_generation.get(key, 0) and task_id not in stale:
            continue
        return task_id
    return None


def _claim(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    for fault in plan.claim_faults:  # the first that answers the claim does, in the order they were scripted
        delivered = fault.answer_claim(state, request, heads, log)
        if delivered is not None:
            return delivered
    task_id = pick(state, stale_tasks(plan.claim_faults))
    if task_id is None:
        status, body = ok_answer(state, 200, task=None, lease=None, retry_after_ms=state.retry_after_ms)
        return Outcome(status, body, [])
    rec = state.tasks[task_id]
    served = rec.current
    set_task_state(state, log, task_id, "RUNNING", "claim")
    generation = served["generation"]
    lease = grant(state, log, served, generation=generation, official=True, holder=request.worker, heads=heads)
    rec.lease_of[served["attempt"]] = lease.data["lease_id"]
    answer = {"task": copy.deepcopy(served), "lease": lease_view(lease), "retry_after_ms": state.retry_after_ms}
    status, body = ok_answer(state, 200, **answer)
    outcome = Outcome(status, body, [])
    if fire_kill_point(state, "server_claim_granted", task_id):
        outcome.kill_point, outcome.kill_worker = "server_claim_granted", request.worker
    return outcome


def _task(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    rec = state.tasks.get(plan.params[0])
    if rec is None:
        return Outcome(*error_answer(state, 404, "not_found", f"no task {plan.params[0]!r}"), [])
    task, stored = copy.deepcopy(rec.current), copy.deepcopy(rec.stored)
    return Outcome(*ok_answer(state, 200, task=task, state=rec.state, stored=stored), [])


def _lease_state(state: State, rec: TaskRec, attempt: Any) -> dict[str, Any]:
    lease_id = rec.lease_of.get(attempt) if is_int(attempt) else None
    if lease_id is None:
        return {"lease_id": None, "state": None}
    return {"lease_id": lease_id, "state": state.leases[lease_id].data["state"]}


def _result(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    task_id = plan.params[0]
    rec = state.tasks.get(task_id)
    # 1. no such task
    if rec is None:
        return Outcome(*error_answer(state, 404, "not_found", f"no task {task_id!r}"), [])
    body: dict[str, Any] = plan.body
    attempt = body["attempt"]
    log.add("governed", endpoint="result", task_id=task_id, attempt=attempt, lease=_lease_state(state, rec, attempt))
    # 2. the body or header breaks CP-9
    problem = _submission_problem(state, rec, request, body)
    if problem is not None:
        return Outcome(*error_answer(state, 400, "bad_request", problem), [])
    key = request.headers["idempotency-key"][0]
    digest = body["result_hash"]
    scripted = take(state, lambda fault: fault.answers_submission(task_id), one=True)
    if scripted:
        return scripted[0].answer_submission(state, log, rec, task_id, body)
    # 3. the lease
    lease_id = rec.lease_of.get(attempt)
    if lease_id is None or body["lease_id"] != lease_id or state.leases[lease_id].data["state"] != "ACTIVE":
        why = "not the lease granted to this attempt" if body["lease_id"] != lease_id else "not ACTIVE at CP time"
        return Outcome(*error_answer(state, 403, "lease_not_active", f"lease {body['lease_id']!r} is {why}"), [])
    # 4. a stored result under this key
    if key in state.keys:
        stored = state.tasks[state.keys[key]].stored
        if state.keys[key] == task_id and stored is not None and stored["result_hash"] == digest:
            status, answer = ok_answer(state, 200, stored=copy.deepcopy(stored), state=rec.state)
            outcome = Outcome(status, answer, [])
            if fire_kill_point(state, "server_result_stored", task_id):
                outcome.kill_point, outcome.kill_worker = "server_result_stored", request.worker
            return outcome
        return Outcome(*error_answer(state, 422, "idempotency_key_reused", "the key was used with another body"), [])
    # 5. a result stored under another key; 6. superseded attempt or not RUNNING
    reason = None
    if rec.stored is not None:
        reason = "result_exists"
    elif attempt != rec.current["attempt"]:
        reason = "attempt_superseded"
    elif rec.state != "RUNNING":
        reason = "state"
    if reason is not None:
        return Outcome(*conflict_answer(state, rec, reason), [])
    if fire_kill_point(state, "server_result_received", task_id):
        return Outcome(0, None, [], transport="drop", kill_point="server_result_received", kill_worker=request.worker)
    # 7. store
    store_result(state, log, rec, task_id, attempt, key, body["result"], "submission")
    set_task_state(state, log, task_id, "VERIFYING", "result_stored")
    status, answer = ok_answer(state, 201, stored=copy.deepcopy(rec.stored), state=rec.state)
    outcome = Outcome(status, answer, [])
    if fire_kill_point(state, "server_result_stored", task_id):
        outcome.kill_point, outcome.kill_worker = "server_result_stored", request.worker
    return outcome


def _submission_problem(state: State, rec: TaskRec, request: Request, body: dict[str, Any]) -> str | None:
    keys = request.headers.get("idempotency-key", ())
    if len(keys) != 1:
        return "the request needs exactly one Idempotency-Key header"
    if not KEY_RE.fullmatch(keys[0]):
        return "the Idempotency-Key is not 1 to 255 visible ASCII characters"
    problem = state.validate(SUBMISSION_SCHEMA, body)
    if problem is not None:
        return f"the body breaks schemas/p1/result-submission.json {problem}"
    attempt = body["attempt"]
    if not 1 <= attempt <= len(rec.attempts):
        return f"attempt {attempt} is not an official attempt of the task"
    served = rec.attempts[attempt - 1]
    if body["execution_digest"] != served["execution_digest"]:
        return f"execution_digest is not attempt {attempt}'s"
    if body["result"].get("kind") != served["kind"]:
        return f"the result is not a {served['kind']} result"
    if body["result_hash"] != result_hash(body["result"]):
        return "result_hash is not the result hash of result"
    return None


def _report(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    task_id = plan.params[0]
    rec = state.tasks.get(task_id)
    if rec is None:
        return Outcome(*error_answer(state, 404, "not_found", f"no task {task_id!r}"), [])
    body = plan.body
    if not (is_int(body["attempt"]) and body["attempt"] >= 1):
        return Outcome(*error_answer(state, 400, "bad_request", "attempt must be an integer >= 1"), [])
    if not isinstance(body["lease_id"], str) or not body["lease_id"]:
        return Outcome(*error_answer(state, 400, "bad_request", "lease_id must be a non-empty string"), [])
    if body["state"] not in REPORT_STATES:
        return Outcome(*error_answer(state, 400, "bad_request", f"state must be one of {', '.join(REPORT_STATES)}"), [])
    if not isinstance(body["reason"], str):
        return Outcome(*error_answer(state, 400, "bad_request", "reason must be a string"), [])
    applied = body["attempt"] == rec.current["attempt"] and rec.state == "RUNNING"
    log.add("report", task_id=task_id, attempt=body["attempt"], lease_id=body["lease_id"], state=body["state"],
            reason=body["reason"], applied=applied)
    if applied:
        set_task_state(state, log, task_id, body["state"], "report")
    return Outcome(*ok_answer(state, 200, state=rec.state), [])


def _renew(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    lease = state.leases.get(plan.params[0])
    if lease is None:
        return Outcome(*error_answer(state, 404, "not_found", f"no lease {plan.params[0]!r}"), [])
    if lease.data["state"] != "ACTIVE":
        why = f"lease is {lease.data['state']}"
        status, body = error_answer(state, 409, "lease_not_active", why, lease=lease_view(lease))
        return Outcome(status, body, [])
    lease.data["expires_at_ms"] = state.now_ms + lease.data["ttl_ms"]
    log.add("lease", event="renewed", lease=lease_view(lease))
    return Outcome(*ok_answer(state, 200, lease=lease_view(lease)), [])


def _release(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    lease = state.leases.get(plan.params[0])
    if lease is None:
        return Outcome(*error_answer(state, 404, "not_found", f"no lease {plan.params[0]!r}"), [])
    if lease.data["state"] == "ACTIVE":
        end_lease(state, log, lease, "RELEASED", "released")
    return Outcome(*ok_answer(state, 200, lease=lease_view(lease)), [])


def _leases(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    query = parse_qs(request.query, keep_blank_values=True)
    repository, branch = query.get("repository", []), query.get("target_branch", [])
    if len(repository) != 1 or len(branch) != 1:
        return Outcome(*error_answer(state, 400, "bad_request", "give repository and target_branch, once each"), [])
    leases = [lease_view(lease) for lease in branch_leases(state, repository[0], branch[0])]
    # Logged so that the rules know which branch a read before a push was of (COMMIT-6): the path is logged bare.
    log.add("leases_read", repository=repository[0], target_branch=branch[0], leases=len(leases))
    return Outcome(*ok_answer(state, 200, leases=leases), [])


def _receipt(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    job_id = plan.params[0]
    owners = {
        (task_id, served["attempt"]): served
        for task_id, rec in state.tasks.items()
        for served in rec.attempts
        if served["job_id"] == job_id
    }
    if not owners:
        return Outcome(*error_answer(state, 404, "not_found", f"no Job {job_id!r}"), [])
    body = plan.body
    malformed = (
        not isinstance(body["task_id"], str)
        or not (is_int(body["attempt"]) and body["attempt"] >= 1)
        or not isinstance(body["lease_id"], str)
        or not isinstance(body["commit_oid"], str)
        or not OID_RE.fullmatch(body["commit_oid"])
    )
    if malformed:
        return Outcome(*error_answer(state, 400, "bad_request", "the receipt body breaks CP-16"), [])
    served = owners.get((body["task_id"], body["attempt"]))
    if served is None:
        return Outcome(*error_answer(state, 400, "bad_request", "that task and attempt are not the Job's"), [])
    rec = state.tasks[body["task_id"]]
    log.add("governed", endpoint="receipt", task_id=body["task_id"], attempt=body["attempt"],
            lease=_lease_state(state, rec, body["attempt"]))
    lease_id = rec.lease_of.get(body["attempt"])
    if lease_id is None or body["lease_id"] != lease_id or state.leases[lease_id].data["state"] != "ACTIVE":
        return Outcome(*error_answer(state, 403, "lease_not_active", f"lease {body['lease_id']!r} is not active"), [])
    held = state.receipts.get(job_id)
    commit = body["commit_oid"]
    if held is not None and held["commit_oid"] != commit:
        receipt = {"job_id": job_id, "commit_oid": held["commit_oid"], "visibility": held["visibility"]}
        status, answer = error_answer(state, 409, "receipt_conflict", "the Job holds another commit", receipt=receipt)
        return Outcome(status, answer, [])
    first = held is None
    if held is None:
        held = {"commit_oid": commit, "task_id": body["task_id"], "attempt": body["attempt"], "visibility": None}
        state.receipts[job_id] = held
    delay = state.visibility_delay.get(job_id, 0)
    if delay > 0:
        state.visibility_delay[job_id] = delay - 1
        visibility = "not_visible"
    else:
        at = heads.get((served["repository"], served["target_branch"]))
        visibility = "confirmed" if at == commit else "not_visible"
    held["visibility"] = visibility
    log.add("receipt", job_id=job_id, task_id=body["task_id"], attempt=body["attempt"], lease_id=lease_id,
            commit_oid=commit, visibility=visibility, recorded=first, delay_left=state.visibility_delay.get(job_id, 0))
    if visibility == "confirmed":
        lease = state.leases[lease_id]
        lease.data["current_head_oid"] = commit
        log.add("lease", event="head", lease=lease_view(lease))
    receipt = {"job_id": job_id, "commit_oid": commit, "visibility": visibility}
    outcome = Outcome(*ok_answer(state, 200, receipt=receipt), [])
    if fire_kill_point(state, "server_receipt_recorded", body["task_id"]):
        outcome.kill_point, outcome.kill_worker = "server_receipt_recorded", request.worker
    return outcome


WORKER_HANDLERS: dict[str, Handler] = {
    "clock": _clock,
    "claim": _claim,
    "task": _task,
    "result": _result,
    "report": _report,
    "renew": _renew,
    "release": _release,
    "leases": _leases,
    "receipt": _receipt,
}
