"""The P1 checks not yet moved into the sections of ``checks`` (transitional: the table of rules,
``checks.rules``, is the verdict; these names are gathered here for their tests until they move)."""

from __future__ import annotations

from resumekit.conformance.p1.checks.story import JournalSettings
from resumekit.conformance.p1.control_plane.state import IDENTITY
from resumekit.conformance.p1.convergence_checks import idle_checks, outcome_checks
from resumekit.conformance.p1.damage_checks import cache_damage_checks, decoy_checks
from resumekit.conformance.p1.effect_checks import lease_checks
from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.renewal_checks import renewal_checks
from resumekit.conformance.p1.views import decoy_changes

__all__ = [
    "IDENTITY",
    "Evidence",
    "JournalSettings",
    "cache_damage_checks",
    "decoy_changes",
    "decoy_checks",
    "idle_checks",
    "lease_checks",
    "outcome_checks",
    "renewal_checks",
]
