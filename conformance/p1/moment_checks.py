"""The P1 checks of a moment, not of a scenario's end: the state at a failpoint (FPT-1), where the kit's tool
ran (ADP-2, WRK-4), and what changed under the workspace root after a restart (WRK-5).

Pure: the harness reads the journal, the tool's announcements and the watch; this module only judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.p1.model import RANKS, Row
from resumekit.conformance.results import Mismatch

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
