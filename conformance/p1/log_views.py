"""Views of the control plane's log that the P1 checks read, as plain data: what each 409 answer to a result
submission carried (SUB-5), and the clock moves and lease events in log order (LEASE-3).

Pure: the harness hands over the log (CP-19) it read; this module only selects and reshapes its entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The members of a lease's view that the renewal check reads (CP-12).
_LEASE_MEMBERS = ("lease_id", "task_id", "attempt", "state", "ttl_ms", "expires_at_ms")


def conflict_answers(log: Sequence[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
    """For each result submission the control plane answered 409: request number -> the task's ``state`` and
    its ``stored`` result (its ``attempt`` and ``result_hash``, or None) as the answer carried them (CP-9).

    A 409 is built once the request's own entries are written (a scripted conflict stores a result and sets
    the state first), and the request's entry comes last, so the task's state and stored result as the log
    has them at that entry are the answer's."""
    states: dict[str, Any] = {}
    stored: dict[str, dict[str, Any]] = {}
    submitted: dict[Any, str] = {}  # request number -> the task its submission names (the moment's)
    found: dict[Any, dict[str, Any]] = {}
    for entry in log:
        kind, task_id = entry.get("kind"), str(entry.get("task_id"))
        if kind == "task_state":
            states[task_id] = entry.get("to")
        elif kind == "result_stored":
            stored[task_id] = {"attempt": entry.get("attempt"), "result_hash": entry.get("result_hash")}
        elif kind == "moment" and entry.get("check") == "submission":
            submitted[entry.get("request")] = task_id
        elif kind == "request" and entry.get("status") == 409 and entry.get("request") in submitted:
            target = submitted[entry.get("request")]
            found[entry.get("request")] = {"state": states.get(target), "stored": stored.get(target)}
    return found


def lease_log(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every clock move and every lease event of the log, in order: ``clock`` entries with their ``seq``, the
    CP time moved ``to`` and ``delta_ms``; ``lease`` entries with their ``seq``, ``event`` (granted, renewed,
    expired, fenced, released, head, ...) and the lease's view."""
    found = []
    for entry in log:
        if entry.get("kind") == "clock":
            found.append(
                {"kind": "clock", "seq": entry.get("seq"), "to": entry.get("to"), "delta_ms": entry.get("delta_ms")}
            )
        elif entry.get("kind") == "lease" and isinstance(entry.get("lease"), Mapping):
            view = {name: entry["lease"].get(name) for name in _LEASE_MEMBERS}
            found.append({"kind": "lease", "seq": entry.get("seq"), "event": entry.get("event"), "lease": view})
    return found
