"""The reference's hand-written RuntimeEvent check gives the same verdict as the normative JSON Schema."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from resumekit.conformance import schemas
from resumekit.reference.phase0.events import event_problem
from tests.support import minimal_event

BASE: dict[str, Any] = minimal_event(id="e1")
CONTENTS: list[Any] = [
    {"kind": "text", "text": "hi"},
    {"kind": "thinking", "text": "hm", "signature": "x"},
    {"kind": "function_call", "id": "c", "name": "Bash", "args": None},
    {"kind": "function_response", "id": "c", "name": "Bash", "result": {"ok": 1}, "isError": True},
    {"kind": "error", "message": "bad", "code": "E"},
]
ODD_VALUES: list[Any] = [None, True, 0, 1.5, "", "x", [], {}, "streaming", "user", "agent", "nope"]


def variants() -> Iterator[Any]:
    """Valid events, and each with one field removed, added or set to an odd value."""
    for content in [None, *CONTENTS]:
        event = dict(BASE) if content is None else dict(BASE, content=content)
        yield event
        for name in list(event):
            yield {k: v for k, v in event.items() if k != name}
            for value in ODD_VALUES:
                yield dict(event, **{name: value})
        for name, value in itertools.product(["branch", "status", "actions", "refs", "extra"], ODD_VALUES):
            yield dict(event, **{name: value})
        yield dict(event, actions={"endInvocation": True, "later": 1})
        if content is not None:
            for key in list(content):
                yield dict(event, content={k: v for k, v in content.items() if k != key})
                for value in ODD_VALUES:
                    changed = copy.deepcopy(content)
                    changed[key] = value
                    yield dict(event, content=changed)
    yield from ODD_VALUES


def test_the_hand_check_agrees_with_the_schema_on_every_variant() -> None:
    disagreements = []
    count = 0
    for event in variants():
        count += 1
        by_schema = schemas.first_violation(schemas.RUNTIME_EVENT, event) is None
        by_hand = event_problem(event) is None
        if by_schema != by_hand:
            disagreements.append((event, by_schema, event_problem(event)))
    assert count > 500
    assert disagreements == []


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        ({**BASE, "role": "robot"}, "'role' is 'robot'"),
        ({k: v for k, v in BASE.items() if k != "turnId"}, "missing required field(s) ['turnId']"),
        ({**BASE, "content": {"kind": "function_call", "id": "c", "name": "B"}}, "needs 'args'"),
    ],
)
def test_the_hand_check_says_what_is_wrong(event: dict[str, Any], fragment: str) -> None:
    assert fragment in (event_problem(event) or "")
