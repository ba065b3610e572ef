"""The bundled reference runtime for resumekit's Phase 0 contract."""

from __future__ import annotations

from resumekit.reference.canonical import canonical_json
from resumekit.reference.phase0.projection import (
    INDETERMINATE_TOOL_RESULT_DIRECTIVE,
    build_resume_plan,
    is_partial_event,
    is_terminal_event,
    project_tool_operations,
)

__all__ = [
    "INDETERMINATE_TOOL_RESULT_DIRECTIVE",
    "build_resume_plan",
    "canonical_json",
    "is_partial_event",
    "is_terminal_event",
    "project_tool_operations",
]
