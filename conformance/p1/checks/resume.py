"""Phases, scope and resume (docs/spec/p1.md, sections 3, 5 and 11): how each attempt's phases step (PHASE-2,
PHASE-3, PHASE-5) and a reconciliation is reported (PHASE-4); what a reused row may name (SCOPE-3, SCOPE-4),
that no superseded attempt writes on (SCOPE-7) and what an attempt served against CP-5 or CP-7 may do (SCOPE-6,
SCOPE-7); that a restarted worker resumes every open attempt before it claims (RESUME-1), and that an orderly
stop ends it through its exit path, status 0, with no governed side effect on the way (RESUME-5).

An open attempt counts as handled once the process has sent a request about it (a renewal or release of its
lease, or a read, result or report of its task): RESUME-2 has it take the lease from its rows and renew it
first, so even an attempt whose lease turns out lost is touched before any claim, and one it never resumes
(abandoned, LEASE-4, which the kit cannot tell from the journal's checkpoints, or superseded, SCOPE-7) gets the
release of its lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.model import BINDING, HARD_FAILURES, RANKS, TERMINAL, Row, attempts, binding
from resumekit.conformance.results import Mismatch

_ABOUT_A_LEASE = ("renew", "release")
_ABOUT_A_TASK = ("task", "result", "report")


def orderly_stops(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-5: ``p1.worker.stop`` ends the worker with status 0."""
    found = []
    for event in history.of(None, "stopped"):
        code = event.get("exitCode")
        if code != 0:
            note = "an orderly stop did not exit 0"
            found.append(Mismatch("/stop/exitCode", 0, code, "RESUME-5", note, event=event.seq))
    return found


def phases(history: Story, scenario: Scenario) -> list[Mismatch]:
    """PHASE-2, PHASE-3, PHASE-5 over every attempt of the (first) worker's journal."""
    found = []
    for ident, group in attempts(history.rows).items():
        found += _phase_checks(group, f"/journal/{ident[0]}/{ident[1]}")
    return found


def _phase_checks(group: Sequence[Row], where: str) -> list[Mismatch]:
    """PHASE-2, PHASE-3, PHASE-5 over one attempt's rows; the first step out of order ends the walk."""
    found: list[Mismatch] = []
    phases = [row["phase"] for row in group]
    if phases[0] != "claimed" or phases.count("claimed") != 1:
        found.append(
            _m("PHASE-2", where, "one claimed row, first", phases, "an attempt must start with one claimed row")
        )
    rank = 1
    for position, row in enumerate(group[1:], start=1):
        phase = row["phase"]
        if phases[position - 1] in TERMINAL:
            found.append(
                _m(
                    "PHASE-5",
                    f"{where}/{position}",
                    "no row after a terminal row",
                    phase,
                    "a row followed a terminal row",
                )
            )
            break
        if phase == "reconciliation_required":
            continue
        reused = (
            row["reused_from"] is not None and position == 1 and phase in ("source_capture_done", "result_pending")
        )
        new_rank = RANKS.get(phase)
        if new_rank is None or (new_rank != rank + 1 and not reused):
            found.append(
                _m(
                    "PHASE-3",
                    f"{where}/{position}",
                    f"rank {rank + 1}",
                    f"{phase} (rank {new_rank})",
                    "the phase did not step up by one",
                )
            )
            break
        rank = new_rank
    return found


def reported(history: Story, scenario: Scenario) -> list[Mismatch]:
    """PHASE-4, once the worker is idle: every reconciliation of the journal was reported to the control plane."""
    return _unreported(attempts(history.rows), history.reports)


def _unreported(
    groups: Mapping[tuple[Any, ...], Sequence[Row]], reports: Sequence[Mapping[str, Any]]
) -> list[Mismatch]:
    """PHASE-4: by idle, every ``reconciliation_required`` row was reported, FAILED for a hard failure and
    RECONCILIATION_REQUIRED otherwise, with its reason; the fences of SCOPE-6 and LEASE-6 included."""
    sent = {(r["task_id"], r["attempt"], r["state"], r["reason"]) for r in reports}
    found = []
    for ident, group in groups.items():
        last = group[-1]
        if last["phase"] != "reconciliation_required":
            continue
        state = "FAILED" if last["reason"] in HARD_FAILURES else "RECONCILIATION_REQUIRED"
        if (ident[0], ident[1], state, last["reason"]) not in sent:
            found.append(
                _m(
                    "PHASE-4",
                    f"/journal/{ident[0]}/{ident[1]}/report",
                    {"state": state, "reason": last["reason"]},
                    [r for r in reports if (r["task_id"], r["attempt"]) == ident[:2]],
                    "a reconciliation_required row was never reported to the control plane",
                )
            )
    return found


