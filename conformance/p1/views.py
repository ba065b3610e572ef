"""What the P1 checks read, taken from one case's history: pure queries over the events the harness recorded.

The harness records (``world.World.record``): every journal read, the control plane's log entries as they
are made, each worker process started, blocked, killed, exited or stopped, each change the kit made, and
what it read once the last step was done. This module only selects and reshapes those events and the
control plane's log (CP-19) among them: what each 409 answer to a result submission carried (SUB-5), the
clock moves and lease events in log order (LEASE-3), the leases a worker was told were lost and what it did
after (LEASE-4), the governed side effects around an orderly stop (RESUME-5). It reads no file and talks to
no process, so a verdict is a function of the history and the scenario alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from resumekit.conformance.events import Event
from resumekit.conformance.p1.model import Row, Snapshot, open_attempts

CONTROL_PLANE = "control-plane"
# The journal reads that stand for what the journal held at a moment (JNL-4): a worker's start is read before
# it runs, and a power-loss read is the durable view, which may lag the live reads.
_SNAPSHOT_READS = frozenset({"moment", "wait", "final"})
# The members of a lease's view that the renewal check reads (CP-12).
_LEASE_MEMBERS = ("lease_id", "task_id", "attempt", "state", "ttl_ms", "expires_at_ms")


def control_log(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The control plane's log (CP-19), entry by entry, as the control plane made it."""
    return [{"kind": e.kind, **e.data} for e in events if e.actor == CONTROL_PLANE]


def of_kind(events: Iterable[Event], actor: str | None, kind: str) -> list[Event]:
    """The events of *kind* (by *actor*, if named), in order."""
    return [e for e in events if e.kind == kind and (actor is None or e.actor == actor)]


def last_of(events: Sequence[Event], actor: str | None, kind: str) -> Event | None:
    """The latest event of *kind* (by *actor*, if named), or None."""
    found = of_kind(events, actor, kind)
    return found[-1] if found else None


def journal_reads(events: Iterable[Event], journal: str, whys: Iterable[str] | None = None) -> list[Event]:
    """The reads of the ``first`` or ``second`` worker's journal (for the reasons in *whys*, if given), in order."""
    wanted = None if whys is None else frozenset(whys)
    return [
        e
        for e in events
        if e.actor == "journal" and e.kind == "read" and e.get("journal") == journal
        and (wanted is None or e.get("why") in wanted)
    ]


def final_rows(events: Sequence[Event], journal: str = "first") -> list[Row]:
    """The journal as the kit read it once the last step was done (no rows if it was not read)."""
    reads = journal_reads(events, journal, ("final",))
    return [dict(row) for row in reads[-1].get("rows", ())] if reads else []


def snapshots(events: Sequence[Event], journal: str = "first") -> tuple[Snapshot, ...]:
    """What the journal held at each read the kit made while the worker ran and after, in order (JNL-4)."""
    return tuple(Snapshot.of(e.get("rows", ())) for e in journal_reads(events, journal, _SNAPSHOT_READS))


def open_at_start(events: Sequence[Event]) -> dict[str, list[Row]]:
    """Worker process -> the last row of each attempt its journal held open when the kit started it (RESUME-1)."""
    found = {}
    for read in journal_reads(events, "first", ("start",)) + journal_reads(events, "second", ("start",)):
        found[str(read.get("worker"))] = open_attempts([dict(row) for row in read.get("rows", ())])
    return found


def rows_at_start(events: Sequence[Event]) -> dict[str, int]:
    """Worker process -> how many rows its journal held when the kit started it."""
    reads = journal_reads(events, "first", ("start",)) + journal_reads(events, "second", ("start",))
    return {str(read.get("worker")): len(read.get("rows", ())) for read in reads}


