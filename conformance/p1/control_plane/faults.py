"""The control plane's scripted faults (CP-21): what a YAML scenario can name, and what each one does.

Each fault is a small frozen dataclass: its fields, their checks, and its behaviour, the hooks of
``state.Fault`` it overrides (the rules call those hooks and name no fault). A fault that waits for a
request names the endpoint it fires on (``on``) and which matching request fires it (``nth``, counted from
when it was scripted, over requests that pass its filters such as ``task_id``); it fires once and is
consumed. Faults that change state at once (``DelayVisibility``, ``SecondLease``, ``Fence``, ``MoveBranch``
without ``on``, ``MoveClock`` without ``on``) take effect when scripted. ``FAULT_TYPES`` names them all;
``fault_from_mapping`` builds one from a mapping such as
``{"fault": "Answer", "on": "result", "status": 503, "effect": true}``.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.p1.control_plane.lifecycle import grant, move_clock, set_task_state, store_result
from resumekit.conformance.p1.control_plane.state import (
    SCRIPTED_KEY,
    BranchMove,
    Fault,
    Heads,
    Log,
    Outcome,
    State,
    TaskRec,
    conflict_answer,
    error_answer,
    kit_task,
)

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


def check_endpoint(on: str) -> None:
    """Refuse an endpoint a fault cannot fire on."""
    if on not in ENDPOINTS:
        raise FaultError(f"unknown endpoint {on!r}; known: {', '.join(ENDPOINTS)}")


def check_integer(value: object, what: str, minimum: int) -> None:
    """Refuse a field *what* that is not an integer of at least *minimum* (a bool is none)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FaultError(f"{what} must be an integer >= {minimum}, not {value!r}")


def check_nth(nth: int) -> None:
    """Refuse an ``nth`` that names no request."""
    check_integer(nth, "nth", 1)


class _AnswerFault(Fault):
    """A fault that shapes how the answer of the nth request to ``on`` (of ``task_id``, if given) travels,
    with its ``effect`` applied or withheld; at most one such fault fires per request."""

    __slots__ = ()
    on: str
    effect: bool
    task_id: str | None

    def shapes_answer(self, endpoint: str, subject: str | None) -> bool:
        """The nth request to ``on``, about ``task_id`` when it names one."""
        return self.on == endpoint and self.task_id in (None, subject)

    def withholds_effect(self) -> bool:
        """Without ``effect``, the request changes nothing."""
        return not self.effect


# The 4xx a scripted Answer may give, with the error code CP-2 names for each; 5xx is ``unavailable``.
REJECTIONS = {400: "bad_request", 404: "not_found", 422: "idempotency_key_reused"}


@dataclass(frozen=True, slots=True)
class Answer(_AnswerFault):
    """Answer the nth matching request with a 5xx ``unavailable``, with or without its effect, or with a
    4xx rejection of CP-2 (400, 404, 422), which never has an effect."""

    on: str
    status: int = 503
    effect: bool = False
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_endpoint(self.on)
        check_nth(self.nth)
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise FaultError(f"Answer.status must be an HTTP status, not {self.status!r}")
        if not (500 <= self.status <= 599 or self.status in REJECTIONS):
            raise FaultError(f"Answer.status must be a 5xx status or one of {sorted(REJECTIONS)}, not {self.status}")
        if self.status in REJECTIONS and self.effect:
            raise FaultError(f"Answer.status {self.status} is a rejection: it cannot have an effect")

    def shape(self, state: State, done: Outcome | None) -> Outcome:
        """The scripted status, with CP-2's error code, in place of the answer."""
        words = "scripted: " + ("effect applied" if done is not None else "no effect")
        return Outcome(*error_answer(state, self.status, REJECTIONS.get(self.status, "unavailable"), words), [])


@dataclass(frozen=True, slots=True)
class Drop(_AnswerFault):
    """Have the effect (or not) and close the connection without an answer."""

    on: str
    effect: bool = True
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_endpoint(self.on)
        check_nth(self.nth)

    def shape(self, state: State, done: Outcome | None) -> Outcome:
        """No answer: the connection is closed."""
        return Outcome(0, None, [], transport="drop")


