"""The control plane's scripted faults (CP-21), as data a YAML scenario can name.

Each fault is a small frozen dataclass. A fault that waits for a request names the endpoint it fires on
(``on``) and which matching request fires it (``nth``, counted from when it was scripted, over requests
that pass its filters such as ``task_id``); it fires once and is consumed. Faults that change state at
once (``DelayVisibility``, ``SecondLease``, ``Fence``, ``MoveBranch`` without ``on``, ``MoveClock``
without ``on``) take effect when scripted. ``fault_from_mapping`` builds one from a mapping such as
``{"fault": "Answer", "on": "result", "status": 503, "effect": true}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The endpoints a fault can fire on: the worker's API (CP-3) and the origin's two hook calls.
ENDPOINTS = (
    "clock",
    "claim",
    "task",
    "result",
    "report",
    "renew",
    "release",
    "leases",
    "receipt",
    "origin_check",
    "origin_updated",
)
# Endpoints whose request has an effect that a 5xx, a dropped answer or a delay may apply or withhold.
EFFECT_ENDPOINTS = ("claim", "result", "report", "renew", "release", "receipt")

KILL_POINTS = {
    "server_claim_granted": "claim",
    "server_result_received": "result",
    "server_result_stored": "result",
    "server_receipt_recorded": "receipt",
    "origin_ref_updated": "origin_updated",
    "tool_started": "tool_started",  # the kit's tool announced itself (p1.md WRK-5)
}
TASK_STATES = ("QUEUED", "RUNNING", "VERIFYING", "SUCCEEDED", "FAILED", "RECONCILIATION_REQUIRED")
STORED_CHOICES = ("same", "other_body", "other_attempt")
MAX_DELAY_S = 30.0


class FaultError(ValueError):
    """A fault that cannot be built or scripted as written."""


def _endpoint(on: str) -> None:
    if on not in ENDPOINTS:
        raise FaultError(f"unknown endpoint {on!r}; known: {', '.join(ENDPOINTS)}")


def _integer(value: object, what: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FaultError(f"{what} must be an integer >= {minimum}, not {value!r}")


def _nth(nth: int) -> None:
    _integer(nth, "nth", 1)


def _claims_only(fault: DuplicateDelivery | ServeStale | ReplayAttempt | ConflictingIdentity) -> None:
    _nth(fault.nth)
    if fault.on != "claim":
        raise FaultError(f"{type(fault).__name__} fires on claims only")


# The 4xx a scripted Answer may give, with the error code CP-2 names for each; 5xx is ``unavailable``.
REJECTIONS = {400: "bad_request", 404: "not_found", 422: "idempotency_key_reused"}


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer the nth matching request with a 5xx ``unavailable``, with or without its effect, or with a
    4xx rejection of CP-2 (400, 404, 422), which never has an effect."""

    on: str
    status: int = 503
    effect: bool = False
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        _endpoint(self.on)
        _nth(self.nth)
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise FaultError(f"Answer.status must be an HTTP status, not {self.status!r}")
        if not (500 <= self.status <= 599 or self.status in REJECTIONS):
            raise FaultError(f"Answer.status must be a 5xx status or one of {sorted(REJECTIONS)}, not {self.status}")
        if self.status in REJECTIONS and self.effect:
            raise FaultError(f"Answer.status {self.status} is a rejection: it cannot have an effect")


@dataclass(frozen=True, slots=True)
class Drop:
    """Have the effect (or not) and close the connection without an answer."""

    on: str
    effect: bool = True
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        _endpoint(self.on)
        _nth(self.nth)


@dataclass(frozen=True, slots=True)
class Delay:
    """Have the effect (or not) and hold the answer *seconds* of real time (past the worker's 5 s timeout)."""

    on: str
    seconds: float = 6.0
    effect: bool = True
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        _endpoint(self.on)
        _nth(self.nth)
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)):
            raise FaultError(f"Delay.seconds must be a number, not {self.seconds!r}")
        if not 0 <= self.seconds <= MAX_DELAY_S:
            raise FaultError(f"Delay.seconds must be between 0 and {MAX_DELAY_S:.0f}, not {self.seconds}")


