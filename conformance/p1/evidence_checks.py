"""The P1 verdict: pure checks over evidence the kit collected itself (docs/spec/p1.md, sections 16-17).

Every check names the clause it enforces, so a failure says which rule broke and the gate table can
say which gate it belongs to. Nothing here reads a file or talks to a process: the harness gathers the
evidence, this module only judges it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, result_hash
from resumekit.conformance.p1.cp_core import IDENTITY
from resumekit.conformance.p1.evidence import (
    BINDING,
    COLUMNS,
    RANKS,
    TERMINAL,
    Row,
    Snapshot,
    attempts,
    binding,
)
from resumekit.conformance.results import Mismatch

# What the worker attests about each journal connection (JNL-5).
SYNCHRONOUS_OK = (2, 3)
JOURNAL_MODES_OK = ("delete", "truncate", "persist", "wal")

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


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one scenario left behind, as plain data."""

    rows: Sequence[Row]
    snapshots: Sequence[Snapshot]
    submissions: Sequence[Mapping[str, Any]]  # task_id, attempt, key, result_hash, status
    tasks: Mapping[str, Mapping[str, Any]]  # task_id -> state, attempt, stored
    leases: Sequence[Mapping[str, Any]]
    pushes: Sequence[Mapping[str, Any]]  # every push attempt the origins saw
    commits: Mapping[str, Sequence[str]]  # task_id -> commits its branch gained above expected_branch_oid
    expected: Mapping[str, Mapping[str, Any]]  # task_id -> the result body the kit computed
    caches: Mapping[str, tuple[str, Any]]  # task_id -> (status, cache)
    idle: bool
    settings: Sequence[Mapping[str, Any]] | None  # None: the adapter does not claim p1.journal
    decoy_changed: bool
    strict: bool = False  # the run's profile is strict: the strict clauses are checked too
    # attempts served against CP-5 or CP-7 (SCOPE-6, SCOPE-7), each with the governed side effects after it
    deliveries: Sequence[Mapping[str, Any]] = ()
    second_rows: Sequence[Row] = ()  # the journal of a scenario's second worker, if it has one
    second_snapshots: Sequence[Snapshot] = ()


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


def failpoint_state(name: str, rows: Sequence[Row], temporaries: Sequence[str]) -> str | None:
    """Why the durable state does not match what FPT-1 says holds at *name*, or None."""
    found = failpoint_site(name)
    if found is None:
        return None
    phase, site = found
    last = rows[-1]["phase"] if rows else None
    if site == "before_{}_row":
        return f"the journal already holds a {phase} row as its latest" if last == phase else None
    if last != phase:
        return f"the journal's latest row is {last!r}, not {phase!r}"
    if site == "before_{}_cache" and not temporaries:
        return "no cache temporary exists in tasks/"
    return None


def _m(clause: str, pointer: str, expected: Any, actual: Any, note: str) -> Mismatch:
    return Mismatch(pointer, expected, actual, clause, note)


def journal_checks(rows: Sequence[Row], snapshots: Sequence[Snapshot]) -> list[Mismatch]:
    """JNL-2, JNL-4, PHASE-2, PHASE-3, PHASE-5 over every attempt of the journal."""
    found: list[Mismatch] = []
    for earlier, later in itertools.pairwise(snapshots):
        if not earlier.kept_by(later):
            found.append(
                _m(
                    "JNL-4",
                    "/journal",
                    "every earlier row unchanged",
                    "a row changed or vanished",
                    "the journal was rewritten",
                )
            )
            break
    for ident, group in attempts(rows).items():
        where = f"/journal/{ident[0]}/{ident[1]}"
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
        for position, row in enumerate(group):
            found += _row_fill(row, f"{where}/{position}")
    return found


def _row_fill(row: Row, where: str) -> list[Mismatch]:
    """JNL-2: the columns a row of each phase fills."""
    phase = row["phase"]
    problems = []
    if phase in ("source_capture_done", "commit_done", "result_pending", "result_submitted"):
        body = row["result_body"]
        try:
            parsed = json.loads(body) if isinstance(body, str) else None
            canonical = canonical_json(parsed).decode("utf-8") if parsed is not None else None
        except (ValueError, NotCanonical):
            parsed = canonical = None
        if parsed is None or canonical != body:
            problems.append(
                _m("JNL-2", f"{where}/result_body", "canonical JSON", body, "result_body is not canonical JSON")
            )
        elif row["result_hash"] != result_hash(parsed):
            problems.append(
                _m(
                    "JNL-2",
                    f"{where}/result_hash",
                    result_hash(parsed),
                    row["result_hash"],
                    "result_hash is not the hash of result_body",
                )
            )
    if phase in ("result_pending", "result_submitted") and not row["idempotency_key"]:
        problems.append(_m("JNL-2", f"{where}/idempotency_key", "a key", None, f"a {phase} row carries no key"))
    if phase == "commit_done" and not row["commit_oid"]:
        problems.append(
            _m("JNL-2", f"{where}/commit_oid", "the governed commit", None, "commit_done carries no commit")
        )
    if phase == "reconciliation_required" and not row["reason"]:
        problems.append(_m("PHASE-4", f"{where}/reason", "a reason", None, "reconciliation_required carries no reason"))
    return problems


