"""In-process projections that each break one clause of docs/spec/phase0.md.

Each is the reference with one rule bent, so that the kit must catch exactly that rule. ``BROKEN``
maps each to the clause it violates.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from resumekit.reference import build_resume_plan

Plan = dict[str, Any]
_counter = itertools.count()


def _reference(events: Sequence[dict[str, Any]], expected_high_water: int | None, profile: str) -> Plan:
    return build_resume_plan(events, expected_high_water=expected_high_water, profile=profile)  # type: ignore[arg-type]


def _with_original_events(plan: Plan, events: list[dict[str, Any]]) -> Plan:
    # The bent rule must show only in the decision, not in the echoed events.
    plan["runtimeEvents"] = copy.deepcopy(events)
    originals = iter(events)
    replay = []
    for replayed in plan["replayRuntimeEvents"]:
        original = next(e for e in originals if e["id"] == replayed["id"])
        replay.append(copy.deepcopy(original))
    plan["replayRuntimeEvents"] = replay
    return plan


def error_counts_as_success(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """OP-3: an ``isError: true`` response settles the operation as succeeded."""
    cleaned = copy.deepcopy(events)
    for event in cleaned:
        content = event.get("content") or {}
        content.pop("isError", None)
    return _with_original_events(_reference(cleaned, expected_high_water, profile), events)


def partial_events_are_facts(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """EVT-4: partial events are projected as if they were committed facts."""
    plan = _reference([dict(e, partial=False) for e in events], expected_high_water, profile)
    return _with_original_events(plan, events)


def offset_ignored(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """OFF-1: the expected high-water is ignored."""
    return _reference(events, None, profile)


def dangling_calls_replayed(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PLAN-9: unpaired tool calls stay in the provider replay."""
    plan = _reference(events, expected_high_water, profile)
    replayed = iter(plan["replayRuntimeEvents"])
    following = next(replayed, None)
    replay = []
    for event in events:
        if following is not None and following == event:  # the reference kept this very event
            replay.append(copy.deepcopy(event))
            following = next(replayed, None)
        elif (event.get("content") or {}).get("kind") == "function_call" and not event.get("partial"):
            replay.append(copy.deepcopy(event))
    plan["replayRuntimeEvents"] = replay
    return plan


