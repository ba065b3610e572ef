"""RESUME-1: a restarted worker resumes every open attempt of its journal before it claims new work.

Pure: the harness reads each worker process's journal when it starts it, and lists the requests of the
control plane's log in order; this module only judges the order. An attempt counts as resumed once the
process has sent a request about it (a renewal or release of its lease, or a read, result or report of
its task): RESUME-2 has it take the lease from its rows and renew it first, so even an attempt whose
lease turns out lost is touched before any claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import Row
from resumekit.conformance.results import Mismatch

_ABOUT_A_LEASE = ("renew", "release")
_ABOUT_A_TASK = ("task", "result", "report")


def resume_checks(ev: Evidence) -> list[Mismatch]:
    """RESUME-1 (2) and (3) for every worker process that found open attempts in its journal at its start."""
    found: list[Mismatch] = []
    for process, open_rows in sorted(ev.open_at_start.items()):
        if open_rows:
            found += _process_order(process, open_rows, [r for r in ev.requests if r.get("worker") == process])
    return found


def stop_checks(ev: Evidence) -> list[Mismatch]:
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
        for stopped in ev.stopped
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
        note = f"{process} claimed new work before resuming the open attempt(s) {', '.join(missing)} of its journal"
        return [_m("RESUME-1", pointer, "every open attempt resumed before a claim", "claim", note)]
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
