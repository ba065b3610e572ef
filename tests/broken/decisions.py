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


BROKEN: dict[str, tuple[Callable[..., Plan], tuple[str, ...]]] = {
    "error_counts_as_success": (error_counts_as_success, ("OP-3",)),
    "partial_events_are_facts": (partial_events_are_facts, ("EVT-4",)),
    "offset_ignored": (offset_ignored, ("OFF-1",)),
    "dangling_calls_replayed": (dangling_calls_replayed, ("PLAN-9",)),
    "high_water_skips_partials": (high_water_skips_partials, ("PLAN-1",)),
    "mutates_its_input": (mutates_its_input, ("PURE-1",)),
    "not_deterministic": (not_deterministic, ("PURE-2",)),
    "core_claims_strict": (
        core_claims_strict,
        ("STRICT-1", "STRICT-2", "STRICT-3", "STRICT-4", "STRICT-5", "STRICT-6", "STRICT-7"),
    ),
}
