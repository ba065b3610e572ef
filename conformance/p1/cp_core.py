"""The control plane's pure core (docs/spec/p1-control-plane.md): state, rules and answers, with no I/O.

The shell (``control_plane.py``) parses HTTP into a ``Request``, asks ``prepare`` what the request needs
(moment checks, origin heads, branch moves), does that I/O, and hands the results to ``handle``, which
applies the rules of CP-4 to CP-18 to the ``State`` and returns an ``Outcome``: the status, the body, how
the answer travels (answered, dropped, delayed), a kill point, and the log entries (CP-19) the shell must
make durable before anything leaves. The kit's own operations (issue, re-issue, clock, faults, states)
are functions here too, so every change of state is made and logged in one place.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from resumekit.conformance.p1 import cp_faults as F
from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, parse_json, result_hash
from resumekit.conformance.schemas import BASE, first_violation

TASK_SCHEMA = BASE + "p1/task.json"
SUBMISSION_SCHEMA = BASE + "p1/result-submission.json"
ZERO = "0" * 40

IDENTITY = (
    "task_id",
    "attempt",
    "execution_digest",
    "job_id",
    "repository",
    "base_oid",
    "expected_branch_oid",
    "target_branch",
    "generation",
)
# Fields a re-issue may change (CP-6, CP-21); task_id and attempt are the control plane's.
REISSUE_FIELDS = frozenset(IDENTITY[2:]) | {"kind", "payload", "origin_url"}

# (method, path pattern, endpoint); "*" is one percent-decoded path segment.
ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("GET", ("v1", "clock"), "clock"),
    ("POST", ("v1", "claims"), "claim"),
    ("GET", ("v1", "tasks", "*"), "task"),
    ("POST", ("v1", "tasks", "*", "result"), "result"),
    ("POST", ("v1", "tasks", "*", "report"), "report"),
    ("POST", ("v1", "leases", "*", "renew"), "renew"),
    ("POST", ("v1", "leases", "*", "release"), "release"),
    ("GET", ("v1", "leases"), "leases"),
    ("PUT", ("v1", "jobs", "*", "receipt"), "receipt"),
)
KIT_ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("POST", ("_kit", "origin", "check"), "origin_check"),
    ("POST", ("_kit", "origin", "updated"), "origin_updated"),
    ("POST", ("_kit", "tool", "started"), "tool_started"),
)
# The exact members of each request body (CP-1: any other body is 400); None: no body (a GET).
BODY_MEMBERS: dict[str, frozenset[str] | None] = {
    "clock": None,
    "task": None,
    "leases": None,
    "claim": frozenset(),
    "renew": frozenset(),
    "release": frozenset(),
    "result": frozenset({"attempt", "execution_digest", "lease_id", "result_hash", "result"}),
    "report": frozenset({"attempt", "lease_id", "state", "reason"}),
    "receipt": frozenset({"task_id", "attempt", "lease_id", "commit_oid"}),
    "origin_check": frozenset({"repository", "updates"}),
    "origin_updated": frozenset({"repository", "updates"}),
    "tool_started": frozenset({"pid", "grandchild", "cwd", "writes"}),
}
# The governed side effects (p1.md 0.3): their requests log the attempt's lease state at arrival.
GOVERNED = frozenset({"result", "receipt", "origin_check"})
REPORT_STATES = ("FAILED", "RECONCILIATION_REQUIRED")
# Kit-only state changes (set_state): a stored result is needed for VERIFYING and SUCCEEDED.
KIT_STATES = ("VERIFYING", "SUCCEEDED", "FAILED", "RECONCILIATION_REQUIRED")
KEY_RE = re.compile(r"[!-~]{1,255}")
OID_RE = re.compile(r"[0-9a-f]{40}")
SCRIPTED_KEY = "p1-kit:scripted-409"


class KitError(ValueError):
    """A kit operation the control plane cannot do as asked (the scenario is wrong)."""


@dataclass
class Lease:
    data: dict[str, Any]
    official: bool  # granted by a claim to an attempt; False for the kit's own (SecondLease, Fence)
    holder: str | None  # the worker path the claim came through


@dataclass
class TaskRec:
    attempts: list[dict[str, Any]]  # the task as served, per attempt (index attempt - 1)
    state: str
    stored: dict[str, Any] | None = None
    lease_of: dict[int, str] = field(default_factory=dict)

    @property
    def current(self) -> dict[str, Any]:
        return self.attempts[-1]


@dataclass
class Pending:
    fault: F.Fault
    seen: int = 0


@dataclass
class State:
    now_ms: int
    ttl_ms: int
    retry_after_ms: int
    origins: dict[str, str] = field(default_factory=dict)  # repository -> origin_url
    tasks: dict[str, TaskRec] = field(default_factory=dict)
    issue_order: list[tuple[str, int]] = field(default_factory=list)
    leases: dict[str, Lease] = field(default_factory=dict)
    highest_generation: dict[tuple[str, str], int] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # idempotency key -> task_id of its stored result
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)  # job_id -> receipt as recorded
    visibility_delay: dict[str, int] = field(default_factory=dict)
    faults: list[Pending] = field(default_factory=list)
    workers_seen: set[str] = field(default_factory=set)
    next_lease: int = 1
    next_request: int = 1


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # relative to the worker's base URL or to the server root for _kit/, still percent-encoded
    query: str
    headers: Mapping[str, tuple[str, ...]]  # lowercase names
    body: bytes
    worker: str | None  # the base-URL path's worker name; None for _kit/ paths


@dataclass(frozen=True)
class Moment:
    """A moment check (CP-20) the shell runs through the observer before ``handle``."""

    check: str  # first_request | submission | receipt | push
    args: dict[str, Any]


@dataclass
class Plan:
    number: int
    endpoint: str | None
    params: tuple[str, ...]
    moments: list[Moment]
    move_branches: list[F.MoveBranch]
    needs_heads: bool
    answer_fault: F.Fault | None
    claim_faults: list[F.Fault]
    body: Any
    body_error: str | None
    entries: list[dict[str, Any]]


@dataclass
class Outcome:
    status: int
    body: dict[str, Any] | None
    entries: list[dict[str, Any]]
    transport: str = "answer"  # answer | drop | delay
    delay_s: float = 0.0
    kill_point: str | None = None
    kill_worker: str | None = None


Heads = Mapping[tuple[str, str], str | None]


class Log:
    """Collects log entries; the shell numbers and writes them."""

    def __init__(self, state: State, request: int | None) -> None:
        self.state = state
        self.request = request
        self.entries: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> None:
        entry = {"kind": kind, "now_ms": self.state.now_ms, "request": self.request}
        entry.update(fields)
        self.entries.append(entry)


# ---------------------------------------------------------------- answers


def _ok(state: State, status: int, /, **members: Any) -> tuple[int, dict[str, Any]]:
    return status, {**members, "now_ms": state.now_ms}


def _error(state: State, status: int, error: str, message: str, /, **members: Any) -> tuple[int, dict[str, Any]]:
    return status, {"error": error, "message": message, **members, "now_ms": state.now_ms}


# ---------------------------------------------------------------- views


def lease_view(lease: Lease) -> dict[str, Any]:
    return copy.deepcopy(lease.data)


def task_view(state: State, task_id: str) -> dict[str, Any]:
    rec = state.tasks[task_id]
    return {
        "task": copy.deepcopy(rec.current),
        "state": rec.state,
        "stored": copy.deepcopy(rec.stored),
        "attempts": copy.deepcopy(rec.attempts),
        "leases": {str(attempt): lease_id for attempt, lease_id in rec.lease_of.items()},
    }


def branch_leases(state: State, repository: str, branch: str) -> list[Lease]:
    return [
        lease
        for lease in state.leases.values()
        if lease.data["repository"] == repository and lease.data["target_branch"] == branch
    ]


# ---------------------------------------------------------------- leases and attempts


def _set_task_state(state: State, log: Log, task_id: str, to: str, cause: str) -> None:
    rec = state.tasks[task_id]
    if rec.state != to:
        attempt = rec.current["attempt"]
        log.add("task_state", task_id=task_id, attempt=attempt, **{"from": rec.state}, to=to, cause=cause)
        rec.state = to


def _issue_next(state: State, log: Log, task_id: str, changes: Mapping[str, Any], cause: str) -> None:
    rec = state.tasks[task_id]
    previous = rec.current
    served = {**copy.deepcopy(previous), **copy.deepcopy(dict(changes)), "attempt": previous["attempt"] + 1}
    _check_task(state, served, rec.attempts)
    rec.attempts.append(served)
    state.issue_order.append((task_id, served["attempt"]))
    log.add("attempt_issued", task_id=task_id, attempt=served["attempt"], task=copy.deepcopy(served), cause=cause)
    _set_task_state(state, log, task_id, "QUEUED", cause)
    # Issuing a new attempt ends the previous attempt's lease (CP-6).
    lease_id = rec.lease_of.get(previous["attempt"])
    if lease_id is not None and state.leases[lease_id].data["state"] == "ACTIVE":
        _end_lease(state, log, state.leases[lease_id], "EXPIRED", "superseded")


def _end_lease(state: State, log: Log, lease: Lease, to: str, event: str) -> None:
    lease.data["state"] = to
    log.add("lease", event=event, lease=lease_view(lease))
    if not lease.official:
        return
    rec = state.tasks[lease.data["task_id"]]
    # CP-12: a RUNNING attempt whose lease stops being ACTIVE with no result stored is issued anew.
    if rec.current["attempt"] == lease.data["attempt"] and rec.state == "RUNNING" and rec.stored is None:
        _issue_next(state, log, lease.data["task_id"], {}, f"lease_{event}")


def expire(state: State, log: Log) -> None:
    """CP-12 expiry: every ACTIVE lease whose expires_at_ms has been reached becomes EXPIRED."""
    for lease in list(state.leases.values()):
        if lease.data["state"] == "ACTIVE" and lease.data["expires_at_ms"] <= state.now_ms:
            _end_lease(state, log, lease, "EXPIRED", "expired")


def _grant(
    state: State,
    log: Log,
    served: Mapping[str, Any],
    *,
    generation: int,
    official: bool,
    holder: str | None,
    heads: Heads,
) -> Lease:
    repository, branch = served["repository"], served["target_branch"]
    lease_id = f"lease-{state.next_lease}"
    state.next_lease += 1
    lease = Lease(
        data={
            "lease_id": lease_id,
            "repository": repository,
            "target_branch": branch,
            "task_id": served["task_id"],
            "attempt": served["attempt"],
            "generation": generation,
            "state": "ACTIVE",
            "ttl_ms": state.ttl_ms,
            "acquired_at_ms": state.now_ms,
            "expires_at_ms": state.now_ms + state.ttl_ms,
            "current_head_oid": heads.get((repository, branch)),
        },
        official=official,
        holder=holder,
    )
    state.leases[lease_id] = lease
    key = (repository, branch)
    state.highest_generation[key] = max(state.highest_generation.get(key, 0), generation)
    log.add("lease", event="granted", lease=lease_view(lease), official=official, holder=holder)
    # Granting generation g fences every ACTIVE lease of the branch with a lower generation.
    for other in branch_leases(state, repository, branch):
        if other.data["state"] == "ACTIVE" and other.data["generation"] < generation:
            _end_lease(state, log, other, "EXPIRED", "fenced")
    return lease


# ---------------------------------------------------------------- kit operations


def _check_task(state: State, served: Mapping[str, Any], earlier: list[dict[str, Any]]) -> None:
    problem = first_violation(TASK_SCHEMA, dict(served))
    if problem is not None:
        raise KitError(f"task {served.get('task_id')!r} breaks schemas/p1/task.json {problem}")
    try:
        canonical_json(dict(served))
    except NotCanonical as error:
        raise KitError(f"task {served.get('task_id')!r}: {error}") from None
    for other in earlier:
        same_digest = other["execution_digest"] == served["execution_digest"]
        if same_digest and (other["kind"] != served["kind"] or other["payload"] != served["payload"]):
            raise KitError("attempts with one execution_digest must have the same kind and payload (CP-5)")


def kit_issue(state: State, log: Log, task: Mapping[str, Any]) -> None:
    served = copy.deepcopy(dict(task))
    served.setdefault("attempt", 1)
    if served["attempt"] != 1:
        raise KitError("issue() starts a task at attempt 1; use reissue() for later attempts")
    if "origin_url" not in served:
        repository = served.get("repository")
        if repository not in state.origins:
            raise KitError(f"no origin for repository {repository!r}; call add_origin first")
        served["origin_url"] = state.origins[repository]
    task_id = served.get("task_id")
    if task_id in state.tasks:
        raise KitError(f"task {task_id!r} is already issued; use reissue()")
    _check_task(state, served, [])
    state.tasks[served["task_id"]] = TaskRec(attempts=[served], state="QUEUED")
    state.issue_order.append((served["task_id"], 1))
    log.add("attempt_issued", task_id=served["task_id"], attempt=1, task=copy.deepcopy(served), cause="kit")
    log.add("task_state", task_id=served["task_id"], attempt=1, **{"from": None}, to="QUEUED", cause="kit")


def kit_reissue(state: State, log: Log, task_id: str, changes: Mapping[str, Any]) -> None:
    rec = _kit_task(state, task_id)
    unknown = sorted(set(changes) - REISSUE_FIELDS)
    if unknown:
        raise KitError(f"reissue cannot change {', '.join(unknown)}")
    if rec.stored is not None:
        raise KitError(f"task {task_id!r} has a stored result; no later attempt is issued (CP-10)")
    changes = dict(changes)
    if "repository" in changes and "origin_url" not in changes and changes["repository"] in state.origins:
        changes["origin_url"] = state.origins[changes["repository"]]
    _issue_next(state, log, task_id, changes, "kit")


def kit_move_clock(state: State, log: Log, delta_ms: int) -> None:
    before = state.now_ms
    state.now_ms += delta_ms
    log.add("clock", **{"from": before}, to=state.now_ms, delta_ms=delta_ms)
    expire(state, log)


def kit_set_state(state: State, log: Log, task_id: str, to: str) -> None:
    rec = _kit_task(state, task_id)
    if to not in KIT_STATES:
        raise KitError(f"set_state takes one of {', '.join(KIT_STATES)}; QUEUED comes with reissue()")
    if to in ("VERIFYING", "SUCCEEDED") and rec.stored is None:
        raise KitError(f"task {task_id!r} has no stored result and cannot be {to}")
    _set_task_state(state, log, task_id, to, "kit")


def kit_script(state: State, log: Log, fault: F.Fault, heads: Heads) -> None:
    """Script one fault: a waiting one joins the queue; the others act now."""
    log.add("fault_scripted", fault=F.fault_to_mapping(fault))
    if F.waits_for_request(fault):
        state.faults.append(Pending(fault))
        return
    if isinstance(fault, F.DelayVisibility):
        state.visibility_delay[fault.job_id] = fault.polls
    elif isinstance(fault, (F.SecondLease, F.Fence)):
        rec = _kit_task(state, fault.task_id)
        served = rec.current
        key = (served["repository"], served["target_branch"])
        if isinstance(fault, F.SecondLease):
            generation = served["generation"]
        else:
            generation = fault.generation or state.highest_generation.get(key, served["generation"]) + 1
        _grant(state, log, served, generation=generation, official=False, holder=None, heads=heads)
    elif isinstance(fault, F.MoveClock):
        kit_move_clock(state, log, fault.delta_ms)
    # MoveBranch without ``on`` is done by the shell, which logs ``branch_moved``.


def _kit_task(state: State, task_id: str) -> TaskRec:
    if task_id not in state.tasks:
        raise KitError(f"no task {task_id!r}")
    return state.tasks[task_id]


# ---------------------------------------------------------------- requests: routing and planning


def route(request: Request) -> tuple[str | None, tuple[str, ...], bool]:
    """The endpoint, its path parameters, and whether the path exists with another method."""
    if not request.path or request.path.startswith("/"):
        return None, (), False
    segments = tuple(unquote(part, errors="strict") for part in request.path.split("/"))
    if any(not part for part in segments):
        return None, (), False
    table = KIT_ROUTES if request.worker is None else ROUTES
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
        pick = _pick(state, set())
        return None if pick is None else pick
    return None


def _matches(fault: F.Fault, endpoint: str, subject: str | None, worker: str | None) -> bool:
    if F.fault_on(fault) != endpoint:
        return False
    task_id = getattr(fault, "task_id", None)
    if task_id is not None and task_id != subject:
        return False
    wanted = getattr(fault, "worker", None)
    return wanted is None or wanted == worker


def _take(state: State, pick: Callable[[F.Fault], bool], *, one: bool = False) -> list[F.Fault]:
    """Count the request against every pending fault *pick* accepts; return (and drop) those that fire."""
    fired: list[F.Fault] = []
    for pending in list(state.faults):
        if not pick(pending.fault):
            continue
        if one and fired:
            break
        pending.seen += 1
        if pending.seen >= getattr(pending.fault, "nth", 1):
            fired.append(pending.fault)
            state.faults.remove(pending)
    return fired


def fire_kill_point(state: State, name: str, subject: str | None) -> bool:
    """Whether a scripted kill point fires at this point (counted only where the point is reached)."""
    return bool(
        _take(
            state,
            lambda f: isinstance(f, F.KillPoint) and f.name == name and f.task_id in (None, subject),
            one=True,
        )
    )


def prepare(state: State, request: Request) -> Plan:
    """What the request needs before it is handled; consumes the faults that fire on its arrival."""
    number = state.next_request
    state.next_request += 1
    log = Log(state, number)
    try:
        endpoint, params, _ = route(request)
    except UnicodeDecodeError:
        endpoint, params = None, ()
    body, body_error = (None, None) if endpoint is None else _parse_body(request, endpoint)
    moments: list[Moment] = []
    if request.worker is not None and request.worker not in state.workers_seen:
        state.workers_seen.add(request.worker)
        moments.append(Moment("first_request", {"worker": request.worker}))
    # Clock moves scripted before this request, then expiry (CP-12: before handling any request).
    if endpoint is not None:
        for fault in _take(state, lambda f: isinstance(f, F.MoveClock) and f.on == endpoint):
            assert isinstance(fault, F.MoveClock)
            kit_move_clock(state, log, fault.delta_ms)
    expire(state, log)
    plan = Plan(number, endpoint, params, moments, [], endpoint in ("claim", "receipt", "origin_check"), None, [],
                body, body_error, log.entries)
    if endpoint is None:
        return plan
    plan.move_branches = [
        f for f in _take(state, lambda f: isinstance(f, F.MoveBranch) and f.on == endpoint)
        if isinstance(f, F.MoveBranch)
    ]
    if plan.move_branches:
        plan.needs_heads = True
    subject = _subject_task(state, endpoint, params, body)
    fired = _take(
        state,
        lambda f: isinstance(f, (F.Answer, F.Drop, F.Delay)) and _matches(f, endpoint, subject, request.worker),
        one=True,
    )
    plan.answer_fault = fired[0] if fired else None
    if endpoint == "claim":
        plan.claim_faults = _take(
            state,
            lambda f: isinstance(f, CLAIM_FAULTS)
            and (getattr(f, "worker", None) in (None, request.worker))
            and _claim_fault_applies(state, f),
        )
    if body_error is None and isinstance(body, dict):
        plan.moments.extend(_moments(state, request, endpoint, params, body))
    return plan


CLAIM_FAULTS = (F.DuplicateDelivery, F.ServeStale, F.ReplayAttempt, F.ConflictingIdentity)


def _claim_fault_applies(state: State, fault: F.Fault) -> bool:
    """Whether a claim counts for a claim fault: the faults that need a task in some state wait for it."""
    rec = state.tasks.get(getattr(fault, "task_id", ""))
    if isinstance(fault, F.ServeStale):
        return rec is not None and rec.state == "QUEUED"
    if isinstance(fault, F.ReplayAttempt):
        return rec is not None and fault.attempt < rec.current["attempt"]
    if isinstance(fault, F.ConflictingIdentity):
        return rec is not None and (fault.attempt or 1) <= rec.current["attempt"]
    return True


def _moments(
    state: State, request: Request, endpoint: str, params: tuple[str, ...], body: dict[str, Any]
) -> list[Moment]:
    worker = request.worker
    if endpoint == "result":
        keys = request.headers.get("idempotency-key", ())
        attempt, digest = body.get("attempt"), body.get("result_hash")
        if len(keys) == 1 and _is_int(attempt) and isinstance(digest, str):
            args = {"worker": worker, "task_id": params[0], "attempt": attempt, "key": keys[0], "result_hash": digest}
            return [Moment("submission", args)]
    elif endpoint == "receipt":
        task_id, attempt, oid = body.get("task_id"), body.get("attempt"), body.get("commit_oid")
        if isinstance(task_id, str) and _is_int(attempt) and isinstance(oid, str):
            args = {"worker": worker, "task_id": task_id, "attempt": attempt, "commit_oid": oid}
            return [Moment("receipt", args)]
    elif endpoint == "origin_check":
        out = []
        for update in _updates(body):
            lease = _pusher(state, str(body["repository"]), update)
            if lease is not None:
                args = {
                    "task_id": lease.data["task_id"],
                    "attempt": lease.data["attempt"],
                    "ref": update["ref"],
                    "old": update["old"],
                    "new": update["new"],
                }
                out.append(Moment("push", args))
        return out
    return []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------- requests: handling


def handle(state: State, request: Request, plan: Plan, heads: Heads, checks: list[tuple[Moment, list[str]]]) -> Outcome:
    """Apply the request to the state; the outcome's entries must be durable before it is answered."""
    log = Log(state, plan.number)
    log.entries = plan.entries
    for moment, problems in checks:
        log.add("moment", check=moment.check, **moment.args, problems=list(problems), ok=not problems)
    outcome = _dispatch(state, request, plan, heads, log)
    entry: dict[str, Any] = {
        "worker": request.worker,
        "method": request.method,
        "path": request.path,
        "endpoint": plan.endpoint,
        "idempotency_key": _one(request.headers.get("idempotency-key", ())),
        "body_sha256": hashlib.sha256(request.body).hexdigest() if request.body else None,
        "status": outcome.status,
        "answer": outcome.transport,
    }
    if plan.answer_fault is not None:
        entry["fault"] = F.fault_to_mapping(plan.answer_fault)
    if outcome.kill_point is not None:
        entry["kill_point"] = outcome.kill_point
    log.add("request", **entry)
    outcome.entries = log.entries
    return outcome