def high_water_skips_partials(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PLAN-1: the high-water counts only non-partial events."""
    plan = _reference(events, expected_high_water, profile)
    plan["sourceRuntimeEventHighWater"] = sum(1 for e in events if not e.get("partial"))
    return plan


def mutates_its_input(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PURE-1: the projection writes into the events it was given."""
    plan = _reference(events, expected_high_water, profile)
    for event in events:
        event.setdefault("refs", {})["seenByProjection"] = True
    return plan


def not_deterministic(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PURE-2: the plan differs from one call to the next (a counter leaks into a diagnostic)."""
    plan = _reference(events, expected_high_water, profile)
    for diagnostic in plan["diagnostics"]:
        diagnostic["message"] += f" (call {next(_counter)})"
    return plan


def core_claims_strict(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """STRICT-7: a core-only projection that claims the strict profile."""
    return _reference(events, expected_high_water, "core")


def _tool_facts(events: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(position, event, content) of every non-partial function_call or function_response."""
    return [
        (position, event, event["content"])
        for position, event in enumerate(events)
        if not event.get("partial")
        and (event.get("content") or {}).get("kind") in ("function_call", "function_response")
    ]


def _reasons_and_disposition(plan: Plan) -> Plan:
    """PLAN-5 and PLAN-7 again, after a bent rule changed the diagnostics."""
    reasons = []
    for diagnostic in plan["diagnostics"]:
        code = diagnostic["code"]
        reason = {
            "runtime_offset_mismatch": "runtime_offset_mismatch",
            "pending_tool_result": "dangling_tool_state",
            "unmatched_tool_result": "dangling_tool_state",
            "tool_name_mismatch": "dangling_tool_state",
        }.get(code, "ledger_integrity_violation")
        if reason not in reasons:
            reasons.append(reason)
    plan["rejectionReasons"] = reasons
    safe = not reasons and not plan["requiresVerification"]
    plan["disposition"] = "safe_replay" if safe else "blocked"
    return plan


def last_duplicate_call_wins(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """OP-1: a later call with a seen tool-call id replaces the operation's call (name, args, event id)."""
    plan = _reference(events, expected_high_water, profile)
    for operation in plan["operations"]:
        for _, event, content in _tool_facts(events):
            if content["kind"] == "function_call" and content["id"] == operation["toolCallId"]:
                operation["toolName"] = content["name"]
                operation["args"] = copy.deepcopy(content["args"])
                operation["callRuntimeEventId"] = event["id"]
    return plan


def second_response_resettles(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """OP-3: every later response after the call settles the operation again; the last one wins."""
    plan = _reference(events, expected_high_water, profile)
    facts = _tool_facts(events)
    for operation in plan["operations"]:
        call = next(p for p, e, _ in facts if e["id"] == operation["callRuntimeEventId"])
        for position, event, content in facts:
            if content["kind"] == "function_response" and content["id"] == operation["toolCallId"] and position > call:
                operation["responseRuntimeEventId"] = event["id"]
                operation["responseIsError"] = content.get("isError") is True
                operation["status"] = "failed" if operation["responseIsError"] else "succeeded"
    return plan


def pairs_with_first_call(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PLAN-9: a response pairs when its name matches the id's first call, not the latest call seen so far."""
    plan = _reference(events, expected_high_water, profile)
    first_name: dict[str, str] = {}
    paired = set()
    for _, _, content in _tool_facts(events):
        if content["kind"] == "function_call":
            first_name.setdefault(content["id"], content["name"])
        elif first_name.get(content["id"]) == content["name"]:
            paired.add(content["id"])
    plan["replayRuntimeEvents"] = [
        copy.deepcopy(event)
        for event in events
        if not event.get("partial")
        and (
            (event.get("content") or {}).get("kind") not in ("function_call", "function_response")
            or event["content"]["id"] in paired
        )
    ]
    return plan


def mismatch_only_at_position(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "strict"
) -> Plan:
    """PLAN-4: a response is compared only with an operation that exists at its position, not the whole prefix."""
    plan = _reference(events, expected_high_water, profile)
    first_call: dict[str, int] = {}
    for position, _, content in _tool_facts(events):
        if content["kind"] == "function_call":
            first_call.setdefault(content["id"], position)
    position_of = {event["id"]: position for position, event in reversed(list(enumerate(events)))}
    plan["diagnostics"] = [
        diagnostic
        for diagnostic in plan["diagnostics"]
        if diagnostic["code"] != "tool_name_mismatch"
        or position_of[diagnostic["eventId"]] > first_call[diagnostic["toolCallId"]]
    ]
    return _reasons_and_disposition(plan)


BROKEN: dict[str, tuple[Callable[..., Plan], tuple[str, ...]]] = {
    "error_counts_as_success": (error_counts_as_success, ("OP-3",)),
    "partial_events_are_facts": (partial_events_are_facts, ("EVT-4",)),
    "offset_ignored": (offset_ignored, ("OFF-1",)),
    "dangling_calls_replayed": (dangling_calls_replayed, ("PLAN-9",)),
    "high_water_skips_partials": (high_water_skips_partials, ("PLAN-1",)),
    "mutates_its_input": (mutates_its_input, ("PURE-1",)),
    "not_deterministic": (not_deterministic, ("PURE-2",)),
    "last_duplicate_call_wins": (last_duplicate_call_wins, ("OP-1",)),
    "second_response_resettles": (second_response_resettles, ("OP-3",)),
    "pairs_with_first_call": (pairs_with_first_call, ("PLAN-9",)),
    "mismatch_only_at_position": (mismatch_only_at_position, ("PLAN-4",)),
    "core_claims_strict": (
        core_claims_strict,
        ("STRICT-1", "STRICT-2", "STRICT-3", "STRICT-4", "STRICT-5", "STRICT-6", "STRICT-7"),
    ),
}

# Each breaks a core clause only in situations that used to sit in strict-only cases: the core
# profile must catch it (issue 9, finding 1).
CORE_SITUATIONS = (
    "last_duplicate_call_wins",
    "second_response_resettles",
    "pairs_with_first_call",
    "mismatch_only_at_position",
)
