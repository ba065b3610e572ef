"""Broken workers of what is durable at a kit-side kill point (FPT-3): the kit kills the worker while it holds a
request, so what the worker records before that request is all the kit finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _Tracked


class RunsTheToolBeforeVerifying(_Tracked):
    """Runs the kit's tool in the workspace as soon as it is prepared and records ``verification_passed`` after
    the tool has ended, as if the tool were part of the verification: killed at ``tool_started``, its journal ends
    at ``workspace_prepared`` (FPT-3: ``verification_passed`` is durable there)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ran = False  # the tool already ran for the verification being recorded

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        if phase == "verification_passed" and attempt.workspace is not None:
            super()._run_tool(Path(self.config.workspace_root) / attempt.workspace)
            self.ran = True
        return super()._record(attempt, phase, **columns)

    def _run_tool(self, path: Path) -> None:
        if not self.ran:
            super()._run_tool(path)
        self.ran = False