def issued(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Every task the kit issued, as issued, in order."""
    return [dict(e.get("task")) for e in of_kind(events, "kit", "issued")]


def settings(events: Sequence[Event]) -> Mapping[str, Any] | None:
    """What the kit learned of the journal connections of the case's worker processes, as it recorded it
    (``story.JournalSettings`` has the members); None: no p1.journal."""
    found = last_of(events, "kit", "journal-settings")
    return None if found is None else found.get("settings")


def at_end(events: Sequence[Event], kind: str) -> Mapping[str, Any]:
    """What the kit read once the last step was done, as its event of *kind* holds it (nothing if unread)."""
    found = last_of(events, "kit", kind)
    return found.data if found is not None else {}


def stops(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Each orderly stop of a blocked or idle first worker: its process and the log's length around it."""
    return [
        {"worker": e.get("worker"), "from": e.get("logFrom"), "to": e.get("logTo")}
        for e in of_kind(events, "kit", "stopped-in-order")
    ]


def kit_calls(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each request the control plane refused for a kit path without the kit's secret (CP-22): the kit's own
    callers always carry it, so each is a worker's; as logged, with any secret already shown as <secret>."""
    return [
        {"worker": e.get("worker"), "method": e.get("method"), "path": e.get("path")}
        for e in log
        if e.get("kind") == "kit_path_refused"
    ]


def decoy_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """Each path of the decoy trees (``<tree>/<path>``) that differs between two listings: ``removed``,
    ``added`` or ``changed`` (its kind, bytes or link target)."""
    changes = {}
    for path in sorted(set(before) | set(after)):
        if path not in after:
            changes[path] = "removed"
        elif path not in before:
            changes[path] = "added"
        elif before[path] != after[path]:
            changes[path] = "changed"
    return changes


def served_requests(log: Sequence[Mapping[str, Any]]) -> set[Any]:
    """The numbers of the requests answered with a task: a lease granted, or a duplicate, replayed or
    conflicting delivery (a task, but no new lease)."""
    granted = {e.get("request") for e in log if e.get("kind") == "lease" and e.get("event") == "granted"}
    delivered = ("duplicate_delivery", "replayed_delivery", "conflicting_delivery")
    return granted | {e.get("request") for e in log if e.get("kind") in delivered}


def _told_to_wait(entry: Mapping[str, Any], served: set[Any]) -> bool:
    """Whether a claim's answer reached the worker without a task, so that WRK-3's wait applies after it."""
    return entry.get("request") not in served and entry.get("answer", "answer") != "drop"


def control_facts(
    log: Sequence[Mapping[str, Any]], end: Mapping[str, Any], tasks_issued: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The control plane's and the origins' side of the evidence, as plain data."""
    answered = {entry["request"]: entry for entry in log if entry.get("kind") == "request"}
    served = served_requests(log)
    conflicts = conflict_answers(log)  # what each 409 to a submission carried (SUB-5)
    submissions = []
    for entry in log:
        if entry.get("kind") == "moment" and entry.get("check") == "submission":
            request = answered.get(entry.get("request"))
            submissions.append(
                {
                    "task_id": entry["task_id"],
                    "attempt": entry["attempt"],
                    "key": entry["key"],
                    "result_hash": entry["result_hash"],
                    "status": request["status"] if request and isinstance(request.get("status"), int) else 0,
                    "answer": conflicts.get(entry.get("request")),
                }
            )
    tasks = {task_id: dict(view) for task_id, view in end.get("tasks", {}).items()}
    for entry in log:
        # A result the kit's own fault stored (a scripted 409) is not the worker's to answer for.
        if entry.get("kind") == "result_stored" and entry.get("cause") == "scripted" and entry["task_id"] in tasks:
            tasks[entry["task_id"]]["scripted_result"] = True
    claims = [
        # Only an answer the worker got asks it to wait: a dropped one is a transport failure to it.
        {"worker": e.get("worker"), "arrived_ms": e.get("arrived_ms"), "empty": _told_to_wait(e, served)}
        for e in log
        if e.get("kind") == "request" and e.get("endpoint") == "claim" and e.get("status") == 200
    ]
    requests = [
        {"worker": e.get("worker"), "endpoint": e.get("endpoint"), "path": e.get("path")}
        for e in log
        if e.get("kind") == "request"
    ]
    return {
        "submissions": submissions,
        "tasks": tasks,
        "leases": list(end.get("leases", ())),
        "pushes": [entry for entry in log if entry.get("kind") == "push"],
        "commits": {task_id: list(oids) for task_id, oids in end.get("commits", {}).items()},
        "claims": claims,
        "retry_after_ms": int(end.get("retry_after_ms", 0)),
        "requests": requests,
    }


def faulty_deliveries(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each attempt the control plane served against CP-5 or CP-7 (ReplayAttempt, ConflictingIdentity),
    with the governed side effects that followed it from the worker it was served to, up to that worker's
    next claim: one attempt at a time (WRK-2), so every one of them was made for the attempt served."""
    found = []
    for index, entry in enumerate(log):
        if entry.get("kind") not in ("replayed_delivery", "conflicting_delivery"):
            continue
        worker, number = entry.get("worker"), entry.get("request")
        governed: list[dict[str, Any]] = []
        for later in log[index + 1 :]:
            if later.get("request") == number:
                continue  # the claim that carried the delivery
            if later.get("kind") == "request" and later.get("worker") == worker:
                if later.get("endpoint") == "claim":
                    break
                if later.get("endpoint") in ("result", "receipt"):
                    governed.append({"endpoint": later["endpoint"], "path": later.get("path"),
                                     "status": later.get("status")})
            elif later.get("kind") == "push" and later.get("task_id") == entry.get("task_id"):
                governed.append({"endpoint": "push", "ref": later.get("ref"), "accepted": later.get("accepted")})
        found.append({
            "kind": entry["kind"],
            "task_id": entry.get("task_id"),
            "attempt": entry.get("attempt"),
            "worker": worker,
            "task": entry.get("task"),
            "governed": governed,
        })
    return found


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


def after_loss(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each lease the control plane told a worker was lost (LEASE-4: a renewal answered with a 4xx, p1.md 0.5
    G13, or a governed side effect answered 403), with the governed side effects of that worker's journal for the
    lease's attempt after the telling: submissions and receipts by any of its processes, and pushes that followed a
    renewal of the lease by one of them (a push follows its renewal, LEASE-3, and the origin does not know the
    worker); ``revived`` says whether a replayed delivery (CP-21) made the lease ACTIVE again since. A 5xx or no
    answer tells nothing (p1.md 0.4)."""
    attempt_of: dict[str, tuple[Any, Any]] = {}  # lease_id -> (task_id, attempt)
    moments: dict[Any, Mapping[str, Any]] = {}  # request number -> its submission or receipt moment
    renewed_by: dict[str, str] = {}  # lease_id -> the journal of its latest renewal
    found: list[dict[str, Any]] = []
    for entry in log:
        kind = entry.get("kind")
        if kind == "lease" and isinstance(entry.get("lease"), Mapping):
            lease = entry["lease"]
            lease_id = str(lease.get("lease_id"))
            attempt_of[lease_id] = (lease.get("task_id"), lease.get("attempt"))
            if entry.get("event") == "revived":
                for loss in found:
                    loss["revived"] = loss["revived"] or loss["lease_id"] == lease_id
        elif kind == "moment" and entry.get("check") in ("submission", "receipt"):
            moments[entry.get("request")] = entry
        elif kind == "moment" and entry.get("check") == "push":
            _note_push(found, entry, renewed_by)
        elif kind == "request":
            _note_request(found, entry, moments.get(entry.get("request")), attempt_of, renewed_by)
    return found


def _note_request(
    found: list[dict[str, Any]],
    entry: Mapping[str, Any],
    moment: Mapping[str, Any] | None,
    attempt_of: Mapping[str, tuple[Any, Any]],
    renewed_by: dict[str, str],
) -> None:
    journal, status, answered = _journal(entry.get("worker")), entry.get("status"), entry.get("answer") == "answer"
    lease_id = _renewed_lease(entry)
    if lease_id is not None:
        renewed_by[lease_id] = journal
        if answered and isinstance(status, int) and 400 <= status < 500:
            _told(found, journal, lease_id, attempt_of, f"a renewal answered {status!r}")
        return
    if moment is None:
        return
    which = (moment.get("task_id"), moment.get("attempt"))
    for loss in found:
        if loss["journal"] == journal and (loss["task_id"], loss["attempt"]) == which:
            loss["governed"].append({"endpoint": entry.get("endpoint"), "path": entry.get("path"), "status": status})
    if status == 403 and answered:  # after the side effects already told: this one is the telling
        for held, owner in attempt_of.items():
            if owner == which:
                _told(found, journal, held, attempt_of, f"a {moment.get('check')} answered 403")


def _told(
    found: list[dict[str, Any]], journal: str, lease_id: str, attempt_of: Mapping[str, tuple[Any, Any]], why: str
) -> None:
    """Note that *journal*'s worker was told *why* that *lease_id* is lost, unless it was told before."""
    if any(loss["journal"] == journal and loss["lease_id"] == lease_id for loss in found):
        return
    task_id, attempt = attempt_of.get(lease_id, (None, None))
    found.append({"journal": journal, "lease_id": lease_id, "task_id": task_id, "attempt": attempt, "told": why,
                  "revived": False, "governed": []})


def _note_push(found: list[dict[str, Any]], entry: Mapping[str, Any], renewed_by: Mapping[str, str]) -> None:
    which = (entry.get("task_id"), entry.get("attempt"))
    for loss in found:
        if (loss["task_id"], loss["attempt"]) == which and renewed_by.get(loss["lease_id"]) == loss["journal"]:
            loss["governed"].append({"endpoint": "push", "ref": entry.get("ref"), "new": entry.get("new")})


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
