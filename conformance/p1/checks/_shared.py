"""What the sections of the P1 rules share: a finding written clause first, a check of the first worker's
journal run on a scenario's second worker's, and JSON the worker wrote, parsed without trusting it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch


def mismatch(clause: str | None, pointer: str, expected: Any, actual: Any, note: str) -> Mismatch:
    """A check's finding, with the clause first: the order the checks read best in."""
    return Mismatch(pointer, expected, actual, clause, note)


def on_second_worker(
    check: Callable[[Story, Scenario], list[Mismatch]], history: Story, scenario: Scenario
) -> list[Mismatch]:
    """*check*, a check of the first worker's journal, run on the journal of a scenario's second worker, which
    obeys the journal's rules on its own; its pointers under ``/second-worker``. No second journal: nothing."""
    if not history.second_rows:
        return []
    found = check(history.second(), scenario)
    return [dataclasses.replace(m, pointer="/second-worker" + m.pointer) for m in found]


def parsed_json(text: object) -> Any:
    """*text*, a column the worker wrote, as JSON; None when it is no text, no JSON, or nested deeper than the
    parser recurses (a traceback in the kit otherwise)."""
    try:
        return json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
