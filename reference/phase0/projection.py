# The Phase 0 resume decision, as a pure function of the committed prefix.
#
# Everything that decides what a resume may do lives here; this module knows nothing of files,
# processes or the clock. It reads a sequence of RuntimeEvents (the committed prefix a store
# reopened, docs/spec/phase0.md section 1) and answers with a ResumePlan (section 3). It never
# changes its input (PURE-1). A plan's event lists hold the input's own event objects, as a slice
# of a list holds its items; a caller that will change the plan asks for copies (`copy_events`), and
# then nothing returned shares an object with the input.
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

import marshal
from collections.abc import Mapping, Sequence
from operator import itemgetter
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
    # An absent `actions` is told apart first: the abstract Mapping check of None costs more than
    # the rest of the rule, once per event of a long ledger.
    return actions is not None and isinstance(actions, Mapping) and actions.get("endInvocation") is True


def is_partial_event(event: Mapping[str, Any]) -> bool:
    """EVT-4: `partial` exactly `true`. A partial event is a streaming snapshot, never a fact."""
    return event.get("partial") is True


# One non-partial `function_call` or `function_response`, as the projection reads it:
# (position, event_id, kind, call_id, name, is_error), where position is the 0-based index in the
# committed prefix, kind is FUNCTION_CALL or FUNCTION_RESPONSE, call_id is `content.id`, and is_error
# (responses only) is `content.isError` exactly `true`. A plain tuple of strings, ints and bools on
# purpose: the collector stops tracking such a tuple once it has seen it (a NamedTuple it tracks for
# ever), so a million facts do not make it sweep the whole heap. A call's `args` is read from its event.
_ToolFact = tuple[int, str, str, str, str, bool]


def _event_id(position: int, event: Mapping[str, Any]) -> str:
    event_id = event.get("id")
    if not isinstance(event_id, str):
        raise ValueError(f"event at position {position} has no string id (EVT-1): {event_id!r}")
    return event_id


def _tool_fact(position: int, event: Mapping[str, Any], content: Mapping[str, Any]) -> _ToolFact:
    """The tool fact of a non-partial event whose *content* is a function call or response (EVT-2)."""
    kind = str(content["kind"])
    call_id, name = content.get("id"), content.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise ValueError(
            f"{kind} at position {position} has an unreadable tool-call id {call_id!r} or name {name!r} (EVT-2)"
        )
    return (position, _event_id(position, event), kind, call_id, name, content.get("isError") is True)


class _Scan(NamedTuple):
    """What one pass over the prefix finds: everything later steps need, so no step reads it again."""

    facts: list[_ToolFact]
    partial: list[int]  # positions of the partial events (EVT-4), which the replay leaves out
    duplicate_ids: dict[int, dict[str, Any]]  # STRICT-1, by position
    identity_conflicts: dict[int, dict[str, Any]]  # STRICT-5, by position
    terminal_position: int  # of the first terminal non-partial event, or len(events) (STRICT-6)
    terminal_id: str


def _scan(events: Sequence[Mapping[str, Any]], *, strict: bool) -> _Scan:
    """One pass over the prefix, the hot loop of the projection: its cost is what planning a long ledger costs.

    The per-event rules are written out here rather than called (a call per event and rule was most of
    the time of planning); each is the rule named in its comment, as the functions above state it.
    """
    facts: list[_ToolFact] = []
    partial: list[int] = []
    duplicate_ids: dict[int, dict[str, Any]] = {}
    identity_conflicts: dict[int, dict[str, Any]] = {}
    first_position_by_event_id: dict[str, int] = {}
    run_identity: tuple[Any, ...] | None = None
    terminal_position, terminal_id = len(events), ""
    identity_of, tool_kinds = _identity_getter, TOOL_FACT_KINDS
    for position, event in enumerate(events):
        if is_partial_event(event):  # EVT-4: never a fact
            partial.append(position)
            continue
        content = event.get("content")
        # EVT-2 (a dict tested first: the abstract Mapping check costs more than the rest of the rule)
        if (type(content) is dict or isinstance(content, Mapping)) and content.get("kind") in tool_kinds:
            facts.append(_tool_fact(position, event, content))
        if not strict:
            continue
        event_id = event.get("id")
        if not isinstance(event_id, str):
            event_id = _event_id(position, event)  # raises: EVT-1
        # STRICT-1: an event id used twice.
        first_position = first_position_by_event_id.setdefault(event_id, position)
        if first_position != position:
            duplicate_ids[position] = _duplicate_event_id(event_id, first_position, position)
        # STRICT-5: every event belongs to the run of the first non-partial event.
        identity = identity_of(event)
        if run_identity is None:
            run_identity = identity
        elif identity != run_identity:
            identity_conflicts[position] = _identity_conflict(event_id, run_identity, identity)
        # EVT-3, for STRICT-6: the first terminal event.
        if not terminal_id and is_terminal_event(event):
            terminal_position, terminal_id = position, event_id
    return _Scan(facts, partial, duplicate_ids, identity_conflicts, terminal_position, terminal_id)


