"""The kit's moment checks (docs/spec/p1.md, EVID-4): what the journal held as each request arrived.

The control plane calls the observer as a worker's first request, a submission, a receipt, a push or a
kit-side kill point arrives, before it answers. Under power loss the journal is read as a cut at that
instant would leave it, so a request is judged against what was durable when it arrived.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from resumekit.conformance.p1 import evidence
from resumekit.conformance.p1.submission_checks import submission_problem
from resumekit.conformance.p1.watch import RootWatch
from resumekit.conformance.p1.world import World
from resumekit.conformance.powerloss import LayerError
from resumekit.conformance.results import Mismatch


class Observer:
    """The kit's moment checks (p1.md EVID-4), run by the control plane as each request arrives."""

    def __init__(self, world: World, profile: str) -> None:
        self.world, self.profile = world, profile
        self.lock = threading.Lock()

    def _journal(self, worker: str | None = None) -> list[evidence.Row]:
        """The journal as this request arrived, kept as a snapshot for JNL-4 (rows deleted before any wait
        are seen); under power loss, the durable view, which is not kept: it may lag the live reads."""
        state_dir = self.world.home(worker)[1]
        if state_dir != self.world.state_dir:
            # A second worker's journal: never on the power-loss layer.
            try:
                read = functools.partial(evidence.read_journal, state_dir)
                return self.world.observe_journal(read, second=True, why="moment", worker=worker)
            except evidence.JournalUnreadable:
                return []
        try:
            if self.world.layer is not None:
                with self.lock:
                    rows = self.world.durable_journal()
                self.world.record_rows(rows, why="durable", worker=worker)
                return rows
            read = functools.partial(evidence.read_journal, self.world.state_dir)
            return self.world.observe_journal(read, why="moment", worker=worker)
        except (evidence.JournalUnreadable, LayerError):
            return []

    def _problem(self, clause: str, pointer: str, expected: Any, actual: Any, note: str) -> list[str]:
        with self.lock:
            self.world.moment_problems.append(Mismatch(pointer, expected, actual, clause, note))
        return [f"{clause}: {note}"]

    def on_first_request(self, worker: str) -> list[str]:
        """CLEAN-1: no stale workspace left at a worker's first request (and the WRK-5 watch starts here)."""
        with self.lock:
            if worker in self.world.first_seen:
                return []
            self.world.first_seen.add(worker)
            if worker == self.world.watch_for and self.world.watch is None:
                # CLEAN-1: cleanup is done by the first request, which waits for this answer meanwhile.
                self.world.watch = RootWatch(self.world.workspace_root, self.world.start_listing.get(worker, []))
        self._journal(worker)  # what the journal held as the worker first spoke: the first snapshot of JNL-4
        before = [name for name in self.world.start_listing.get(worker, []) if name.startswith("task-")]
        now = set(evidence.listing(self.world.home(worker)[0]))
        left = sorted(name for name in before if name in now and name not in self.world.swapped)
        if left:
            return self._problem(
                "CLEAN-1",
                f"/workers/{worker}/first-request",
                [],
                left,
                "stale workspaces were still there at the worker's first request",
            )
        return []

    def on_submission(self, worker: str, task_id: str, attempt: int, key: str, result_hash: str) -> list[str]:
        """SUB-1: a submission arrives only once its result_pending row is durable (SUB-2: with its hash)."""
        problem = submission_problem(self._journal(worker), task_id, attempt, key, result_hash)
        if problem is None:
            return []
        with self.lock:
            self.world.moment_problems.append(problem)
        return [f"{problem.clause}: {problem.note}"]

    def on_receipt(self, worker: str, task_id: str, attempt: int, commit_oid: str) -> list[str]:
        """COMMIT-5 (strict profile): a receipt arrives only once its commit_done is durable."""
        if self.profile != "strict":
            return []
        rows = [r for r in self._journal(worker) if r["task_id"] == task_id and r["attempt"] == attempt]
        # A reused result_pending carries an earlier attempt's commit_done, and SCOPE-3 has the new attempt
        # report its receipt after it (COMMIT-4): the commit is durable in the attempt's rows either way.
        carried = any(
            r["phase"] == "result_pending" and r["reused_from"] is not None and r["commit_oid"] == commit_oid
            for r in rows
        )
        if not carried and (
            not rows or (rows[-1]["phase"] != "commit_done" and "commit_done" not in {r["phase"] for r in rows})
        ):
            return self._problem(
                "COMMIT-5",
                f"/tasks/{task_id}/attempts/{attempt}/receipt",
                "commit_done durable",
                rows[-1]["phase"] if rows else None,
                "a receipt arrived before commit_done was durable",
            )
        return []

    def on_push(self, task_id: str, attempt: int, ref: str, old: str, new: str) -> list[str]:
        """COMMIT-2: a push reaches the origin only while the attempt's latest row is verification_passed."""
        # The origin cannot tell which worker pushed: with a second worker holding the same attempt, the
        # push is in order if the attempt's latest row is verification_passed in either journal.
        latest = None
        others = {home[1]: name for name, home in self.world.homes.items() if home[1] != self.world.state_dir}
        for worker in (None, *others.values()):
            rows = [r for r in self._journal(worker) if r["task_id"] == task_id and r["attempt"] == attempt]
            if rows:
                latest = rows[-1]["phase"]
                if latest == "verification_passed":
                    break
        if latest != "verification_passed":
            return self._problem(
                "COMMIT-2",
                f"/tasks/{task_id}/attempts/{attempt}/push",
                "verification_passed",
                latest,
                "a push reached the origin while the attempt's latest row was not verification_passed",
            )
        return []

    def on_kill_point(self, name: str, worker: str) -> None:
        """A kit-side kill point the scenario armed: kill the running worker there, once."""
        if name not in self.world.kill_armed:
            return
        self.world.kill_armed.discard(name)
        if self.world.kill_current is not None:
            self.world.kill_current()
        self.world.record(worker, "killed", signal="SIGKILL", at=name, by="a kit-side kill point")
        self.world.killed_at.append(name)
        self.world.kill_event.set()
