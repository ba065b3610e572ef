"""The kit's shortcuts give the verdicts of the long way: message checks and the schedule's streams."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance import schemas
from resumekit.conformance.adapters import CheckedEvents
from resumekit.conformance.phase0.crash import STREAMS, stream_kills
from tests.support import minimal_event

OPEN = {"cmd": "phase0.store.open", "seq": 3, "workspace": "/w", "sessionId": "s", "runId": "r"}
APPEND = {"cmd": "phase0.store.append", "seq": 4, "event": minimal_event()}

REQUESTS: list[Any] = [
    OPEN,
    APPEND,
    {"cmd": "stop", "seq": 1},
    {"cmd": "hello", "seq": 1, "protocol": 1, "kit": {"name": "resumekit", "version": "0"}},
    {**OPEN, "extra": 1},
    {**OPEN, "seq": -1},
    {**OPEN, "seq": True},
    {**OPEN, "sessionId": "not an id"},
    {**OPEN, "cmd": "no.such.command"},
    {**OPEN, "cmd": 7},
    {**APPEND, "event": {**minimal_event(), "role": "robot"}},
    {**APPEND, "event": "not an object"},
    {"seq": 1},
    ["not", "an", "object"],
]


@pytest.mark.parametrize("message", REQUESTS, ids=range(len(REQUESTS)))
def test_checking_the_selected_branch_gives_the_full_verdict(message: Any) -> None:
    full = schemas.first_violation(schemas.ADAPTER_REQUEST, message) is None
    assert schemas.passes_discriminated(schemas.ADAPTER_REQUEST, "cmd", message) is full


def test_events_are_skipped_only_once_checked_byte_for_byte() -> None:
    checked = CheckedEvents()
    event = minimal_event(id="e1")
    result = {"status": "ok", "events": [event], "tornTail": None}
    light, unchecked = checked.lighten(result)
    assert light["events"] == [event] and unchecked == [event]  # not seen yet: checked in full
    checked.add(unchecked)
    light, unchecked = checked.lighten(result)
    assert light["events"] == [] and unchecked == [] and result["events"] == [event]
    # The same value in another JSON spelling is not the event that was checked.
    for other in ({**event, "ts": 1.0}, {**event, "partial": 0}, {**event, "id": "e2"}):
        light, unchecked = checked.lighten({"status": "ok", "events": [event, other], "tornTail": None})
        assert light["events"] == [event, other] and unchecked == [event, other]


def test_the_schedule_deals_every_kill_to_a_stream() -> None:
    assert stream_kills(200) == [50] * STREAMS
    for kills in range(30):
        shares = stream_kills(kills)
        assert sum(shares) == kills and 1 <= len(shares) <= STREAMS
        assert max(shares) - min(shares) <= 1