def _identity_getter(event: Mapping[str, Any]) -> tuple[Any, ...]:
    try:
        return _IDENTITY(event)  # type: ignore[no-any-return]
    except (KeyError, TypeError):  # a field missing (the schema requires them all): read it as None
        return tuple(event.get(field) for field in RUN_IDENTITY_FIELDS)


_IDENTITY = itemgetter(*RUN_IDENTITY_FIELDS)


def _duplicate_event_id(event_id: str, first_position: int, position: int) -> dict[str, Any]:
    return _diagnostic(
        DUPLICATE_EVENT_ID,
        f"event id {event_id!r} at position {position} was already used at position {first_position}",
        event_id=event_id,
        detail={"firstPosition": first_position, "position": position},
    )


def _identity_conflict(event_id: str, expected: tuple[Any, ...], actual: tuple[Any, ...]) -> dict[str, Any]:
    run_identity = dict(zip(RUN_IDENTITY_FIELDS, expected, strict=True))
    identity = dict(zip(RUN_IDENTITY_FIELDS, actual, strict=True))
    return _diagnostic(
        RUN_IDENTITY_CONFLICT,
        f"event {event_id!r} belongs to run identity {identity!r}, not to {run_identity!r} of the first event",
        event_id=event_id,
        detail={"expected": run_identity, "actual": identity},
    )


# --------------------------------------------------------------------------------------------
# Operations (OP-1..OP-5)
# --------------------------------------------------------------------------------------------


def _project(events: Sequence[Mapping[str, Any]], facts: Sequence[_ToolFact]) -> dict[str, dict[str, Any]]:
    operations: dict[str, dict[str, Any]] = {}  # tool-call id -> operation, in call order
    for position, event_id, kind, call_id, name, is_error in facts:
        if kind == FUNCTION_CALL:
            if call_id not in operations:  # OP-1: the first call wins
                operations[call_id] = {
                    "toolCallId": call_id,
                    "toolName": name,
                    "args": events[position]["content"].get("args"),
                    "status": INDETERMINATE,  # OP-5 until a response settles it
                    "callRuntimeEventId": event_id,
                }
            continue
        operation = operations.get(call_id)
        if operation is None or "responseRuntimeEventId" in operation:
            continue  # OP-2: no call yet; OP-3: already settled
        # OP-3 and OP-4: settle, whatever the response's name.
        operation["responseRuntimeEventId"] = event_id
        operation["responseIsError"] = is_error
        operation["status"] = FAILED if is_error else SUCCEEDED
    return operations


