"""Workers that do nothing a scenario asks for: every scenario must fail with them, or it passes on no evidence."""

from __future__ import annotations

from resumekit.reference.p1.journal import Journal
from tests.broken.workers._base import _Tracked


class NeverClaims(_Tracked):
    """Opens its journal, reports idle at once and waits for the stop without a single request."""

    def _startup(self) -> None:
        self._journal = Journal(self.config.state_dir, self.settings, disk=self.control.disk)

    def _claim_loop(self) -> None:
        self.control.set_idle(True)
        while True:
            self.control.check_stop()
            self.control.sleep(3600)  # woken early by the stop


class DropsEveryTask(_Tracked):
    """Claims work as the reference does, then does nothing with what it is served: no row, no effect."""

    def _served(self, task: dict[str, object], lease: dict[str, object]) -> None:
        return None
