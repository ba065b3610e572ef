"""The control plane's requests (docs/spec/p1-control-plane.md CP-1 to CP-3, CP-12, CP-19 to CP-22), pure.

``prepare`` routes a request, reads its body, counts it against the scripted faults and says what the
shell must do first (moment checks, origin heads, branch moves); ``handle`` applies the endpoint's rules
and the answer's fault, and logs the request (CP-19) in the entries the shell makes durable. A request to
the kit's own paths without the control plane's secret (CP-22) routes nowhere and is logged as refused.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import unquote

from resumekit.conformance.p1.canonical import NotCanonical, parse_json
from resumekit.conformance.p1.control_plane.faults import EFFECT_ENDPOINTS, fault_to_mapping
from resumekit.conformance.p1.control_plane.kit_endpoints import KIT_HANDLERS, push_moments
from resumekit.conformance.p1.control_plane.lifecycle import expire
from resumekit.conformance.p1.control_plane.state import (
    BODY_MEMBERS,
    KIT,
    KIT_ROUTES,
    ROUTES,
    SECRET_SHOWN,
    Fault,
    Handler,
    Heads,
    Log,
    Moment,
    Outcome,
    Plan,
    Request,
    State,
    error_answer,
    is_int,
    take,
)
from resumekit.conformance.p1.control_plane.worker_endpoints import WORKER_HANDLERS, pick, stale_tasks

# ---------------------------------------------------------------- routing and planning


def is_kit_path(path: str) -> bool:
    """Whether *path* (relative, still percent-encoded) is one of the kit's own (CP-22): its first segment,
    decoded, is ``_kit``, however it is spelled (``%5Fkit``) and wherever it is sent."""
    first = path.lstrip("/").split("/", 1)[0]
    return unquote(first, errors="replace") == KIT


def is_kit_call(path: str, worker: str | None, secret: str) -> bool:
    """Whether a request is the kit's own (CP-22): sent to the server's root, not through a worker's base URL,
    as ``_kit/<secret>/...`` with the control plane's secret. Compared in constant time, so that timing the
    answers tells nothing of the secret; with no secret, no request is the kit's."""
    parts = path.split("/")
    if worker is not None or not secret or len(parts) < 3 or parts[0] != KIT:
        return False
    return hmac.compare_digest(parts[1].encode("utf-8"), secret.encode("utf-8"))


def is_refused_kit_call(path: str, worker: str | None, secret: str) -> bool:
    """A request to a kit path that is not the kit's own: a worker's (the kit always has the secret), refused
    and logged so that a check fails the case on CP-22."""
    return is_kit_path(path) and not is_kit_call(path, worker, secret)


def shown_path(path: str, secret: str) -> str:
    """*path* as the log and the answers show it: the secret, wherever it is, replaced by ``<secret>``, since a
    worker may read both."""
    return path.replace(secret, SECRET_SHOWN) if secret else path


def route(request: Request, secret: str = "") -> tuple[str | None, tuple[str, ...], bool]:
    """The endpoint, its path parameters, and whether the path exists with another method. A kit path routes
    only when it is the kit's own call (``is_kit_call``), its secret dropped: ``_kit/<secret>/origin/check``
    is ``_kit/origin/check``; a worker's base URL routes the worker's endpoints only."""
    if not request.path or request.path.startswith("/"):
        return None, (), False
    segments = tuple(unquote(part, errors="strict") for part in request.path.split("/"))
    if any(not part for part in segments):
        return None, (), False
    if is_kit_call(request.path, request.worker, secret):
        segments, table = (segments[0], *segments[2:]), KIT_ROUTES
    elif is_kit_path(request.path) or request.worker is None:
        return None, (), False
    else:
        table = ROUTES
    other_method = False
    for method, pattern, endpoint in table:
        if len(pattern) != len(segments):
            continue
        if all(p == "*" or p == s for p, s in zip(pattern, segments, strict=True)):
            params = tuple(s for p, s in zip(pattern, segments, strict=True) if p == "*")
            if method == request.method:
                return endpoint, params, False
            other_method = True
    return None, (), other_method