def side_effect_checks(ev: Evidence) -> list[Mismatch]:
    """COMMIT-3, KEY-1, SUB-2/SUB-4, CP-10 and the expected result hash."""
    found: list[Mismatch] = []
    accepted_refs: dict[tuple[str, str], int] = {}
    for index, push in enumerate(ev.pushes):
        pushed = (str(push.get("repository", "")), str(push.get("ref", "")))
        if pushed in accepted_refs:
            found.append(
                _m(
                    "COMMIT-3",
                    f"/origin/pushes/{index}",
                    "no push attempt after an accepted one",
                    push,
                    "a governed commit was pushed again",
                )
            )
        if push.get("accepted"):
            accepted_refs.setdefault(pushed, index)
    for task_id, gained in ev.commits.items():
        if len(gained) > 1:
            found.append(
                _m(
                    "COMMIT-3",
                    f"/origin/{task_id}/commits",
                    "at most one",
                    list(gained),
                    "the branch gained more than one commit",
                )
            )
    keys: dict[tuple[str, int], set[str]] = {}
    bodies: dict[tuple[str, int], set[str]] = {}
    for submission in ev.submissions:
        which = (str(submission["task_id"]), int(submission["attempt"]))
        keys.setdefault(which, set()).add(str(submission["key"]))
        bodies.setdefault(which, set()).add(str(submission["result_hash"]))
    for (task_id, number), used in sorted(keys.items()):
        where = f"/control-plane/{task_id}/{number}"
        if len(used) > 1:
            found.append(
                _m("KEY-1", f"{where}/keys", "one key per attempt", sorted(used), "an attempt used more than one key")
            )
        sent = bodies[(task_id, number)]
        if len(sent) > 1:
            found.append(
                _m("SUB-4", f"{where}/bodies", "one body per key", sorted(sent), "another body was sent under the key")
            )
    owners: dict[tuple[str, str], set[int]] = {}
    for (task_id, number), used in keys.items():
        for key in used:
            owners.setdefault((task_id, key), set()).add(number)
    for (task_id, key), numbers in sorted(owners.items()):
        if len(numbers) > 1:
            found.append(
                _m(
                    "KEY-1",
                    f"/control-plane/{task_id}/keys",
                    "a different key per attempt",
                    {key: sorted(numbers)},
                    "two attempts shared a key",
                )
            )
    for task_id, facts in ev.tasks.items():
        stored = facts.get("stored")
        if stored and task_id in ev.expected and not facts.get("scripted_result"):
            want = result_hash(ev.expected[task_id])
            if stored.get("result_hash") != want:
                found.append(
                    _m(
                        "TASK-2",
                        f"/control-plane/{task_id}/stored",
                        ev.expected[task_id],
                        stored.get("result"),
                        "the stored result is not the task's result",
                    )
                )
    return found


def reuse_checks(rows: Sequence[Row]) -> list[Mismatch]:
    """SCOPE-3, SCOPE-4: a reused row names a row of an earlier attempt of its task with an identical binding."""
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


def _reused_pending(rows: Sequence[Row], task_id: str, key: str) -> bool:
    return any(
        row["task_id"] == task_id
        and row["phase"] == "result_pending"
        and row["reused_from"] is not None
        and row["idempotency_key"] == key
        for row in rows
    )


