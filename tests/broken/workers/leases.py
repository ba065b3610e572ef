"""Broken workers of the WriterLease: a row that records another attempt's lease (LEASE-1), and CP time kept on
the worker's own clock between answers (LEASE-2)."""

from __future__ import annotations

import time
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _AtBoundary, _Tracked


class RecordsTheSourceLease(_Tracked):
    """Copies a reused row whole from its source, the source's ``lease_id`` with it: the reused row records the
    earlier attempt's lease, not the one granted to the attempt it belongs to (LEASE-1)."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        source = columns.get("reused_from")
        if source is not None:
            rows = [row for row in self.journal.rows() if row.seq == source]
            if rows:
                columns["lease_id"] = rows[0].lease_id
        return super()._record(attempt, phase, **columns)


class KeepsCPTimeByItsOwnClock(_AtBoundary):
    """Keeps CP time between answers by adding its own monotonic clock's progress to the latest ``now_ms`` it was
    told, and at a step boundary renews only when that estimate puts its lease past half its TTL (LEASE-2): the
    kit's clock moves without the worker's, so it takes a lease the kit aged for a young one and asks nothing.
    Before a governed side effect it still renews, as LEASE-3 (b) says."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.told: tuple[int, float] | None = None  # (now_ms of the latest answer, time.monotonic() then)
        self.expiry: dict[str, tuple[int, int]] = {}  # lease_id -> (expires_at_ms, ttl_ms) of its latest renewal

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        answer = super()._request(method, path, body, headers)
        if answer.now_ms is not None:
            self.told = (answer.now_ms, time.monotonic())
        lease = answer.body.get("lease")
        if answer.status == 200 and isinstance(lease, dict):
            expires, ttl = lease.get("expires_at_ms"), lease.get("ttl_ms")
            if isinstance(expires, int) and isinstance(ttl, int):
                self.expiry[str(lease.get("lease_id"))] = (expires, ttl)
        return answer

    def _renew(self, attempt: reference.Attempt) -> bool:
        known = self.expiry.get(attempt.lease_id)
        if self.at_boundary and not attempt.lost and known is not None and self.told is not None:
            now = self.told[0] + int((time.monotonic() - self.told[1]) * 1000)
            expires, ttl = known
            if expires - now >= ttl / 2:
                return True  # young on the estimate: no request, whatever the kit did to CP time
        return super()._renew(attempt)
