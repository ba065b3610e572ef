"""A runtime that gets one rule wrong: it never reports the dangling tool calls it finds (PLAN-9)."""

from __future__ import annotations

from typing import Any

from my_runtime import build_resume_plan as _sound


def build_resume_plan(
    events: list[dict[str, Any]], *, expected_high_water: int | None = None, profile: str = "core"
) -> dict[str, Any]:
    """The sound plan with every pending tool call's diagnostic left out."""
    plan = _sound(events, expected_high_water=expected_high_water, profile=profile)
    kept = [entry for entry in plan.get("diagnostics", []) if entry.get("code") != "pending_tool_result"]
    return {**plan, "diagnostics": kept}
