"""What a task asks of its result (docs/spec/p1.md, section 4), where the kit can see it: a ``source_capture``
task's result body lists every blob of its base commit's tree once, by path and SHA-256, sorted by path, and
the task never writes to the origin (TASK-3). The stored result's hash is TASK-2's (``submission``); the
governed commit is TASK-4's (``commit``).

The kit computes the body it expects from the origin for each task's current attempt (``Story.expected``). A
capture's body depends on its base commit alone, so every ``result_pending`` row of a capture attempt with that
base must hold it; an attempt with another base (an earlier one, issued before the base moved) is judged only
where the kit computed its body, which it does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance._text import clip
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import parsed_json
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch

CAPTURE = "source_capture"
_SERVING = ("attempt_issued", "replayed_delivery", "conflicting_delivery")  # the log's entries that serve a task


def captures(history: Story, scenario: Scenario) -> list[Mismatch]:
    """TASK-3: the body of each ``result_pending`` row of a ``source_capture`` attempt is the body the kit
    computed for its base commit; and no push reaches an origin for a capture: none the control plane's log
    gives a capture's attempt, and none to a repository the scenario issued only capture tasks on."""
    kinds = _kinds(history)
    found = []
    for row in history.rows:
        if row["phase"] == "result_pending" and kinds.get(row["task_id"]) == CAPTURE:
            wanted = history.expected.get(row["task_id"])
            if isinstance(wanted, Mapping) and wanted.get("base_oid") == row["base_oid"]:
                found += _body(row, wanted)
    return found + _writes(history, kinds)


def _kinds(history: Story) -> dict[Any, Any]:
    """task_id -> the kind the control plane served it with (a task served as two kinds keeps the last)."""
    found = {}
    for entry in history.log:
        task = entry.get("task")
        if entry.get("kind") in _SERVING and isinstance(task, Mapping):
            found[task.get("task_id")] = task.get("kind")
    return found


def _body(row: Row, wanted: Mapping[str, Any]) -> list[Mismatch]:
    held = parsed_json(row["result_body"])
    if held == wanted:
        return []
    note = (
        f"the result_pending row (seq {row['seq']!r}) of {clip(str(row['task_id']), 80)!r} attempt "
        f"{row['attempt']!r} does not hold the capture of base {clip(str(row['base_oid']), 80)!r}: "
        f"{how_it_differs(wanted, held)}"
    )
    where = f"/journal/{clip(str(row['task_id']), 80)}/{row['attempt']}/{row['seq']}/result_body"
    shown = clip(row["result_body"], 200) if isinstance(row["result_body"], str) else row["result_body"]
    return [_m("TASK-3", where, dict(wanted), shown, note)]


def how_it_differs(wanted: Mapping[str, Any], held: Any) -> str:
    """In words, how a capture body *held* differs from the *wanted* one: the paths it lacks, adds or hashes
    otherwise, or its order, or the members it gets wrong."""
    if not isinstance(held, Mapping):
        return "its result_body is no JSON object"
    members = sorted(name for name in set(wanted) | set(held) if name != "files" and held.get(name) != wanted.get(name))
    listed = held.get("files")
    if not isinstance(listed, list) or not all(isinstance(item, Mapping) for item in listed):
        return f"its files is no list of objects (members that differ: {[*members, 'files']!r})"
    ours = {str(item.get("path")): item.get("sha256") for item in wanted.get("files", ())}
    theirs = [(clip(str(item.get("path")), 80), item.get("sha256")) for item in listed]
    parts = []
    missing = sorted(set(ours) - {path for path, _ in theirs})
    if missing:
        parts.append(f"it lists no entry for the blobs {missing[:5]!r}")
    extra = sorted({path for path, _ in theirs} - set(ours))
    if extra:
        parts.append(f"it lists {extra[:5]!r}, which are no blobs of the tree")
    hashed = sorted({path for path, digest in theirs if path in ours and digest != ours[path]})
    if hashed:
        parts.append(f"the sha256 of {hashed[:5]!r} is not of the blob's bytes")
    if len(theirs) != len({path for path, _ in theirs}):
        parts.append("it lists a path more than once")
    if not parts and [path for path, _ in theirs] != list(ours):
        parts.append("its files are not sorted by the UTF-8 bytes of their paths")
    if members:
        parts.append(f"its members {members!r} differ")
    return "; ".join(parts) or "its entries carry members other than path and sha256"


def _writes(history: Story, kinds: Mapping[Any, Any]) -> list[Mismatch]:
    """TASK-3: the pushes that reached an origin for a capture (the hook logs each, accepted or refused)."""
    issued = _repositories(history.log)
    found = []
    for push in history.pushes:
        ours = kinds.get(push.get("task_id")) == CAPTURE
        only_captures = issued.get(push.get("repository")) == {CAPTURE}
        if ours or only_captures:
            whose = f"{push.get('task_id')!r} attempt {push.get('attempt')!r}" if ours else "the capture tasks"
            note = (
                f"a push to {clip(str(push.get('ref')), 80)!r} of {push.get('repository')!r} reached the origin for "
                f"{whose}: a source_capture task is read-only and never writes to the origin"
            )
            where = f"/origins/{push.get('repository')}/pushes"
            found.append(_m("TASK-3", where, "no push", push, note))
    return found


def _repositories(log: Sequence[Mapping[str, Any]]) -> dict[Any, set[Any]]:
    """repository -> the kinds of the tasks the control plane served on it."""
    found: dict[Any, set[Any]] = {}
    for entry in log:
        task = entry.get("task")
        if entry.get("kind") in _SERVING and isinstance(task, Mapping):
            found.setdefault(task.get("repository"), set()).add(task.get("kind"))
    return found
