"""Pure comparison of what an implementation answered with what the spec demands.

Everything here is a function of its arguments: no I/O, no adapters. Each rule names the clause that
makes the compared field normative (docs/spec/phase0.md, PLAN-10).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.canonical import canonical_json, same_json
from resumekit.conformance.results import Mismatch

Event = Mapping[str, Any]

# Which clause makes each compared plan field normative.
FIELD_CLAUSES = {
    "disposition": "PLAN-7",
    "requiresVerification": "PLAN-6",
    "sourceRuntimeEventHighWater": "PLAN-1",
    "rejectionReasons": "PLAN-5",
    "operations": "OP-1",
    "diagnostics": "PLAN-10",
    "directive": "PLAN-6",
    "runtimeEvents": "PLAN-8",
    "replayRuntimeEvents": "PLAN-9",
}
OPERATION_FIELDS = (
    "toolCallId",
    "toolName",
    "args",
    "status",
    "callRuntimeEventId",
    "responseRuntimeEventId",
    "responseIsError",
)
OPERATION_CLAUSES = {"status": "OP-3", "responseRuntimeEventId": "OP-3", "responseIsError": "OP-3", "args": "OP-1"}
_ABSENT = "<absent>"


def _call_args(events: Sequence[Event], call_event_id: str) -> Any:
    for event in events:
        content = event.get("content") or {}
        if event.get("id") == call_event_id and content.get("kind") == "function_call":
            return content.get("args")
    return None


def expected_operations(events: Sequence[Event], expect: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The expected operations with defaulted ``args`` filled in from their call events (OP-1)."""
    operations = []
    for operation in expect["operations"]:
        full = dict(operation)
        if "args" not in full:
            full["args"] = _call_args(events, full["callRuntimeEventId"])
        operations.append(full)
    return operations


def _diagnostic_key(diagnostic: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(diagnostic.get("code")),
        str(diagnostic.get("eventId", _ABSENT)),
        str(diagnostic.get("toolCallId", _ABSENT)),
    )


def _compare_operations(expected: list[dict[str, Any]], actual: list[Any]) -> list[Mismatch]:
    mismatches = []
    if len(expected) != len(actual):
        mismatches.append(
            Mismatch(
                "/operations",
                [op["toolCallId"] for op in expected],
                [op.get("toolCallId") for op in actual],
                "OP-1",
                f"expected {len(expected)} operation(s), got {len(actual)}",
            )
        )
        return mismatches
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for name in OPERATION_FIELDS:
            present = (name in want, name in got)
            if present == (False, False):
                continue
            if present != (True, True) or not same_json(want[name], got[name]):
                mismatches.append(
                    Mismatch(
                        f"/operations/{index}/{name}",
                        want.get(name, _ABSENT),
                        got.get(name, _ABSENT),
                        OPERATION_CLAUSES.get(name, "OP-1"),
                    )
                )
    return mismatches