def key_checks(ev: Evidence) -> list[Mismatch]:
    """KEY-2: every submission carries the key of its attempt's result_pending row, which result_submitted repeats."""
    found = []
    pending: dict[tuple[str, int], str] = {}
    for row in ev.rows:
        if row["phase"] == "result_pending" and row["idempotency_key"]:
            pending.setdefault((row["task_id"], row["attempt"]), row["idempotency_key"])
    for submission in ev.submissions:
        which = (str(submission["task_id"]), int(submission["attempt"]))
        if which in pending and submission["key"] != pending[which]:
            found.append(
                _m(
                    "KEY-2",
                    f"/control-plane/{which[0]}/{which[1]}/key",
                    pending[which],
                    submission["key"],
                    "a submission carried a key other than its result_pending row's",
                )
            )
    # The journal sees what the control plane may not: a key written in result_pending but never sent, which
    # a later attempt (reusing the row, or not) must not carry again (KEY-1, KEY-2).
    holders: dict[tuple[str, str], list[int]] = {}
    for (task_id, number), key in pending.items():
        holders.setdefault((task_id, key), []).append(number)
    for (task_id, key), numbers in sorted(holders.items()):
        if len(numbers) > 1:
            found.append(
                _m(
                    "KEY-2" if _reused_pending(ev.rows, task_id, key) else "KEY-1",
                    f"/journal/{task_id}/result_pending/idempotency_key",
                    "a different key per attempt; a reused result_pending carries the new attempt's key",
                    {key: sorted(numbers)},
                    "two attempts' result_pending rows hold the same key",
                )
            )
    for row in ev.rows:
        which = (row["task_id"], row["attempt"])
        if row["phase"] == "result_submitted" and which in pending and row["idempotency_key"] != pending[which]:
            found.append(
                _m(
                    "KEY-2",
                    f"/journal/{which[0]}/{which[1]}/result_submitted",
                    pending[which],
                    row["idempotency_key"],
                    "result_submitted carries a key other than its result_pending row's",
                )
            )
    return found


def lease_checks(ev: Evidence) -> list[Mismatch]:
    """LEASE-4 (EVID-4): no push and no submission reached the kit while the attempt's lease was not ACTIVE."""
    found = []
    for index, push in enumerate(ev.pushes):
        lease = push.get("lease")
        state = lease.get("state") if isinstance(lease, Mapping) else None
        if push.get("task_id") is not None and state is not None and state != "ACTIVE":
            found.append(
                _m("LEASE-4", f"/origin/pushes/{index}", "ACTIVE", state, "a push reached the origin with a lost lease")
            )
    for submission in ev.submissions:
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


def submitted_backing(ev: Evidence) -> list[Mismatch]:
    """SUB-7: a result_submitted row only on a 2xx answer to its key or on an exact match."""
    found = []
    for row in ev.rows:
        if row["phase"] != "result_submitted":
            continue
        stored: Mapping[str, Any] | None = ev.tasks.get(row["task_id"], {}).get("stored")
        answered = any(
            s["task_id"] == row["task_id"] and s["key"] == row["idempotency_key"] and 200 <= int(s["status"]) < 300
            for s in ev.submissions
        )
        exact = (
            stored is not None
            and stored.get("attempt") == row["attempt"]
            and stored.get("result_hash") == row["result_hash"]
        )
        if not (answered or exact):
            found.append(
                _m(
                    "SUB-7",
                    f"/journal/{row['task_id']}/{row['attempt']}/result_submitted",
                    "a 2xx answer or an exact match",
                    stored,
                    "result_submitted without the control plane holding the result",
                )
            )
    return found


def idle_checks(ev: Evidence) -> list[Mismatch]:
    """What must hold once the worker is idle: leases released (LEASE-5), caches rebuilt (CACHE-4)."""
    found = []
    groups = attempts(ev.rows)
    # Only the leases a terminal attempt recorded as its own: a lease the kit granted itself is not the worker's.
    terminal = {row["lease_id"] for group in groups.values() if group[-1]["phase"] in TERMINAL for row in group}
    for lease in ev.leases:
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
    last_of: dict[str, Row] = {}
    for row in ev.rows:
        last_of[row["task_id"]] = row
    for task_id, row in sorted(last_of.items()):
        status, cache = ev.caches.get(task_id, ("absent", None))
        want = {"cache_version": 1, **{name: row[name] for name in COLUMNS}}
        if status != "ok" or not isinstance(cache, dict) or {k: cache.get(k) for k in want} != want:
            found.append(
                _m(
                    "CACHE-4",
                    f"/caches/{task_id}",
                    {"seq": row["seq"], "phase": row["phase"]},
                    cache if status == "ok" else status,
                    "the cache does not mirror the journal's last row at idle",
                )
            )
    return found


