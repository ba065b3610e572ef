"""Broken workers of the settings a worker depends on (WRK-1): every request goes through the base URL it was
given."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1.client import Answer
from tests.broken.workers._base import _patched, _Tracked


class ReleasesFromTheHostRoot(_Tracked):
    """Builds the path of a lease's release from the host's root (``/v1/leases/{id}/release``, a template with a
    leading slash), so the release leaves the base URL's path out and reaches no endpoint of its own; the 404
    it gets it takes for a lease already gone (WRK-1: every request through ``controlPlaneUrl``)."""

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        if not path.endswith("/release"):
            return super()._request(method, path, body, headers)
        with _patched(self.cp, "_prefix", "/"):
            return super()._request(method, path, body, headers)
