"""The P1 verdict: pure checks over evidence the kit collected itself (docs/spec/p1.md, sections 16-17).

Every check names the clause it enforces, so a failure says which rule broke and the gate table can
say which gate it belongs to. Nothing here reads a file or talks to a process: the harness gathers the
evidence, this module only judges it.

The checks live in one module per thing they judge, and this module gathers them into the verdict
(``judge``) and is the one the harness imports: ``row_checks`` (the journal's rows), ``effect_checks``
(side effects at the control plane and the origin), ``origin_checks`` (the pushes and every ref of the
origins once the last step is done), ``convergence_checks`` (idle state and each task's expected outcome),
``pacing_checks`` (claims after an empty one), ``resume_checks`` (open attempts before a claim),
``settings_checks`` (the journal's settings) and ``moment_checks`` (the state at a failpoint, the tool, the
watch); the evidence they share is in ``evidence_data``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.checks.story import JournalSettings
from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.convergence_checks import idle_checks, outcome_checks
from resumekit.conformance.p1.damage_checks import cache_damage_checks, decoy_checks
from resumekit.conformance.p1.effect_checks import (
    delivery_checks,
    key_checks,
    lease_checks,
    side_effect_checks,
    submitted_backing,
)
from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.model import open_attempts
from resumekit.conformance.p1.origin_checks import origin_checks, push_checks, ref_checks
from resumekit.conformance.p1.renewal_checks import renewal_checks
from resumekit.conformance.p1.resume_checks import resume_checks, stop_checks
from resumekit.conformance.p1.row_checks import journal_checks, reuse_checks, superseded_checks
from resumekit.conformance.p1.settings_checks import (
    JOURNAL_MODES_OK,
    SYNCHRONOUS_OK,
    attested,
    settings_checks,
    unreported,
)
from resumekit.conformance.p1.submission_checks import exact_match_checks, submission_problem
from resumekit.conformance.p1.views import decoy_changes
from resumekit.conformance.results import Mismatch

__all__ = [
    "IDENTITY",
    "JOURNAL_MODES_OK",
    "SYNCHRONOUS_OK",
    "Evidence",
    "JournalSettings",
    "attested",
    "cache_damage_checks",
    "decoy_changes",
    "decoy_checks",
    "delivery_checks",
    "exact_match_checks",
    "idle_checks",
    "journal_checks",
    "judge",
    "key_checks",
    "lease_checks",
    "open_attempts",
    "origin_checks",
    "outcome_checks",
    "push_checks",
    "ref_checks",
    "renewal_checks",
    "resume_checks",
    "reuse_checks",
    "second_worker_checks",
    "settings_checks",
    "side_effect_checks",
    "stop_checks",
    "submission_problem",
    "submitted_backing",
    "superseded_checks",
    "unreported",
]


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


def judge(expect: Mapping[str, Mapping[str, Any]], names: Mapping[str, str], ev: Evidence) -> list[Mismatch]:
    """Every check of a scenario; an empty list is a pass."""
    found = journal_checks(ev.rows, ev.snapshots)
    found += side_effect_checks(ev)
    found += submitted_backing(ev)
    found += exact_match_checks(ev)
    found += reuse_checks(ev.rows)
    found += key_checks(ev)
    found += lease_checks(ev)
    found += renewal_checks(ev)
    found += origin_checks(ev)
    found += resume_checks(ev)
    found += stop_checks(ev)
    if ev.idle:
        found += idle_checks(ev)
        found += cache_damage_checks(ev)
    found += settings_checks(ev.settings)
    found += decoy_checks(ev)
    if ev.strict:
        found += superseded_checks(ev.rows)
        found += delivery_checks(ev)
    found += second_worker_checks(ev)
    found += outcome_checks(expect, names, ev)
    return found