@dataclass(frozen=True, slots=True)
class Delay(_AnswerFault):
    """Have the effect (or not) and hold the answer *seconds* of real time (past the worker's 5 s timeout)."""

    on: str
    seconds: float = 6.0
    effect: bool = True
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_endpoint(self.on)
        check_nth(self.nth)
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)):
            raise FaultError(f"Delay.seconds must be a number, not {self.seconds!r}")
        if not 0 <= self.seconds <= MAX_DELAY_S:
            raise FaultError(f"Delay.seconds must be between 0 and {MAX_DELAY_S:.0f}, not {self.seconds}")

    def shape(self, state: State, done: Outcome | None) -> Outcome:
        """The answer (a 503 without the effect), held ``seconds`` of real time."""
        if done is None:
            status, body = error_answer(state, 503, "unavailable", "scripted: no effect, answer delayed")
            return Outcome(status, body, [], transport="delay", delay_s=float(self.seconds))
        return Outcome(done.status, done.body, [], transport="delay", delay_s=float(self.seconds))


@dataclass(frozen=True, slots=True)
class Conflict409(Fault):
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
        check_nth(self.nth)
        if self.on != "result":
            raise FaultError("Conflict409 fires on result submissions only")
        if self.state not in TASK_STATES:
            raise FaultError(f"Conflict409.state must be one of {', '.join(TASK_STATES)}, not {self.state!r}")
        if self.stored is not None and self.stored not in STORED_CHOICES:
            raise FaultError(f"Conflict409.stored must be one of {', '.join(STORED_CHOICES)} or null")

    def answers_submission(self, task_id: str) -> bool:
        """The nth well-formed submission for ``task_id`` (any task's without one)."""
        return self.task_id in (None, task_id)

    def answer_submission(self, state: State, log: Log, rec: TaskRec, task_id: str, body: dict[str, Any]) -> Outcome:
        """A 409 for the task as the fault sets it: its state, and the stored result ``stored`` says."""
        # self.state is the task's state to set; *state* is the control plane's.
        attempt = body["attempt"]
        if rec.stored is None and self.stored is not None:
            result = _other_body(body["result"]) if self.stored == "other_body" else body["result"]
            other_attempt = attempt - 1 if attempt > 1 else attempt + 1
            stored_attempt = other_attempt if self.stored == "other_attempt" else attempt
            key = f"{SCRIPTED_KEY}:{task_id}"
            store_result(state, log, rec, task_id, stored_attempt, key, result, "scripted")
        elif rec.stored is not None and self.stored != "same":
            log.add("fault_note", fault=fault_to_mapping(self), note="a stored result is kept (CP-10)")
        set_task_state(state, log, task_id, self.state, "scripted")
        if rec.stored is not None:
            reason = "result_exists"
        elif attempt != rec.current["attempt"]:
            reason = "attempt_superseded"
        else:
            reason = "state"
        status, answer = conflict_answer(state, rec, reason)
        answer["message"] = f"scripted conflict: {reason}"
        return Outcome(status, answer, [])


def _other_body(body: dict[str, Any]) -> dict[str, Any]:
    """A valid result of the same kind that is not *body* (Conflict409's ``other_body``)."""
    other = copy.deepcopy(body)
    if other.get("kind") == "commit":
        oid = str(other["commit_oid"])
        other["commit_oid"] = oid[:-1] + ("1" if oid[-1] != "1" else "2")
    elif other.get("files"):
        other["files"] = other["files"][:-1]
    else:
        other["files"] = [{"path": "kit-other", "sha256": "0" * 64}]
    return other


@dataclass(frozen=True, slots=True)
class DelayVisibility(Fault):
    """The next *polls* receipt evaluations of the Job answer ``not_visible`` (CP-16)."""

    job_id: str
    polls: int = 1

    def __post_init__(self) -> None:
        check_integer(self.polls, "DelayVisibility.polls", 0)

    def waits_for_request(self) -> bool:
        """It acts when scripted."""
        return False

    def act(self, state: State, log: Log, heads: Heads) -> None:
        """The Job's next ``polls`` receipt evaluations answer ``not_visible``."""
        state.visibility_delay[self.job_id] = self.polls


