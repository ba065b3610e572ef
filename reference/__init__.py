"""The bundled reference runtime for resumekit's Phase 0 contract."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: the adapter process answers hello sooner
if TYPE_CHECKING:
    from typing import Any

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


def __getattr__(name: str) -> Any:
    # Imported on first use, so that the adapter process (``python -m resumekit.reference``) answers
    # ``hello`` without loading the projection first.
    if name == "canonical_json":
        from resumekit.reference import canonical

        return canonical.canonical_json
    if name in __all__:
        from resumekit.reference.phase0 import projection

        return getattr(projection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
