"""Workers that take the other reading of a question p1.md section 0.5 settles: each is the reference but for it."""

from __future__ import annotations

import threading
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer
from resumekit.reference.p1.control import Control
from tests.broken.workers._base import _Tracked

LATE_WAKE_S = 0.5  # how long the released worker thread takes to mark itself running: far beyond the kit's next wait


class NeverReleasesAtStartup(_Tracked):
    """G1: takes LEASE-4's release of an abandoned attempt for a MAY at startup too. A restart sends no request
    about an attempt it abandoned, or one a later attempt superseded, and claims (RESUME-1)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._skipping = False  # within the startup, outside a terminal attempt's report and release

    def _release(self, lease_id: str) -> None:
        if not self._skipping:
            super()._release(lease_id)

    def _startup(self) -> None:
        self._skipping = True
        try:
            super()._startup()
        finally:
            self._skipping = False

    def _finish(self, attempt: reference.Attempt) -> None:
        skipping, self._skipping = self._skipping, False  # LEASE-5's release of a terminal attempt, it keeps
        try:
            super()._finish(attempt)
        finally:
            self._skipping = skipping


class RenewalRejectionIsUnknown(_Tracked):
    """G13: reads a renewal answered 404 or 400 as unknown, like a 5xx, and renews again: a lease the control
    plane told it was lost authorises its push or its submission once a later renewal answers ACTIVE (LEASE-4)."""

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        answer = super()._request(method, path, body, headers)
        if path.endswith("/renew") and answer.status in (400, 404):
            return Answer(503, answer.body)  # the reference's renewal resends a 5xx
        return answer


class _WakesLate(Control):
    """A control whose ``release`` answers before the worker's thread is marked running: the thread clears the
    block itself once it has woken up, which here takes ``LATE_WAKE_S``."""

    def release(self, failpoint: tuple[str, int] | None) -> None:
        with self._cond:
            self._armed = failpoint
            self._woken = True
            self._cond.notify_all()

    def failpoint(self, name: str) -> None:
        with self._cond:
            hit = self._hits[name] = self._hits.get(name, 0) + 1
            self._total += 1
            if self._stop or self._armed not in ((name, hit), ("*", self._total)):
                return
            self._armed, self._woken = None, False
            self._blocked = name
            self._cond.notify_all()
            while self._blocked == name and not self._woken:
                self._cond.wait()
        threading.Event().wait(LATE_WAKE_S)  # the thread has not woken up yet: wait still says blocked
        with self._cond:
            if self._blocked == name:
                self._blocked = None
                self._cond.notify_all()


class AnswersContinueBeforeWaking(_Tracked):
    """G20: leaves the worker's state to its thread, so a ``p1.worker.wait`` right after ``p1.worker.continue``
    still reports the block that continue released (ADP-2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.control.__class__ = _WakesLate
