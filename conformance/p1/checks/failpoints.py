"""Failpoints (docs/spec/p1.md, section 14): a worker blocks at the site armed, in the durable state its
catalog names there (FPT-1, FPT-2), ``before_receipt`` passed on no resend of a receipt (FPT-1); the journal a
kit-side kill point leaves holds what FPT-3's table names there; and the catalog itself: which names are sites,
and what is durable at each.

The harness records each block (``blocked``: the site the worker named, the one armed, and what the kit
read as it stood there: the task's rows, the last row of every attempt, the cache and any temporaries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.model import RANKS, Row
from resumekit.conformance.p1.views import CONTROL_PLANE
from resumekit.conformance.results import Mismatch

ANY_FAILPOINT = "*"  # the hit-th failpoint site of any name (capability p1.failpoint-any)
# The phase a failpoint's site names, and what must be durable there (FPT-1), as (phase, where).
_SITES = ("before_{}_row", "after_{}_row", "before_{}_cache", "after_{}_cache")
# The worker failpoints that surround no row (FPT-1).
OTHER_FAILPOINTS = (
    "cleanup_before_remove",
    "before_push",
    "before_receipt",
    "before_result_submit",
    "before_report",
    "before_release",
)


def released(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2: once ``p1.worker.continue`` has answered, no ``p1.worker.wait`` reports the block it released.

    The harness notes on each block and each wait that ended in another state than the one waited for the block
    the last ``continue`` released, if no wait has ended since. A report of that block again is judged only where
    the worker cannot have reached the same site anew: the failpoint armed by the ``continue`` has another name
    (or none), and is not ``*``, whose next hit may be a site of the same name."""
    found = []
    for event in (*history.of(None, "blocked"), *history.of(None, "not-as-waited")):
        name = still_released(event)
        if name is not None:
            note = (
                f"p1.worker.continue had answered, releasing the block at {name!r}, yet a p1.worker.wait still "
                "reported that block: the adapter must mark the worker running before it answers continue, not "
                "leave it to the worker's thread to wake up"
            )
            answer = event.get("answer") or {"state": "blocked", "failpoint": name}
            found.append(Mismatch("/wait/state", "not the released block", answer, "ADP-2", note, event=event.seq))
    return found


def still_released(event: Event) -> str | None:
    """The failpoint a block or an unexpected wait answer (*event*) reports although ``continue`` released it
    and the worker cannot have reached it anew (see :func:`released`); None for any other event."""
    releases, armed = event.get("released"), event.get("armed")
    if event.kind == "blocked":
        name = event.get("failpoint")
    else:
        answer = event.get("answer")
        name = answer.get("failpoint") if isinstance(answer, Mapping) and answer.get("state") == "blocked" else None
    if not isinstance(name, str) or name != releases or armed in (name, ANY_FAILPOINT):
        return None
    return name


def block(history: Story, scenario: Scenario) -> list[Mismatch]:
    """FPT-1 and FPT-2: each block at a site the catalog names, the one armed, in the state named there; a block
    ``continue`` released, still reported, is ADP-2's (:func:`released`)."""
    found = []
    for event in history.of(None, "blocked"):
        if still_released(event) is not None:
            continue
        name, armed = event.get("failpoint"), event.get("armed")
        if armed == ANY_FAILPOINT and isinstance(name, str):
            if not known_failpoint(name):
                note = f"blocked at {name!r}, a site the failpoint catalog does not name"
                expected = "a failpoint of golden/p1/failpoints.yaml"
                found.append(Mismatch("/wait/failpoint", expected, name, "FPT-1", note, event=event.seq))
                continue
        elif name != armed:
            note = "blocked at another failpoint"
            found.append(Mismatch("/wait/failpoint", armed, name, "FPT-2", note, event=event.seq))
            continue
        state = failpoint_state(
            str(name),
            list(event.get("rows", ())),
            [tuple(item) for item in event.get("temporaries", ())],
            tuple(event.get("cache", ("absent", None))),
            list(event.get("attempts", ())),
        )
        if state is not None:
            problem, clause = state
            note = f"blocked at {name}, but {problem}"
            found.append(Mismatch("/wait/observed", name, problem, clause, note, event=event.seq))
    return found


