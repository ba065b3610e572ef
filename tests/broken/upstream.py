"""A runtime that has moved past the seed: ``python -m tests.broken.upstream`` answers as the upstream runtime's
newer main is observed to (docs/spec/phase0.md, section 0.2, later readings).

Written from the observed behaviour, group by group, not from upstream's code: it blocks where Phase 0
settles or ignores, names operations ``corruption`` and uses diagnostic codes outside the contract's
vocabulary. The kit must report every such case as failed, never errored, each with its differences
and its grade (tests/test_upstream_like.py). Upstream has no profiles: the answer is the same for both.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.reference import build_resume_plan
from resumekit.reference.adapter import Harness, serve

Plan = dict[str, Any]
Event = Mapping[str, Any]

TOOL_KINDS = ("function_call", "function_response")
# The diagnostics of the strict profile upstream does not give: it does not flag a tool fact after the
# terminal event (group K), and it reads run identity per invocation with a code of its own (group I).
NOT_GIVEN = ("tool_fact_after_terminal", "run_identity_conflict")
# The codes whose operation upstream calls ``corruption`` (groups B, E, F, G).
CORRUPTING = ("tool_name_mismatch", "duplicate_tool_call", "duplicate_tool_result", "tool_result_before_call")
LANE = {"function_call": ("model", "agent"), "function_response": ("tool", "tool")}
ALLOWED_ACTIONS = frozenset({"endInvocation"})


def _kind(event: Event) -> Any:
    content = event.get("content")
    return content.get("kind") if isinstance(content, Mapping) else None


def _diagnostic(code: str, event: Event, **detail: str) -> dict[str, Any]:
    found: dict[str, Any] = {"code": code, "message": f"{code} at {event['id']}", "eventId": event["id"]}
    if _kind(event) in TOOL_KINDS:
        found["toolCallId"] = event["content"]["id"]
    if detail:
        found["detail"] = detail
    return found


def _first_of_each_id(events: Sequence[Event]) -> tuple[list[Event], list[dict[str, Any]]]:
    """Group H: a row whose id was seen before is skipped, and flagged."""
    seen: set[str] = set()
    kept, flagged = [], []
    for event in events:
        if event["id"] in seen:
            flagged.append(_diagnostic("duplicate_event_id", event))
        else:
            seen.add(event["id"])
            kept.append(event)
    return kept, flagged


def _off_lane(event: Event) -> bool:
    """Group D: a tool event outside its lane envelope."""
    kind = _kind(event)
    if kind not in LANE or event.get("partial") is True:
        return False
    actions, refs = event.get("actions") or {}, event.get("refs") or {}
    return (
        "branch" in event
        or "status" in event
        or (event.get("role"), event.get("author")) != LANE[kind]
        or not set(actions) <= ALLOWED_ACTIONS
        or bool(refs)
    )


def _lane_diagnostics(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Groups A (orphans are checked by the caller), C, D and I: what upstream's ledger scanner adds."""
    found = []
    identities: dict[str, tuple[Any, ...]] = {}
    for event in events:
        if event.get("partial") is True and _kind(event) in TOOL_KINDS:
            found.append(_diagnostic("semantic_lane_conflict", event))
        elif _off_lane(event):
            found.append(_diagnostic("protocol_marker_invalid", event))
        identity = (event.get("sessionId"), event.get("runId"), event.get("turnId"))
        first = identities.setdefault(str(event.get("invocationId")), identity)
        if first != identity:
            found.append(_diagnostic("tool_ledger_corruption", event, issueCode="invocation_identity_conflict"))
    return found


def _first_fact_order(events: Sequence[Event], operations: list[Plan]) -> list[Plan]:
    """Group G: operations in the order of each tool call's first fact, a response before its call included."""
    first: dict[str, int] = {}
    for index, event in enumerate(events):
        if _kind(event) in TOOL_KINDS and event.get("partial") is not True:
            first.setdefault(event["content"]["id"], index)
    return sorted(operations, key=lambda operation: first.get(operation["toolCallId"], len(events)))


def upstream_plan(events: list[dict[str, Any]], *, expected_high_water: int | None = None, **_: Any) -> Plan:
    """The plan upstream's newer main gives for *events*, in either profile."""
    kept, flagged = _first_of_each_id(events)
    expected = None if expected_high_water is None else expected_high_water - (len(events) - len(kept))
    base = build_resume_plan(kept, expected_high_water=expected, profile="strict", copy_events=True)
    diagnostics = [d for d in base["diagnostics"] if d["code"] not in NOT_GIVEN] + flagged
    corrupt = {d.get("toolCallId") for d in diagnostics if d["code"] in CORRUPTING}
    orphans = [d for d in diagnostics if d["code"] == "unmatched_tool_result"]
    by_id = {event["id"]: event for event in kept}
    diagnostics += [
        _diagnostic("tool_ledger_corruption", by_id[d["eventId"]], issueCode="orphan_tool_result") for d in orphans
    ]
    diagnostics += _lane_diagnostics(events)
    operations = []
    for operation in base["operations"]:
        if operation["toolCallId"] in corrupt:
            operation = {**operation, "status": "corruption"}
        operations.append(operation)
    operations = _first_fact_order(events, operations)
    reasons = sorted(
        {
            "runtime_offset_mismatch" if d["code"] == "runtime_offset_mismatch" else "dangling_tool_state"
            for d in diagnostics
        }
    )
    verify = any(operation["status"] == "indeterminate" for operation in operations)
    plan: Plan = {
        "disposition": "blocked" if reasons or verify else "safe_replay",
        "operations": operations,
        "diagnostics": diagnostics,
        "rejectionReasons": reasons,
        "requiresVerification": verify,
        "sourceRuntimeEventHighWater": len(events),
        "runtimeEvents": copy.deepcopy(events),
        "replayRuntimeEvents": base["replayRuntimeEvents"],
    }
    if verify:
        plan["directive"] = base.get("directive") or "Do not retry the interrupted tool call; inspect first."
    return plan


class LikeUpstream(Harness):
    """The reference server, its projection replaced by ``upstream_plan``; it claims the projection only."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        hello = super()._hello(request)
        hello["implementation"] = {"name": "upstream-like", "version": "2026.8", "language": "python"}
        hello["capabilities"] = ["phase0.projection"]
        return hello

    def _project(self, events: Any, request: dict[str, Any]) -> dict[str, Any]:
        high_water = request.get("expectedRuntimeEventHighWater")
        return upstream_plan(events, expected_high_water=high_water if isinstance(high_water, int) else None)


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    sys.exit(serve(sys.stdin, sys.stdout, harness=LikeUpstream()))
