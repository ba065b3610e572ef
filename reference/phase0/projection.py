# The Phase 0 resume decision, as a pure function of the committed prefix.
#
# Everything that decides what a resume may do lives here; this module knows nothing of files,
# processes or the clock. It reads a sequence of RuntimeEvents (the committed prefix a store
# reopened, docs/spec/phase0.md section 1) and answers with a ResumePlan (section 3). It never
# changes its input (PURE-1), and every list or object it returns is a fresh copy, unless the
# caller asks it to share the event objects (`share_events`, for a caller that serialises at once).
#
# The rules, in the order the functions below apply them:
#
#   EVT-3    an event is terminal by a terminal `status` or by `actions.endInvocation: true`.
#   EVT-4    a partial event is never a fact: it creates, settles and pairs nothing, yields no
#            diagnostic and is never replayed, but it counts toward the high-water and stays in
#            `runtimeEvents`.
#   OP-1     the first non-partial `function_call` of a tool-call id creates its operation;
#            later calls with that id change nothing. Operations keep the order of their calls.
#   OP-2     a response settles only an operation that already exists at its position.
#   OP-3     settling happens at most once; `isError: true` gives `failed`, anything else
#            `succeeded`.
#   OP-4     settling does not compare names (PLAN-4 reports the mismatch, PLAN-9 drops the pair).
#   OP-5     an unsettled operation stays `indeterminate`.
#   PLAN-1   the high-water is the prefix length, partial events included.
#   PLAN-2..4, OFF-1    the core diagnostics; PLAN-5 and STRICT-7 map codes to rejection reasons.
#   PLAN-6   `requiresVerification` (and the directive) exactly when an operation is indeterminate.
#   PLAN-7   `safe_replay` exactly when nothing rejects and nothing needs verification.
#   PLAN-8   `runtimeEvents` is the prefix; PLAN-9 the replay keeps only paired tool facts.
#   STRICT-1..6  the strict profile's fail-closed checks, over non-partial events only. They add
#            diagnostics and `ledger_integrity_violation`, never operations or replay changes.
#
# Diagnostics come out in one deterministic order: the offset diagnostic, then one pending
# diagnostic per operation (operation order), then the unmatched and name-mismatch diagnostics
# per response (event order), then the strict diagnostics (event order; clause order within an
# event). Rejection reasons are deduplicated in first-seen order of their diagnostics.
#
# Input is assumed to satisfy schemas/phase0/runtime-event.json (a store rejects every other row,
# STORE-5). The projection reads fields defensively and does not validate the whole schema, but a
# non-partial tool fact whose ids or name it cannot read raises ValueError rather than be guessed at.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

__all__ = [
    "CORE_DIAGNOSTIC_CODES",
    "INDETERMINATE_TOOL_RESULT_DIRECTIVE",
    "PROFILES",
    "REJECTION_REASON_BY_CODE",
    "STRICT_DIAGNOSTIC_CODES",
    "TERMINAL_STATUSES",
    "build_resume_plan",
    "is_partial_event",
    "is_terminal_event",
    "project_tool_operations",
]

# --------------------------------------------------------------------------------------------
# The rules as data
# --------------------------------------------------------------------------------------------

Profile = Literal["core", "strict"]

PROFILES: Final[frozenset[str]] = frozenset({"core", "strict"})

# EVT-3: `streaming` is the one status that is not terminal.
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "aborted", "cancelled"})

FUNCTION_CALL: Final = "function_call"
FUNCTION_RESPONSE: Final = "function_response"
# EVT-2: only these content kinds are tool facts; `text`, `thinking` and `error` never are.
TOOL_FACT_KINDS: Final[frozenset[str]] = frozenset({FUNCTION_CALL, FUNCTION_RESPONSE})

# ToolOperation statuses (section 2).
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
INDETERMINATE: Final = "indeterminate"

# Dispositions (PLAN-7).
SAFE_REPLAY: Final = "safe_replay"
BLOCKED: Final = "blocked"

# Diagnostic codes. Core: OFF-1 and PLAN-2..4. Strict: STRICT-1..6.
RUNTIME_OFFSET_MISMATCH: Final = "runtime_offset_mismatch"
PENDING_TOOL_RESULT: Final = "pending_tool_result"
UNMATCHED_TOOL_RESULT: Final = "unmatched_tool_result"
TOOL_NAME_MISMATCH: Final = "tool_name_mismatch"
DUPLICATE_EVENT_ID: Final = "duplicate_event_id"
DUPLICATE_TOOL_CALL: Final = "duplicate_tool_call"
DUPLICATE_TOOL_RESULT: Final = "duplicate_tool_result"
TOOL_RESULT_BEFORE_CALL: Final = "tool_result_before_call"
RUN_IDENTITY_CONFLICT: Final = "run_identity_conflict"
TOOL_FACT_AFTER_TERMINAL: Final = "tool_fact_after_terminal"

