"""Startup cleanup (docs/spec/p1.md, section 12): by a worker's first request no stale workspace is left
(CLEAN-1), and nothing outside the workspace root ever changes (CLEAN-2: the kit lists the decoy trees it laid
out there before the first step and after the last)."""

from __future__ import annotations

from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch

_SHOWN = 5  # changed decoy paths a message names before it counts the rest


def first_requests(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-1: each ``task-`` workspace the root held when a worker process started is gone by its first
    request (but one the kit swapped for a link, which CLEAN-4 lets stay)."""
    started = {event.actor: event.get("listing", ()) for event in history.of(None, "started")}
    swapped = {event.get("name") for event in history.of("kit", "swapped-for-link")}
    found = []
    for event in history.of(None, "first-request"):
        worker, now = event.actor, set(event.get("listing", ()))
        before = [name for name in started.get(worker, ()) if name.startswith("task-")]
        left = sorted(name for name in before if name in now and name not in swapped)
        if left:
            note = "stale workspaces were still there at the worker's first request"
            found.append(Mismatch(f"/workers/{worker}/first-request", [], left, "CLEAN-1", note, event=event.seq))
    return found


def decoys(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-2: nothing outside the workspace root changed; the finding names each changed path of the decoys."""
    changes = dict(history.decoy_changes)
    if not changes and not history.decoy_changed:
        return []
    if not changes:
        return [_m("CLEAN-2", "/decoy", "unchanged", "changed", "something outside the workspace root changed")]
    shown = [f"{path!r} ({what})" for path, what in list(changes.items())[:_SHOWN]]
    more = f" and {len(changes) - _SHOWN} more" if len(changes) > _SHOWN else ""
    note = f"{len(changes)} path(s) outside the workspace root changed: {', '.join(shown)}{more}"
    return [_m("CLEAN-2", "/decoy", "unchanged", changes, note)]
