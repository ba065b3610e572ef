"""Leases (docs/spec/p1.md, section 10): renewed on CP time at the step boundaries after the kit moved the clock
past a lease's renewal point (LEASE-3, LEASE-2) and before every governed send, each resend included (LEASE-3,
SUB-4), no governed side effect with a lost lease (LEASE-4), and every lease of a terminal attempt released by
idle (LEASE-5).

The kit's clock moves only when the kit moves it, so a worker that decides from its own wall or monotonic
clock that its lease is still young never renews in time. Which boundaries renew is settled in p1.md 0.4
(those before ``workspace_prepared``, ``verification_passed``, ``source_capture_done``, ``commit_done`` and
``result_pending``), and so is what a lease lost at them means: an abandonment, but for COMMIT-4's
``lease_not_converged`` once ``commit_done`` is durable, never after a source_capture task's result. The
harness records the journal's length just before and just after each clock move of a step, so the rows written
between two such moves are known; the control plane's log shows the lease as it stood at the move and every
renewal after it. The log also orders each governed send after the renewals before it: a check of the lease's
state when a request arrives cannot tell a resend that no renewal preceded, since the lease is still ACTIVE then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from resumekit.conformance._text import clip
from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import TERMINAL, Row, attempts
from resumekit.conformance.p1.views import CONTROL_PLANE
from resumekit.conformance.results import Mismatch

RENEWING = ("workspace_prepared", "verification_passed", "source_capture_done", "commit_done", "result_pending")
# The moments of the control plane's log that stand for one governed send each (p1.md 0.3), and their names.
GOVERNED = {"push": "push", "receipt": "receipt report", "submission": "result submission"}
# How an answer travelled when the worker may have read it; a dropped one it never got.
_REACHED = ("answer", "delay")
_KIT_ENDPOINTS = ("origin_check", "origin_updated", "tool_started")  # the calls of the origin's hooks and the tool
_SHOWN = 5  # the renewals a finding lists of those since the previous send, the latest
_RULE = {
    False: "a renewal answered ACTIVE immediately precedes every governed side effect, each resend included (LEASE-3)",
    True: "a renewal answered ACTIVE precedes each resend of a submission after an unknown answer (SUB-4), as it "
    "precedes every governed side effect (LEASE-3)",
}


def lost(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-4 (EVID-4): no push and no submission reached the kit while the attempt's lease was not ACTIVE, and
    none from a worker that was told the lease was lost (a renewal answered with a 4xx, a side effect with 403),
    whatever the control plane says of the lease later: a 404 or a 400 that changed nothing, a replayed delivery
    that made it ACTIVE again."""
    found = [_after_loss(loss) for loss in history.losses if loss["governed"]]
    for index, push in enumerate(history.pushes):
        lease = push.get("lease")
        state = lease.get("state") if isinstance(lease, Mapping) else None
        if push.get("task_id") is not None and state is not None and state != "ACTIVE":
            found.append(
                _m("LEASE-4", f"/origin/pushes/{index}", "ACTIVE", state, "a push reached the origin with a lost lease")
            )
    for submission in history.submissions:
        if int(submission["status"]) == 403:
            found.append(
                _m(
                    "LEASE-4",
                    f"/control-plane/{submission['task_id']}/{submission['attempt']}/submission",
                    "a lease ACTIVE at CP time",
                    "answered 403",
                    "a submission reached the control plane with a lost lease",
                )
            )
    return found


