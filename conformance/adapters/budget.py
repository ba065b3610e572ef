"""The start budget: how many times in a row the kit tries to start an adapter before it gives up."""

from __future__ import annotations

import threading

from resumekit.conformance.adapters.interface import AdapterStartError

START_ATTEMPTS = 3  # consecutive failed starts after which the kit stops starting an adapter


class StartBudget:
    """Consecutive failed starts of one adapter, shared by every process made for it.

    After ``START_ATTEMPTS`` failures in a row the kit stops trying: every later start fails at once
    with the last reason, so a dead adapter does not cost a timeout per case.
    """

    def __init__(self, attempts: int = START_ATTEMPTS) -> None:
        self.attempts = attempts
        self.failures = 0
        self.last: AdapterStartError | None = None
        self._lock = threading.Lock()  # cases running at once (--jobs) share one budget

    def check(self) -> None:
        """Raise AdapterStartError, with the last failure's reason, once the budget is spent."""
        with self._lock:
            if self.failures >= self.attempts and self.last is not None:
                raise AdapterStartError(
                    f"not started again: the last {self.failures} starts failed; the last one: {self.last.message}",
                    self.last.stderr_tail,
                )

    def failed(self, error: AdapterStartError) -> None:
        """Count one more failed start, for *error*."""
        with self._lock:
            self.failures += 1
            self.last = error

    def succeeded(self) -> None:
        """A start succeeded: the count begins afresh."""
        with self._lock:
            self.failures, self.last = 0, None