def reuse(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-3, SCOPE-4: a reused row names a row of an earlier attempt of its task with an identical binding."""
    rows = history.rows
    found = []
    by_seq = {row["seq"]: row for row in rows}
    for row in rows:
        source_seq = row["reused_from"]
        if source_seq is None:
            continue
        where = f"/journal/{row['task_id']}/{row['attempt']}/reused_from"
        source = by_seq.get(source_seq)
        if source is None or source["task_id"] != row["task_id"] or source["attempt"] >= row["attempt"]:
            found.append(
                _m("SCOPE-3", where, "a row of an earlier attempt of the task", source_seq, "reused an unknown row")
            )
        elif binding(source) != binding(row):
            differs = [name for name, a, b in zip(BINDING, binding(source), binding(row), strict=True) if a != b]
            found.append(_m("SCOPE-4", where, "an identical binding", differs, "reused a row of another binding"))
        elif source["phase"] not in ("source_capture_done", "result_pending") or any(
            source[name] != row[name] for name in ("phase", "result_hash", "result_body", "commit_oid")
        ):
            found.append(
                _m("SCOPE-3", where, "the source's phase and result", source["phase"], "not a reuse SCOPE-3 allows")
            )
    return found


def superseded(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-7 (strict): once the journal holds a row of attempt n of a task, no row of an attempt m < n."""
    where = "/journal"
    found = []
    highest: dict[str, int] = {}
    for row in history.rows:
        task_id, number = row["task_id"], row["attempt"]
        later = highest.get(task_id, 0)
        if number < later:
            found.append(
                _m(
                    "SCOPE-7",
                    f"{where}/{task_id}/{number}/{row['seq']}",
                    f"no row of an attempt below {later}",
                    row["phase"],
                    f"a row of attempt {number} was written after a row of attempt {later} of the task",
                )
            )
        highest[task_id] = max(later, number)
    return found


def deliveries(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-6 and SCOPE-7 (strict) for the attempts the kit served against CP-5 or CP-7: no governed side
    effect for them, and under a changed identity only ``claimed`` then ``identity_conflict``."""
    found = []
    groups = attempts(history.rows)
    for delivery in history.deliveries:
        conflicting = delivery["kind"] == "conflicting_delivery"
        clause = "SCOPE-6" if conflicting else "SCOPE-7"
        where = f"/control-plane/{delivery['task_id']}/{delivery['attempt']}/{delivery['kind']}"
        if delivery["governed"]:
            what = "served with a changed identity" if conflicting else "superseded by a later one, served again"
            found.append(
                _m(clause, f"{where}/governed", [], list(delivery["governed"]),
                   f"a governed side effect for an attempt {what}")
            )
        served = delivery.get("task")
        if not conflicting or not isinstance(served, Mapping):
            continue
        ident = tuple(served.get(name) for name in IDENTITY)
        held = any(key[:2] == ident[:2] and key != ident for key in groups)
        mine = groups.get(ident, [])
        if held and mine:
            phases = [(row["phase"], row["reason"]) for row in mine]
            if phases != [("claimed", None), ("reconciliation_required", "identity_conflict")]:
                found.append(
                    _m(
                        "SCOPE-6",
                        f"/journal/{ident[0]}/{ident[1]}/served-identity",
                        ["claimed", "reconciliation_required: identity_conflict"],
                        [phase if reason is None else f"{phase}: {reason}" for phase, reason in phases],
                        "rows under an identity that conflicts with the journal's for the same attempt",
                    )
                )
    return found


def open_attempts(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-1 (2) and (3) for every worker process that found open attempts in its journal at its start."""
    found: list[Mismatch] = []
    for process, open_rows in sorted(history.open_at_start.items()):
        if open_rows:
            found += _process_order(process, open_rows, [r for r in history.requests if r.get("worker") == process])
    return found


def stops(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-5: a worker stopped while blocked or idle makes no governed side effect before it exits: the stop
    is honoured at the next step boundary, and before a push, a receipt or a submission as well."""
    return [
        _m(
            "RESUME-5",
            f"/stop/{stopped['worker']}",
            [],
            list(stopped["governed"]),
            "governed side effects after p1.worker.stop and before the worker exited",
        )
        for stopped in history.stopped
        if stopped["governed"]
    ]


def _process_order(process: str, open_rows: Sequence[Row], requests: Sequence[Mapping[str, Any]]) -> list[Mismatch]:
    """One process's finding: each open attempt touched before its first claim, in the order of the journal."""
    first_claim = next((i for i, r in enumerate(requests) if r.get("endpoint") == "claim"), None)
    if first_claim is None:  # it never claimed: nothing came before resuming
        return []
    before = requests[:first_claim]
    touched = [_first_touch(row, before) for row in open_rows]
    pointer = f"/workers/{process}/requests/{first_claim}"
    missing = [_name(row) for row, at in zip(open_rows, touched, strict=True) if at is None]
    if missing:
        note = (
            f"{process} claimed new work before any request about the attempt(s) {', '.join(missing)} its journal "
            "held open: at a start, each attempt whose last row is not terminal gets a request before the first "
            "claim; the worker resumes it (RESUME-2: the renewal of its lease comes first), or, when it was "
            "abandoned (LEASE-4) or superseded (SCOPE-7) and is never resumed, releases its lease"
        )
        expected = "a request about every open attempt before a claim"
        return [_m("RESUME-1", pointer, expected, "claim", note)]
    at = [index for index in touched if index is not None]  # every one, once none is missing
    if at != sorted(at):
        order = [_name(row) for _, row in sorted(zip(at, open_rows, strict=True), key=lambda pair: pair[0])]
        note = f"{process} resumed its open attempts in the order {order}, not in the order of their claimed rows"
        return [_m("RESUME-1", f"/workers/{process}/requests", [_name(row) for row in open_rows], order, note)]
    return []


def _first_touch(row: Row, requests: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the first request about *row*'s attempt: its lease, or its task."""
    for index, request in enumerate(requests):
        segments = [unquote(part) for part in str(request.get("path", "")).split("/")]
        endpoint = request.get("endpoint")
        if endpoint in _ABOUT_A_LEASE and row.get("lease_id") in segments:
            return index
        if endpoint in _ABOUT_A_TASK and row["task_id"] in segments:
            return index
    return None


def _name(row: Row) -> str:
    return f"{row['task_id']!r} attempt {row['attempt']!r} (at {row['phase']})"


def second_worker_phases(history: Story, scenario: Scenario) -> list[Mismatch]:
    """PHASE-2, PHASE-3, PHASE-5 over the journal of a scenario's second worker."""
    return on_second_worker(phases, history, scenario)


def second_worker_reuse(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-3, SCOPE-4 over the journal of a scenario's second worker."""
    return on_second_worker(reuse, history, scenario)


def second_worker_superseded(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SCOPE-7 (strict) over the journal of a scenario's second worker."""
    return on_second_worker(superseded, history, scenario)


_GOVERNED = ("submission", "receipt", "push")  # the moment checks of a governed side effect


def after_submitted(history: Story, scenario: Scenario) -> list[Mismatch]:
    """RESUME-2 (and PHASE-5): a terminal attempt gets nothing but the report and the release, so no governed side
    effect (a result submission, a receipt, a push) of an attempt reaches the control plane or an origin while the
    journal holds its terminal row, result_submitted or reconciliation_required. The kit read the journal as each
    of those arrived (EVID-4); with a second worker's journal read too, the side effect is in order if either
    still holds the attempt open."""
    found = []
    for check in _GOVERNED:
        for moment in history.moments(check):
            key = (moment.get("task_id"), moment.get("attempt"))
            reads = history.reads_at(moment.get("request"))
            held = [last for read in reads for last in _lasts(read.get("rows", ()), key)]
            if any(phase not in TERMINAL for phase in held):
                continue
            ended = sorted(set(held))
            if ended:
                found.append(_after_submitted(check, key, moment, ended[0]))
    return found


def _lasts(rows: Sequence[Mapping[str, Any]], key: tuple[Any, Any]) -> list[str]:
    """The last phase of each attempt (one identity) with *key*'s task and number: one identity may be terminal while
    another of the same number, an identity conflict's (SCOPE-6), is still open."""
    return [str(group[-1]["phase"]) for ident, group in attempts([dict(r) for r in rows]).items() if ident[:2] == key]


def _after_submitted(check: str, key: tuple[Any, Any], moment: Mapping[str, Any], row: str) -> Mismatch:
    task_id, attempt = key
    note = (
        f"a {check} of attempt {attempt} of {task_id!r} arrived (request {moment.get('request')!r}) while the journal "
        f"held the attempt's {row} row: a terminal attempt gets nothing but the report and the release"
    )
    return _m("RESUME-2", f"/tasks/{task_id}/attempts/{attempt}/{check}", "no governed side effect", check, note)
