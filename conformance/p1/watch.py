"""WRK-5's watch of the workspace root, and the end of what the kit's tool left running.

A worker killed while the kit's tool runs in its workspace may leave the tool behind. From the next
worker's first request on, the kit samples the entries the root held when that worker started and records
every change; ``watch_root`` judges them (docs/spec/p1.md, WRK-5). When the scenario is over, the tool is
told to stop and the trees of the adapters killed with it are ended.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from resumekit.conformance.p1 import _tool, evidence, model

if TYPE_CHECKING:
    from resumekit.conformance.p1.worker import Worker
    from resumekit.conformance.p1.world import World

WATCH_INTERVAL_S = 0.02  # how often the WRK-5 watch samples the workspace root


class RootWatch:
    """WRK-5's watch: from the next worker's first request on, samples the entries the workspace root held
    when that worker started (so never the worker's own new workspaces) and records every change."""

    def __init__(self, root: Path, names: Sequence[str]) -> None:
        self.root, self.names = root, tuple(names)
        self.started = time.monotonic()
        self.last = evidence.tree_state(root, self.names)
        self.changes: dict[str, str] = {}
        self.samples = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resumekit-root-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            self.sample()

    def sample(self) -> None:
        """Compare the watched entries with the last sample; the first change of each path is kept."""
        now = evidence.tree_state(self.root, self.names)
        for path, what in model.tree_changes(self.last, now).items():
            self.changes.setdefault(path, what)
        self.last = now
        self.samples += 1

    def stop(self) -> float:
        """Stop sampling after one last sample; how long the watch lasted, in seconds."""
        self._stop.set()
        self._thread.join(10.0)
        self.sample()
        return time.monotonic() - self.started


def watch_root(worker: Worker, world: World, ms: int) -> str:
    """WRK-5: keep watching the root for *ms* more, then record every change since the watch began (the rules
    judge them: ``processes.watch``); a sentence for the report."""
    watch = world.watch
    if watch is None:
        raise worker.errored(
            "watch_root needs a kill of a worker that ran the kit's tool, then a worker whose first request "
            "starts the watch; the scenario has neither"
        )
    time.sleep(ms / 1000)
    elapsed = watch.stop()
    world.watch = None
    world.record("watch", "changes", changes=dict(watch.changes), seconds=round(elapsed, 3), samples=watch.samples)
    announced = [e for e in worker.control.log() if e.get("kind") == "tool_started"]
    found = [e.get("writes", {}) for e in world.history.events() if e.actor == "tool" and e.kind == "writes"]
    writes = ", ".join(f"{role} {count}" for role, count in sorted(found[-1].items())) if found else ""
    writes = writes or "none found"
    first = announced[0] if announced else {}
    return (
        f"the kit's tool (pid {first.get('pid')}, grandchild pid {first.get('grandchild')}) announced itself after "
        f"{first.get('writes')} write(s) and the worker was killed there; writes found just after the kill: "
        f"{writes}; the workspace root was watched from the next worker's first request for {elapsed:.1f} s "
        f"({watch.samples} samples): {len(watch.changes)} change(s)"
    )


def end_tools(world: World) -> None:
    """Stop what a scenario with the kit's tool left running: the flag first (a surviving tool stops at its
    next write), then the trees of the adapters killed with it."""
    if world.watch is not None:
        world.watch.stop()
    if world.tool_flag is not None:
        world.stop_tool()
        time.sleep(5 * _tool.INTERVAL_S)  # a write under way when the flag went finishes before the root goes
    for process in world.held:
        with contextlib.suppress(OSError):
            process.kill()
    world.held.clear()
