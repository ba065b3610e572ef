"""An in-process implementation whose module, not its function, says it claims only core."""

from __future__ import annotations

from typing import Any

from resumekit.reference import build_resume_plan as _reference

profiles = ("core",)


def build_resume_plan(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "core"
) -> dict[str, Any]:
    """The reference's core projection; asked for strict, it fails loudly."""
    assert profile == "core", f"asked for profile {profile!r}, which it does not claim"
    return _reference(events, expected_high_water=expected_high_water, profile="core")