def receipt_resends(history: Story, scenario: Scenario) -> list[Mismatch]:
    """FPT-1: ``before_receipt`` is passed once per convergence check, before the receipt's first send; a resend
    after an unknown answer is preceded by a renewal but by no failpoint. A worker process's request just before
    it blocked there is the renewal that follows the failpoint's previous pass, or the push before
    ``commit_done``: never a receipt of its own left without an answer (a 5xx, or none), which it would resend."""
    found = []
    last: dict[str, Event] = {}  # each worker process's latest request, by the name the log gives it
    for event in history.events:
        if event.actor == CONTROL_PLANE and event.kind == "request":
            last[str(event.get("worker"))] = event
        elif event.kind == "blocked" and event.get("failpoint") == "before_receipt":
            before = last.get(event.actor)
            if before is not None and before.get("endpoint") == "receipt" and _unanswered(before):
                found.append(_resent_receipt(event, before))
    return found


def _unanswered(request: Event) -> bool:
    """A request the worker got no answer to: a 5xx, or an answer the control plane dropped."""
    status = request.get("status")
    return request.get("answer") == "drop" or (isinstance(status, int) and status >= 500)


def _resent_receipt(block: Event, before: Event) -> Mismatch:
    status = "no answer" if before.get("answer") == "drop" else f"status {before.get('status')!r}"
    note = (
        f"blocked at before_receipt right after its receipt request {before.get('path')!r} got {status}: the "
        "failpoint was passed again for the resend, but it sits before the first send of a convergence check "
        "only (a resend is preceded by a renewal, not by a failpoint), so the hit counts of before_receipt and "
        "'*' differ from the catalog's"
    )
    got = {"failpoint": "before_receipt", "after": {"path": before.get("path"), "status": before.get("status")}}
    expected = "before_receipt before a convergence check's first receipt send only"
    return Mismatch("/wait/failpoint", expected, got, "FPT-1", note, event=block.seq)


def known_failpoint(name: str) -> bool:
    """Whether *name* is a worker failpoint of the catalog (FPT-1)."""
    return failpoint_site(name) is not None or name in OTHER_FAILPOINTS


def failpoint_site(name: str) -> tuple[str, str] | None:
    """(phase, site) for a row or cache failpoint name, or None for the other failpoints."""
    for site in _SITES:
        prefix, suffix = site.split("{}")
        if name.startswith(prefix) and name.endswith(suffix):
            phase = name[len(prefix) : len(name) - len(suffix)]
            if phase in RANKS or phase == "reconciliation_required":
                return phase, site
    return None


# What the journal's latest row of the task is at each failpoint that surrounds no row (FPT-1's second
# table), and the clause that orders that row before the side effect the failpoint precedes: a worker
# blocked there without the row has broken that clause, so the mismatch names it. None: nothing of the
# journal is named there (cleanup_before_remove: "unchanged", attested).
OTHER_DURABLE: Mapping[str, tuple[frozenset[str], str] | None] = {
    "cleanup_before_remove": None,
    "before_push": (frozenset({"verification_passed"}), "COMMIT-1"),
    "before_receipt": (frozenset({"commit_done"}), "COMMIT-5"),
    "before_result_submit": (frozenset({"result_pending"}), "SUB-1"),
    "before_report": (frozenset({"reconciliation_required"}), "OUT-1"),
    "before_release": (frozenset({"result_submitted", "reconciliation_required"}), "LEASE-5"),
}

# What is durable in the worker at each kit-side kill point (FPT-3's table): the last row of the attempt the
# point's request names, or of the journal where it names none (the tool's); None: no row of the attempt that
# the journal did not hold before (a claim granted and not yet answered, a replayed delivery's included).
KIT_KILLS: Mapping[str, str | None] = {
    "server_claim_granted": None,
    "server_result_received": "result_pending",
    "server_result_stored": "result_pending",
    "server_receipt_recorded": "commit_done",
    "origin_ref_updated": "verification_passed",
    "tool_started": "verification_passed",
}
_KIT_KILL = "a kit-side kill point"  # the ``by`` of a kill the control plane made at one
_SERVED_AGAIN = ("replayed_delivery", "conflicting_delivery")  # a claim answered with an attempt served before


