"""A runtime's crash-resume decision, in-process: ``--resumekit-adapter python:my_runtime:build_resume_plan``.

It stands for a runtime of one's own; here it hands the events to the bundled reference's projection.
"""

from __future__ import annotations

from typing import Any

from resumekit.reference import build_resume_plan as _reference


def build_resume_plan(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "core"
) -> dict[str, Any]:
    """The resume plan of *events* (docs/spec/phase0.md)."""
    plan: dict[str, Any] = _reference(events, expected_high_water=expected_high_water, profile=profile)
    return plan