def _one(values: tuple[str, ...]) -> str | None:
    return values[0] if len(values) == 1 else (None if not values else "\n".join(values))


def _dispatch(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    endpoint = plan.endpoint
    if endpoint is None:
        status, body = _error(state, 404, "not_found", f"no endpoint {request.method} {request.path}")
        return Outcome(status, body, [])
    fault = plan.answer_fault
    if endpoint in F.EFFECT_ENDPOINTS and fault is not None and not getattr(fault, "effect", True):
        # The fault withholds the effect: the request changes nothing.
        return _transport(state, fault, None)
    missing = _missing(state, endpoint, plan.params)
    if missing is not None:
        status, body = _error(state, 404, "not_found", missing)
        outcome = Outcome(status, body, [])
    elif plan.body_error is not None:
        status, body = _error(state, 400, "bad_request", plan.body_error)
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


def _transport(state: State, fault: F.Fault, done: Outcome | None) -> Outcome:
    if isinstance(fault, F.Answer):
        words = "scripted: " + ("effect applied" if done else "no effect")
        status, error = _error(state, fault.status, F.REJECTIONS.get(fault.status, "unavailable"), words)
        outcome = Outcome(status, error, [])
    elif isinstance(fault, F.Drop):
        outcome = Outcome(0, None, [], transport="drop")
    else:
        assert isinstance(fault, F.Delay)
        body: dict[str, Any] | None
        if done is None:
            status, body = _error(state, 503, "unavailable", "scripted: no effect, answer delayed")
        else:
            status, body = done.status, done.body
        outcome = Outcome(status, body, [], transport="delay", delay_s=float(fault.seconds))
    if done is not None:
        outcome.kill_point, outcome.kill_worker = done.kill_point, done.kill_worker
    return outcome


def _clock(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    return Outcome(*_ok(state, 200), [])


def _pick(state: State, stale_ok: set[str]) -> str | None:
    for task_id, attempt in state.issue_order:
        rec = state.tasks[task_id]
        if rec.state != "QUEUED" or rec.current["attempt"] != attempt:
            continue
        served = rec.current
        key = (served["repository"], served["target_branch"])
        if any(lease.data["state"] == "ACTIVE" for lease in branch_leases(state, *key)):
            continue
        if served["generation"] < state.highest_generation.get(key, 0) and task_id not in stale_ok:
            continue
        return task_id
    return None


def _faulty_delivery(
    state: State, request: Request, heads: Heads, log: Log, fault: F.ReplayAttempt | F.ConflictingIdentity
) -> Outcome:
    """A claim answered with an attempt CP-5 and CP-7 would never serve (SCOPE-6, SCOPE-7): a superseded
    attempt replayed, or an attempt served with a changed identity, each with a new ACTIVE lease, so that a
    worker that does not fence it can go on to a governed side effect the kit then sees."""
    rec = state.tasks[fault.task_id]
    if isinstance(fault, F.ReplayAttempt):
        number, changes, kind = fault.attempt, {}, "replayed_delivery"
    else:
        number, changes, kind = fault.attempt or rec.current["attempt"], dict(fault.changes), "conflicting_delivery"
    served = {**copy.deepcopy(rec.attempts[number - 1]), **copy.deepcopy(changes)}
    _check_task(state, served, [])
    replayed = isinstance(fault, F.ReplayAttempt)
    earlier = rec.lease_of.get(number)
    if replayed and earlier is not None:
        # The old claim answer again, its lease revived as a control plane that lost its lease state would
        # (CP-12 never does this): a worker that resumes the attempt from its journal renews it with success.
        lease = state.leases[earlier]
        lease.data.update(state="ACTIVE", expires_at_ms=state.now_ms + lease.data["ttl_ms"])
        log.add("lease", event="revived", lease=lease_view(lease))
    else:
        # A conflicting identity gets a lease of the kit's, which no real attempt of the task holds.
        lease = _grant(state, log, served, generation=served["generation"], official=replayed,
                       holder=request.worker, heads=heads)
        if replayed:
            rec.lease_of[number] = lease.data["lease_id"]
    log.add(kind, task_id=fault.task_id, attempt=number, worker=request.worker, task=copy.deepcopy(served),
            lease_id=lease.data["lease_id"], earlier_lease_id=earlier, fault=F.fault_to_mapping(fault))
    answer = {"task": served, "lease": lease_view(lease), "retry_after_ms": state.retry_after_ms}
    return Outcome(*_ok(state, 200, **answer), [])


def _claim(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    for fault in plan.claim_faults:
        if isinstance(fault, (F.ReplayAttempt, F.ConflictingIdentity)):
            return _faulty_delivery(state, request, heads, log, fault)
        if isinstance(fault, F.DuplicateDelivery):
            rec = state.tasks.get(fault.task_id)
            lease_id = None if rec is None else rec.lease_of.get(rec.current["attempt"])
            if rec is None or rec.state != "RUNNING" or lease_id is None:
                log.add("fault_missed", fault=F.fault_to_mapping(fault), why="the task has no RUNNING attempt")
                continue
            lease = state.leases[lease_id]
            log.add("duplicate_delivery", task_id=fault.task_id, attempt=rec.current["attempt"], lease_id=lease_id)
            status, body = _ok(
                state,
                200,
                task=copy.deepcopy(rec.current),
                lease=lease_view(lease),
                retry_after_ms=state.retry_after_ms,
            )
            return Outcome(status, body, [])
    stale_ok = {f.task_id for f in plan.claim_faults if isinstance(f, F.ServeStale)}
    task_id = _pick(state, stale_ok)
    if task_id is None:
        status, body = _ok(state, 200, task=None, lease=None, retry_after_ms=state.retry_after_ms)
        return Outcome(status, body, [])
    rec = state.tasks[task_id]
    served = rec.current
    _set_task_state(state, log, task_id, "RUNNING", "claim")
    generation = served["generation"]
    lease = _grant(state, log, served, generation=generation, official=True, holder=request.worker, heads=heads)
    rec.lease_of[served["attempt"]] = lease.data["lease_id"]
    answer = {"task": copy.deepcopy(served), "lease": lease_view(lease), "retry_after_ms": state.retry_after_ms}
    status, body = _ok(state, 200, **answer)
    outcome = Outcome(status, body, [])
    if fire_kill_point(state, "server_claim_granted", task_id):
        outcome.kill_point, outcome.kill_worker = "server_claim_granted", request.worker
    return outcome


def _task(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    rec = state.tasks.get(plan.params[0])
    if rec is None:
        return Outcome(*_error(state, 404, "not_found", f"no task {plan.params[0]!r}"), [])
    status, body = _ok(state, 200, task=copy.deepcopy(rec.current), state=rec.state, stored=copy.deepcopy(rec.stored))
    return Outcome(status, body, [])


def _lease_state(state: State, rec: TaskRec, attempt: Any) -> dict[str, Any]:
    lease_id = rec.lease_of.get(attempt) if _is_int(attempt) else None
    if lease_id is None:
        return {"lease_id": None, "state": None}
    return {"lease_id": lease_id, "state": state.leases[lease_id].data["state"]}


def _other_body(body: dict[str, Any]) -> dict[str, Any]:
    other = copy.deepcopy(body)
    if other.get("kind") == "commit":
        oid = str(other["commit_oid"])
        other["commit_oid"] = oid[:-1] + ("1" if oid[-1] != "1" else "2")
    elif other.get("files"):
        other["files"] = other["files"][:-1]
    else:
        other["files"] = [{"path": "kit-other", "sha256": "0" * 64}]
    return other


def _result(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    task_id = plan.params[0]
    rec = state.tasks.get(task_id)
    # 1. no such task
    if rec is None:
        return Outcome(*_error(state, 404, "not_found", f"no task {task_id!r}"), [])
    body: dict[str, Any] = plan.body
    attempt = body["attempt"]
    log.add("governed", endpoint="result", task_id=task_id, attempt=attempt, lease=_lease_state(state, rec, attempt))
    # 2. the body or header breaks CP-9
    problem = _submission_problem(rec, request, body)
    if problem is not None:
        return Outcome(*_error(state, 400, "bad_request", problem), [])
    key = request.headers["idempotency-key"][0]
    digest = body["result_hash"]
    scripted = _take(
        state, lambda f: isinstance(f, F.Conflict409) and f.task_id in (None, task_id), one=True
    )
    if scripted:
        fault = scripted[0]
        assert isinstance(fault, F.Conflict409)
        return _scripted_conflict(state, log, rec, task_id, body, fault)
    # 3. the lease
    lease_id = rec.lease_of.get(attempt)
    if lease_id is None or body["lease_id"] != lease_id or state.leases[lease_id].data["state"] != "ACTIVE":
        why = "not the lease granted to this attempt" if body["lease_id"] != lease_id else "not ACTIVE at CP time"
        return Outcome(*_error(state, 403, "lease_not_active", f"lease {body['lease_id']!r} is {why}"), [])
    # 4. a stored result under this key
    if key in state.keys:
        stored = state.tasks[state.keys[key]].stored
        if state.keys[key] == task_id and stored is not None and stored["result_hash"] == digest:
            status, answer = _ok(state, 200, stored=copy.deepcopy(stored), state=rec.state)
            outcome = Outcome(status, answer, [])
            if fire_kill_point(state, "server_result_stored", task_id):
                outcome.kill_point, outcome.kill_worker = "server_result_stored", request.worker
            return outcome
        return Outcome(*_error(state, 422, "idempotency_key_reused", "the key was used with another body"), [])
    # 5. a result stored under another key; 6. superseded attempt or not RUNNING
    reason = None
    if rec.stored is not None:
        reason = "result_exists"
    elif attempt != rec.current["attempt"]:
        reason = "attempt_superseded"
    elif rec.state != "RUNNING":
        reason = "state"
    if reason is not None:
        return Outcome(*_conflict(state, rec, reason), [])
    if fire_kill_point(state, "server_result_received", task_id):
        return Outcome(0, None, [], transport="drop", kill_point="server_result_received", kill_worker=request.worker)
    # 7. store
    _store(state, log, rec, task_id, attempt, key, body["result"], "submission")
    _set_task_state(state, log, task_id, "VERIFYING", "result_stored")
    status, answer = _ok(state, 201, stored=copy.deepcopy(rec.stored), state=rec.state)
    outcome = Outcome(status, answer, [])
    if fire_kill_point(state, "server_result_stored", task_id):
        outcome.kill_point, outcome.kill_worker = "server_result_stored", request.worker
    return outcome


def _conflict(state: State, rec: TaskRec, reason: str) -> tuple[int, dict[str, Any]]:
    return _error(
        state, 409, "conflict", f"conflict: {reason}", reason=reason, state=rec.state, stored=copy.deepcopy(rec.stored)
    )


def _store(
    state: State, log: Log, rec: TaskRec, task_id: str, attempt: int, key: str, result: Any, cause: str
) -> None:
    digest = result_hash(result)
    rec.stored = {"attempt": attempt, "idempotency_key": key, "result_hash": digest, "result": copy.deepcopy(result)}
    state.keys[key] = task_id
    log.add(
        "result_stored",
        task_id=task_id,
        attempt=attempt,
        idempotency_key=key,
        result_hash=digest,
        body=canonical_json(result).decode("utf-8"),
        cause=cause,
    )


def _scripted_conflict(
    state: State, log: Log, rec: TaskRec, task_id: str, body: dict[str, Any], fault: F.Conflict409
) -> Outcome:
    attempt = body["attempt"]
    if rec.stored is None and fault.stored is not None:
        result = _other_body(body["result"]) if fault.stored == "other_body" else body["result"]
        stored_attempt = attempt if fault.stored != "other_attempt" else (attempt - 1 if attempt > 1 else attempt + 1)
        key = f"{SCRIPTED_KEY}:{task_id}"
        _store(state, log, rec, task_id, stored_attempt, key, result, "scripted")
    elif rec.stored is not None and fault.stored != "same":
        log.add("fault_note", fault=F.fault_to_mapping(fault), note="a stored result is kept (CP-10)")
    _set_task_state(state, log, task_id, fault.state, "scripted")
    if rec.stored is not None:
        reason = "result_exists"
    elif attempt != rec.current["attempt"]:
        reason = "attempt_superseded"
    else:
        reason = "state"
    status, answer = _conflict(state, rec, reason)
    answer["message"] = f"scripted conflict: {reason}"
    return Outcome(status, answer, [])


def _submission_problem(rec: TaskRec, request: Request, body: dict[str, Any]) -> str | None:
    keys = request.headers.get("idempotency-key", ())
    if len(keys) != 1:
        return "the request needs exactly one Idempotency-Key header"
    if not KEY_RE.fullmatch(keys[0]):
        return "the Idempotency-Key is not 1 to 255 visible ASCII characters"
    problem = first_violation(SUBMISSION_SCHEMA, body)
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
        return Outcome(*_error(state, 404, "not_found", f"no task {task_id!r}"), [])
    body = plan.body
    if not (_is_int(body["attempt"]) and body["attempt"] >= 1):
        return Outcome(*_error(state, 400, "bad_request", "attempt must be an integer >= 1"), [])
    if not isinstance(body["lease_id"], str) or not body["lease_id"]:
        return Outcome(*_error(state, 400, "bad_request", "lease_id must be a non-empty string"), [])
    if body["state"] not in REPORT_STATES:
        return Outcome(*_error(state, 400, "bad_request", f"state must be one of {', '.join(REPORT_STATES)}"), [])
    if not isinstance(body["reason"], str):
        return Outcome(*_error(state, 400, "bad_request", "reason must be a string"), [])
    applied = body["attempt"] == rec.current["attempt"] and rec.state == "RUNNING"
    log.add("report", task_id=task_id, attempt=body["attempt"], lease_id=body["lease_id"], state=body["state"],
            reason=body["reason"], applied=applied)
    if applied:
        _set_task_state(state, log, task_id, body["state"], "report")
    return Outcome(*_ok(state, 200, state=rec.state), [])


def _renew(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    lease = state.leases.get(plan.params[0])
    if lease is None:
        return Outcome(*_error(state, 404, "not_found", f"no lease {plan.params[0]!r}"), [])
    if lease.data["state"] != "ACTIVE":
        why = f"lease is {lease.data['state']}"
        status, body = _error(state, 409, "lease_not_active", why, lease=lease_view(lease))
        return Outcome(status, body, [])
    lease.data["expires_at_ms"] = state.now_ms + lease.data["ttl_ms"]
    log.add("lease", event="renewed", lease=lease_view(lease))
    return Outcome(*_ok(state, 200, lease=lease_view(lease)), [])


def _release(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    lease = state.leases.get(plan.params[0])
    if lease is None:
        return Outcome(*_error(state, 404, "not_found", f"no lease {plan.params[0]!r}"), [])
    if lease.data["state"] == "ACTIVE":
        _end_lease(state, log, lease, "RELEASED", "released")
    return Outcome(*_ok(state, 200, lease=lease_view(lease)), [])


def _leases(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    query = parse_qs(request.query, keep_blank_values=True)
    repository, branch = query.get("repository", []), query.get("target_branch", [])
    if len(repository) != 1 or len(branch) != 1:
        return Outcome(*_error(state, 400, "bad_request", "give repository and target_branch, once each"), [])
    leases = [lease_view(lease) for lease in branch_leases(state, repository[0], branch[0])]
    return Outcome(*_ok(state, 200, leases=leases), [])


def _receipt(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    job_id = plan.params[0]
    owners = {
        (task_id, served["attempt"]): served
        for task_id, rec in state.tasks.items()
        for served in rec.attempts
        if served["job_id"] == job_id
    }
    if not owners:
        return Outcome(*_error(state, 404, "not_found", f"no Job {job_id!r}"), [])
    body = plan.body
    malformed = (
        not isinstance(body["task_id"], str)
        or not (_is_int(body["attempt"]) and body["attempt"] >= 1)
        or not isinstance(body["lease_id"], str)
        or not isinstance(body["commit_oid"], str)
        or not OID_RE.fullmatch(body["commit_oid"])
    )
    if malformed:
        return Outcome(*_error(state, 400, "bad_request", "the receipt body breaks CP-16"), [])
    served = owners.get((body["task_id"], body["attempt"]))
    if served is None:
        return Outcome(*_error(state, 400, "bad_request", "that task and attempt are not the Job's"), [])
    rec = state.tasks[body["task_id"]]
    log.add("governed", endpoint="receipt", task_id=body["task_id"], attempt=body["attempt"],
            lease=_lease_state(state, rec, body["attempt"]))
    lease_id = rec.lease_of.get(body["attempt"])
    if lease_id is None or body["lease_id"] != lease_id or state.leases[lease_id].data["state"] != "ACTIVE":
        return Outcome(*_error(state, 403, "lease_not_active", f"lease {body['lease_id']!r} is not active"), [])
    held = state.receipts.get(job_id)
    commit = body["commit_oid"]
    if held is not None and held["commit_oid"] != commit:
        receipt = {"job_id": job_id, "commit_oid": held["commit_oid"], "visibility": held["visibility"]}
        status, answer = _error(state, 409, "receipt_conflict", "the Job holds another commit", receipt=receipt)
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
    outcome = Outcome(*_ok(state, 200, receipt=receipt), [])
    if fire_kill_point(state, "server_receipt_recorded", body["task_id"]):
        outcome.kill_point, outcome.kill_worker = "server_receipt_recorded", request.worker
    return outcome


# ---------------------------------------------------------------- the origin's hook (CP-18)


def _updates(body: dict[str, Any]) -> list[dict[str, Any]]:
    updates = body.get("updates")
    if not isinstance(body.get("repository"), str) or not isinstance(updates, list):
        return []
    return [
        u for u in updates
        if isinstance(u, dict) and all(isinstance(u.get(k), str) for k in ("ref", "old", "new"))
    ]


def _pusher(state: State, repository: str, update: Mapping[str, Any]) -> Lease | None:
    """The attempt a push is attributed to: the ACTIVE official lease whose attempt expects *old*, else the
    latest official lease of the branch."""
    ref = str(update["ref"])
    if not ref.startswith("refs/heads/"):
        return None
    branch = ref[len("refs/heads/"):]
    official = [lease for lease in branch_leases(state, repository, branch) if lease.official]
    active = [lease for lease in official if lease.data["state"] == "ACTIVE"]
    for lease in active:
        served = state.tasks[lease.data["task_id"]].attempts[lease.data["attempt"] - 1]
        if served["expected_branch_oid"] == update["old"]:
            return lease
    if active:
        return active[-1]
    return official[-1] if official else None


def _origin_check(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    body = plan.body
    updates = _updates(body)
    if not updates or len(updates) != len(body["updates"]):
        return Outcome(*_error(state, 400, "bad_request", "give repository and updates [{ref, old, new, ...}]"), [])
    repository = body["repository"]
    verdicts = []
    for update in updates:
        reason = _refusal(state, repository, update)
        verdicts.append({"ref": update["ref"], "accepted": reason is None, "reason": reason or ""})
    if any(not v["accepted"] for v in verdicts):
        for verdict in verdicts:
            if verdict["accepted"]:
                verdict["accepted"], verdict["reason"] = False, "another update of the same push was refused"
    for update, verdict in zip(updates, verdicts, strict=True):
        lease = _pusher(state, repository, update)
        log.add(
            "push",
            repository=repository,
            ref=update["ref"],
            old=update["old"],
            new=update["new"],
            accepted=verdict["accepted"],
            reason=verdict["reason"],
            task_id=None if lease is None else lease.data["task_id"],
            attempt=None if lease is None else lease.data["attempt"],
            lease={"lease_id": None, "state": None} if lease is None else {
                "lease_id": lease.data["lease_id"], "state": lease.data["state"]},
        )
    return Outcome(*_ok(state, 200, updates=verdicts), [])


def _refusal(state: State, repository: str, update: Mapping[str, Any]) -> str | None:
    ref, old, new = str(update["ref"]), str(update["old"]), str(update["new"])
    branches = {
        served["target_branch"]
        for rec in state.tasks.values()
        for served in rec.attempts
        if served["repository"] == repository
    }
    if not ref.startswith("refs/heads/") or ref[len("refs/heads/"):] not in branches:
        return f"ref {ref} is not the target branch of a task on {repository}"
    if old == ZERO:
        return f"creating {ref} is refused"
    if new == ZERO:
        return f"deleting {ref} is refused"
    branch = ref[len("refs/heads/"):]
    holders = [
        state.tasks[lease.data["task_id"]].attempts[lease.data["attempt"] - 1]
        for lease in branch_leases(state, repository, branch)
        if lease.official and lease.data["state"] == "ACTIVE"
    ]
    if not any(served["expected_branch_oid"] == old for served in holders):
        return f"{ref} is at {old}, which is not the expected_branch_oid of an attempt with an ACTIVE lease"
    if update.get("type") != "commit" or update.get("parents") != [old]:
        return f"{new} is not a commit whose only parent is {old}"
    return None


def _origin_updated(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    body = plan.body
    updates = _updates(body)
    outcome = Outcome(*_ok(state, 200), [])
    for update in updates:
        lease = _pusher(state, body["repository"], update)
        task_id = None if lease is None else str(lease.data["task_id"])
        log.add("origin_ref_updated", repository=body["repository"], ref=update["ref"], old=update["old"],
                new=update["new"], task_id=task_id, attempt=None if lease is None else lease.data["attempt"])
        if outcome.kill_point is None and fire_kill_point(state, "origin_ref_updated", task_id):
            outcome.kill_point = "origin_ref_updated"
            outcome.kill_worker = None if lease is None else lease.holder
    return outcome


def _tool_started(state: State, request: Request, plan: Plan, heads: Heads, log: Log) -> Outcome:
    """The kit's tool runs in a workspace (p1.md WRK-5): logged, and the kill point ``tool_started``."""
    log.add("tool_started", **plan.body)  # BODY_MEMBERS made it exactly pid, grandchild, cwd and writes
    outcome = Outcome(*_ok(state, 200), [])
    if fire_kill_point(state, "tool_started", None):
        outcome.kill_point = "tool_started"
    return outcome


Handler = Callable[[State, Request, Plan, Heads, Log], Outcome]
HANDLERS: dict[str, Handler] = {
    "clock": _clock,
    "claim": _claim,
    "task": _task,
    "result": _result,
    "report": _report,
    "renew": _renew,
    "release": _release,
    "leases": _leases,
    "receipt": _receipt,
    "origin_check": _origin_check,
    "origin_updated": _origin_updated,
    "tool_started": _tool_started,
}
