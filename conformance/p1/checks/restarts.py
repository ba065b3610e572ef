"""Restarts and attempts served again (docs/spec/p1.md, section 11): a replay before the governed commit works in
a new workspace, so nothing the kit put in the old one reaches a result (RESUME-3); an attempt served again is not
started over, and a terminal one gets no step and no governed side effect (RESUME-4); restarts without progress are
capped (RESUME-6, strict).

The kit does not read the ``recoveries`` table: it counts the resumptions it saw. A process resumed an open
attempt when its journal held the attempt open as the kit started it and the control plane answered its renewal of
the attempt's lease with 200. Such a process appended a ``recoveries`` row first, so one that then blocked at a
failpoint certainly did; one killed before that may not have, so a count of resumptions is an upper bound of the
rows, and the blocked ones a lower bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.model import RANKS, TERMINAL, Row, attempts, identity, open_attempts
from resumekit.conformance.results import Mismatch

RECOVERY_CAP = 5  # resumptions with the same last row before the next one ends the attempt (RESUME-6)
# A conflicting delivery is served again when its own identity has rows (p1.md 0.5, G11); the first is SCOPE-6's.
_SERVED_AGAIN = ("duplicate_delivery", "replayed_delivery", "conflicting_delivery")


def replayed(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-3: no result of the journal names a file the kit wrote into a workspace a killed worker left, and the
    commit of an attempt replayed after it is the governed one the kit computes (TASK-4 defines it)."""
    names = [str(name) for event in history.of("kit", "tampered") for name in event.get("files", ())]
    if not names:
        return []
    found = []
    for row in history.rows:
        body = row["result_body"]
        hit = [name for name in names if isinstance(body, str) and name in body]
        if hit and row["phase"] in ("source_capture_done", "commit_done", "result_pending"):
            where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/result_body"
            note = (
                f"the {row['phase']} row's result names {hit[0]!r}, a file the kit wrote into a workspace the killed "
                "worker left: the replay read the old workspace instead of a new one"
            )
            found.append(_m("RESUME-3", where, "no file of the old workspace", hit, note))
    found += _replayed_commits(history)
    return found


def _replayed_commits(history: Story) -> list[Mismatch]:
    """A commit_done row written after the kit changed the old workspaces names the commit TASK-4 defines."""
    tampered = min((event.seq for event in history.of("kit", "tampered")), default=None)
    governed = {(g.get("task_id"), g.get("attempt")): g.get("commit") for g in history.governed}
    written_after = _rows_after(history, tampered)
    found = []
    for row in history.rows:
        wanted = governed.get((row["task_id"], row["attempt"]))
        if row["phase"] != "commit_done" or row["seq"] not in written_after or wanted in (None, row["commit_oid"]):
            continue
        where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/commit_oid"
        note = (
            "the commit_done row written after the kit changed the old workspace names another commit than the "
            "governed one: the replay did not build it in a new, clean workspace"
        )
        found.append(_m("RESUME-3", where, wanted, row["commit_oid"], note))
    return found


def _rows_after(history: Story, seq: int | None) -> set[int]:
    """The seqs of the (first) journal's rows that no read before event *seq* held."""
    if seq is None:
        return set()
    before = [e for e in history.events if e.seq < seq and _of_journal(e, history.journal)]
    held = {row.get("seq") for e in before for row in e.get("rows", ())}
    return {row["seq"] for row in history.rows} - held


def _of_journal(event: Event, journal: str) -> bool:
    return event.actor == "journal" and event.kind == "read" and event.get("journal") == journal


