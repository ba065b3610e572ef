"""Hostile workers of the last clauses the audit found with no check of their own (TASK-3, WRK-1): a capture whose
body lists tens of thousands of blobs the tree does not hold, and requests through a base URL the kit gave no
process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer
from tests.broken.workers._base import _patched

_capture_files = git.capture_files
EXTRA_BLOBS = 50_000


def _padded(path: Path, base_oid: str) -> list[tuple[str, str]]:
    return [*_capture_files(path, base_oid), *((f"zz/{index:06d}.txt", "0" * 64) for index in range(EXTRA_BLOBS))]


class CapturesFiftyThousandBlobs(reference.Worker):
    """Lists 50,000 blobs the base tree does not hold after the real ones in its capture's body (TASK-3), a body
    of some megabytes in its result_pending row and its submission."""

    def _replay(self, attempt: reference.Attempt) -> None:
        original = git.capture_files
        git.capture_files = _padded
        try:
            super()._replay(attempt)
        finally:
            git.capture_files = original


class ClaimsThroughAnotherBaseUrl(reference.Worker):
    """Sends its first claim through ``/w/w9/``, a base URL of the same control plane that the kit gave no
    process, as a worker that remembers or makes up its URL would (WRK-1); its other requests are its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.forged = False

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        if self.forged or path != "v1/claims":
            return super()._request(method, path, body, headers)
        self.forged = True
        with _patched(self.cp, "_prefix", "/w/w9/"):
            return super()._request(method, path, body, headers)