@dataclass(frozen=True, slots=True)
class Conflict409:
    """Answer the nth well-formed submission 409, setting the task's state and stored result to match.

    ``stored``: ``same`` (this submission's body, for its attempt, under a key of the kit's),
    ``other_body`` (another valid body of the kind), ``other_attempt`` (this body, stored for another
    attempt number), or None (no stored result). A result already stored is never replaced (CP-10): the
    answer then shows the one held.
    """

    state: str
    stored: str | None = None
    nth: int = 1
    task_id: str | None = None
    on: str = "result"

    def __post_init__(self) -> None:
        _nth(self.nth)
        if self.on != "result":
            raise FaultError("Conflict409 fires on result submissions only")
        if self.state not in TASK_STATES:
            raise FaultError(f"Conflict409.state must be one of {', '.join(TASK_STATES)}, not {self.state!r}")
        if self.stored is not None and self.stored not in STORED_CHOICES:
            raise FaultError(f"Conflict409.stored must be one of {', '.join(STORED_CHOICES)} or null")


@dataclass(frozen=True, slots=True)
class DelayVisibility:
    """The next *polls* receipt evaluations of the Job answer ``not_visible`` (CP-16)."""

    job_id: str
    polls: int = 1

    def __post_init__(self) -> None:
        _integer(self.polls, "DelayVisibility.polls", 0)


@dataclass(frozen=True, slots=True)
class KillPoint:
    """Call the observer's ``on_kill_point`` at a kit-side kill point (FPT-3) of the nth matching request.

    At ``server_result_received`` nothing is stored and the connection is closed without an answer; at
    the others the effect has happened and the answer is attempted after the callback.
    """

    name: str
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        _nth(self.nth)
        if self.name not in KILL_POINTS:
            raise FaultError(f"unknown kill point {self.name!r}; known: {', '.join(KILL_POINTS)}")

    @property
    def on(self) -> str:
        """The endpoint whose handling reaches the kill point."""
        return KILL_POINTS[self.name]


@dataclass(frozen=True, slots=True)
class DuplicateDelivery:
    """Answer the nth claim with the task's RUNNING attempt and its current lease, to whoever claims."""

    task_id: str
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)


@dataclass(frozen=True, slots=True)
class ServeStale:
    """Let the nth claim serve the task's QUEUED attempt although its generation is below the branch's.

    Counted over the claims at which the task has a QUEUED attempt, so that a claim the worker sends
    before the kit has issued the task does not use the fault up."""

    task_id: str
    nth: int = 1
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)


@dataclass(frozen=True, slots=True)
class ReplayAttempt:
    """Answer the nth claim with attempt *attempt* of the task, superseded by a later one, as served then,
    with its own lease made ACTIVE again (a new one if it never had one): a replayed, faulty delivery
    (SCOPE-7). Counted over the claims at which the task's current attempt is above *attempt*."""

    task_id: str
    attempt: int
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)
        _integer(self.attempt, "ReplayAttempt.attempt", 1)


# The identity fields a ConflictingIdentity may change: every one but task_id and attempt, which name the
# attempt served, and repository, which would need another origin.
CONFLICT_FIELDS = ("execution_digest", "job_id", "base_oid", "expected_branch_oid", "target_branch", "generation")


@dataclass(frozen=True, slots=True)
class ConflictingIdentity:
    """Answer the nth claim with an attempt of the task (default: its current one) served with *changes* to
    its identity, and a new ACTIVE lease of the kit's for it. CP-5 forbids this: it is a deliberate fault of
    the kit's, for SCOPE-6. The lease has the served generation and is granted as a claim's would be (a
    higher generation fences the branch's lower ones, CP-12); the task's own record is left as it was.
    Counted over the claims at which the task has that attempt."""

    task_id: str
    changes: dict[str, Any]
    attempt: int | None = None
    nth: int = 1
    worker: str | None = None
    on: str = "claim"

    def __post_init__(self) -> None:
        _claims_only(self)
        if not isinstance(self.changes, dict) or not self.changes:
            raise FaultError("ConflictingIdentity.changes must be a non-empty mapping of identity fields")
        unknown = sorted(set(self.changes) - set(CONFLICT_FIELDS))
        if unknown:
            raise FaultError(
                f"ConflictingIdentity.changes cannot change {', '.join(unknown)}; it may change "
                f"{', '.join(CONFLICT_FIELDS)}"
            )
        if self.attempt is not None:
            _integer(self.attempt, "ConflictingIdentity.attempt", 1)


@dataclass(frozen=True, slots=True)
class SecondLease:
    """Grant, at once, a second ACTIVE lease on the task's branch to a holder of the kit's own."""

    task_id: str