def settings_checks(settings: Sequence[Mapping[str, Any]] | None) -> list[Mismatch]:
    """JNL-5, attested: every connection's synchronous and journal mode."""
    if settings is None:
        return [
            _m(
                "ADP-1",
                "/p1.journal",
                "claimed",
                "not claimed",
                "no p1.journal: the JNL-5 evidence is missing (attested)",
            )
        ]
    if not settings:
        return [
            _m(
                "JNL-5",
                "/p1.journal/connections",
                "at least one connection",
                [],
                "the worker reported no journal connection (attested)",
            )
        ]
    found = []
    for index, connection in enumerate(settings):
        synchronous = connection.get("synchronous")
        mode = str(connection.get("journalMode", "")).lower()
        busy = connection.get("busyTimeoutMs")
        if not isinstance(busy, int) or isinstance(busy, bool) or busy < 5000:
            found.append(
                _m(
                    "JNL-6",
                    f"/p1.journal/connections/{index}/busyTimeoutMs",
                    ">= 5000",
                    busy,
                    "a journal connection's busy timeout is too short (attested)",
                )
            )
        if synchronous not in SYNCHRONOUS_OK or mode not in JOURNAL_MODES_OK:
            found.append(
                _m(
                    "JNL-5",
                    f"/p1.journal/connections/{index}",
                    {"synchronous": "2 or 3", "journalMode": list(JOURNAL_MODES_OK)},
                    dict(connection),
                    "a journal connection is not synchronous=FULL (attested)",
                )
            )
    return found


def outcome_checks(expect: Mapping[str, Mapping[str, Any]], names: Mapping[str, str], ev: Evidence) -> list[Mismatch]:
    """Each task's expected convergence (FPT-4, the scenario's `expect`)."""
    found = []
    groups = attempts(ev.rows)
    for name, outcome in expect.items():
        task_id = names[name]
        mine = [group for ident, group in groups.items() if ident[0] == task_id]
        final = mine[-1] if mine else []
        where = f"/expect/{name}"
        last = final[-1] if final else None
        if "final" in outcome and (last is None or last["phase"] != outcome["final"]):
            found.append(
                _m(
                    "FPT-4",
                    f"{where}/final",
                    outcome["final"],
                    last["phase"] if last else None,
                    "the task's final attempt ended elsewhere",
                )
            )
        if "reason" in outcome and (last is None or last["reason"] != outcome["reason"]):
            found.append(
                _m(
                    "PHASE-4",
                    f"{where}/reason",
                    outcome["reason"],
                    last["reason"] if last else None,
                    "another reconciliation reason",
                )
            )
        facts = ev.tasks.get(task_id, {})
        if "state" in outcome and facts.get("state") != outcome["state"]:
            found.append(
                _m("FPT-4", f"{where}/state", outcome["state"], facts.get("state"), "the control plane's task state")
            )
        if "stored" in outcome:
            stored: Mapping[str, Any] | None = facts.get("stored")
            ok = (
                stored is not None
                and task_id in ev.expected
                and stored.get("result_hash") == result_hash(ev.expected[task_id])
            )
            if ok != outcome["stored"]:
                found.append(
                    _m("FPT-4", f"{where}/stored", outcome["stored"], stored, "the control plane's stored result")
                )
        if "attempts" in outcome and len(mine) != outcome["attempts"]:
            found.append(_m("SCOPE-1", f"{where}/attempts", outcome["attempts"], len(mine), "attempts with rows"))
        if "pushes" in outcome:
            accepted = [p for p in ev.pushes if p.get("accepted") and p.get("task_id") == task_id]
            if len(accepted) != outcome["pushes"]:
                found.append(
                    _m(
                        "COMMIT-3",
                        f"{where}/pushes",
                        outcome["pushes"],
                        len(accepted),
                        "accepted pushes of the governed commit",
                    )
                )
        if "submissions" in outcome:
            sent = [s for s in ev.submissions if s["task_id"] == task_id]
            if len(sent) != outcome["submissions"]:
                found.append(
                    _m(
                        "SUB-6",
                        f"{where}/submissions",
                        outcome["submissions"],
                        len(sent),
                        "submissions that reached the control plane",
                    )
                )
        if isinstance(outcome.get("second_worker"), Mapping):
            found += _second_outcome(task_id, f"{where}/second_worker", outcome["second_worker"], ev.second_rows)
        if "reused" in outcome:
            reused = any(row["reused_from"] is not None for row in final)
            if reused != outcome["reused"]:
                found.append(
                    _m(
                        "SCOPE-3",
                        f"{where}/reused",
                        outcome["reused"],
                        reused,
                        "whether the final attempt reused a row",
                    )
                )
    return found


def superseded_checks(rows: Sequence[Row], where: str = "/journal") -> list[Mismatch]:
    """SCOPE-7 (strict): once the journal holds a row of attempt n of a task, no row of an attempt m < n."""
    found = []
    highest: dict[str, int] = {}
    for row in rows:
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