def served_again(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-4: an attempt served again whose identity has rows in the worker's journal gets no ``claimed`` row and
    no row at or below its last rank (it is not started over); a terminal one gets no row at all, and no governed
    side effect of that worker until its next claim."""
    found = []
    for index, event in enumerate(history.events):
        if event.actor != "control-plane" or event.kind not in _SERVED_AGAIN:
            continue
        worker = event.get("worker") or _requester(history.events, event.get("request"))
        held = _held_before(history.events[:index], worker)
        key = (event.get("task_id"), event.get("attempt"))
        groups = [group for ident, group in attempts(held).items() if _served_as(event, ident)]
        if not groups:
            continue
        top = max(row["seq"] for row in held)
        later = [r for r in history.rows if r["seq"] > top and identity(r) == identity(groups[-1][0])]
        found += _started_over(groups[-1], later, key)
        if groups[-1][-1]["phase"] in TERMINAL:
            found += _governed_after(history.events[index + 1 :], worker, key)
    return found


def _served_as(event: Event, ident: tuple[Any, ...]) -> bool:
    """Whether the delivery *event* served the attempt of identity *ident*: a conflicting one by its whole identity
    (another identity of the same attempt number is what it conflicts with), any other by task and number."""
    task = event.get("task")
    if event.kind == "conflicting_delivery":
        return isinstance(task, Mapping) and ident == tuple(task.get(name) for name in IDENTITY)
    return ident[:2] == (event.get("task_id"), event.get("attempt"))


def _requester(events: Sequence[Event], request: object) -> Any:
    """The worker process that sent request number *request* (the control plane logs the request last)."""
    for event in events:
        if event.actor == "control-plane" and event.kind == "request" and event.get("request") == request:
            return event.get("worker")
    return None


def _held_before(events: Sequence[Event], worker: Any) -> list[Row]:
    """The rows of *worker*'s journal as the kit last read it before a delivery (none: the kit never read it)."""
    starts = [e for e in events if e.actor == "journal" and e.get("why") == "start"]
    journal = {e.get("worker"): e.get("journal") for e in starts}.get(worker, "first")
    reads = [e for e in events if _of_journal(e, str(journal))]
    return [dict(row) for row in reads[-1].get("rows", ())] if reads else []


def _started_over(group: Sequence[Row], later: Sequence[Row], key: tuple[Any, Any]) -> list[Mismatch]:
    last = group[-1]
    terminal = last["phase"] in TERMINAL
    rank = RANKS.get(last["phase"], 7)
    again = [r for r in later if terminal or r["phase"] == "claimed" or RANKS.get(r["phase"], 7) <= rank]
    if not again:
        return []
    what = "terminal" if terminal else f"at {last['phase']}"
    note = (
        f"attempt {key[1]!r} of {key[0]!r}, served again {what}, got the row {again[0]['phase']} (seq "
        f"{again[0]['seq']!r}): an attempt served again is resumed from its last row, never started over, and a "
        "terminal one gets no step"
    )
    where = f"/journal/{key[0]}/{key[1]}/{again[0]['seq']}"
    return [_m("RESUME-4", where, f"no row at or below {last['phase']}", again[0]["phase"], note)]


def _governed_after(events: Iterable[Event], worker: Any, key: tuple[Any, Any]) -> list[Mismatch]:
    """The governed side effects of *worker* for the attempt *key* after it was served again, to its next claim."""
    governed = []
    for event in events:
        if event.actor != "control-plane":
            continue
        if event.kind == "request" and event.get("worker") == worker and event.get("endpoint") == "claim":
            break
        if event.kind == "moment" and event.get("check") in ("submission", "receipt", "push"):
            mine = event.get("worker") in (worker, None)  # a push's moment names no worker
            if mine and (event.get("task_id"), event.get("attempt")) == key:
                governed.append(str(event.get("check")))
    if not governed:
        return []
    note = (
        f"attempt {key[1]!r} of {key[0]!r} was terminal when it was served again, and {worker!r} then made "
        f"{', '.join(governed)}: a terminal attempt served again gets no step and no governed side effect"
    )
    return [_m("RESUME-4", f"/tasks/{key[0]}/attempts/{key[1]}/served-again", [], governed, note)]


def recovery_cap(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-6 (strict): a resumption that follows five which surely appended a ``recoveries`` row with the same
    last row ends the attempt in ``recovery_cap``; and a ``recovery_cap`` row follows at least five resumptions
    from that row before the one that wrote it."""
    found = []
    rows = _latest_rows(history)
    counted: dict[tuple[Any, Any, Any], list[bool]] = {}  # (task, attempt, last seq) -> each resumption: surely?
    for process, last, renewed in _resumptions(history.events):
        key = (last["task_id"], last["attempt"], last["seq"])
        earlier = counted.setdefault(key, [])
        if sum(earlier) >= RECOVERY_CAP and not _capped(history.events, rows, process, last, renewed):
            found.append(_uncapped(process, last, sum(earlier)))
        earlier.append(_blocked_after(history.events, process, renewed) is not None)
    for group in attempts(rows).values():
        for before, row in itertools.pairwise(group):
            resumed = len(counted.get((row["task_id"], row["attempt"], before["seq"]), ()))
            if row["reason"] == "recovery_cap" and resumed <= RECOVERY_CAP:
                found.append(_early(row, before, resumed))
    return found


def _resumptions(events: Sequence[Event]) -> list[tuple[str, Row, int]]:
    """Each resumption of the first worker's processes, in order: the process, the open attempt's last row when
    the kit started it, and the event of the renewal of its lease the control plane answered 200."""
    found = []
    for start in [e for e in events if _of_journal(e, "first") and e.get("why") == "start"]:
        process = str(start.get("worker"))
        for last in open_attempts([dict(row) for row in start.get("rows", ())]):
            renewed = _renewed(events, process, last.get("lease_id"), start.seq)
            if renewed is not None:
                found.append((process, last, renewed))
    return found


def _renewed(events: Sequence[Event], process: str, lease_id: object, since: int) -> int | None:
    for event in events:
        if event.seq < since or event.actor != "control-plane" or event.kind != "request":
            continue
        parts = [unquote(part) for part in str(event.get("path", "")).split("/")]
        if (
            event.get("worker") == process and event.get("endpoint") == "renew" and lease_id in parts
            and event.get("status") == 200 and event.get("answer", "answer") == "answer"
        ):
            return event.seq
    return None


def _blocked_after(events: Sequence[Event], process: str, seq: int) -> str | None:
    """The failpoint *process* blocked at after event *seq*, if it did."""
    for event in events:
        if event.seq > seq and event.actor == process and event.kind == "blocked":
            return str(event.get("failpoint"))
    return None


def _latest_rows(history: Story) -> list[Row]:
    """The (first) journal as the kit read it last: once the last step was done, or where the scenario stopped
    (a worker that capped early is not blocked where the next step waits for it)."""
    if history.rows:
        return history.rows
    reads = [e for e in history.events if _of_journal(e, "first")]
    return [dict(row) for row in reads[-1].get("rows", ())] if reads else []


def _capped(events: Sequence[Event], rows: Sequence[Row], process: str, last: Row, renewed: int) -> bool:
    """Whether a resumption that must cap did not go on: the attempt's next row, if any, is ``recovery_cap``, and
    the process blocked nowhere but around that row."""
    following = [r for r in rows if (r["task_id"], r["attempt"]) == (last["task_id"], last["attempt"])
                 and r["seq"] > last["seq"]]
    if following and following[0]["reason"] != "recovery_cap":
        return False
    site = _blocked_after(events, process, renewed)
    return site is None or "reconciliation_required" in site


def _uncapped(process: str, last: Row, earlier: int) -> Mismatch:
    note = (
        f"{process} resumed attempt {last['attempt']!r} of {last['task_id']!r} from its {last['phase']} row (seq "
        f"{last['seq']!r}) after {earlier} resumptions from that row that each appended a recoveries row, and went "
        "on: restarts without progress are capped, the next resumption writes reconciliation_required (recovery_cap)"
    )
    where = f"/journal/{last['task_id']}/{last['attempt']}/recoveries/{last['seq']}"
    return _m("RESUME-6", where, "reconciliation_required: recovery_cap", f"resumption {earlier + 1}", note)


def _early(row: Row, before: Row, resumed: int) -> Mismatch:
    note = (
        f"attempt {row['attempt']!r} of {row['task_id']!r} ended in recovery_cap after {resumed} resumption(s) "
        f"from its {before['phase']} row (seq {before['seq']!r}), the one that wrote it included: the cap comes "
        f"after {RECOVERY_CAP} earlier ones"
    )
    where = f"/journal/{row['task_id']}/{row['attempt']}/{row['seq']}/reason"
    return _m("RESUME-6", where, f"{RECOVERY_CAP + 1} resumptions from seq {before['seq']!r}", resumed, note)