@dataclass(frozen=True, slots=True)
class Fence:
    """Grant, at once, a lease of a higher generation on the task's branch to the kit, fencing lower ones.

    ``generation`` defaults to the branch's highest granted generation plus one.
    """

    task_id: str
    generation: int | None = None

    def __post_init__(self) -> None:
        if self.generation is not None:
            _integer(self.generation, "Fence.generation", 1)


@dataclass(frozen=True, slots=True)
class MoveBranch:
    """Move a branch of an origin to *oid* (bypassing its hook): at once, or before the nth request to ``on``."""

    repository: str
    branch: str
    oid: str
    on: str | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        if self.on is not None:
            _endpoint(self.on)
        _nth(self.nth)
        if len(self.oid) != 40 or any(c not in "0123456789abcdef" for c in self.oid):
            raise FaultError(f"MoveBranch.oid must be 40 lowercase hex digits, not {self.oid!r}")


@dataclass(frozen=True, slots=True)
class MoveClock:
    """Move CP time by *delta_ms*: at once, or before the nth request to ``on`` is handled."""

    delta_ms: int
    on: str | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.delta_ms, bool) or not isinstance(self.delta_ms, int):
            raise FaultError(f"MoveClock.delta_ms must be an integer, not {self.delta_ms!r}")
        if self.on is not None:
            _endpoint(self.on)
        _nth(self.nth)


Fault = (
    Answer
    | Drop
    | Delay
    | Conflict409
    | DelayVisibility
    | KillPoint
    | DuplicateDelivery
    | ServeStale
    | ReplayAttempt
    | ConflictingIdentity
    | SecondLease
    | Fence
    | MoveBranch
    | MoveClock
)
FAULT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Answer,
        Drop,
        Delay,
        Conflict409,
        DelayVisibility,
        KillPoint,
        DuplicateDelivery,
        ServeStale,
        ReplayAttempt,
        ConflictingIdentity,
        SecondLease,
        Fence,
        MoveBranch,
        MoveClock,
    )
}
# Faults that shape the answer: at most one of them fires per request.
ANSWER_FAULTS = (Answer, Drop, Delay, Conflict409)


def waits_for_request(fault: Fault) -> bool:
    """Whether the fault fires on a request rather than when scripted."""
    if isinstance(fault, (DelayVisibility, SecondLease, Fence)):
        return False
    if isinstance(fault, (MoveBranch, MoveClock)):
        return fault.on is not None
    return True


def fault_on(fault: Fault) -> str | None:
    """The endpoint a waiting fault fires on."""
    return getattr(fault, "on", None)


def fault_to_mapping(fault: Fault) -> dict[str, Any]:
    """The mapping ``fault_from_mapping`` reads back, for the log."""
    out: dict[str, Any] = {"fault": type(fault).__name__}
    out.update({field.name: getattr(fault, field.name) for field in dataclasses.fields(fault)})
    return out


def fault_from_mapping(data: Mapping[str, Any]) -> Fault:
    """Build a fault from ``{"fault": NAME, field: value, ...}``; unknown names and fields are errors."""
    if not isinstance(data, Mapping):
        raise FaultError(f"a fault is a mapping, not {type(data).__name__}")
    name = data.get("fault")
    if not isinstance(name, str) or name not in FAULT_TYPES:
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULT_TYPES))}")
    cls = FAULT_TYPES[name]
    fields = {field.name: field for field in dataclasses.fields(cls)}
    values = {key: value for key, value in data.items() if key != "fault"}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise FaultError(f"{name} has no field {', '.join(map(repr, unknown))}; fields: {', '.join(fields)}")
    missing = sorted(
        key
        for key, field in fields.items()
        if key not in values
        and field.default is dataclasses.MISSING
        and field.default_factory is dataclasses.MISSING
    )
    if missing:
        raise FaultError(f"{name} needs {', '.join(map(repr, missing))}")
    for key, value in values.items():
        if key in ("effect",) and not isinstance(value, bool):
            raise FaultError(f"{name}.{key} must be true or false, not {value!r}")
        strings = ("task_id", "job_id", "repository", "branch", "oid", "name", "state", "worker")
        if key in strings and not isinstance(value, str) and not (value is None and fields[key].default is None):
            raise FaultError(f"{name}.{key} must be a string, not {value!r}")
    fault: Fault = cls(**values)
    return fault
