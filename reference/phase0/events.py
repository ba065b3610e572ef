"""The RuntimeEvent shape (spec EVT-1, EVT-2), checked by hand: fast enough for every append and read.

``schemas/phase0/runtime-event.json`` is the normative form of these rules; a test holds the two to
the same verdicts. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing is not imported at run time: the adapter process opens a store sooner
if TYPE_CHECKING:
    from typing import Any

IDENTITY_FIELDS = ("id", "invocationId", "runId", "sessionId", "turnId")
REQUIRED = (*IDENTITY_FIELDS, "ts", "partial", "role", "author")
ALLOWED = frozenset((*REQUIRED, "branch", "status", "content", "actions", "refs"))
_REQUIRED_SET = frozenset(REQUIRED)
ENUMS = {
    "role": ("user", "model", "tool", "system"),
    "author": ("user", "agent", "tool", "system"),
    "status": ("streaming", "completed", "failed", "aborted", "cancelled"),
}
CONTENT_KINDS = ("text", "thinking", "function_call", "function_response", "error")
# kind -> (required non-empty string fields, other required fields, required string fields)
CONTENT_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "function_call": (("id", "name"), ("args",), ()),
    "function_response": (("id", "name"), ("result",), ()),
    "text": ((), (), ("text",)),
    "thinking": ((), (), ("text",)),
    "error": ((), (), ("message",)),
}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _content_problem(content: object) -> str | None:
    if not isinstance(content, Mapping):
        return f"content is {content!r}, not an object"
    kind = content.get("kind")
    if kind not in CONTENT_KINDS:
        return f"content kind {kind!r} is not one of {list(CONTENT_KINDS)}"
    non_empty, present, strings = CONTENT_RULES[kind]
    for name in non_empty:
        value = content.get(name)
        if not isinstance(value, str) or not value:
            return f"{kind} content needs a non-empty string {name!r}, got {value!r}"
    for name in present:
        if name not in content:
            return f"{kind} content needs {name!r}"
    for name in strings:
        if not isinstance(content.get(name), str):
            return f"{kind} content needs a string {name!r}, got {content.get(name)!r}"
    if kind == "function_response" and "isError" in content and not isinstance(content["isError"], bool):
        return f"isError must be a boolean, got {content['isError']!r}"
    return None


def event_problem(event: object) -> str | None:
    """Why *event* is not a RuntimeEvent, or None when it is one."""
    if not isinstance(event, Mapping):
        return f"a RuntimeEvent is a JSON object, not {type(event).__name__}"
    keys = event.keys()
    if not keys >= _REQUIRED_SET:
        return f"missing required field(s) {[name for name in REQUIRED if name not in event]}"
    if not keys <= ALLOWED:
        return f"unknown field(s) {sorted(set(keys) - ALLOWED)}"
    for name in IDENTITY_FIELDS:
        value = event[name]
        if not isinstance(value, str) or not value:
            return f"{name!r} must be a non-empty string, got {value!r}"
    if not _is_number(event["ts"]):
        return f"'ts' must be a number, got {event['ts']!r}"
    if not isinstance(event["partial"], bool):
        return f"'partial' must be a boolean, got {event['partial']!r}"
    for name, allowed in ENUMS.items():
        if name in event and event[name] not in allowed:
            return f"{name!r} is {event[name]!r}, not one of {list(allowed)}"
    if "branch" in event and not isinstance(event["branch"], str):
        return f"'branch' must be a string, got {event['branch']!r}"
    if "content" in event:
        problem = _content_problem(event["content"])
        if problem:
            return problem
    actions: Any = event.get("actions", {})
    if not isinstance(actions, Mapping):
        return f"'actions' must be an object, got {actions!r}"
    if "endInvocation" in actions and not isinstance(actions["endInvocation"], bool):
        return f"'actions.endInvocation' must be a boolean, got {actions['endInvocation']!r}"
    if "refs" in event and not isinstance(event["refs"], Mapping):
        return f"'refs' must be an object, got {event['refs']!r}"
    return None