def kit_kills(history: Story, scenario: Scenario) -> list[Mismatch]:
    """FPT-3: the journal the kit read first after a kit-side kill point holds what the table names durable there:
    the worker held the request, unanswered, so it had recorded all it records before sending it and nothing its
    answer decides. A kill point is no failpoint: the worker cannot say where it stands, so the kit reads it."""
    found = []
    for event in history.of(None, "killed"):
        at = event.get("at")
        if event.get("by") != _KIT_KILL or not isinstance(at, str) or at not in KIT_KILLS:
            continue
        after = _read_after(history.events, event.seq, _journal_of(history.events, event.actor))
        number = _killed_request(history.of(CONTROL_PLANE, "request"), at, event.seq)
        subject = _subject(history.log, number)
        before = _held_before(history, at, number)
        if after is None or before is None:
            continue  # no read of the journal after the kill, or none of it as the claim arrived: nothing seen
        problem = _kill_state(at, subject, before, list(after.get("rows", ())))
        if problem is not None:
            note = f"killed by the kit at {at!r}, the worker's journal shows that {problem}"
            expected = KIT_KILLS[at] or "no row of the attempt beyond those held as the claim arrived"
            found.append(Mismatch(f"/kill-points/{at}", expected, problem, "FPT-3", note, event=after.seq))
    return found


def _journal_of(events: Sequence[Event], worker: str) -> str:
    """Which journal a worker process keeps (a scenario's second worker keeps the second one)."""
    for event in events:
        if event.actor == "journal" and event.kind == "read" and event.get("worker") == worker:
            return str(event.get("journal"))
    return "first"


def _read_after(events: Sequence[Event], seq: int, journal: str) -> Event | None:
    """The first read of *journal* after event *seq*."""
    reads = (e for e in events if e.actor == "journal" and e.kind == "read" and e.get("journal") == journal)
    return next((e for e in reads if e.seq > seq), None)


def _killed_request(requests: Sequence[Event], at: str, seq: int) -> Any:
    """The number of the request the control plane killed the worker at *at* on, the latest before event *seq*."""
    numbers = [e.get("request") for e in requests if e.seq < seq and e.get("kill_point") == at]
    return numbers[-1] if numbers else None


def _subject(log: Sequence[Mapping[str, Any]], number: Any) -> tuple[Any, Any] | None:
    """(task_id, attempt) the request *number* names in an entry the control plane logged for it (a task's state,
    a lease, a moment, a ref update); None where it names none (the tool's announcement)."""
    for entry in log if number is not None else ():
        if entry.get("request") != number:
            continue
        lease = entry.get("lease")
        named: Mapping[str, Any] = lease if isinstance(lease, Mapping) else entry
        if named.get("task_id") is not None and named.get("attempt") is not None:
            return named.get("task_id"), named.get("attempt")
    return None


def _held_before(history: Story, at: str, number: Any) -> list[Row] | None:
    """For a claim: the rows the journal held as it arrived (the kit's read at that request), none for an attempt
    issued fresh, and None for a delivery served again that the kit did not read at (its earlier rows cannot be
    told from new ones). Other kill points: no rows (unused)."""
    if KIT_KILLS[at] is not None:
        return []
    reads = history.reads_at(number) if number is not None else []
    if reads:
        return list(reads[0].get("rows", ()))
    again = any(e.get("request") == number and e.get("kind") in _SERVED_AGAIN for e in history.log)
    return None if again else []


def _kill_state(at: str, subject: tuple[Any, Any] | None, before: Sequence[Row], after: Sequence[Row]) -> str | None:
    """What of the journal read after a kill at *at* disagrees with FPT-3's table, in words, or None."""
    wanted = KIT_KILLS[at]
    mine = [row for row in after if subject is None or (row.get("task_id"), row.get("attempt")) == subject]
    if wanted is None:
        held = {row.get("seq") for row in before}
        new = [row.get("phase") for row in mine if row.get("seq") not in held]
        return f"the attempt {subject!r} has rows {new!r} it had not before the claim was answered" if new else None
    last = mine[-1].get("phase") if mine else None
    if last == wanted:
        return None
    whose = "the journal" if subject is None else f"attempt {subject!r}"
    return f"the last row of {whose} is {last!r}, not {wanted!r}"


