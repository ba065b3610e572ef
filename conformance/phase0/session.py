"""One Phase 0 case's dealings with implementation processes: replies, kills, power cuts, the ledger's place.

Every harness of the crash kinds (``failpoints``, ``ledger_faults``, ``schedule``) talks to the
implementation through a ``Session``, which turns every bad reply into ``Abort`` with the case's
result, and keeps the workspace it runs in: a plain folder, or under power loss a mounted
``PowerLayer`` that keeps only what was synced.

A session records the case's story as a P1 scenario's is recorded (``conformance.history``): each process
started, each command sent and what it answered (every append and its acknowledgement, every reopen and what
it read), each kill and power cut; a case that fails or errs carries it (``told``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, NotInTree, plausible_pid, wait_pid_gone
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, Reply
from resumekit.conformance.canonical import canonical_json
from resumekit.conformance.cases import Case
from resumekit.conformance.events import for_report
from resumekit.conformance.fault_models import POWER_LOSS, PROCESS_CRASH, Abort
from resumekit.conformance.history import History
from resumekit.conformance.phase0.decisions import plan_problem
from resumekit.conformance.powerloss import LayerError, PowerLayer, PowerLoss
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for, start_failed

Factory = Callable[[], ProcessAdapter]
SESSION_ID, RUN_ID = "session-1", "run-1"


class Session:
    """One case's dealings with implementation processes, turning every bad reply into Abort."""

    def __init__(self, case: Case, factory: Factory, profile: str, power: PowerLoss | None = None) -> None:
        self.case, self.factory, self.profile = case, factory, profile
        self.adapter: ProcessAdapter | None = None
        self.power = power
        self.model = POWER_LOSS if power is not None else PROCESS_CRASH
        self.layer: PowerLayer | None = None  # mounted under power loss
        self.ledger: Path | None = None  # the ledger file, once located, whose durable view is checked
        self.cut_notes: list[str] = []
        self.history = History()  # the case's story (a schedule's: one stream's)

    def told(self, result: CaseResult) -> CaseResult:
        """*result*, carrying the story of the case when it failed or erred (a bounded copy)."""
        if result.outcome not in (Outcome.FAILED, Outcome.ERRORED) or result.history:
            return result
        return dataclasses.replace(result, history=tuple(for_report(self.history.events(), self.history.cut)))

    def start(self) -> ProcessAdapter:
        """Start a fresh implementation process; one that cannot start ends the case."""
        self.adapter = self.factory()
        try:
            self.adapter.start()
        except AdapterStartError as error:
            self.history.record("kit", "start-failed", error=error.message)
            raise Abort(start_failed(self.case, error, fault_model=self.model)) from None
        process = self.adapter.process
        self.history.record("impl", "started", pid=process.pid if process is not None else None)
        return self.adapter

    def ask(self, cmd: str, **fields: Any) -> Any:
        """Send *cmd* and return its result object; a skip, an error or a result that is no object ends the case."""
        assert self.adapter is not None
        reply: Reply = self.adapter.request(cmd, **fields)
        answer = reply.value if reply.outcome == "result" else reply.message
        self.history.record("impl", cmd, sent=dict(fields), outcome=reply.outcome, answer=answer)
        if reply.outcome == "skipped":
            raise Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message, fault_model=self.model))
        if reply.outcome != "result":
            raise Abort(dataclasses.replace(errored(self.case, reply, cmd), fault_model=self.model))
        if not isinstance(reply.value, dict):
            raise Abort(self.fail(f"{cmd} answered {reply.value!r}, not an object"))
        return reply.value

    def fail(self, message: str, *mismatches: Mismatch, **fields: Any) -> CaseResult:
        """The case's failed result, with the implementation's last stderr lines."""
        tail = self.adapter.stderr_tail() if self.adapter else ""
        return result_for(
            self.case,
            Outcome.FAILED,
            message=message,
            mismatches=mismatches or (Mismatch("", None, None, None, message),),
            fault_model=self.model,
            stderr_tail=tail or None,
            **fields,
        )

    def arm(self, marker: Path) -> int:
        """Arm the exit marker and return the pid the implementation says holds the store.

        The kit will kill that pid, so it must be the adapter process or one of its descendants.
        """
        pid = self.ask("phase0.crash.arm", marker=str(marker)).get("pid")
        assert self.adapter is not None and self.adapter.process is not None
        if not plausible_pid(pid):
            raise Abort(
                self.fail(f"phase0.crash.arm reported pid {pid!r}, which the kit will not kill: not a process id")
            )
        if not self.adapter.process.owns(pid):
            raise Abort(
                self.fail(
                    f"phase0.crash.arm reported pid {pid!r}, which the kit will not kill: "
                    f"pid {pid} is not the adapter or one of its descendants"
                )
            )
        return int(pid)

    def open(self, workspace: Path) -> None:
        """Open the store of the case's one session and run in *workspace*."""
        self.ask("phase0.store.open", workspace=str(workspace), sessionId=SESSION_ID, runId=RUN_ID)

    def read(self) -> dict[str, Any]:
        """Read the open store: the answer as the implementation gave it."""
        answer: dict[str, Any] = self.ask("phase0.store.read")
        return answer

    def plan(self, profile: str, rows: int, **fields: Any) -> dict[str, Any]:
        """The ResumePlan ``phase0.store.plan`` gives for a ledger whose read gave *rows* rows; no plan fails the case.

        A corrupt answer, or a plan that breaks the ResumePlan schema, is no plan: a ledger the store
        has just read whole must be projected (CRASH-3), and only a valid plan can be compared.
        """
        answer = self.ask("phase0.store.plan", profile=profile)
        plan = answer.get("plan")
        problem = (
            plan_problem(plan)
            if answer.get("status") == "ok"
            else f"it answered status {answer.get('status')!r} (line {answer.get('line')!r})"
        )
        if problem is not None:
            raise Abort(
                self.fail(
                    f"phase0.store.plan gave no plan of the {rows} row(s) its read returned: {problem}",
                    Mismatch("/plan", f"a ResumePlan of {rows} row(s)", problem, "CRASH-3"),
                    **fields,
                )
            )
        assert isinstance(plan, dict)
        return plan

    def close(self) -> None:
        """Stop the implementation in order, if one runs."""
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None

    def crash(self, pid: int) -> None:
        """Kill the pid the implementation named, and the process the kit started, and reap both."""
        assert self.adapter is not None and self.adapter.process is not None
        process = self.adapter.process
        self.freeze()
        self.history.record("kit", "killed", pid=pid, signal="SIGKILL")
        try:
            process.kill_member(pid)
        except NotInTree as error:
            raise Abort(self.fail(f"the kit will not kill pid {pid}: {error}")) from None
        except OSError as error:
            raise Abort(self.fail(f"cannot kill pid {pid} that phase0.crash.arm reported: {error}")) from None
        if pid != process.pid:
            process.kill()  # a wrapper around the real runtime
        process.wait(timeout=10.0)
        process.kill()
        if not wait_pid_gone(pid, timeout=10.0):
            raise Abort(self.fail(f"pid {pid} still runs 10 s after it was killed"))
        self.adapter.process = None
        self.adapter = None
        self.power_cut(seed=0, mode="lose")

    def errored(self, message: str) -> CaseResult:
        """The result of a case the kit's own layer failed (not the implementation)."""
        return result_for(self.case, Outcome.ERRORED, message=message, fault_model=self.model)

    def freeze(self) -> None:
        """Under power loss, the instant of the cut, taken just before the kill: no later sync lands."""
        if self.layer is None:
            return
        try:
            self.layer.freeze()
        except LayerError as error:
            raise Abort(self.errored(f"the power layer failed: {error}")) from None

    def power_cut(self, *, seed: int, mode: str) -> None:
        """Under power loss, after the kill: drop what was never synced (a no-op for a process crash)."""
        if self.layer is None:
            return
        try:
            self.cut_notes.append(f"{mode}: {self.layer.cut(mode, seed)}")
            self.history.record("kit", "power-cut", mode=mode, seed=seed, what=self.cut_notes[-1])
        except LayerError as error:
            raise Abort(self.errored(f"the power cut failed: {error}")) from None

    def acknowledged(self, rows: int, *, replay: str | None = None, locate: bool = True) -> None:
        """Under power loss, the ledger's durable view must hold *rows* rows when the kit hears the acknowledgement.

        Only where the implementation shows its ledger file (``phase0.ledger-file``); without it the
        cuts alone judge. The layer answers an fsync only after a delay, so a row acknowledged before
        its sync is still volatile here.
        """
        if self.layer is None:
            return
        if self.ledger is None:
            if not locate:
                return
            self.ledger = self._located(self.layer)
            if self.ledger is None:
                return
        try:
            durable = self.layer.durable(self.ledger)
        except LayerError as error:
            raise Abort(self.errored(f"the power layer failed: {error}")) from None
        held = 0 if durable is None else durable.count(b"\n")
        self.history.record("kit", "durable-view", rows=rows, held=held, file=durable is not None)
        if held < rows:
            where = "no ledger file at all" if durable is None else f"{held} row(s)"
            raise Abort(
                self.fail(
                    f"row {rows} was acknowledged before it was durable: when the acknowledgement arrived, a "
                    f"power cut would have left {where} (the row, or the file's name in its directory, was "
                    "not synced yet)",
                    Mismatch("/durable/rows", rows, held, "STORE-2"),
                    replay=replay,
                )
            )

    def _located(self, layer: PowerLayer) -> Path | None:
        """The ledger file the implementation shows inside the layer, or None where it shows none."""
        if self.adapter is None or "phase0.ledger-file" not in self.adapter.implementation.capabilities:
            return None
        located = self.ask("phase0.ledger.locate").get("path")
        try:
            return _files.inside(layer.mountpoint, located)
        except _files.Refused as error:
            raise Abort(self.fail(f"phase0.ledger.locate: {error}")) from None


