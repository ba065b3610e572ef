"""Broken workers of what a task asks of its result: a capture's body lists every blob of the tree (TASK-3)."""

from __future__ import annotations

from pathlib import Path

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from tests.broken.workers._base import _patched, _Tracked

_capture_files = git.capture_files


def _top_level(path: Path, base_oid: str) -> list[tuple[str, str]]:
    """The blobs of the tree's top level only, as ``git ls-tree`` without ``-r`` would list them."""
    return [(name, digest) for name, digest in _capture_files(path, base_oid) if "/" not in name]


class CapturesTheTopLevelOnly(_Tracked):
    """Lists the blobs of the base tree's top level in a capture's body and leaves out those in directories, as a
    tree listing without recursion does (TASK-3: every blob of the tree, recursively, exactly once)."""

    def _replay(self, attempt: reference.Attempt) -> None:
        with _patched(git, "capture_files", _top_level):
            super()._replay(attempt)
