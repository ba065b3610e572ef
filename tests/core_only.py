"""An in-process implementation that claims only the core profile (``profiles = ("core",)``)."""

from __future__ import annotations

from typing import Any

from resumekit.reference import build_resume_plan


class CoreOnly:
    """The reference's core projection, claiming core and not strict."""

    name = "core-only"
    version = "1.0"
    profiles = ("core",)

    @staticmethod
    def build_resume_plan(
        events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "core"
    ) -> dict[str, Any]:
        assert profile == "core", f"asked for profile {profile!r}, which it does not claim"
        return build_resume_plan(events, expected_high_water=expected_high_water, profile="core")


core_only = CoreOnly()
