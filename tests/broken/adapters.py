"""Adapter-protocol servers that each misbehave in one way: ``python -m tests.broken.adapters MODE``.

Each is the reference server with one thing bent. The kit must give each the verdict named in
``VERDICTS`` and must never hang on any of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from resumekit.reference.adapter import Harness, serve

# The case each disruptive mode picks on; every other case is answered properly.
VICTIM = "prefix-after-function-response"


class AckBeforeDurable(Harness):
    """Acknowledges an append at once and writes it only when the next request arrives."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[dict[str, Any]] = []

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("cmd") != "phase0.store.append":
            self._flush()
        return super().handle(request)

    def _flush(self) -> None:
        store = self._store
        while self._pending and store is not None:
            store.append(self._pending.pop(0))

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        self._flush()
        self._pending.append(request["event"])
        store = self._open_store()
        return {"rows": len(store.read().events) + len(self._pending)}


class FinallyAnyway(Harness):
    """Runs its cleanup (and writes the exit marker) after every append, not only on exit."""

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return super()._store_append(request)
        finally:
            self._markers_written = False
            self.write_markers()


class NotDeterministic(Harness):
    """Stamps each plan with the time it was made."""

    def _project(self, events: Any, request: dict[str, Any]) -> dict[str, Any]:
        plan = super()._project(events, request)
        plan["computedAtNs"] = time.perf_counter_ns()
        return plan


class RewritesLedger(Harness):
    """Normalises the ledger file (sorted keys) whenever it plans from it."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_plan(request)
        path = self._open_store().ledger_path
        rows = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        path.write_bytes(b"".join(json.dumps(row, sort_keys=True).encode() + b"\n" for row in rows))
        return answer


class SurfacesTornRow(Harness):
    """Parses the uncommitted tail and, when it happens to be JSON, returns it as an event."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        path: Path = self._open_store().ledger_path
        if answer.get("status") == "ok" and answer.get("tornTail"):
            tail = path.read_bytes()[answer["tornTail"]["offset"] :]
            with contextlib.suppress(ValueError):
                answer["events"].append(json.loads(tail))
        return answer


class Hangs(Harness):
    """Never answers the plan for one case."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            time.sleep(3600)
        return super()._plan(request)


class CrashesMidRun(Harness):
    """Dies without a word on one case, after saying why on stderr."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            print("broken adapter: giving up on this case", file=sys.stderr, flush=True)
            os._exit(3)
        return super()._plan(request)


class PrintsGarbage(Harness):
    """Prints a debugging line to stdout before one answer."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            out = sys.__stdout__
            assert out is not None
            out.buffer.write(b"DEBUG computing the plan...\n")
            out.buffer.flush()
        return super()._plan(request)


class SloppyMessages(Harness):
    """Acknowledges appends with the row count as a string: breaks the result schema."""

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"rows": str(super()._store_append(request)["rows"])}


class NamesTheKitsPid(Harness):
    """Reports its parent, the kit, as the process to kill."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        return {"pid": os.getppid()}


class ChattyHello(Harness):
    """Greets on stdout before its hello answer, as a logging library set up to print might."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        out = sys.__stdout__
        assert out is not None
        out.buffer.write(b"runtime starting up\n")
        out.buffer.flush()
        return super()._hello(request)


MODES: dict[str, type[Harness]] = {
    "ack-before-durable": AckBeforeDurable,
    "finally-anyway": FinallyAnyway,
    "not-deterministic": NotDeterministic,
    "rewrites-ledger": RewritesLedger,
    "surfaces-torn-row": SurfacesTornRow,
    "hangs": Hangs,
    "crashes-mid-run": CrashesMidRun,
    "prints-garbage": PrintsGarbage,
    "chatty-hello": ChattyHello,
    "sloppy-messages": SloppyMessages,
    "names-the-kits-pid": NamesTheKitsPid,
}


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    sys.exit(serve(sys.stdin, sys.stdout, harness=MODES[sys.argv[1]]()))