def capture_losses(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-4 (p1.md 0.4): an attempt whose rows record a result and no governed commit (a source_capture
    task's) never ends in ``lease_not_converged``. That reason is COMMIT-4's, for a lease lost once
    ``commit_done`` is durable; ``source_capture_done`` has its rank but records no commit and no convergence
    check follows it, so a lease lost at its ``result_pending`` boundary abandons the attempt without a row."""
    found = []
    for ident, group in attempts(history.rows).items():
        last = group[-1]
        if last["phase"] != "reconciliation_required" or last["reason"] != "lease_not_converged":
            continue
        results = [row for row in group if row["phase"] in ("source_capture_done", "result_pending")]
        if not results or any(row["phase"] == "commit_done" or row["commit_oid"] for row in group):
            continue
        note = (
            f"attempt {ident[1]!r} of {ident[0]!r} recorded a result and no governed commit (last result row: "
            f"{results[-1]['phase']!r}, seq {results[-1]['seq']!r}), then ended in lease_not_converged: a lease "
            "lost before result_pending of a source_capture attempt abandons it without a row (LEASE-4); "
            "COMMIT-4's convergence check and its reasons follow commit_done only"
        )
        found.append(
            _m("LEASE-4", f"/journal/{ident[0]}/{ident[1]}/{len(group) - 1}/reason", "no row (abandoned)",
               "reconciliation_required: lease_not_converged", note)
        )
    return found
def _after_loss(loss: Mapping[str, Any]) -> Mismatch:
    revived = loss["revived"]
    since = "before a replayed delivery made it ACTIVE again" if revived else "and the lease stays lost for the worker"
    note = (
        f"governed side effects for an abandoned attempt: the control plane had told this worker that lease "
        f"{loss['lease_id']!r} was lost ({loss['told']}) {since}; any 4xx to a renewal is a loss, only a 5xx or "
        "no answer leaves it unknown"
    )
    where = f"/control-plane/{loss['task_id']}/{loss['attempt']}/{'revived' if revived else 'lost'}/{loss['journal']}"
    return _m("LEASE-4", where, [], list(loss["governed"]), note)


def renewed_sends(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-3 (b), SUB-4: in the control plane's log, each governed send of an attempt (a push, a receipt report, a
    result submission; a first send and every resend) follows a successful renewal of the attempt's lease (answered
    200, so ACTIVE, and the answer not dropped) made since the attempt's previous governed send: by the process
    that sends, for a report or a submission; by any, for a push, which reaches the origin without naming its
    worker. A submission after an earlier one of its attempt is a resend (SUB-4); the rest are LEASE-3's."""
    attempt_of: dict[str, tuple[Any, Any]] = {}  # lease_id -> (task_id, attempt)
    renewed: dict[Any, tuple[Any, Any]] = {}  # request number -> the attempt whose lease it renewed
    sends: dict[tuple[Any, Any], _Sends] = {}
    found = []
    for event in history.events:
        if event.actor != CONTROL_PLANE:
            continue
        if event.kind == "lease" and isinstance(event.get("lease"), Mapping):
            lease = event.get("lease")
            which = (lease.get("task_id"), lease.get("attempt"))
            attempt_of[str(lease.get("lease_id"))] = which
            sends.setdefault(which, _Sends()).lease_id = str(lease.get("lease_id"))
            if event.get("event") == "renewed":
                renewed[event.get("request")] = which
        elif event.kind == "request" and event.get("endpoint") == "renew":
            # The lease the control plane renewed, however the path spelled it; else the one the path names.
            of = renewed.pop(event.get("request"), None)
            success = of is not None and event.get("status") == 200 and event.get("answer") in _REACHED
            of = of or attempt_of.get(_renewed(event))
            if of is not None:
                sends[of].renewals.append({**_renewal(event), "renewed": success})
        elif event.kind == "moment" and event.get("check") in GOVERNED:
            attempt = sends.setdefault((event.get("task_id"), event.get("attempt")), _Sends())
            if event.get("request") in attempt.requests:
                continue  # one push that updates several branches is one send
            if not any(_succeeded(renewal, event) for renewal in attempt.renewals):
                found.append(_unrenewed_send(event, attempt))
            attempt.sent(event)
    return found


@dataclass
class _Sends:
    """One attempt's governed sends so far, and the renewals of its lease since the latest."""

    lease_id: str | None = None
    renewals: list[dict[str, Any]] = field(default_factory=list)
    previous: Event | None = None
    counts: dict[str, int] = field(default_factory=dict)  # check -> the sends of that kind so far
    requests: set[Any] = field(default_factory=set)

    def sent(self, send: Event) -> None:
        self.renewals, self.previous = [], send
        self.counts[send.get("check")] = self.counts.get(send.get("check"), 0) + 1
        self.requests.add(send.get("request"))


def _renewed(request: Event) -> str:
    """The lease a renewal request's path names (``v1/leases/<lease_id>/renew``)."""
    parts = str(request.get("path")).split("/")
    return unquote(parts[2], errors="replace") if len(parts) == 4 else ""


def _renewal(request: Event) -> dict[str, Any]:
    return {name: request.get(name) for name in ("request", "worker", "status", "answer")}


def _succeeded(renewal: Mapping[str, Any], send: Event) -> bool:
    """Whether *renewal* renewed the lease and told the process that made *send* so (any process, for a push)."""
    return bool(renewal["renewed"]) and (send.get("check") == "push" or renewal["worker"] == send.get("worker"))


def _unrenewed_send(send: Event, attempt: _Sends) -> Mismatch:
    check, task_id, number = send.get("check"), send.get("task_id"), attempt.counts.get(send.get("check"), 0)
    resend = check == "submission" and number > 0
    by = "" if check == "push" else f" by {send.get('worker')!r}"
    after = "before it"
    if attempt.previous is not None:
        previous = attempt.previous
        after = f"since the attempt's previous governed send (its {GOVERNED[previous.get('check')]}, request "
        after += f"{previous.get('request')!r})"
    note = (
        f"send {number + 1!r} of the {GOVERNED[check]} of attempt {send.get('attempt')!r} of {task_id!r} (request "
        f"{send.get('request')!r}{by and ','}{by}) followed no renewal of the attempt's lease {attempt.lease_id!r} "
        f"answered ACTIVE{' to that process' if by else ''} {after}: {len(attempt.renewals)!r} renewal requests of "
        f"it came in between; {_RULE[resend]}"
    )
    shown = attempt.renewals[-_SHOWN:]
    actual = {"request": send.get("request"), "worker": send.get("worker"), "renewals": shown}
    pointer = f"/control-plane/{task_id}/{send.get('attempt')}/{check}/{number}/renewal"
    expected = f"a renewal of {attempt.lease_id!r} answered ACTIVE{by} {after}"
    found = _m("SUB-4" if resend else "LEASE-3", pointer, expected, actual, note)
    return dataclasses.replace(found, event=send.seq)


def renewals(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-3: for each clock move of a step that left an ACTIVE lease less than half its TTL before expiry,
    the first renewing row of that lease's attempt written before the next move follows a renewal of it."""
    moves = {move["seq"]: move for move in history.clock_moves}
    entries = list(history.lease_log)
    at = [index for index, entry in enumerate(entries) if entry["kind"] == "clock"]
    found: list[Mismatch] = []
    for number, index in enumerate(at):
        move = moves.get(entries[index]["seq"])
        end = at[number + 1] if number + 1 < len(at) else len(entries)
        later = moves.get(entries[end]["seq"]) if end < len(entries) else None
        if move is None or (end < len(entries) and later is None):
            continue  # a move no step made (a fault's, an expiry's): the rows around it cannot be placed
        upper = later["rows_before"] if later is not None else len(history.rows)
        rows = history.rows[move["rows_after"] : upper]
        found += _segment(entries[index], _views(entries[:index]), rows, entries[index + 1 : end])
    return found


def _views(entries: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each lease's view as its latest event before a move left it."""
    views: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if entry["kind"] == "lease":
            views[str(entry["lease"]["lease_id"])] = entry["lease"]
    return views


def _segment(
    clock: Mapping[str, Any],
    views: Mapping[str, Mapping[str, Any]],
    rows: Sequence[Row],
    after: Sequence[Mapping[str, Any]],
) -> list[Mismatch]:
    """The findings of one move: *rows* were written after it and before the next, *after* is the log since."""
    now = clock["to"]
    renewed = {str(e["lease"]["lease_id"]) for e in after if e["kind"] == "lease" and e["event"] == "renewed"}
    found, seen = [], set()
    for row in rows:
        lease_id = row["lease_id"]
        view = views.get(lease_id)
        if row["phase"] not in RENEWING or view is None or lease_id in seen or lease_id in renewed:
            continue
        seen.add(lease_id)
        if view.get("state") == "ACTIVE" and _due(view, now):
            found.append(_unrenewed(clock, view, row))
    return found


def _due(view: Mapping[str, Any], now: Any) -> bool:
    """Whether a lease is past its renewal point at CP time *now* and not yet expired (LEASE-3 (a))."""
    expires, ttl = view.get("expires_at_ms"), view.get("ttl_ms")
    if not (isinstance(expires, int) and isinstance(ttl, int) and isinstance(now, int)):
        return False
    return 0 < expires - now < ttl / 2


def _unrenewed(clock: Mapping[str, Any], view: Mapping[str, Any], row: Row) -> Mismatch:
    lease_id, expires, ttl = view["lease_id"], view["expires_at_ms"], view["ttl_ms"]
    note = (
        f"the kit moved the clock by {clock['delta_ms']!r} ms to {clock['to']!r}, leaving lease {lease_id!r} "
        f"{expires - clock['to']!r} ms before its expires_at_ms {expires!r}, less than half its ttl_ms {ttl!r}; "
        f"the step boundary of the {row['phase']!r} row (seq {row['seq']!r}) came after that move without a "
        f"renewal: the renewal is decided on CP time, never on the worker's own clock (LEASE-2)"
    )
    return _m(
        "LEASE-3",
        f"/journal/{row['task_id']}/{row['attempt']}/{row['phase']}/renewal",
        f"a renewal of {lease_id!r} at the step boundary before the row",
        {"lease_id": lease_id, "now_ms": clock["to"], "expires_at_ms": expires, "renewed": False},
        note,
    )


def released(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-5, once the worker is idle: no terminal attempt still holds its lease."""
    found = []
    groups = attempts(history.rows)
    # Only the leases a terminal attempt recorded as its own: a lease the kit granted itself is not the worker's.
    terminal = {row["lease_id"] for group in groups.values() if group[-1]["phase"] in TERMINAL for row in group}
    for lease in history.leases:
        if lease.get("state") == "ACTIVE" and lease.get("lease_id") in terminal:
            found.append(
                _m(
                    "LEASE-5",
                    f"/leases/{lease.get('lease_id')}",
                    "released",
                    "ACTIVE",
                    "a terminal attempt still holds its lease at idle",
                )
            )
    return found


def own_leases(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-1: every row of an attempt records one lease, the one the control plane granted that attempt (at its
    claim, or with a delivery of it); one finding per attempt."""
    granted = _granted(history.log)
    found = []
    for ident, group in attempts(history.rows).items():
        named = list(dict.fromkeys(str(row["lease_id"]) for row in group))
        ours = granted.get(ident[:2], [])
        if len(named) == 1 and named[0] in ours:
            continue
        # The worker wrote the ids: each shown cut short, so that a megabyte of one stays out of the report.
        strays = {str(row["seq"]): _id(row["lease_id"]) for row in group if row["lease_id"] not in ours}
        shown = [_id(lease_id) for lease_id in named]
        note = (
            f"the rows of attempt {ident[1]!r} of {ident[0]!r} record the leases {shown!r}, of which the rows "
            f"(seq -> lease) {strays!r} are none the control plane granted that attempt ({ours!r}): the claim "
            "answer's lease is the only one an attempt uses, and every row records it"
        )
        expected = ours[0] if len(ours) == 1 else ours
        found.append(_m("LEASE-1", f"/journal/{ident[0]}/{ident[1]}/lease_id", expected, shown, note))
    return found


def _id(lease_id: Any) -> str:
    return clip(str(lease_id), 80)


def _granted(log: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], list[str]]:
    """(task_id, attempt) -> the leases claim answers granted it, in order: the official grants, and the lease a
    faulty delivery served (CP-21's, which the kit holds; its other leases, a second writer's, are no attempt's)."""
    found: dict[tuple[Any, Any], list[str]] = {}
    for entry in log:
        lease, kind = entry.get("lease"), entry.get("kind")
        if kind == "lease" and entry.get("event") == "granted" and isinstance(lease, Mapping):
            if entry.get("official") is False:
                continue
            key, lease_id = (lease.get("task_id"), lease.get("attempt")), lease.get("lease_id")
        elif kind in ("replayed_delivery", "conflicting_delivery"):
            key, lease_id = (entry.get("task_id"), entry.get("attempt")), entry.get("lease_id")
        else:
            continue
        leases = found.setdefault(key, [])
        if str(lease_id) not in leases:
            leases.append(str(lease_id))
    return found


def clock_reads(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-2: after the kit moved the clock past a lease's renewal point, a row of that lease's attempt at a
    boundary that renews was written while the worker sent the control plane no request at all until the next
    move: nothing told it the CP time, so the lease was judged young by the worker's own clock."""
    moves = {move["seq"]: move for move in history.clock_moves}
    log = history.log
    at = [index for index, entry in enumerate(log) if entry.get("kind") == "clock"]
    found: list[Mismatch] = []
    views: dict[str, Mapping[str, Any]] = {}
    done = 0
    for number, index in enumerate(at):
        for entry in log[done:index]:
            if entry.get("kind") == "lease" and isinstance(entry.get("lease"), Mapping):
                views[str(entry["lease"].get("lease_id"))] = entry["lease"]
        done = index
        move = moves.get(log[index].get("seq"))
        end = at[number + 1] if number + 1 < len(at) else len(log)
        later = moves.get(log[end].get("seq")) if end < len(log) else None
        if move is None or (end < len(log) and later is None):
            continue  # a move no step made: the rows around it cannot be placed
        if any(_asked(entry) for entry in log[index + 1 : end]):
            continue  # the worker asked the control plane something: it could know the CP time
        upper = later["rows_before"] if later is not None else len(history.rows)
        found += _unread(log[index], views, history.rows[move["rows_after"] : upper])
    return found


def _asked(entry: Mapping[str, Any]) -> bool:
    """Whether a log entry is a request of the worker's API, whose answer carries CP time (CP-4): not a call of the
    origin's hooks or of the tool, which answers nothing to the worker."""
    return entry.get("kind") == "request" and entry.get("endpoint") not in _KIT_ENDPOINTS


def _unread(clock: Mapping[str, Any], views: Mapping[str, Mapping[str, Any]], rows: Sequence[Row]) -> list[Mismatch]:
    """The first renewing row of each lease left due by *clock*, written with no request since the move."""
    found, seen = [], set()
    for row in rows:
        view = views.get(str(row["lease_id"]))
        if row["phase"] not in RENEWING or view is None or row["lease_id"] in seen:
            continue
        seen.add(row["lease_id"])
        if view.get("state") != "ACTIVE" or not _due(view, clock.get("to")):
            continue
        note = (
            f"the kit moved the clock by {clock.get('delta_ms')!r} ms to {clock.get('to')!r}, leaving lease "
            f"{view.get('lease_id')!r} {view['expires_at_ms'] - clock['to']!r} ms before expiry (ttl_ms "
            f"{view.get('ttl_ms')!r}); the {row['phase']!r} row (seq {row['seq']!r}) came after that move while the "
            "worker sent the control plane no request until the next move, so no CP time reached it: every lease "
            "decision is taken on CP time (now_ms of an answer or of GET v1/clock), never the worker's own clock"
        )
        where = f"/journal/{row['task_id']}/{row['attempt']}/{row['phase']}/cp-time"
        expected = f"a request to the control plane (GET v1/clock or a renewal) after the move to {clock.get('to')!r}"
        found.append(_m("LEASE-2", where, expected, "no request before the row", note))
    return found


def second_worker_own_leases(history: Story, scenario: Scenario) -> list[Mismatch]:
    """LEASE-1 over the journal of a scenario's second worker."""
    return on_second_worker(own_leases, history, scenario)
