"""Where a readable plan leaves the contract's vocabulary (schemas/phase0/resume-plan.json), as mismatches.

A plan the kit can read (its envelope, ``decisions.plan_problem``) is an answer, and an operation status
or a diagnostic code the contract does not have makes it a wrong one: each place is a mismatch at its
pointer, under the clause of its field, beside every difference ``plan_checks.compare_plan`` finds
(docs/adapter-protocol.md, "A broken message and a wrong answer"). It reads the schemas, so it is kept
out of the pure ``plan_checks``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance import schemas
from resumekit.conformance._text import clip
from resumekit.conformance.phase0 import plan_checks
from resumekit.conformance.phase0.plan_checks import FIELD_CLAUSES, OPERATION_CLAUSES
from resumekit.conformance.results import Mismatch

SHOWN = 20  # places outside the vocabulary a case lists; past them, one mismatch counts the rest
NOTE = 400  # characters of the schema's message a place keeps
_OUTSIDE = "outside the contract's vocabulary (schemas/phase0/resume-plan.json): "


def _clause(path: Sequence[Any]) -> str:
    if len(path) >= 3 and path[0] == "operations":
        return OPERATION_CLAUSES.get(str(path[2]), "OP-1")
    return FIELD_CLAUSES.get(str(path[0]), "PLAN-10") if path else "PLAN-10"


def _found(instance: Any) -> Any:
    """What a mismatch shows of a value outside the vocabulary: a scalar itself, an object by its member names
    (what ``required`` and ``additionalProperties`` judge), an array by its length; never a whole operation,
    whose ``args`` the implementation may have made as large as a message may be."""
    if isinstance(instance, Mapping):
        return {"members": sorted(map(str, instance))}
    if isinstance(instance, list):
        return {"items": len(instance)}
    return instance


def outside(plan: Mapping[str, Any]) -> list[Mismatch]:
    """Each place where *plan*, a plan the kit can read, leaves schemas/phase0/resume-plan.json, as a mismatch.

    The echoed event lists are left out: ``compare_plan`` requires each of their events to be a committed one.
    """
    light = {**plan, "runtimeEvents": [], "replayRuntimeEvents": []}
    errors = itertools.islice(schemas.validator(schemas.RESUME_PLAN).iter_errors(light), schemas.FIRST_ERRORS)
    ordered = sorted(errors, key=lambda error: ([str(part) for part in error.absolute_path], str(error.validator)))
    mismatches = [
        Mismatch(
            schemas.pointer(error.absolute_path),
            {str(error.validator): error.validator_value},
            _found(error.instance),
            _clause(list(error.absolute_path)),
            # jsonschema's message quotes the value whole: a megabyte-long code would be quoted twice.
            clip(_OUTSIDE + error.message, NOTE),
        )
        for error in ordered[:SHOWN]
    ]
    if len(ordered) > SHOWN:
        more = len(ordered) - SHOWN
        mismatches.append(
            Mismatch("", "a ResumePlan", f"{more} more place(s) outside the vocabulary", "PLAN-10", "not listed")
        )
    return mismatches


def judge_plan(
    events: Sequence[Mapping[str, Any]], expect: Mapping[str, Any], plan: Mapping[str, Any]
) -> list[Mismatch]:
    """Every difference of the readable *plan* from *expect* for the prefix *events*, then each place outside
    the vocabulary: what a case reports of a plan it compares."""
    return plan_checks.compare_plan(events, expect, plan) + outside(plan)


__all__ = ["NOTE", "SHOWN", "judge_plan", "outside"]
