"""How far a wrong plan strays, and in which direction: the grade of a divergence (docs/spec/phase0.md, GRADE-1).

A crash-resume decision can go wrong two ways. Replaying what had to be blocked loses or repeats a side
effect: the plan is **unsafe**. Blocking what could be replayed, or asking for a verification nobody
needs, costs availability: the plan is **over-cautious**. Every other difference (reasons, diagnostics,
operation fields that change neither) is a **detail**. The grade is computed here from the expected and
the actual plans, never stored in a fixture. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resumekit.conformance.phase0 import plan_checks

UNSAFE = "unsafe"
OVER_CAUTIOUS = "over-cautious"
DETAIL = "detail"
GRADES = (UNSAFE, OVER_CAUTIOUS, DETAIL)  # worst first
UNGRADED = "ungraded"  # what reports count an errored or P1 failure as
SETTLED = ("succeeded", "failed")

Event = Mapping[str, Any]


def _operations_by_id(operations: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for operation in operations:
        if isinstance(operation, Mapping) and isinstance(operation.get("toolCallId"), str):
            found.setdefault(operation["toolCallId"], operation)
    return found


def _status_divergences(expect: Mapping[str, Any], plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    got = _operations_by_id(plan["operations"])
    found = []
    for want in expect["operations"]:
        call_id, status = want["toolCallId"], want["status"]
        answered = got.get(call_id)
        actual = answered.get("status") if answered is not None else None
        if status == "indeterminate" and (answered is None or actual in SETTLED):
            said = "left out" if answered is None else f"reported {actual}"
            found.append((UNSAFE, f"operation {call_id!r} is indeterminate and was {said}"))
        elif status in SETTLED and actual == "indeterminate":
            found.append((OVER_CAUTIOUS, f"operation {call_id!r} is {status} and was reported indeterminate"))
    return found


def divergences(events: Sequence[Event], expect: Mapping[str, Any], plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each unsafe or over-cautious way *plan* departs from *expect* for the prefix *events*, as (grade, why).

    *plan* must be readable (``decisions.plan_problem``); *expect* is a fixture's expectation.
    """
    found: list[tuple[str, str]] = []
    answered, wanted = plan["disposition"], expect["disposition"]
    if answered == "safe_replay" and wanted == "blocked":
        found.append((UNSAFE, "safe_replay where blocked is expected"))
    elif answered == "blocked" and wanted == "safe_replay":
        found.append((OVER_CAUTIOUS, "blocked where safe_replay is expected"))
    verify, needed = plan["requiresVerification"], expect["requiresVerification"]
    if needed is True and verify is False:
        found.append((UNSAFE, "no verification where one is required"))
    elif needed is False and verify is True:
        found.append((OVER_CAUTIOUS, "verification asked where none is needed"))
    found += _status_divergences(expect, plan)
    if answered == "safe_replay" and plan_checks.compare_replay(events, expect["replay"], plan["replayRuntimeEvents"]):
        found.append((UNSAFE, "a safe_replay answer that replays other events than the expected ones"))
    return found


def grade(events: Sequence[Event], expect: Mapping[str, Any], plans: Iterable[Mapping[str, Any]]) -> str:
    """The grade of a failed case whose answers were *plans*: the worst divergence of any, else ``detail``.

    Every answer counts: a second answer (PURE-2) that is unsafe makes the case unsafe.
    """
    seen = {kind for plan in plans for kind, _ in divergences(events, expect, plan)}
    return next((kind for kind in GRADES if kind in seen), DETAIL)


__all__ = ["DETAIL", "GRADES", "OVER_CAUTIOUS", "UNGRADED", "UNSAFE", "divergences", "grade"]