CORE_DIAGNOSTIC_CODES: Final[tuple[str, ...]] = (
    RUNTIME_OFFSET_MISMATCH,
    PENDING_TOOL_RESULT,
    UNMATCHED_TOOL_RESULT,
    TOOL_NAME_MISMATCH,
)
STRICT_DIAGNOSTIC_CODES: Final[tuple[str, ...]] = (
    DUPLICATE_EVENT_ID,
    DUPLICATE_TOOL_CALL,
    DUPLICATE_TOOL_RESULT,
    TOOL_RESULT_BEFORE_CALL,
    RUN_IDENTITY_CONFLICT,
    TOOL_FACT_AFTER_TERMINAL,
)

# PLAN-5 and STRICT-7: which rejection reason each diagnostic code adds.
REJECTION_REASON_BY_CODE: Final[Mapping[str, str]] = {
    RUNTIME_OFFSET_MISMATCH: "runtime_offset_mismatch",
    PENDING_TOOL_RESULT: "dangling_tool_state",
    UNMATCHED_TOOL_RESULT: "dangling_tool_state",
    TOOL_NAME_MISMATCH: "dangling_tool_state",
    **dict.fromkeys(STRICT_DIAGNOSTIC_CODES, "ledger_integrity_violation"),
}

# PLAN-6: the wording is free; this is the upstream runtime's text.
INDETERMINATE_TOOL_RESULT_DIRECTIVE: Final = (
    "Tool execution was interrupted before a matching committed tool result was found. "
    "The side effects may or may not have occurred. "
    "Do not retry the tool call immediately. "
    "Use read-only inspection tools to verify the current state before deciding the next step."
)

# STRICT-5: the fields that make up a run's identity.
RUN_IDENTITY_FIELDS: Final[tuple[str, ...]] = ("sessionId", "runId", "invocationId", "turnId")


# --------------------------------------------------------------------------------------------
# Reading events
# --------------------------------------------------------------------------------------------


def is_terminal_event(event: Mapping[str, Any]) -> bool:
    """EVT-3: a terminal `status`, or `actions.endInvocation` exactly `true`; either is enough."""
    if event.get("status") in TERMINAL_STATUSES:
        return True
    actions = event.get("actions")
    return isinstance(actions, Mapping) and actions.get("endInvocation") is True


def is_partial_event(event: Mapping[str, Any]) -> bool:
    """EVT-4: `partial` exactly `true`. A partial event is a streaming snapshot, never a fact."""
    return event.get("partial") is True


class _ToolFact(NamedTuple):
    """One non-partial `function_call` or `function_response`, as the projection reads it."""

    position: int  # 0-based index in the committed prefix
    event_id: str
    kind: str  # FUNCTION_CALL or FUNCTION_RESPONSE
    call_id: str  # the tool-call id: `content.id`
    name: str
    args: Any  # calls only; the input's own object, copied before it leaves this module
    is_error: bool  # responses only: `content.isError` exactly `true`


def _event_id(position: int, event: Mapping[str, Any]) -> str:
    event_id = event.get("id")
    if not isinstance(event_id, str):
        raise ValueError(f"event at position {position} has no string id (EVT-1): {event_id!r}")
    return event_id


def _tool_fact(position: int, event: Mapping[str, Any]) -> _ToolFact | None:
    """The tool fact a non-partial event carries, or None for every other event (EVT-2)."""
    content = event.get("content")
    if not isinstance(content, Mapping) or content.get("kind") not in TOOL_FACT_KINDS:
        return None
    kind = str(content["kind"])
    call_id, name = content.get("id"), content.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise ValueError(
            f"{kind} at position {position} has an unreadable tool-call id {call_id!r} or name {name!r} (EVT-2)"
        )
    return _ToolFact(
        position=position,
        event_id=_event_id(position, event),
        kind=kind,
        call_id=call_id,
        name=name,
        args=content.get("args"),
        is_error=content.get("isError") is True,
    )


