"""Adapters that claim P1 only, each failing one worker command: ``python -m tests.broken.p1_adapters MODE``.

Each is the reference server claiming ``p1.worker`` and ``p1.journal`` and nothing of Phase 0, so that
``resumekit doctor`` has no Phase 0 check to fail them on; all but ``p1-only`` break one command of the
P1 worker protocol, which doctor must name by the step of its scenario that sends it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from resumekit.reference.adapter import Harness, serve

_CLAIMS = ("p1.worker", "p1.journal")


class P1Only(Harness):
    """The reference, claiming only P1's worker and journal: a sound P1-only adapter."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**super()._hello(request), "capabilities": list(_CLAIMS)}


class CannotStart(P1Only):
    """Fails every p1.worker.start, as an adapter whose worker binary is missing would."""

    def _worker_start(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the worker binary ./worker is not there")


class CannotRestart(P1Only):
    """Starts a worker on an empty state directory only: the restart after a kill fails."""

    def _worker_start(self, request: dict[str, Any]) -> dict[str, Any]:
        config = request.get("config")
        state = config.get("stateDir") if isinstance(config, dict) else None
        if isinstance(state, str) and any(Path(state).iterdir()):
            raise RuntimeError(f"the state directory {state} is not empty")
        return super()._worker_start(request)


class CannotWait(P1Only):
    """Starts a worker, then fails every p1.worker.wait."""

    def _worker_wait(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("wait is not implemented yet")


class CannotStop(P1Only):
    """Fails every p1.worker.stop."""

    def _worker_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("stop is not implemented yet")


class NoSettings(P1Only):
    """Claims p1.journal but fails every p1.journal.settings."""

    def _journal_settings_cmd(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("journal settings are not implemented yet")


MODES: dict[str, type[Harness]] = {
    "p1-only": P1Only,
    "cannot-start": CannotStart,
    "cannot-restart": CannotRestart,
    "cannot-wait": CannotWait,
    "cannot-stop": CannotStop,
    "no-settings": NoSettings,
}


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    sys.exit(serve(sys.stdin, sys.stdout, harness=MODES[sys.argv[1]]()))