def project_tool_operations(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Project the committed prefix onto its ToolOperations (OP-1 to OP-5), in call order."""
    events = events if isinstance(events, (list, tuple)) else tuple(events)
    return list(_project(events, _scan(events, strict=False).facts).values())


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
    for _position, event_id, kind, call_id, name, _is_error in facts:
        if kind != FUNCTION_RESPONSE:
            continue
        operation = operations.get(call_id)
        if operation is None:
            diagnostics.append(
                _diagnostic(
                    UNMATCHED_TOOL_RESULT,
                    f"tool result {call_id!r} ({name!r}, event {event_id!r}) "
                    "answers no tool call in the committed prefix",
                    event_id=event_id,
                    tool_call_id=call_id,
                    tool_name=name,
                )
            )
        elif operation["toolName"] != name:
            diagnostics.append(
                _diagnostic(
                    TOOL_NAME_MISMATCH,
                    f"tool result {call_id!r} (event {event_id!r}) names {name!r}, "
                    f"but its call (event {operation['callRuntimeEventId']!r}) named "
                    f"{operation['toolName']!r}",
                    event_id=event_id,
                    tool_call_id=call_id,
                    tool_name=name,
                    detail={"callToolName": operation["toolName"], "responseToolName": name},
                )
            )
    return diagnostics


def _strict_diagnostics(scan: _Scan) -> list[dict[str, Any]]:
    """STRICT-1 to STRICT-6, over non-partial events in event order, clause order within an event.

    STRICT-1 and STRICT-5 come from the scan; the tool-fact clauses are checked here, over the facts
    alone, and each event's diagnostics are put together in clause order at the end.
    """
    # tool-call id -> the position and the event id of its first call
    first_call: dict[str, int] = {}
    first_call_event: dict[str, str] = {}
    for position, event_id, kind, call_id, _name, _is_error in scan.facts:
        if kind == FUNCTION_CALL and call_id not in first_call:
            first_call[call_id] = position
            first_call_event[call_id] = event_id

    # STRICT-2 to STRICT-4, by position; a position gets a list only when it has a diagnostic, so
    # that a clean ledger allocates nothing per fact here.
    tool_clauses: dict[int, list[dict[str, Any]]] = {}
    after_terminal: dict[int, dict[str, Any]] = {}  # STRICT-6, by position
    first_response: dict[str, str] = {}  # tool-call id -> event id of its first response
    for position, event_id, kind, call_id, name, _is_error in scan.facts:
        if kind == FUNCTION_CALL:
            # STRICT-2: a tool-call id called twice.
            first_position = first_call[call_id]
            if first_position != position:
                tool_clauses.setdefault(position, []).append(_diagnostic(
                    DUPLICATE_TOOL_CALL,
                    f"tool call {call_id!r} ({name!r}) is called again by event "
                    f"{event_id!r}; its first call is event {first_call_event[call_id]!r}",
                    event_id=event_id,
                    tool_call_id=call_id,
                    tool_name=name,
                ))  # fmt: skip
        else:
            # STRICT-3: a tool-call id answered twice.
            earlier = first_response.get(call_id)
            if earlier is not None:
                tool_clauses.setdefault(position, []).append(_diagnostic(
                    DUPLICATE_TOOL_RESULT,
                    f"tool call {call_id!r} ({name!r}) is answered again by event "
                    f"{event_id!r}; its first result is event {earlier!r}",
                    event_id=event_id,
                    tool_call_id=call_id,
                    tool_name=name,
                ))  # fmt: skip
            else:
                first_response[call_id] = event_id
            # STRICT-4: a response that comes before the first call it answers.
            call_position = first_call.get(call_id)
            if call_position is not None and call_position > position:
                tool_clauses.setdefault(position, []).append(_diagnostic(
                    TOOL_RESULT_BEFORE_CALL,
                    f"tool result {call_id!r} ({name!r}, event {event_id!r}) comes "
                    f"before its call (event {first_call_event[call_id]!r})",
                    event_id=event_id,
                    tool_call_id=call_id,
                    tool_name=name,
                ))  # fmt: skip
        # STRICT-6: no tool fact after the first terminal event.
        if position > scan.terminal_position:
            after_terminal[position] = _diagnostic(
                TOOL_FACT_AFTER_TERMINAL,
                f"{kind} {call_id!r} ({name!r}, event {event_id!r}) comes after "
                f"terminal event {scan.terminal_id!r}",
                event_id=event_id,
                tool_call_id=call_id,
                tool_name=name,
                detail={"terminalEventId": scan.terminal_id},
            )

    diagnostics: list[dict[str, Any]] = []
    for position in sorted({*scan.duplicate_ids, *tool_clauses, *scan.identity_conflicts, *after_terminal}):
        if position in scan.duplicate_ids:
            diagnostics.append(scan.duplicate_ids[position])
        diagnostics.extend(tool_clauses.get(position, ()))
        if position in scan.identity_conflicts:
            diagnostics.append(scan.identity_conflicts[position])
        if position in after_terminal:
            diagnostics.append(after_terminal[position])
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
    for _position, _event_id, kind, call_id, name, _is_error in facts:
        if kind == FUNCTION_CALL:
            call_names[call_id] = name
        elif call_names.get(call_id) == name:
            paired.add(call_id)
    return paired


def _replay_events(events: Sequence[Any], scan: _Scan) -> list[Any]:
    """PLAN-9: the non-partial events, without the tool facts of unpaired tool-call ids.

    *events* is the prefix or a copy of it, position for position.
    """
    paired = _paired_call_ids(scan.facts)
    dropped = {position for position, _event_id, _kind, call_id, _name, _error in scan.facts if call_id not in paired}
    dropped.update(scan.partial)
    if not dropped:
        return list(events)
    return [event for position, event in enumerate(events) if position not in dropped]


def _copied_events(events: list[Mapping[str, Any]]) -> list[Any]:
    """A deep copy of a list of JSON objects, made by the interpreter's own serialiser in one call.

    Copying was most of the time of planning a long ledger. marshal copies exactly the JSON types
    (dict, list, str, int, float, bool, None; a tuple stays a tuple) and refuses anything else, which
    then goes through the general copy below. Nothing is read or written outside memory (PURE-1).
    """
    try:
        copied: list[Any] = marshal.loads(marshal.dumps(events))
    except (ValueError, TypeError, RecursionError):  # a Mapping that is not a dict, or nesting too deep
        return [dict(_copied(event)) for event in events]
    return copied


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
    copy_events: bool = False,
) -> dict[str, Any]:
    """Decide what a resume over the committed prefix `events` may do.

    Returns the wire ResumePlan (schemas/phase0/resume-plan.json). `expected_high_water` is the
    caller's `expectedRuntimeEventHighWater` (OFF-1). `profile="core"` applies the core clauses
    only; `"strict"` adds STRICT-1 to STRICT-7. The input is never changed (PURE-1).

    `runtimeEvents` and `replayRuntimeEvents` hold the input's own event objects, and an
    operation's `args` is its call's own object: planning reads the prefix and never copies it,
    which is what a caller that serialises the plan at once wants (the protocol server does). With
    `copy_events` true nothing returned shares an object with the input (`replayRuntimeEvents` then
    holds the very copies that `runtimeEvents` holds), for a caller that will change the plan and
    keep the input; the copy costs about as much again as the plan.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be 'core' or 'strict', not {profile!r}")
    if expected_high_water is not None and (
        isinstance(expected_high_water, bool) or not isinstance(expected_high_water, int)
    ):
        raise TypeError(f"expected_high_water must be an int or None, not {expected_high_water!r}")

    events = events if isinstance(events, (list, tuple)) else tuple(events)
    scan = _scan(events, strict=profile == "strict")
    facts = scan.facts
    operations_by_id = _project(events, facts)
    operations = list(operations_by_id.values())
    high_water = len(events)  # PLAN-1

    diagnostics = [
        *_offset_diagnostics(expected_high_water, high_water),
        *_pending_diagnostics(operations),
        *_response_diagnostics(facts, operations_by_id),
    ]
    if profile == "strict":
        diagnostics.extend(_strict_diagnostics(scan))

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
    if copy_events:
        # One copy of the prefix serves both lists (a replayed event is the same copied object in
        # each); arguments and diagnostic details are copied on their own.
        runtime_events = _copied_events(list(events))
        for operation in operations:
            operation["args"] = _copied(operation["args"])
        for diagnostic in diagnostics:
            if "detail" in diagnostic:
                diagnostic["detail"] = _copied(diagnostic["detail"])
    else:
        runtime_events = list(events)
    plan["runtimeEvents"] = runtime_events  # PLAN-8
    plan["replayRuntimeEvents"] = _replay_events(runtime_events, scan)  # PLAN-9
    return plan
