"""Startup cleanup (docs/spec/p1.md, section 12): by a worker's first request no stale workspace is left
(CLEAN-1), and nothing outside the workspace root ever changes (CLEAN-2: the kit lists the decoy trees it laid
out there before the first step and after the last)."""

from __future__ import annotations

from resumekit.conformance.p1 import views
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


def _changed_under(changes: dict[str, str], tree: str) -> dict[str, str]:
    return {path: what for path, what in changes.items() if path.startswith(f"{tree}/")}


def links(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-4: the target of every link the kit planted in the root (or swapped in for a checked directory)
    is left untouched; the finding names each link whose tree changed, and the changed paths."""
    changes = dict(history.decoy_changes)
    found = []
    for event in history.of("kit", "planted-link"):
        changed = _changed_under(changes, str(event.get("tree")))
        if changed:
            note = f"cleanup went through the link {event.get('name')!r}: {_named(changed)} changed under its target"
            pointer = f"/links/{event.get('name')}"
            found.append(Mismatch(pointer, "untouched", changed, "CLEAN-4", note, event=event.seq))
    return found


def boundary(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-3: the sibling ``<root>-evil``, whose path has the root's as a prefix, is outside the root and
    unchanged; and a worker told the root through a link, which it resolves once, still finds the stale
    workspaces inside it (a boundary compared with the unresolved root refuses them all)."""
    changes, found = dict(history.decoy_changes), []
    for tree in sorted({str(e.get("tree")) for e in history.of("kit", "planted-link") if e.get("sibling")}):
        changed = _changed_under(changes, tree)
        if changed:
            note = f"{tree!r} is outside the root although its path starts with the root's: {_named(changed)} changed"
            found.append(_m("CLEAN-3", f"/boundary/{tree}", "untouched", changed, note))
    started = {e.actor: e for e in history.of(None, "started")}
    through = {str(e.get("link")) for e in history.of("kit", "root-through-link")}
    for event in history.of(None, "first-request"):
        start = started.get(event.actor)
        if start is None or str(start.get("givenRoot")) not in through:
            continue
        now = set(event.get("listing", ()))
        left = sorted(n for n in start.get("listing", ()) if n.startswith("task-") and n in now)
        if left:
            note = f"told the root as the link {start.get('givenRoot')!r}, the worker left its stale workspaces"
            found.append(Mismatch(f"/workers/{event.actor}/boundary", [], left, "CLEAN-3", note, event=event.seq))
    return found


def _named(changed: dict[str, str]) -> str:
    shown = ", ".join(f"{path!r} ({what})" for path, what in list(changed.items())[:_SHOWN])
    return shown + (f" and {len(changed) - _SHOWN} more" if len(changed) > _SHOWN else "")


def active_workspaces(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-5: a workspace whose attempt still held an ACTIVE lease when the process started is removed like
    any other: by the first request it is gone. The journal's ``workspace_prepared`` rows tell whose it is."""
    owner = {
        row.get("workspace"): (row.get("task_id"), row.get("attempt"))
        for row in history.rows
        if row.get("phase") == "workspace_prepared" and row.get("workspace")
    }
    started = {event.actor: event for event in history.of(None, "started")}
    swapped = {event.get("name") for event in history.of("kit", "swapped-for-link")}
    found = []
    for event in history.of(None, "first-request"):
        start = started.get(event.actor)
        if start is None:
            continue
        active = {(lease.get("task_id"), lease.get("attempt")) for lease in start.get("activeAtStart", ())}
        now = set(event.get("listing", ()))
        left = sorted(
            name for name in start.get("listing", ())
            if name in now and name not in swapped and owner.get(name) in active
        )
        if left:
            note = "workspaces of attempts whose lease was ACTIVE at the start were still there at the first request"
            pointer = f"/workers/{event.actor}/active-workspaces"
            found.append(Mismatch(pointer, [], left, "CLEAN-5", note, event=event.seq))
    return found


def kept(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CLEAN-2: an entry of the root without the ``task-`` prefix (a ``task-`` directory nested in it included,
    which is no candidate of its own) is, at a worker's first request, as it was when the process started."""
    started = {event.actor: dict(event.get("kept") or {}) for event in history.of(None, "started")}
    found = []
    for event in history.of(None, "first-request"):
        before = started.get(event.actor, {})
        changes = views.decoy_changes(before, dict(event.get("kept") or {})) if before else {}
        if changes:
            note = f"cleanup changed entries without the task- prefix: {_named(changes)}"
            pointer = f"/workers/{event.actor}/kept"
            found.append(Mismatch(pointer, "unchanged", changes, "CLEAN-2", note, event=event.seq))
    return found
