"""The control plane's state (docs/spec/p1-control-plane.md), pure: the values every rule reads and writes.

The constants of the API (identity fields, routes, body members), the state's records, the request, plan
and outcome the shell and the rules pass each other, the log the rules write, the shapes of an answer, the
views the kit reads, and the scripted faults as the rules see them: ``Fault``, the hooks through which a
fault acts, and the queue of those waiting for their request. Nothing here reads a file, a clock or a
socket: the one outside rule, schema validation, is the state's ``validate``, which the shell
(``server.py``) hands in. How the records change over time (attempts, leases, CP time) is ``lifecycle.py``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field
from typing import Any, ClassVar

# The schemas' "$id" base, as ``resumekit.conformance.schemas.BASE`` spells it: importing that module would
# bring the reading of schema files with it (tests/test_purity.py checks that the two agree).
_SCHEMA_BASE = "https://resumekit.dev/schemas/"
TASK_SCHEMA = _SCHEMA_BASE + "p1/task.json"
SUBMISSION_SCHEMA = _SCHEMA_BASE + "p1/result-submission.json"
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
# The kit's own paths (CP-22), as they route once the control plane's secret, the segment after ``_kit``, is
# checked and dropped: ``_kit/<secret>/origin/check`` routes as ``_kit/origin/check``.
KIT = "_kit"
SECRET_SHOWN = "<secret>"  # what the log and the answers show in place of the secret
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
    """One lease as the control plane holds it: its wire form and who holds it."""

    data: dict[str, Any]
    official: bool  # granted by a claim to an attempt; False for the kit's own (SecondLease, Fence)
    holder: str | None  # the worker path the claim came through


@dataclass
class TaskRec:
    """One task: every attempt as served, its state, its stored result and each attempt's lease."""

    attempts: list[dict[str, Any]]  # the task as served, per attempt (index attempt - 1)
    state: str
    stored: dict[str, Any] | None = None
    lease_of: dict[int, str] = field(default_factory=dict)

    @property
    def current(self) -> dict[str, Any]:
        """The latest attempt, as served."""
        return self.attempts[-1]


# The first way *instance* breaks the schema whose "$id" is the first argument, or None; its str() is the
# message (``schemas.first_violation``, which reads the schema files, is what the shell hands in).
Validate = Callable[[str, Any], object | None]


@dataclass
class State:
    """Everything the control plane knows: CP time, tasks, leases, keys, receipts and the scripted faults."""

    now_ms: int
    ttl_ms: int
    retry_after_ms: int
    validate: Validate = field(repr=False, compare=False)
    # The secret every kit path carries (CP-22), which the worker is never given; none: no kit path is served.
    kit_secret: str = field(default="", repr=False, compare=False)
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
    """One HTTP request as the shell read it."""

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


@dataclass(frozen=True)
class BranchMove:
    """A branch of an origin the shell moves to *oid*, bypassing its hook, when a scripted fault says so."""

    repository: str
    branch: str
    oid: str


@dataclass
class Plan:
    """What ``prepare`` found a request needs before ``handle``: its route, body, moments and faults."""

    number: int
    endpoint: str | None
    params: tuple[str, ...]
    moments: list[Moment]
    move_branches: list[BranchMove]
    needs_heads: bool
    answer_fault: Fault | None
    claim_faults: list[Fault]
    body: Any
    body_error: str | None
    entries: list[dict[str, Any]]


@dataclass
class Outcome:
    """How a request is answered (or not), with the log entries that must be durable first."""

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
        """Add one entry of *kind*, stamped with CP time and the request's number."""
        entry = {"kind": kind, "now_ms": self.state.now_ms, "request": self.request}
        entry.update(fields)
        self.entries.append(entry)


# An endpoint's rules: the request, its plan and the heads the shell read, applied to the state.
Handler = Callable[[State, Request, Plan, Heads, Log], Outcome]


# ---------------------------------------------------------------- answers


def ok_answer(state: State, status: int, /, **members: Any) -> tuple[int, dict[str, Any]]:
    """A success's status and body: its members and the CP time (CP-4)."""
    return status, {**members, "now_ms": state.now_ms}


def error_answer(
    state: State, status: int, error: str, message: str, /, **members: Any
) -> tuple[int, dict[str, Any]]:
    """An error's status and body (CP-2): its code, its message, its members and the CP time."""
    return status, {"error": error, "message": message, **members, "now_ms": state.now_ms}


def conflict_answer(state: State, rec: TaskRec, reason: str) -> tuple[int, dict[str, Any]]:
    """A submission's 409 (CP-9): why, with the task's state and its stored result."""
    return error_answer(
        state, 409, "conflict", f"conflict: {reason}", reason=reason, state=rec.state, stored=copy.deepcopy(rec.stored)
    )


# ---------------------------------------------------------------- views


def lease_view(lease: Lease) -> dict[str, Any]:
    """The lease as the API shows it (a copy)."""
    return copy.deepcopy(lease.data)