@dataclass(frozen=True, slots=True)
class KillPoint(Fault):
    """Call the observer's ``on_kill_point`` at a kit-side kill point (FPT-3) of the nth matching request.

    At ``server_result_received`` nothing is stored and the connection is closed without an answer; at
    the others the effect has happened and the answer is attempted after the callback.
    """

    name: str
    nth: int = 1
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_nth(self.nth)
        if self.name not in KILL_POINTS:
            raise FaultError(f"unknown kill point {self.name!r}; known: {', '.join(KILL_POINTS)}")

    @property
    def on(self) -> str:
        """The endpoint whose handling reaches the kill point."""
        return KILL_POINTS[self.name]

    def fires_at(self, point: str, subject: str | None) -> bool:
        """The nth time its point is reached, for ``task_id`` when it names one."""
        return self.name == point and self.task_id in (None, subject)


class _KitLease(Fault):
    """A fault that grants, when it is scripted, a lease of the kit's own on the task's branch (no attempt
    holds it), at the generation ``_generation`` gives."""

    __slots__ = ()
    task_id: str

    def waits_for_request(self) -> bool:
        """It acts when scripted."""
        return False

    def reads_heads(self) -> bool:
        """The lease it grants shows its branch's head."""
        return True

    def act(self, state: State, log: Log, heads: Heads) -> None:
        """Grant the kit its lease on the branch of the task's current attempt."""
        served = kit_task(state, self.task_id).current
        generation = self._generation(state, served)
        grant(state, log, served, generation=generation, official=False, holder=None, heads=heads)

    def _generation(self, state: State, served: dict[str, Any]) -> int:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class SecondLease(_KitLease):
    """Grant, at once, a second ACTIVE lease on the task's branch to a holder of the kit's own."""

    task_id: str

    def _generation(self, state: State, served: dict[str, Any]) -> int:
        generation: int = served["generation"]
        return generation


@dataclass(frozen=True, slots=True)
class Fence(_KitLease):
    """Grant, at once, a lease of a higher generation on the task's branch to the kit, fencing lower ones.

    ``generation`` defaults to the branch's highest granted generation plus one.
    """

    task_id: str
    generation: int | None = None

    def __post_init__(self) -> None:
        if self.generation is not None:
            check_integer(self.generation, "Fence.generation", 1)

    def _generation(self, state: State, served: dict[str, Any]) -> int:
        key = (served["repository"], served["target_branch"])
        return self.generation or state.highest_generation.get(key, served["generation"]) + 1


class _NowOrBeforeRequest(Fault):
    """A fault that acts when it is scripted, or, when it names an endpoint ``on``, before the nth request
    to it is handled (before its leases expire)."""

    __slots__ = ()
    on: str | None

    def waits_for_request(self) -> bool:
        """It waits when it names the endpoint it fires on."""
        return self.on is not None

    def fires_before(self, endpoint: str) -> bool:
        """The nth request to ``on``."""
        return self.on == endpoint


@dataclass(frozen=True, slots=True)
class MoveBranch(_NowOrBeforeRequest):
    """Move a branch of an origin to *oid* (bypassing its hook): at once, or before the nth request to ``on``."""

    repository: str
    branch: str
    oid: str
    on: str | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        if self.on is not None:
            check_endpoint(self.on)
        check_nth(self.nth)
        if len(self.oid) != 40 or any(c not in "0123456789abcdef" for c in self.oid):
            raise FaultError(f"MoveBranch.oid must be 40 lowercase hex digits, not {self.oid!r}")

    def branch_move(self) -> BranchMove:
        """Its branch, to ``oid``."""
        return BranchMove(self.repository, self.branch, self.oid)


@dataclass(frozen=True, slots=True)
class MoveClock(_NowOrBeforeRequest):
    """Move CP time by *delta_ms*: at once, or before the nth request to ``on`` is handled."""

    delta_ms: int
    on: str | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.delta_ms, bool) or not isinstance(self.delta_ms, int):
            raise FaultError(f"MoveClock.delta_ms must be an integer, not {self.delta_ms!r}")
        if self.on is not None:
            check_endpoint(self.on)
        check_nth(self.nth)

    def act(self, state: State, log: Log, heads: Heads) -> None:
        """Move CP time by ``delta_ms`` (leases due expire)."""
        move_clock(state, log, self.delta_ms)


def fault_to_mapping(fault: Fault) -> dict[str, Any]:
    """The mapping ``fault_from_mapping`` reads back, for the log."""
    out: dict[str, Any] = {"fault": type(fault).__name__}
    out.update({field.name: getattr(fault, field.name) for field in dataclasses.fields(fault)})
    return out