def _tool_facts(events: Sequence[Mapping[str, Any]]) -> list[_ToolFact]:
    """Every tool fact of the prefix, in order; partial events are skipped (EVT-4)."""
    facts: list[_ToolFact] = []
    for position, event in enumerate(events):
        if is_partial_event(event):
            continue
        fact = _tool_fact(position, event)
        if fact is not None:
            facts.append(fact)
    return facts


# --------------------------------------------------------------------------------------------
# Operations (OP-1..OP-5)
# --------------------------------------------------------------------------------------------


def _project(facts: Sequence[_ToolFact]) -> dict[str, dict[str, Any]]:
    operations: dict[str, dict[str, Any]] = {}  # tool-call id -> operation, in call order
    for fact in facts:
        if fact.kind == FUNCTION_CALL:
            if fact.call_id not in operations:  # OP-1: the first call wins
                operations[fact.call_id] = {
                    "toolCallId": fact.call_id,
                    "toolName": fact.name,
                    "args": _copied(fact.args),
                    "status": INDETERMINATE,  # OP-5 until a response settles it
                    "callRuntimeEventId": fact.event_id,
                }
            continue
        operation = operations.get(fact.call_id)
        if operation is None or "responseRuntimeEventId" in operation:
            continue  # OP-2: no call yet; OP-3: already settled
        # OP-3 and OP-4: settle, whatever the response's name.
        operation["responseRuntimeEventId"] = fact.event_id
        operation["responseIsError"] = fact.is_error
        operation["status"] = FAILED if fact.is_error else SUCCEEDED
    return operations