def _parse_body(request: Request, endpoint: str) -> tuple[Any, str | None]:
    members = BODY_MEMBERS[endpoint]
    if members is None:
        return None, ("a GET has no body" if request.body else None)
    ctype = request.headers.get("content-type", ())
    if len(ctype) != 1 or ctype[0].split(";")[0].strip().lower() != "application/json":
        return None, "the body must be sent with Content-Type: application/json"
    try:
        body = parse_json(request.body)
    except NotCanonical as error:
        return None, str(error)
    if not isinstance(body, dict):
        return body, "the body must be a JSON object"
    extra = sorted(set(body) - members)
    missing = sorted(members - set(body))
    if extra or missing:
        words = []
        if extra:
            words.append(f"unknown members {', '.join(extra)}")
        if missing:
            words.append(f"missing members {', '.join(missing)}")
        return body, "the body has " + " and ".join(words)
    return body, None


def _subject_task(state: State, endpoint: str, params: tuple[str, ...], body: Any) -> str | None:
    if endpoint in ("task", "result", "report"):
        return params[0]
    if endpoint in ("renew", "release"):
        lease = state.leases.get(params[0])
        return None if lease is None else str(lease.data["task_id"])
    if endpoint == "receipt" and isinstance(body, dict) and isinstance(body.get("task_id"), str):
        return str(body["task_id"])
    if endpoint == "claim":
        return pick(state, set())
    return None


def prepare(state: State, request: Request) -> Plan:
    """What the request needs before it is handled; consumes the faults that fire on its arrival."""
    number = state.next_request
    state.next_request += 1
    log = Log(state, number)
    try:
        endpoint, params, _ = route(request, state.kit_secret)
    except UnicodeDecodeError:
        endpoint, params = None, ()
    body, body_error = (None, None) if endpoint is None else _parse_body(request, endpoint)
    moments: list[Moment] = []
    if request.worker is not None and request.worker not in state.workers_seen:
        state.workers_seen.add(request.worker)
        moments.append(Moment("first_request", {"worker": request.worker}))
    # The faults scripted to fire before this request (a clock move; a branch move, which the shell makes),
    # then expiry (CP-12: before handling any request).
    before = [] if endpoint is None else take(state, lambda fault: fault.fires_before(endpoint))
    for fault in before:
        fault.act(state, log, {})
    expire(state, log)
    # A receipt's visibility is the branch's head; a report of the origin's hook is logged with the ref as the
    # kit's own git read it when the report arrived, so that no report is believed on its word (CP-18).
    reads = endpoint in ("receipt", "origin_check", "origin_updated")
    plan = Plan(number, endpoint, params, moments, [], reads, None, [], body, body_error, log.entries)
    if endpoint is None:
        return plan
    plan.move_branches = [move for move in (fault.branch_move() for fault in before) if move is not None]
    if plan.move_branches:
        plan.needs_heads = True
    subject = _subject_task(state, endpoint, params, body)
    fired = take(state, lambda fault: fault.shapes_answer(endpoint, subject), one=True)
    plan.answer_fault = fired[0] if fired else None
    if endpoint == "claim":
        plan.claim_faults = take(state, lambda fault: fault.applies_to_claim(state, request.worker))
        plan.needs_heads = plan.needs_heads or _claim_may_grant(state, plan.claim_faults)
    if body_error is None and isinstance(body, dict):
        plan.moments.extend(_moments(state, request, endpoint, params, body))
    return plan


def _claim_may_grant(state: State, claim_faults: list[Fault]) -> bool:
    """Whether a claim may grant a lease, whose CP-9 view carries the branch's head: a claim that finds
    nothing to serve, most of a worker's polls, costs the shell no read of the origin."""
    if any(fault.may_grant() for fault in claim_faults):
        return True
    return pick(state, stale_tasks(claim_faults)) is not None


def _moments(
    state: State, request: Request, endpoint: str, params: tuple[str, ...], body: dict[str, Any]
) -> list[Moment]:
    worker = request.worker
    if endpoint == "result":
        keys = request.headers.get("idempotency-key", ())
        attempt, digest = body.get("attempt"), body.get("result_hash")
        if len(keys) == 1 and is_int(attempt) and isinstance(digest, str):
            args = {"worker": worker, "task_id": params[0], "attempt": attempt, "key": keys[0], "result_hash": digest}
            return [Moment("submission", args)]
    elif endpoint == "receipt":
        task_id, attempt, oid = body.get("task_id"), body.get("attempt"), body.get("commit_oid")
        if isinstance(task_id, str) and is_int(attempt) and isinstance(oid, str):
            args = {"worker": worker, "task_id": task_id, "attempt": attempt, "commit_oid": oid}
            return [Moment("receipt", args)]
    elif endpoint == "origin_check":
        return push_moments(state, body)
    return []


