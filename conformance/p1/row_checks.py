"""The P1 checks of the journal's rows: how each attempt's phases step (PHASE-2, PHASE-3, PHASE-5), what each
row fills (JNL-2), that no row is rewritten (JNL-4), what a reused row may name (SCOPE-3, SCOPE-4), that no
superseded attempt writes on (SCOPE-7), and the journal connections' settings the worker attests (JNL-5, JNL-6).

Pure: the harness reads the journal; this module only judges its rows.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, result_hash
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import BINDING, RANKS, TERMINAL, Row, Snapshot, attempts, binding
from resumekit.conformance.results import Mismatch

# What the worker attests about each journal connection (JNL-5).


def journal_checks(rows: Sequence[Row], snapshots: Sequence[Snapshot]) -> list[Mismatch]:
    """JNL-2, JNL-4, PHASE-2, PHASE-3, PHASE-5 over every attempt of the journal."""
    found = _rewrite_checks(snapshots)
    for ident, group in attempts(rows).items():
        where = f"/journal/{ident[0]}/{ident[1]}"
        found += _phase_checks(group, where)
        for position, row in enumerate(group):
            found += _row_fill(row, f"{where}/{position}")
    return found


def _rewrite_checks(snapshots: Sequence[Snapshot]) -> list[Mismatch]:
    """JNL-4: every snapshot keeps the rows of the one before; one rewrite is reported once."""
    for earlier, later in itertools.pairwise(snapshots):
        if not earlier.kept_by(later):
            return [
                _m(
                    "JNL-4",
                    "/journal",
                    "every earlier row unchanged",
                    "a row changed or vanished",
                    "the journal was rewritten",
                )
            ]
    return []


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
    if phase == "workspace_prepared":
        problems += _workspace_name(row["workspace"], f"{where}/workspace")
    if phase == "reconciliation_required" and not row["reason"]:
        problems.append(_m("PHASE-4", f"{where}/reason", "a reason", None, "reconciliation_required carries no reason"))
    return problems


def _workspace_name(name: object, where: str) -> list[Mismatch]:
    """JNL-2 and WRK-4: a workspace_prepared row names its workspace, a ``task-`` directory right under the root."""
    if not isinstance(name, str) or not name:
        return [_m("JNL-2", where, "the workspace's name", name, "a workspace_prepared row names no workspace")]
    if not name.startswith("task-") or any(bad in name for bad in ("/", "\\", "\0")):
        return [
            _m(
                "WRK-4",
                where,
                "a name starting with 'task-', of a directory right under the workspace root",
                name,
                "the workspace is not a task- directory of the root",
            )
        ]
    return []


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
