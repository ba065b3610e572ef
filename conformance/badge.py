"""A run as a shields.io endpoint badge: ``resumekit | core 114/114``, never more than the verdict says.

A certification of fewer capabilities than the selection has cases for names them and is a paler green:
``core 128/128, Phase 0 projection only``.

The document is valid against schemas/report/badge.json (shields.io's endpoint format, schemaVersion 1).
"""

from __future__ import annotations

from typing import Any

from resumekit.conformance.results import Outcome, Run

COLORS = {
    "certified": "brightgreen",
    "claimed-only": "green",  # certified for what it claims, which leaves some selected cases not claimed
    "known": "yellowgreen",  # certified with known failures
    "not-certified": "red",
    "subset-passed": "blue",
    "subset-failed": "red",
    "interrupted": "lightgrey",
    "shard": "lightgrey",
}


def message(run: Run) -> tuple[str, str]:
    """The badge's message and the key of its colour in COLORS."""
    verdict = run.verdict
    claimed = [r for r in run.results if r.outcome is not Outcome.NOT_CLAIMED]
    passed = sum(1 for r in claimed if r.ok and r.known_failure is None)
    score = f"{passed}/{len(claimed)}"
    if run.shard is not None:  # one shard certifies nothing alone
        return f"shard {run.shard.index}/{run.shard.count}, not certified", "shard"
    if verdict.scope == "interrupted":
        return f"interrupted {score}, not certified", "interrupted"
    if verdict.scope == "subset":
        state = "passed" if verdict.passed else "failed"
        return f"subset {score} {state}, not certified", verdict.status
    if not verdict.certified:
        return f"not certified {score}", "not-certified"
    only = f", {verdict.claimed_only} only" if verdict.claimed_only else ""
    if verdict.known_failures:
        return f"{verdict.profile} {score}{only}, {len(verdict.known_failures)} known failure(s)", "known"
    return f"{verdict.profile} {score}{only}", "claimed-only" if only else "certified"


def to_badge(run: Run) -> dict[str, Any]:
    """The shields.io endpoint document for *run*."""
    text, key = message(run)
    return {"schemaVersion": 1, "label": "resumekit", "message": text, "color": COLORS[key]}