def _compare_diagnostics(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> list[Mismatch]:
    want, got = Counter(map(_diagnostic_key, expected)), Counter(map(_diagnostic_key, actual))
    if want == got:
        return []
    missing, extra = sorted((want - got).elements()), sorted((got - want).elements())
    notes = []
    if missing:
        notes.append("missing " + ", ".join(_describe(key) for key in missing))
    if extra:
        notes.append("unexpected " + ", ".join(_describe(key) for key in extra))
    return [
        Mismatch(
            "/diagnostics",
            sorted(_describe(k) for k in want.elements()),
            sorted(_describe(k) for k in got.elements()),
            "PLAN-10",
            "; ".join(notes),
        )
    ]


def _describe(key: tuple[str, str, str]) -> str:
    code, event_id, tool_call_id = key
    details = [
        f"eventId={event_id}" if event_id != _ABSENT else "",
        f"toolCallId={tool_call_id}" if tool_call_id != _ABSENT else "",
    ]
    inside = ", ".join(d for d in details if d)
    return f"{code}({inside})" if inside else code


def compare_replay(events: Sequence[Event], expected_ids: Sequence[str], actual: Sequence[Any]) -> list[Mismatch]:
    """The difference between the replayed events *actual* and the committed events of *expected_ids* (PLAN-9)."""
    actual_ids = [event.get("id") if isinstance(event, Mapping) else event for event in actual]
    if list(expected_ids) != actual_ids:
        return [Mismatch("/replayRuntimeEvents", list(expected_ids), actual_ids, "PLAN-9", "replayed event ids differ")]
    committed: dict[Any, list[bytes]] = {}
    for event in events:
        committed.setdefault(event.get("id"), []).append(canonical_json(event))
    for index, event in enumerate(actual):
        if canonical_json(event) not in committed.get(event.get("id"), []):
            return [Mismatch(f"/replayRuntimeEvents/{index}", "the committed event, unchanged", event, "PLAN-9")]
    return []


_TOOL_KINDS = ("function_call", "function_response")
_IDENTITY = ("sessionId", "runId", "invocationId", "turnId")


def plain_prefix_expectation(events: Sequence[Event]) -> dict[str, Any] | None:
    """The expectation the spec gives a committed prefix without tool facts, or None when it has one.

    For events without ``function_call`` or ``function_response`` content, with ids all different and
    one run identity, both profiles demand the same plan: no operation (OP-1), so no diagnostic (PLAN-2
    to PLAN-4, and strict STRICT-1 to STRICT-6 find nothing), no rejection reason (PLAN-5), no
    verification (PLAN-6), ``safe_replay`` (PLAN-7), the prefix's length as the high-water (PLAN-1),
    and every non-partial event replayed (PLAN-9). Any other prefix needs a golden expectation.
    """
    if any((event.get("content") or {}).get("kind") in _TOOL_KINDS for event in events):
        return None
    if len({event.get("id") for event in events}) != len(events):
        return None
    if len({tuple(str(event.get(name)) for name in _IDENTITY) for event in events}) > 1:
        return None
    return {
        "disposition": "safe_replay",
        "requiresVerification": False,
        "sourceRuntimeEventHighWater": len(events),
        "rejectionReasons": [],
        "operations": [],
        "diagnostics": [],
        "replay": [event["id"] for event in events if event.get("partial") is not True],
    }


def compare_plan(events: Sequence[Event], expect: Mapping[str, Any], plan: Mapping[str, Any]) -> list[Mismatch]:
    """Every normative difference between *plan* and the expectation *expect* for the prefix *events*.

    *plan* must already be readable (``decisions.plan_problem``): the comparison runs as for any plan, and
    the caller adds where the plan leaves the contract's vocabulary (``vocabulary.outside``, which needs
    the schemas and so is no part of this pure module).
    """
    mismatches: list[Mismatch] = []
    for name in ("disposition", "requiresVerification", "sourceRuntimeEventHighWater"):
        if not same_json(expect[name], plan[name]):
            mismatches.append(Mismatch(f"/{name}", expect[name], plan[name], FIELD_CLAUSES[name]))

    reasons = plan["rejectionReasons"]
    if len(set(reasons)) != len(reasons):
        mismatches.append(
            Mismatch("/rejectionReasons", sorted(set(reasons)), reasons, "PLAN-5", "a reason is listed twice")
        )
    elif set(reasons) != set(expect["rejectionReasons"]):
        mismatches.append(Mismatch("/rejectionReasons", sorted(expect["rejectionReasons"]), sorted(reasons), "PLAN-5"))

    mismatches += _compare_operations(expected_operations(events, expect), plan["operations"])
    mismatches += _compare_diagnostics(expect["diagnostics"], plan["diagnostics"])

    if ("directive" in plan) != expect["requiresVerification"]:
        mismatches.append(
            Mismatch(
                "/directive",
                "present" if expect["requiresVerification"] else _ABSENT,
                "present" if "directive" in plan else _ABSENT,
                "PLAN-6",
            )
        )

    if not same_json(list(events), plan["runtimeEvents"]):
        mismatches.append(
            Mismatch(
                "/runtimeEvents",
                [e.get("id") for e in events],
                [e.get("id") for e in plan["runtimeEvents"]],
                "PLAN-8",
                "runtimeEvents must be the committed prefix, unchanged",
            )
        )
    mismatches += compare_replay(events, expect["replay"], plan["replayRuntimeEvents"])
    return mismatches


def _escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def first_difference(first: Any, second: Any, pointer: str = "") -> tuple[str, Any, Any] | None:
    """The JSON pointer of the first place where two JSON values differ, with both values there, or None.

    Objects are walked in sorted key order, as canonical JSON writes them; a key only one side has
    shows as ``<absent>`` on the other.
    """
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        for key in sorted(set(first) | set(second)):
            where = f"{pointer}/{_escape(key)}"
            if key not in first or key not in second:
                return where, first.get(key, _ABSENT), second.get(key, _ABSENT)
            found = first_difference(first[key], second[key], where)
            if found is not None:
                return found
        return None
    if isinstance(first, list) and isinstance(second, list):
        for index, (one, two) in enumerate(zip(first, second, strict=False)):
            found = first_difference(one, two, f"{pointer}/{index}")
            if found is not None:
                return found
        if len(first) != len(second):
            index = min(len(first), len(second))
            longer = first if len(first) > len(second) else second
            return (
                f"{pointer}/{index}",
                first[index] if longer is first else _ABSENT,
                second[index] if longer is second else _ABSENT,
            )
        return None
    return None if canonical_json(first) == canonical_json(second) else (pointer, first, second)


def compare_determinism(first: Any, second: Any) -> list[Mismatch]:
    """Two answers to one request must be byte-identical in canonical JSON (PURE-2).

    The mismatch points at the first differing field of the two canonical plans, with the first
    answer's value as expected and the second's as actual. A missing answer (None) is never equal to
    anything, another missing one included: two requests that gave no plan show no determinism.
    """
    missing = [name for name, answer in (("first", first), ("second", second)) if answer is None]
    if missing:
        return [
            Mismatch(
                "",
                "two plans, byte-identical",
                {"first": first, "second": second},
                "PURE-2",
                f"the {' and the '.join(missing)} answer carried no plan, so there is nothing to compare",
            )
        ]
    if canonical_json(first) == canonical_json(second):
        return []
    found = first_difference(first, second)
    pointer, one, two = found if found is not None else ("", first, second)
    return [
        Mismatch(
            pointer,
            one,
            two,
            "PURE-2",
            f"the same request gave different answers; they first differ at {pointer or '/'} "
            "(expected: the first answer, actual: the second)",
        )
    ]
