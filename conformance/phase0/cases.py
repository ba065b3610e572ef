"""The Phase 0 cases: decisions, failpoints, ledger faults and the crash schedule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.cases import Case, Event


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionCase(Case):
    """A committed prefix and the plan the spec demands for it."""

    events: tuple[Event, ...]
    expect: Mapping[str, Any]
    expect_strict: Mapping[str, Any] | None = None
    expected_high_water: int | None = None

    kind = "decision"
    answer_name = "plan"

    def compared_expectation(self, profile: str) -> Mapping[str, Any] | None:
        """The plan a failed decision was compared against whole, defaulted operation args filled in as compared."""
        from resumekit.conformance.phase0.plan_checks import expected_operations

        expectation = dict(self.expectation_for(profile))
        expectation["operations"] = expected_operations(self.events, expectation)
        return expectation

    def expectation_profile(self, profile: str) -> str:
        """Whose expectation a run in *profile* compares against: ``"strict"`` only where the case has one."""
        return "strict" if profile == "strict" and self.expect_strict is not None else self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """The plan a run in *profile* must produce: ``expect_strict`` under strict where given, else ``expect``."""
        if self.expectation_profile(profile) == "strict" and self.expect_strict is not None:
            return self.expect_strict
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashCase(Case):
    """A failpoint: append its committed prefix, kill the writer, reopen, and decide."""

    failpoint: str
    boundary: str
    prefix_name: str
    events: tuple[Event, ...]
    expect: Mapping[str, Any]

    kind = "crash"

    def expectation_profile(self, profile: str) -> str:
        """The failpoint prefixes have one expectation for both profiles."""
        return self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """The plan a run in *profile* must produce after the crash (the same in both profiles)."""
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerFaultCase(Case):
    """Bytes the kit damages in a ledger file, and what a read must then report."""

    fault: Mapping[str, Any]
    events: tuple[Event, ...]
    expect: Mapping[str, Any]  # one expectation, or {"alternatives": [...]}
    expect_strict: Mapping[str, Any] | None = None

    kind = "ledger-fault"

    def expectation_profile(self, profile: str) -> str:
        """Whose expectation a run in *profile* compares against: ``"strict"`` only where the case has one."""
        return "strict" if profile == "strict" and self.expect_strict is not None else self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """What a read in *profile* must report: ``expect_strict`` under strict where given, else ``expect``."""
        if self.expectation_profile(profile) == "strict" and self.expect_strict is not None:
            return self.expect_strict
        return self.expect

    def readings_for(self, profile: str) -> tuple[Mapping[str, Any], ...]:
        """The expectations any one of which a read in *profile* may meet (one, unless core offers alternatives)."""
        expectation = self.expectation_for(profile)
        return tuple(expectation["alternatives"]) if "alternatives" in expectation else (expectation,)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCase(Case):
    """A long append stream whose writer the kit kills at seeded random moments."""

    template: Mapping[str, Any]

    kind = "schedule"
