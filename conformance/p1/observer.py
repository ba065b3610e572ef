"""The kit's moment readings (docs/spec/p1.md, EVID-4): what the journal held as each request arrived.

The control plane calls the observer as a worker's first request, a submission, a receipt, a push or a
kit-side kill point arrives, before it answers. The observer reads the journal then (under power loss, as a
cut at that instant would leave it, so a request is judged against what was durable when it arrived) and
records the read with the request's number; the rules judge the request against it (``checks``: CLEAN-1,
SUB-1, SUB-2, COMMIT-2, COMMIT-5). Nothing here judges.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from resumekit.conformance.p1 import evidence, journal_reader
from resumekit.conformance.p1.watch import RootWatch
from resumekit.conformance.p1.world import World, kept_entries
from resumekit.conformance.powerloss import LayerError


class Observer:
    """The kit's moment readings (p1.md EVID-4), made by the control plane as each request arrives."""

    def __init__(self, world: World, profile: str) -> None:
        self.world, self.profile = world, profile
        self.lock = threading.Lock()

    def _journal(self, worker: str | None, request: int | None, check: str) -> None:
        """Read the journal as this request arrived and record the read, with the request's number and the
        check it is for; under power loss, the durable view (which JNL-4 does not compare: it may lag the live
        reads). A read that fails is recorded as one that found no row, and compared by no JNL-4 check."""
        state_dir = self.world.home(worker)[1]
        context: dict[str, Any] = {"worker": worker, "request": request, "check": check}
        second = state_dir != self.world.state_dir  # a second worker's journal: never on the power-loss layer
        try:
            if self.world.layer is not None and not second:
                with self.lock:
                    rows = self.world.durable_journal()
                self.world.record_rows(rows, why="durable", **context)
                return
            read = functools.partial(self.world.read_journal, state_dir)
            self.world.observe_journal(read, second=second, why="moment", **context)
        except (journal_reader.JournalUnreadable, LayerError) as error:
            self.world.record_rows([], second=second, why="moment-failed", error=str(error), **context)

    def on_first_request(self, worker: str, *, request: int | None = None) -> list[str]:
        """CLEAN-1: the root as a worker's first request arrived (and the WRK-5 watch starts here)."""
        with self.lock:
            if worker in self.world.first_seen:
                return []
            self.world.first_seen.add(worker)
            if worker == self.world.watch_for and self.world.watch is None:
                # CLEAN-1: cleanup is done by the first request, which waits for this answer meanwhile.
                self.world.watch = RootWatch(self.world.workspace_root, self.world.start_listing.get(worker, []))
        self._journal(worker, request, "first_request")  # what the journal held as the worker first spoke
        listing = evidence.listing(self.world.home(worker)[0])
        kept = kept_entries(self.world, self.world.home(worker)[0])
        self.world.record(worker, "first-request", request=request, listing=listing, kept=kept)
        return []

    def on_submission(
        self, worker: str, task_id: str, attempt: int, key: str, result_hash: str, *, request: int | None = None
    ) -> list[str]:
        """SUB-1 and SUB-2: the journal as a submission arrived."""
        self._journal(worker, request, "submission")
        return []

    def on_receipt(
        self, worker: str, task_id: str, attempt: int, commit_oid: str, *, request: int | None = None
    ) -> list[str]:
        """COMMIT-5 (strict profile): the journal as a receipt arrived."""
        if self.profile == "strict":
            self._journal(worker, request, "receipt")
        return []

    def on_push(
        self, task_id: str, attempt: int, ref: str, old: str, new: str, *, request: int | None = None
    ) -> list[str]:
        """COMMIT-2: every journal as a push reached the origin (the origin cannot tell which worker pushed)."""
        others = {home[1]: name for name, home in self.world.homes.items() if home[1] != self.world.state_dir}
        for worker in (None, *others.values()):
            self._journal(worker, request, "push")
        return []

    def on_kill_point(self, name: str, worker: str) -> None:
        """A kit-side kill point the scenario armed: kill the running worker there, once."""
        if name not in self.world.kill_armed:
            return
        self.world.kill_armed.discard(name)
        kill = self.world.kill_current
        failed = kill() if kill is not None else "no worker process was running"
        if failed is None:
            self.world.record(worker, "killed", signal="SIGKILL", at=name, by="a kit-side kill point")
            self.world.killed_at.append(name)
        else:  # never recorded as a kill: the journal the worker goes on to write would be judged as one
            self.world.record(worker, "kill-failed", at=name, why=failed)
            self.world.kill_failed = failed
        self.world.kill_event.set()
