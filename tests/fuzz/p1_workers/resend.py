"""Hostile workers of the renewal before each governed send (LEASE-3 (b), SUB-4): a resend after an unknown answer
with no renewal answered ACTIVE since the first send, however near a renewal-looking request comes; and a renewal
the control plane routes to the lease although its path spells the lease id otherwise, which the kit must count."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer, quote
from tests.broken.workers.resend import Resending
from tests.fuzz.p1_workers import _base


class RenewsAnotherLeaseBeforeAResend(Resending):
    """Before each resend of its submission, renews a lease that is not its own and sends whatever that renewal was
    answered (404): a renewal request right before the send, by the same process, that renewed nothing of its."""

    def _renew(self, attempt: reference.Attempt) -> bool:
        if not self.resending:
            return super()._renew(attempt)
        self.resending = False
        self._request("POST", f"v1/leases/{quote(attempt.lease_id + '-not-mine')}/renew", {})
        return True


class SkipsTheRenewalBeforeAReceiptResend(reference.Worker):
    """Renews before the first send of its receipt report and not before the resend after the 503 (LEASE-3 (b))."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipts: int | None = None  # the receipt reports of the convergence check under way, if any

    def _converge(self, attempt: reference.Attempt) -> None:
        self.receipts = 0
        try:
            super()._converge(attempt)
        finally:
            self.receipts = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        if self.receipts is not None and method == "PUT" and path.endswith("/receipt"):
            self.receipts += 1
        return super()._request(method, path, body, headers)

    def _renew(self, attempt: reference.Attempt) -> bool:
        if self.receipts:
            return not attempt.lost
        return super()._renew(attempt)


class RenewsThroughAnEncodedPath(reference.Worker):
    """Renews with every byte of the lease id percent-encoded (``v1/leases/%6C%65.../renew``): the same lease to the
    control plane, which decodes each path segment, so every send follows a renewal the kit must count."""

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        parts = path.split("/")
        if method == "POST" and len(parts) == 4 and parts[:2] == ["v1", "leases"] and parts[3] == "renew":
            lease_id = unquote(parts[2])
            parts[2] = "".join(f"%{byte:02X}" for byte in lease_id.encode("utf-8"))
            with Path(_base.argument()).open("a", encoding="utf-8") as probe:
                probe.write(f"encoded {lease_id} as {parts[2]}\n")
            path = "/".join(parts)
        return super()._request(method, path, body, headers)