Cache = tuple[str, Any]  # (absent | torn | unreadable | ok, content), as the harness read a cache or a temporary


def failpoint_state(
    name: str,
    rows: Sequence[Row],
    temporaries: Sequence[Cache] = (),
    cache: Cache = ("absent", None),
    attempts: Sequence[Row] | None = None,
) -> tuple[str, str] | None:
    """(why, clause) when the durable state does not match what FPT-1 says holds at *name*, or None.

    *rows* are the journal's rows of the task the worker is at (the task of its latest row), *cache* that
    task's cache and *temporaries* every cache temporary in ``tasks/``, each read by the harness; *attempts*
    the last row of every attempt of the journal (default: the latest row), since a failpoint beside the
    rows may be reached for another attempt than the latest row's (a restart releases the lease of a
    terminal attempt before it resumes the open one). The clause
    is FPT-2 unless a more precise rule is broken: CACHE-2 for a cache ahead of its journal, and at the
    failpoints beside the rows the rule that puts the row before the side effect.
    """
    found = failpoint_site(name)
    last = rows[-1] if rows else None
    if found is None:
        wanted = OTHER_DURABLE.get(name)
        candidates = attempts if attempts is not None else rows[-1:]
        if wanted is None or any(row["phase"] in wanted[0] for row in candidates):
            return None
        phases, clause = wanted
        latest = sorted({row["phase"] for row in candidates})
        return f"no attempt's last row is {' or '.join(sorted(phases))} (the last rows: {latest!r})", clause
    phase, site = found
    ahead = _cache_ahead(cache, last)
    if site == "before_{}_row":
        if last is not None and last["phase"] == phase:
            return f"the journal already holds a {phase} row as its latest", "FPT-2"
        return ahead
    if last is None or last["phase"] != phase:
        return f"the journal's latest row is {last['phase'] if last else None!r}, not {phase!r}", "FPT-2"
    return ahead or _cache_problem(phase, site, last, temporaries, cache)


def _cache_problem(
    phase: str, site: str, last: Row, temporaries: Sequence[Cache], cache: Cache
) -> tuple[str, str] | None:
    """What FPT-1 says of the cache and its temporary at a row's site, once the row itself matched."""
    shows = _shows(cache, last)
    if site == "after_{}_row" and shows:
        # Written before this site: before its row's commit, the likely bug, or the failpoint is misplaced.
        note = f"the cache already shows the {phase} row: it must still show the previous row or be absent"
        return f"{note} (was it written before its row's commit?)", "CACHE-2"
    if site == "before_{}_cache":
        if shows:
            return f"the cache already shows the {phase} row before its temporary was renamed", "FPT-2"
        if not any(_shows(temporary, last) for temporary in temporaries):
            return f"no cache temporary in tasks/ holds the {phase} row of task {last['task_id']!r}", "FPT-2"
    if site == "after_{}_cache" and not shows:
        return f"the cache does not show the {phase} row of task {last['task_id']!r}", "FPT-2"
    return None


def _shows(cache: Cache, row: Row) -> bool:
    """Whether a cache (or temporary) holds *row*: its task, seq and phase (CACHE-1)."""
    status, content = cache
    if status != "ok" or not isinstance(content, Mapping):
        return False
    return all(content.get(column) == row[column] for column in ("task_id", "seq", "phase"))


def _cache_ahead(cache: Cache, last: Row | None) -> tuple[str, str] | None:
    """CACHE-2: a cache is never ahead of its journal; why it is, or None."""
    status, content = cache
    if status != "ok" or not isinstance(content, Mapping):
        return None
    seq = content.get("seq")
    if last is None or (isinstance(seq, int) and not isinstance(seq, bool) and seq > last["seq"]):
        return f"the cache names seq {seq!r}, ahead of the journal: the journal commit comes first", "CACHE-2"
    return None