def kill_if_running(process: LineProcess, pid: int, layer: PowerLayer | None = None) -> None:
    """Cut the power (under a layer) and kill *pid* of *process*, quietly if it already died."""
    # Runs on a timer thread: a process that already died by itself is not an error to print there.
    if layer is not None:  # the power goes first; a failed freeze shows in the cut that follows
        with contextlib.suppress(LayerError):
            layer.freeze()
    with contextlib.suppress(NotInTree, OSError):
        process.kill_member(pid)


@contextlib.contextmanager
def scratch_folder(label: str, session: Session) -> Iterator[Path]:
    """A scratch folder for one case, removed after the session's implementation and layer have stopped."""
    path = _files.scratch(label)
    try:
        yield path
    finally:
        # Stop the implementation first: an armed exit path writes its marker into this folder.
        session.close()
        if session.layer is not None:
            session.layer.stop()
            session.layer = None
        _files.remove(path)


def make_workspace(scratch: Path, session: Session) -> Path:
    """The case's workspace: a plain folder, or under power loss the mounted layer."""
    workspace = scratch / "workspace"
    if session.power is None:
        workspace.mkdir()
        return workspace
    session.layer = PowerLayer(scratch / "backing", workspace, session.power.sync_delay)
    try:
        session.layer.start()
    except LayerError as error:
        raise Abort(session.errored(f"cannot mount the power layer: {error}")) from None
    return workspace


def same_events(expected: Sequence[Mapping[str, Any]], actual: Any) -> bool:
    """Whether a read's *actual* events are the *expected* ones, compared as canonical JSON."""
    if not isinstance(actual, list) or len(actual) != len(expected):
        return False
    # Equal plain JSON texts are equal canonical ones; only a difference (which may be 1.0 against 1)
    # needs the slower canonical form, whose normalising walk is in Python.
    plain = json.dumps(list(expected), sort_keys=True, ensure_ascii=False)
    return plain == json.dumps(actual, sort_keys=True, ensure_ascii=False) or (
        canonical_json(list(expected)) == canonical_json(actual)
    )


def ids(events: Any) -> list[Any]:
    """The ids of a read's events, for a mismatch: each event's id, or the item itself where it is no object."""
    return [e.get("id") if isinstance(e, dict) else e for e in events] if isinstance(events, list) else [events]


__all__ = [
    "RUN_ID",
    "SESSION_ID",
    "Factory",
    "Session",
    "ids",
    "kill_if_running",
    "make_workspace",
    "same_events",
    "scratch_folder",
]
