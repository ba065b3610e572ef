"""Views of the control plane's log that the P1 checks read, as plain data: what each 409 answer to a result
submission carried (SUB-5), and the clock moves and lease events in log order (LEASE-3).

Pure: the harness hands over the log (CP-19) it read; this module only selects and reshapes its entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

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


def _journal(worker: Any) -> str:
    """The journal a worker process works on: its base-URL name without the process count (``w2`` -> ``w``)."""
    return str(worker).rstrip("0123456789")


def _renewed_lease(entry: Mapping[str, Any]) -> str | None:
    """The lease a renewal request names (``v1/leases/<lease_id>/renew``), or None for any other request."""
    parts = str(entry.get("path")).split("/")
    if entry.get("endpoint") != "renew" or len(parts) != 4:
        return None
    return unquote(parts[2])


def revived_after_loss(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each lease the control plane revived (a replayed delivery, CP-21) after it had told a worker that the
    lease was lost (LEASE-4: a renewal answered other than 200, or a governed side effect answered 403), with
    the governed side effects of that worker's journal for the lease's attempt after the revival: submissions
    and receipts by any of its processes, and pushes that followed a renewal of the lease by one of them (a
    push follows its renewal, LEASE-3, and the origin does not know the worker)."""
    attempt_of: dict[str, tuple[Any, Any]] = {}  # lease_id -> (task_id, attempt)
    told: dict[tuple[str, str], str] = {}  # (journal, lease_id) -> what told it
    moments: dict[Any, Mapping[str, Any]] = {}  # request number -> its submission or receipt moment
    renewed_by: dict[str, str] = {}  # lease_id -> the journal of its latest renewal
    found: list[dict[str, Any]] = []
    for entry in log:
        kind = entry.get("kind")
        if kind == "lease" and isinstance(entry.get("lease"), Mapping):
            lease = entry["lease"]
            attempt_of[str(lease.get("lease_id"))] = (lease.get("task_id"), lease.get("attempt"))
            if entry.get("event") == "revived":
                lease_id = str(lease.get("lease_id"))
                found += [
                    {
                        "journal": j,
                        "lease_id": lease_id,
                        "task_id": attempt_of[lease_id][0],
                        "attempt": attempt_of[lease_id][1],
                        "told": why,
                        "governed": [],
                    }
                    for (j, held), why in told.items()
                    if held == lease_id
                ]
        elif kind == "moment" and entry.get("check") in ("submission", "receipt"):
            moments[entry.get("request")] = entry
        elif kind == "moment" and entry.get("check") == "push":
            _note_push(found, entry, attempt_of, renewed_by)
        elif kind == "request":
            _note_request(found, entry, moments.get(entry.get("request")), attempt_of, told, renewed_by)
    return found


def _note_request(
    found: list[dict[str, Any]],
    entry: Mapping[str, Any],
    moment: Mapping[str, Any] | None,
    attempt_of: Mapping[str, tuple[Any, Any]],
    told: dict[tuple[str, str], str],
    renewed_by: dict[str, str],
) -> None:
    journal, status, answered = _journal(entry.get("worker")), entry.get("status"), entry.get("answer") == "answer"
    lease_id = _renewed_lease(entry)
    if lease_id is not None:
        renewed_by[lease_id] = journal
        if status != 200 and answered:
            told.setdefault((journal, lease_id), f"a renewal answered {status!r}")
        return
    if moment is None:
        return
    which = (moment.get("task_id"), moment.get("attempt"))
    if status == 403 and answered:
        for lease_id, owner in attempt_of.items():
            if owner == which:
                told.setdefault((journal, lease_id), f"a {moment.get('check')} answered 403")
    for revival in found:
        if revival["journal"] == journal and (revival["task_id"], revival["attempt"]) == which:
            revival["governed"].append({"endpoint": entry.get("endpoint"), "path": entry.get("path"), "status": status})


def _note_push(
    found: list[dict[str, Any]],
    entry: Mapping[str, Any],
    attempt_of: Mapping[str, tuple[Any, Any]],
    renewed_by: Mapping[str, str],
) -> None:
    which = (entry.get("task_id"), entry.get("attempt"))
    for revival in found:
        if (revival["task_id"], revival["attempt"]) == which and renewed_by.get(revival["lease_id"]) == revival[
            "journal"
        ]:
            revival["governed"].append({"endpoint": "push", "ref": entry.get("ref"), "new": entry.get("new")})


def effects_after_stops(log: Sequence[Mapping[str, Any]], stops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each orderly stop of a blocked or idle worker (``worker``, and the log's length ``from`` the stop ``to``
    the exit), the governed side effects in between: its submissions and receipts, and the pushes that reached an
    origin while no other worker made a request (the origin does not know the worker; RESUME-5)."""
    found = []
    for stop in stops:
        window = log[stop["from"] : stop["to"]]
        requests = [e for e in window if e.get("kind") == "request"]
        alone = all(e.get("worker") in (None, stop["worker"]) for e in requests)  # None: the origin's hook
        governed = [
            {"endpoint": e.get("endpoint"), "path": e.get("path"), "status": e.get("status")}
            for e in requests
            if e.get("worker") == stop["worker"] and e.get("endpoint") in ("result", "receipt")
        ]
        governed += [
            {"endpoint": "push", "ref": e.get("ref"), "new": e.get("new")}
            for e in window
            if alone and e.get("kind") == "moment" and e.get("check") == "push"
        ]
        found.append({"worker": stop["worker"], "governed": governed})
    return found