def delivery_checks(ev: Evidence) -> list[Mismatch]:
    """SCOPE-6 and SCOPE-7 (strict) for the attempts the kit served against CP-5 or CP-7: no governed side
    effect for them, and under a changed identity only ``claimed`` then ``identity_conflict``."""
    found = []
    groups = attempts(ev.rows)
    for delivery in ev.deliveries:
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


def second_worker_checks(ev: Evidence) -> list[Mismatch]:
    """A second worker's journal obeys the journal's rules on its own; SUB-7 holds for its rows too."""
    rows = ev.second_rows
    if not rows:
        return []
    found = journal_checks(rows, ev.second_snapshots)
    found += reuse_checks(rows)
    found += submitted_backing(dataclasses.replace(ev, rows=rows))
    if ev.strict:
        found += superseded_checks(rows)
    return [dataclasses.replace(m, pointer="/second-worker" + m.pointer) for m in found]


def _second_outcome(task_id: str, where: str, outcome: Mapping[str, Any], rows: Sequence[Row]) -> list[Mismatch]:
    """Where the task's final attempt ended in the second worker's journal, and how many attempts it has
    there (no rows at all: ``attempts: 0``)."""
    mine = [group for ident, group in attempts(rows).items() if ident[0] == task_id]
    last = mine[-1][-1] if mine else None
    found = []
    if "final" in outcome and (last is None or last["phase"] != outcome["final"]):
        found.append(_m("FPT-4", f"{where}/final", outcome["final"], last["phase"] if last else None,
                        "the task's final attempt in the second worker's journal ended elsewhere"))
    if "reason" in outcome and (last is None or last["reason"] != outcome["reason"]):
        found.append(_m("PHASE-4", f"{where}/reason", outcome["reason"], last["reason"] if last else None,
                        "another reconciliation reason in the second worker's journal"))
    if "attempts" in outcome and len(mine) != outcome["attempts"]:
        found.append(_m("SCOPE-1", f"{where}/attempts", outcome["attempts"], len(mine),
                        "attempts with rows in the second worker's journal"))
    return found


def judge(expect: Mapping[str, Mapping[str, Any]], names: Mapping[str, str], ev: Evidence) -> list[Mismatch]:
    """Every check of a scenario; an empty list is a pass."""
    found = journal_checks(ev.rows, ev.snapshots)
    found += side_effect_checks(ev)
    found += submitted_backing(ev)
    found += reuse_checks(ev.rows)
    found += key_checks(ev)
    found += lease_checks(ev)
    if ev.idle:
        found += idle_checks(ev)
    found += settings_checks(ev.settings)
    if ev.decoy_changed:
        found.append(_m("CLEAN-2", "/decoy", "unchanged", "changed", "something outside the workspace root changed"))
    if ev.strict:
        found += superseded_checks(ev.rows)
        found += delivery_checks(ev)
    found += second_worker_checks(ev)
    found += outcome_checks(expect, names, ev)
    return found


def tool_problems(announced: Sequence[Mapping[str, Any]], root: str) -> list[Mismatch]:
    """The kit's tool ran, in a workspace directly under the (resolved) workspace root (ADP-2, WRK-4):
    without it the WRK-5 watch would prove nothing."""
    if not announced:
        return [_m("ADP-2", "/tool", "the tool started in a workspace", None,
                   "the kit's tool never announced itself: the worker did not run it")]
    problems = []
    for entry in announced:
        cwd = entry.get("cwd")
        where = PurePath(cwd) if isinstance(cwd, str) else None
        if where is None or where.parent != PurePath(root) or not where.name.startswith("task-"):
            problems.append(_m("ADP-2", "/tool/cwd", f"a task- workspace directly under {root}", cwd,
                               "the kit's tool ran outside a workspace of the workspace root"))
    return problems


def watch_problems(changes: Mapping[str, str], shown: int = 8) -> list[Mismatch]:
    """WRK-5: nothing the root held when the next worker started changed after its first request."""
    if not changes:
        return []
    paths = sorted(changes)
    listed = ", ".join(f"{path} ({changes[path]})" for path in paths[:shown])
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    note = (
        f"{len(paths)} path(s) under the workspace root changed after the next worker's startup cleanup, so a "
        f"process the killed worker started outlived it: {listed}{more}"
    )
    return [_m("WRK-5", "/workspace-root/after-restart", "no change", {p: changes[p] for p in paths[:shown]}, note)]
