"""A broken worker of the renewal that precedes each send of a governed side effect (LEASE-3 (b), SUB-4)."""

from __future__ import annotations

from typing import Any

from resumekit.reference.p1 import worker as reference
from tests.broken.workers._base import _Tracked


class Resending(reference.Worker):
    """The reference worker, knowing whether the renewal under way is the one before a resend of a submission
    (shared with the hostile workers of the campaign, tests/fuzz/p1_workers/resend.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sends: int | None = None  # the sends of the submission under way in this process, if any
        self.resending = False  # the next renewal is the one before a resend

    def _submit(self, attempt: reference.Attempt) -> None:
        self.sends = 0
        try:
            super()._submit(attempt)
        finally:
            self.sends, self.resending = None, False

    def _failpoint(self, name: str) -> None:
        super()._failpoint(name)
        if name == "before_result_submit" and self.sends is not None:
            self.sends += 1
            self.resending = self.sends > 1


class RenewsOnlyBeforeTheFirstSend(Resending, _Tracked):
    """Renews the lease before the first send of a result submission and never before a resend after an unknown
    answer (SUB-4: a renewal precedes each resend). Its lease state stays ACTIVE throughout, so only the order of
    the control plane's log shows it."""

    def _renew(self, attempt: reference.Attempt) -> bool:
        if self.resending:
            self.resending = False
            return not attempt.lost
        return super()._renew(attempt)