# ---------------------------------------------------------------- handling


def handle(state: State, request: Request, plan: Plan, heads: Heads, checks: list[tuple[Moment, list[str]]]) -> Outcome:
    """Apply the request to the state; the outcome's entries must be durable before it is answered."""
    log = Log(state, plan.number)
    log.entries = plan.entries
    for moment, problems in checks:
        log.add("moment", check=moment.check, **moment.args, problems=list(problems), ok=not problems)
    outcome = _dispatch(state, request, plan, heads, log)
    log_refused_kit_call(state, log, request.method, request.path, request.worker)
    entry: dict[str, Any] = {
        "worker": request.worker,
        "method": request.method,
        "path": shown_path(request.path, state.kit_secret),
        "endpoint": plan.endpoint,
        "idempotency_key": _one(request.headers.get("idempotency-key", ())),
        "body_sha256": hashlib.sha256(request.body).hexdigest() if request.body else None,
        "status": outcome.status,
        "answer": outcome.transport,
    }
    if plan.answer_fault is not None:
        entry["fault"] = fault_to_mapping(plan.answer_fault)
    if outcome.kill_point is not None:
        entry["kill_point"] = outcome.kill_point
    log.add("request", **entry)
    outcome.entries = log.entries
    return outcome


def log_refused_kit_call(state: State, log: Log, method: str, path: str, worker: str | None) -> None:
    """Log ``kit_path_refused`` for a request to a kit path that is not the kit's own (CP-22), however it was
    answered, so that the case's checks see the worker called it; the path as shown, never the secret."""
    if is_refused_kit_call(path, worker, state.kit_secret):
        log.add("kit_path_refused", worker=worker, method=method, path=shown_path(path, state.kit_secret))


def _one(values: tuple[str, ...]) -> str | None:
    return values[0] if len(values) == 1 else (None if not values else "\n".join(values))


def _dispatch(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    endpoint = plan.endpoint
    if endpoint is None:
        path = shown_path(request.path, state.kit_secret)
        message = f"no endpoint {request.method} {path}"
        if is_refused_kit_call(request.path, request.worker, state.kit_secret):
            message += ": the kit's own paths are not a worker's to call (CP-22)"
        status, body = error_answer(state, 404, "not_found", message)
        return Outcome(status, body, [])
    fault = plan.answer_fault
    if endpoint in EFFECT_ENDPOINTS and fault is not None and fault.withholds_effect():
        # The fault withholds the effect: the request changes nothing.
        return _transport(state, fault, None)
    missing = _missing(state, endpoint, plan.params)
    if missing is not None:
        status, body = error_answer(state, 404, "not_found", missing)
        outcome = Outcome(status, body, [])
    elif plan.body_error is not None:
        status, body = error_answer(state, 400, "bad_request", plan.body_error)
        outcome = Outcome(status, body, [])
    else:
        outcome = HANDLERS[endpoint](state, request, plan, heads, log)
    if fault is not None and outcome.transport == "answer":
        return _transport(state, fault, outcome)
    return outcome


def _missing(state: State, endpoint: str, params: tuple[str, ...]) -> str | None:
    """404 comes first (CP-9 rule 1, CP-13, CP-14, CP-16): an unknown task, lease or Job."""
    if endpoint in ("task", "result", "report") and params[0] not in state.tasks:
        return f"no task {params[0]!r}"
    if endpoint in ("renew", "release") and params[0] not in state.leases:
        return f"no lease {params[0]!r}"
    if endpoint == "receipt" and not any(
        served["job_id"] == params[0] for rec in state.tasks.values() for served in rec.attempts
    ):
        return f"no Job {params[0]!r}"
    return None


def _transport(state: State, fault: Fault, done: Outcome | None) -> Outcome:
    """The answer as the fault shapes it, at the kill point the endpoint reached (if it was handled)."""
    outcome = fault.shape(state, done)
    if done is not None:
        outcome.kill_point, outcome.kill_worker = done.kill_point, done.kill_worker
    return outcome


# Every endpoint's rules, the worker's and the kit's own.
HANDLERS: dict[str, Handler] = {**WORKER_HANDLERS, **KIT_HANDLERS}