def project_tool_operations(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Project the committed prefix onto its ToolOperations (OP-1 to OP-5), in call order."""
    return list(_project(_tool_facts(events)).values())


# --------------------------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------------------------


def _diagnostic(
    code: str,
    message: str,
    *,
    event_id: str | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    diagnostic: dict[str, Any] = {"code": code, "message": message}
    if event_id is not None:
        diagnostic["eventId"] = event_id
    if tool_call_id is not None:
        diagnostic["toolCallId"] = tool_call_id
    if tool_name is not None:
        diagnostic["toolName"] = tool_name
    if detail is not None:
        diagnostic["detail"] = detail
    return diagnostic


def _offset_diagnostics(expected: int | None, actual: int) -> list[dict[str, Any]]:
    """OFF-1: an expected high-water that differs from the prefix length, above or below."""
    if expected is None or expected == actual:
        return []
    return [
        _diagnostic(
            RUNTIME_OFFSET_MISMATCH,
            f"expected a RuntimeEvent high-water of {expected!r}, but the committed prefix holds {actual!r} events",
            detail={"expectedRuntimeEventHighWater": expected, "actualRuntimeEventHighWater": actual},
        )
    ]


def _pending_diagnostics(operations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """PLAN-2: one per indeterminate operation, in operation order."""
    return [
        _diagnostic(
            PENDING_TOOL_RESULT,
            f"tool call {op['toolCallId']!r} ({op['toolName']!r}, event {op['callRuntimeEventId']!r}) "
            "has no committed result; its side effects may or may not have happened",
            event_id=op["callRuntimeEventId"],
            tool_call_id=op["toolCallId"],
            tool_name=op["toolName"],
        )
        for op in operations
        if op["status"] == INDETERMINATE
    ]


def _response_diagnostics(
    facts: Sequence[_ToolFact], operations: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """PLAN-3 and PLAN-4, per response in event order, against the operations of the whole prefix."""
    diagnostics: list[dict[str, Any]] = []
    for fact in facts:
        if fact.kind != FUNCTION_RESPONSE:
            continue
        operation = operations.get(fact.call_id)
        if operation is None:
            diagnostics.append(
                _diagnostic(
                    UNMATCHED_TOOL_RESULT,
                    f"tool result {fact.call_id!r} ({fact.name!r}, event {fact.event_id!r}) "
                    "answers no tool call in the committed prefix",
                    event_id=fact.event_id,
                    tool_call_id=fact.call_id,
                    tool_name=fact.name,
                )
            )
        elif operation["toolName"] != fact.name:
            diagnostics.append(
                _diagnostic(
                    TOOL_NAME_MISMATCH,
                    f"tool result {fact.call_id!r} (event {fact.event_id!r}) names {fact.name!r}, "
                    f"but its call (event {operation['callRuntimeEventId']!r}) named "
                    f"{operation['toolName']!r}",
                    event_id=fact.event_id,
                    tool_call_id=fact.call_id,
                    tool_name=fact.name,
                    detail={"callToolName": operation["toolName"], "responseToolName": fact.name},
                )
            )
    return diagnostics


def _run_identity(event: Mapping[str, Any]) -> dict[str, Any]:
    return {field: event.get(field) for field in RUN_IDENTITY_FIELDS}


def _strict_diagnostics(events: Sequence[Mapping[str, Any]], facts: Sequence[_ToolFact]) -> list[dict[str, Any]]:
    """STRICT-1 to STRICT-6, over non-partial events in event order, clause order within an event."""
    facts_by_position = {fact.position: fact for fact in facts}
    first_call: dict[str, _ToolFact] = {}
    for call_fact in facts:
        if call_fact.kind == FUNCTION_CALL:
            first_call.setdefault(call_fact.call_id, call_fact)

    diagnostics: list[dict[str, Any]] = []
    first_position_by_event_id: dict[str, int] = {}
    first_response: dict[str, _ToolFact] = {}
    run_identity: dict[str, Any] | None = None
    terminal_event_id: str | None = None

    for position, event in enumerate(events):
        if is_partial_event(event):
            continue
        event_id = _event_id(position, event)
        fact = facts_by_position.get(position)

        # STRICT-1: an event id used twice.
        if event_id in first_position_by_event_id:
            first_position = first_position_by_event_id[event_id]
            diagnostics.append(
                _diagnostic(
                    DUPLICATE_EVENT_ID,
                    f"event id {event_id!r} at position {position} was already used at position {first_position}",
                    event_id=event_id,
                    detail={"firstPosition": first_position, "position": position},
                )
            )
        else:
            first_position_by_event_id[event_id] = position

        if fact is not None and fact.kind == FUNCTION_CALL:
            # STRICT-2: a tool-call id called twice.
            first = first_call[fact.call_id]
            if first.position != position:
                diagnostics.append(
                    _diagnostic(
                        DUPLICATE_TOOL_CALL,
                        f"tool call {fact.call_id!r} ({fact.name!r}) is called again by event "
                        f"{event_id!r}; its first call is event {first.event_id!r}",
                        event_id=event_id,
                        tool_call_id=fact.call_id,
                        tool_name=fact.name,
                    )
                )
        elif fact is not None:
            # STRICT-3: a tool-call id answered twice.
            earlier = first_response.get(fact.call_id)
            if earlier is not None:
                diagnostics.append(
                    _diagnostic(
                        DUPLICATE_TOOL_RESULT,
                        f"tool call {fact.call_id!r} ({fact.name!r}) is answered again by event "
                        f"{event_id!r}; its first result is event {earlier.event_id!r}",
                        event_id=event_id,
                        tool_call_id=fact.call_id,
                        tool_name=fact.name,
                    )
                )
            else:
                first_response[fact.call_id] = fact
            # STRICT-4: a response that comes before the first call it answers.
            call = first_call.get(fact.call_id)
            if call is not None and call.position > position:
                diagnostics.append(
                    _diagnostic(
                        TOOL_RESULT_BEFORE_CALL,
                        f"tool result {fact.call_id!r} ({fact.name!r}, event {event_id!r}) comes "
                        f"before its call (event {call.event_id!r})",
                        event_id=event_id,
                        tool_call_id=fact.call_id,
                        tool_name=fact.name,
                    )
                )

        # STRICT-5: every event belongs to the run of the first non-partial event.
        identity = _run_identity(event)
        if run_identity is None:
            run_identity = identity
        elif identity != run_identity:
            diagnostics.append(
                _diagnostic(
                    RUN_IDENTITY_CONFLICT,
                    f"event {event_id!r} belongs to run identity {identity!r}, not to "
                    f"{run_identity!r} of the first event",
                    event_id=event_id,
                    detail={"expected": _copied(run_identity), "actual": _copied(identity)},
                )
            )

        # STRICT-6: no tool fact after the first terminal event.
        if fact is not None and terminal_event_id is not None:
            diagnostics.append(
                _diagnostic(
                    TOOL_FACT_AFTER_TERMINAL,
                    f"{fact.kind} {fact.call_id!r} ({fact.name!r}, event {event_id!r}) comes after "
                    f"terminal event {terminal_event_id!r}",
                    event_id=event_id,
                    tool_call_id=fact.call_id,
                    tool_name=fact.name,
                    detail={"terminalEventId": terminal_event_id},
                )
            )
        if terminal_event_id is None and is_terminal_event(event):
            terminal_event_id = event_id

    return diagnostics


def _rejection_reasons(diagnostics: Sequence[Mapping[str, Any]]) -> list[str]:
    """PLAN-5 and STRICT-7: each reason once, in first-seen order."""
    reasons: list[str] = []
    for diagnostic in diagnostics:
        reason = REJECTION_REASON_BY_CODE[diagnostic["code"]]
        if reason not in reasons:
            reasons.append(reason)
    return reasons


# --------------------------------------------------------------------------------------------
# Replay (PLAN-9)
# --------------------------------------------------------------------------------------------


def _paired_call_ids(facts: Sequence[_ToolFact]) -> set[str]:
    """A tool-call id is paired when a response follows a call of that id with the same name,
    the latest call seen so far being the one compared."""
    call_names: dict[str, str] = {}
    paired: set[str] = set()
    for fact in facts:
        if fact.kind == FUNCTION_CALL:
            call_names[fact.call_id] = fact.name
        elif call_names.get(fact.call_id) == fact.name:
            paired.add(fact.call_id)
    return paired


def _replay_events(
    events: Sequence[Mapping[str, Any]], facts: Sequence[_ToolFact], copy: Callable[[Mapping[str, Any]], Any]
) -> list[Any]:
    paired = _paired_call_ids(facts)
    facts_by_position = {fact.position: fact for fact in facts}
    replay: list[Any] = []
    for position, event in enumerate(events):
        if is_partial_event(event):
            continue
        fact = facts_by_position.get(position)
        if fact is not None and fact.call_id not in paired:
            continue
        replay.append(copy(event))
    return replay


def _copy_event(event: Mapping[str, Any]) -> dict[str, Any]:
    return dict(_copied(event))


def _same_event(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return event


def _copied(value: Any) -> Any:
    """A deep copy of a JSON value: several times faster than copy.deepcopy, which serves any object."""
    if isinstance(value, Mapping):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copied(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------


def build_resume_plan(
    events: Sequence[Mapping[str, Any]],
    *,
    expected_high_water: int | None = None,
    profile: Profile = "strict",
    share_events: bool = False,
) -> dict[str, Any]:
    """Decide what a resume over the committed prefix `events` may do.

    Returns the wire ResumePlan (schemas/phase0/resume-plan.json). `expected_high_water` is the
    caller's `expectedRuntimeEventHighWater` (OFF-1). `profile="core"` applies the core clauses
    only; `"strict"` adds STRICT-1 to STRICT-7. The input is never changed. Nothing returned
    shares an object with it, unless `share_events` is true: then `runtimeEvents` and
    `replayRuntimeEvents` hold the input's own event objects, which saves copying them for a caller
    that serialises the plan at once and drops the input (the protocol server does).
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be 'core' or 'strict', not {profile!r}")
    if expected_high_water is not None and (
        isinstance(expected_high_water, bool) or not isinstance(expected_high_water, int)
    ):
        raise TypeError(f"expected_high_water must be an int or None, not {expected_high_water!r}")

    events = tuple(events)
    facts = _tool_facts(events)
    operations_by_id = _project(facts)
    operations = list(operations_by_id.values())
    high_water = len(events)  # PLAN-1

    diagnostics = [
        *_offset_diagnostics(expected_high_water, high_water),
        *_pending_diagnostics(operations),
        *_response_diagnostics(facts, operations_by_id),
    ]
    if profile == "strict":
        diagnostics.extend(_strict_diagnostics(events, facts))

    rejection_reasons = _rejection_reasons(diagnostics)
    requires_verification = any(op["status"] == INDETERMINATE for op in operations)  # PLAN-6
    disposition = SAFE_REPLAY if not rejection_reasons and not requires_verification else BLOCKED

    plan: dict[str, Any] = {
        "disposition": disposition,
        "operations": operations,
        "diagnostics": diagnostics,
        "rejectionReasons": rejection_reasons,
        "requiresVerification": requires_verification,
        "sourceRuntimeEventHighWater": high_water,
    }
    if requires_verification:
        plan["directive"] = INDETERMINATE_TOOL_RESULT_DIRECTIVE
    copy = _same_event if share_events else _copy_event
    plan["runtimeEvents"] = [copy(event) for event in events]  # PLAN-8
    plan["replayRuntimeEvents"] = _replay_events(events, facts, copy)  # PLAN-9
    return plan