def task_view(state: State, task_id: str) -> dict[str, Any]:
    """The task's current attempt, state, stored result, every attempt and their leases (copies)."""
    rec = state.tasks[task_id]
    return {
        "task": copy.deepcopy(rec.current),
        "state": rec.state,
        "stored": copy.deepcopy(rec.stored),
        "attempts": copy.deepcopy(rec.attempts),
        "leases": {str(attempt): lease_id for attempt, lease_id in rec.lease_of.items()},
    }


def branch_leases(state: State, repository: str, branch: str) -> list[Lease]:
    """Every lease granted on the branch, in order of grant."""
    return [
        lease
        for lease in state.leases.values()
        if lease.data["repository"] == repository and lease.data["target_branch"] == branch
    ]


def kit_task(state: State, task_id: str) -> TaskRec:
    """The task a kit operation names (``KitError`` when there is none)."""
    if task_id not in state.tasks:
        raise KitError(f"no task {task_id!r}")
    return state.tasks[task_id]


# ---------------------------------------------------------------- the scripted faults


class Fault:
    """A scripted fault (CP-21), as the rules see it: the hooks through which it acts, each of which takes
    no part unless the fault overrides it.

    The faults themselves are in ``faults.py``, each a frozen dataclass that overrides the hooks it takes
    part in: the rules call these hooks and name no fault. A fault that waits for a request is queued when
    it is scripted; each request is counted against it at the hook of the point the request reaches, and
    the ``nth`` counted fires it (once: it is then dropped). One that does not wait acts at once.
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every fault is a dataclass: its fields are its script
    nth: int = 1  # which counted request fires it

    # -- when it is scripted

    def waits_for_request(self) -> bool:
        """Whether it waits for a request rather than acting when it is scripted."""
        return True

    def reads_heads(self) -> bool:
        """Whether acting when it is scripted needs the origins' heads (a lease's view carries its branch's)."""
        return False

    def act(self, state: State, log: Log, heads: Heads) -> None:
        """Change the state, when it is scripted (if it does not wait) or when it fires ``fires_before`` a
        request; *heads* are empty unless ``reads_heads`` asked for them."""

    def branch_move(self) -> BranchMove | None:
        """The branch the shell moves when this fault acts (the core reads and writes no origin)."""
        return None

    # -- when a request arrives, before it is handled

    def fires_before(self, endpoint: str) -> bool:
        """Whether a request to *endpoint* counts for it, to ``act`` before the request's leases expire."""
        return False

    def shapes_answer(self, endpoint: str, subject: str | None) -> bool:
        """Whether a request to *endpoint*, about task *subject*, counts for it, to ``shape`` its answer (at
        most one such fault fires per request)."""
        return False

    def applies_to_claim(self, state: State, worker: str | None) -> bool:
        """Whether a claim from *worker* counts for it, as the state stands (a fault that needs its task in
        some state waits for it)."""
        return False

    # -- while the request is handled

    def withholds_effect(self) -> bool:
        """Whether the answer it shapes comes with no effect: the request changes nothing."""
        return False

    def shape(self, state: State, done: Outcome | None) -> Outcome:
        """How the answer travels: *done* is the endpoint's outcome, or None when the effect is withheld."""
        raise NotImplementedError(f"{type(self).__name__} shapes no answer")

    def may_grant(self) -> bool:
        """Whether a claim it fired on may grant a lease (whose view needs the branch's head) whatever is
        queued."""
        return False

    def stale_task(self) -> str | None:
        """The task a claim it fired on may serve although its generation is below its branch's."""
        return None

    def answer_claim(self, state: State, request: Request, heads: Heads, log: Log) -> Outcome | None:
        """The answer to a claim it fired on, or None to let the claim's own rules answer."""
        return None

    def answers_submission(self, task_id: str) -> bool:
        """Whether a well-formed result submission for *task_id* counts for it, to ``answer_submission``."""
        return False

    def answer_submission(self, state: State, log: Log, rec: TaskRec, task_id: str, body: dict[str, Any]) -> Outcome:
        """The answer to the submission it fired on (in place of CP-9's rules from the lease on)."""
        raise NotImplementedError(f"{type(self).__name__} answers no submission")

    def fires_at(self, point: str, subject: str | None) -> bool:
        """Whether reaching the kit-side kill *point*, for task *subject*, counts for it (FPT-3)."""
        return False


@dataclass
class Pending:
    """A scripted fault waiting for its request, with how many matching requests it has seen."""

    fault: Fault
    seen: int = 0


def take(state: State, counts: Callable[[Fault], bool], *, one: bool = False) -> list[Fault]:
    """Count the request against every pending fault *counts* accepts; return (and drop) those that fire."""
    fired: list[Fault] = []
    for pending in list(state.faults):
        if not counts(pending.fault):
            continue
        if one and fired:
            break
        pending.seen += 1
        if pending.seen >= pending.fault.nth:
            fired.append(pending.fault)
            state.faults.remove(pending)
    return fired


def fire_kill_point(state: State, name: str, subject: str | None) -> bool:
    """Whether a scripted kill point fires at this point (counted only where the point is reached)."""
    return bool(take(state, lambda fault: fault.fires_at(name, subject), one=True))


def is_int(value: Any) -> bool:
    """Whether *value* is a JSON integer (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)
