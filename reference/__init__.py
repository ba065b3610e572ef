"""The bundled reference runtime of both contracts, certified by the kit the way a foreign one is.

``phase0`` holds the pure projection and the durable file store, ``p1`` the worker with its journal, task
cache, git workspaces and cleanup; ``adapter`` speaks the adapter protocol for both. The names exported
here are the Phase 0 projection's, which Python runtimes can call in-process
(``--adapter python:resumekit.reference:build_resume_plan``).
"""

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
