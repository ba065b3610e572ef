"""The worker handle: the adapter process that runs a P1 worker, started, waited on, killed and stopped.

A new adapter process runs the worker after every kill. The handle arms the worker's failpoints and disk
faults, confirms that a worker blocked where the failpoint catalog says and in the durable state it names
(FPT-2), kills only a process the process guard says the kit may kill, and reaps it; under power loss each
kill is a power cut, after which every cache must be a whole version (CACHE-3). Every adapter process of a
case carries the case's marker in its environment (``ending.end_case`` ends what is left before the verdict).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import NotInTree, plausible_pid, wait_pid_gone
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, Reply
from resumekit.conformance.adapters.factory import with_marker
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.fault_models import Abort
from resumekit.conformance.p1 import _tool, evidence, journal_reader
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.control_plane.state import KitError
from resumekit.conformance.p1.model import Row, open_attempts
from resumekit.conformance.p1.views import served_requests
from resumekit.conformance.p1.world import NO_CRASH_MODEL, Stop, Unreached, World, given_root, kept_entries
from resumekit.conformance.powerloss import LayerError, PowerLayer
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for, start_failed

Factory = Callable[[], ProcessAdapter]

ANY_FAILPOINT = "*"  # the hit-th failpoint site of any name (capability p1.failpoint-any)
WAIT_SLICE_MS = 1000
NEXT_REQUEST_S = 0.2  # the longest wait for a request of an idle worker before asking it again


def any_failpoint(hit: int) -> dict[str, Any]:
    """A step's failpoint that arms the *hit*-th failpoint site the worker reaches, whatever its name."""
    return {"name": ANY_FAILPOINT, "hit": hit}


class Worker:
    """The adapter process that runs the worker; a new one after every kill."""

    def __init__(
        self,
        case: ScenarioCase,
        factory: Factory,
        world: World,
        control: ControlPlane,
        label: str = "w",
        home: tuple[Path, Path] | None = None,
    ) -> None:
        self.case, self.world, self.control = case, world, control
        # Every adapter process of the world carries its token, so that what they leave can be found (WRK-5).
        self.factory = with_marker(factory, world.case_token)
        # A scenario's second worker has names of its own (b1, b2, ...) and its own pair of directories
        # (WRK-1: a pair serves one worker); kill points and power cuts stay the first worker's.
        self.label = label
        self.primary = home is None
        self.workspace_root, self.state_dir = home if home is not None else (world.workspace_root, world.state_dir)
        self.adapter: ProcessAdapter | None = None
        self.count = 0
        self.name = ""
        self.pid: int | None = None
        self.marker: Path | None = None
        self.armed: str | None = None
        self.transcript: list[str] = []
        self.settings: dict[str, list[Mapping[str, Any]]] = {}  # process name -> its connections (ADP-3)
        self.claims_journal = False
        self.claims_log = False  # p1.journal-log: each process appends its connections to a file of the kit's
        self.blocked = False  # the current process is blocked at its failpoint: it can be asked before a kill
        self.blocked_name: str | None = None  # the failpoint it last blocked at
        self.released: str | None = None  # the block p1.worker.continue released, until a wait has ended since
        self.disk_fault: Mapping[str, Any] | None = None  # armed on the current worker (p1.disk-faults)
        self.tool = False  # the current worker runs the kit's tool (p1.tools)
        self.exited = False
        self.tail = ""  # the stderr tail of the adapter that close() ended, for a failure after it

    def fail(self, message: str, *mismatches: Mismatch, outcome: Outcome = Outcome.FAILED) -> CaseResult:
        """The scenario's result when it ends here: *outcome*, with the checks' *mismatches* and the adapter's
        stderr tail (an errored one carries none: no rule was broken, the kit could not go on)."""
        tail = (self.adapter.stderr_tail() if self.adapter else "") or self.tail
        return result_for(
            self.case,
            outcome,
            message=message,
            mismatches=mismatches,
            fault_model=self.world.kill_model if self.world.killed_at or self.count > 1 else NO_CRASH_MODEL,
            stderr_tail=tail or None,
        )

    def errored(self, message: str) -> Abort:
        """The Abort of a scenario the kit itself cannot carry on (not the worker's doing)."""
        return Abort(self.fail(message, outcome=Outcome.ERRORED))

    def ask(self, cmd: str, **fields: Any) -> dict[str, Any]:
        """Send *cmd* to the adapter; its result object, or Abort when it skips, errs or answers another value."""
        assert self.adapter is not None
        reply: Reply = self.adapter.request(cmd, **fields)
        self.transcript.extend(reply.transcript[-4:])
        if reply.outcome == "skipped":
            raise Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message))
        if reply.outcome != "result":
            raise Abort(errored(self.case, reply, cmd))
        if not isinstance(reply.value, dict):
            raise self.world.stop(self.name or self.label, "not-an-object", cmd=cmd, value=reply.value)
        return reply.value

    def ensure_adapter(self) -> ProcessAdapter:
        """The running adapter process, a new one started when there is none or the last one has ended."""
        if self.adapter is None or self.adapter.process is None or self.adapter.process.poll() is not None:
            if self.adapter is not None:
                self.adapter.kill()
            self.adapter, self.tail = self.factory(), ""
            try:
                info = self.adapter.start()
            except AdapterStartError as error:
                raise Abort(start_failed(self.case, error)) from None
            self.claims_journal = "p1.journal" in info.capabilities
            self.claims_log = self.claims_journal and "p1.journal-log" in info.capabilities
        return self.adapter

    def start(
        self,
        failpoint: Mapping[str, Any] | None,
        disk_fault: Mapping[str, Any] | None = None,
        tool: Mapping[str, Any] | None = None,
    ) -> None:
        """Start a new worker process (p1.worker.start): armed at *failpoint*, at *disk_fault*, running *tool*."""
        self.ensure_adapter()
        self.count += 1
        self.name = f"{self.label}{self.count}"
        self.world.homes[self.name] = (self.workspace_root, self.state_dir)
        listing = self.world.start_listing[self.name] = evidence.listing(self.workspace_root)
        kept = kept_entries(self.world, self.workspace_root)
        rows = self.read_journal()
        self.world.record_rows(rows, second=not self.primary, why="start", worker=self.name)
        self.marker = self.world.root / f"exit-{self.name}.marker"
        self.blocked = False
        self.released = None
        fields: dict[str, Any] = {
            "config": {
                "controlPlaneUrl": self.control.base_url(self.name),
                "workspaceRoot": str(self._given_root()),
                "stateDir": str(self.state_dir),
            },
            "marker": str(self.marker),
        }
        if self.claims_log:
            # Made by the kit, in place of anything at the name (a link there is replaced, never written
            # through): an empty log is a process that opened no connection.
            log = self.journal_log(self.name)
            self._put_kit_file(log.name, b"", "the journal log of p1.journal-log", "ADP-3")
            fields["journalLog"] = str(log)
        if failpoint:
            fields["failpoint"] = {"name": failpoint["name"], "hit": failpoint.get("hit", 1)}
            self.armed = failpoint["name"]
        else:
            self.armed = None
        self.disk_fault = None
        if disk_fault:
            fields["diskFault"] = {**disk_fault, "hit": disk_fault.get("hit", 1)}
            self.disk_fault = fields["diskFault"]
        self.tool = tool is not None
        if tool is not None:
            fields["tool"] = {"argv": self._tool_argv(float(tool.get("seconds", _tool.DEFAULT_SECONDS)))}
        if self.world.watch_next:
            self.world.watch_for, self.world.watch_next = self.name, False
        self.exited = False
        pid = self.ask("p1.worker.start", **fields).get("pid")
        self._adopt(pid, "p1.worker.start")
        self.world.record(
            self.name, "started", pid=pid, failpoint=fields.get("failpoint"), diskFault=self.disk_fault,
            tool=self.tool, listing=listing, rowsAtStart=len(rows), givenRoot=str(self._given_root()),
            activeAtStart=self._active_leases(),  # CLEAN-5: the attempts whose lease is ACTIVE as it starts
            kept=kept,  # CLEAN-2: the kit's entries without the task- prefix, which cleanup never touches
            # RESUME-1: the attempts its journal held open, each by its last row
            openAtStart=[dict(row) for row in open_attempts(rows)],
        )
        if self.primary:
            self.world.kill_current = self._kill_now

    def _active_leases(self) -> list[dict[str, Any]]:
        """Each attempt whose lease is ACTIVE by CP time now, as ``{task_id, attempt}``: the control plane's
        records, read before the process starts."""
        now = self.control.now_ms()
        branches = sorted({(task["repository"], task["target_branch"]) for task in self.world.tasks.values()})
        return [
            {"task_id": lease.get("task_id"), "attempt": lease.get("attempt")}
            for repository, branch in branches
            for lease in self.control.leases(repository, branch)
            if lease.get("state") == "ACTIVE" and int(lease.get("expires_at_ms") or 0) > now
        ]

    def _given_root(self) -> Path:
        """The workspace root as this worker is told it: through the kit's link to it where a scenario said so
        (CLEAN-3); a second worker's own root always as it is."""
        if self.workspace_root == self.world.workspace_root:
            return given_root(self.world)
        return self.workspace_root

    def _tool_argv(self, seconds: float) -> list[str]:
        """The kit's tool (p1.tools): this interpreter, so it runs wherever the kit runs. Its announce URL
        carries the control plane's secret (CP-22) and the worker sees this argv, so the URL goes into a file
        of the kit's scratch, beside the tool's flag, and the argv names only the file."""
        if self.world.tool_flag is None:
            self.world.tool_flag = self.world.root / "tool-may-run"
            self._put_kit_file(self.world.tool_flag.name, b"the kit's tool stops once this file is gone\n",
                               "the flag of the kit's tool", "ADP-2")
        announce = self.world.root / "tool-announce"
        url = self.control.kit_url("_kit/tool/started") + "\n"
        self._put_kit_file(announce.name, url.encode("utf-8"), "the announce file of the kit's tool", "ADP-2")
        return [
            sys.executable,
            "-m",
            _tool.MODULE,
            "--announce-file",
            str(announce),
            "--while-exists",
            str(self.world.tool_flag),
            "--seconds",
            f"{seconds:g}",
        ]

    def _put_kit_file(self, name: str, data: bytes, what: str, clause: str) -> None:
        """A file of the kit's in the scratch root, through the root the kit holds: whatever a process of the
        worker's put at the name is replaced, never written through; what cannot be replaced fails the case."""
        try:
            self.world.folder(self.world.root).put(name, data)
        except _files.Refused as refused:
            taken = {"name": name, "what": what, "refused": str(refused), "clause": clause}
            raise self.world.stop(self.name, "kit-file-taken", **taken) from None

    def _adopt(self, pid: object, where: str) -> None:
        """Take *pid* as the worker's only if the process guard says the kit may kill it."""
        assert self.adapter is not None and self.adapter.process is not None
        if not plausible_pid(pid) or not self.adapter.process.owns(pid):
            raise self.world.stop(self.name, "pid-refused", where=where, pid=pid)
        assert isinstance(pid, int)
        self.pid = pid

    def _freeze(self) -> None:
        """Under power loss, the instant of the cut, just before a kill: no sync lands after it."""
        if self.world.layer is not None and self.primary:
            with contextlib.suppress(LayerError):  # a layer that fails shows in the cut that follows
                self.world.layer.freeze()

    def _kill_now(self) -> str | None:
        """None once the worker's process is killed (or already gone); else why the kit could not kill it.
        Called from the control plane's thread at a kit-side kill point: kill, never wait here."""
        process = self.adapter.process if self.adapter is not None else None
        if process is None or self.pid is None:
            return "no worker process was running"
        self._freeze()
        try:
            process.kill_member(self.pid)
        except ProcessLookupError:
            return None
        except (NotInTree, OSError) as error:
            return str(error)
        return None

    def wait(self, wanted: str, deadline: float) -> dict[str, Any]:
        """Wait until the worker is *wanted* (idle, blocked, exited, settled: idle or exited, or killed at a
        kit-side kill point), judging what it reports on the way; the worker's last answer."""
        if wanted == "killed":
            return self._wait_killed(deadline)
        settling = wanted == "settled"
        stale_since: float | None = None  # when the worker first said idle without a claim to show for it
        while True:
            answer = self.ask("p1.worker.wait", timeoutMs=WAIT_SLICE_MS)
            state = answer.get("state")
            # "idle" counts only once the worker has seen the world as the kit last left it: a claim
            # answered without a task after the kit's last change (OUT-2).
            log = self.control.log()
            fresh = (wanted, state) not in (("idle", "idle"), ("settled", "idle")) or _empty_claim_since(
                log, self.world.changed_at, self.name
            )
            if wanted == "blocked" and state == "idle" and self.world.until_unreached:
                if _empty_claim_since(log, self.world.changed_at, self.name):
                    raise Unreached
                stale_since = stale_since if stale_since is not None else time.monotonic()
                if time.monotonic() - stale_since > self._claim_grace():
                    raise self._idle_without_claims(wanted)
                self.control.await_entries(len(log), NEXT_REQUEST_S)  # idle, before a claim that saw the change
                state = "running"
            if wanted == "settled" and state in ("exited", "idle"):
                wanted = str(state)
            if state == wanted and fresh:
                self.world.record(self.name, "state", wanted=wanted, answer=answer)
                if wanted == "blocked":
                    self._confirm_block(answer)
                self.released = None
                if wanted == "exited":
                    self.exited = True
                    marker = self.marker is not None and self.marker.exists()
                    # JNL-8: an exit after an injected disk error is judged by the rules (journal.fatal_exits)
                    self.world.judge_now(self.world.record(
                        self.name, "exited", exitCode=answer.get("exitCode"), marker=marker,
                        diskFault=self.disk_fault, settling=settling,
                    ))
                return answer
            if state == wanted:
                # Idle, but before a claim that saw the kit's last change: the worker claims again
                # within its retry_after_ms, so wait a moment instead of asking in a tight loop.
                stale_since = stale_since if stale_since is not None else time.monotonic()
                if time.monotonic() - stale_since > self._claim_grace():
                    raise self._idle_without_claims(wanted)
                self.control.await_entries(len(log), NEXT_REQUEST_S)
                state = "running"
            if state != "running":
                raise self.world.stop(
                    self.name, "not-as-waited", wanted=wanted, state=state, answer=answer, diskFault=self.disk_fault,
                    released=self.released,
                )
            if time.monotonic() > deadline:
                raise self.world.stop(self.name, "not-in-time", wanted=wanted, state=state, seconds=self.world.budget)

    def _claim_grace(self) -> float:
        # A worker that says idle claims again within retry_after_ms, and a claim lasts at most WRK-3's
        # 5 s timeout: twice both is ample on a loaded machine, and far below the case's budget.
        return 2 * (5.0 + self.control.retry_after_ms() / 1000)

    def _idle_without_claims(self, wanted: str) -> Stop:
        return self.world.stop(self.name, "no-claim", wanted=wanted, seconds=self._claim_grace())

    def _wait_killed(self, deadline: float) -> dict[str, Any]:
        """Wait for the armed kit-side kill point to kill the worker, then reap it."""
        if not self._kill_event_or_idle(deadline):
            if self.tool:
                raise self.world.stop(self.name, "tool-never-ran")
            raise self.world.stop(self.name, "kill-point-not-reached", points=sorted(self.world.kill_armed))
        self.world.kill_event.clear()
        failed, self.world.kill_failed = self.world.kill_failed, None
        if failed is not None:  # the worker went on: what it did next is no worker's fault and judges nothing
            raise KitError(f"the kit could not kill the worker at its kill point: {failed}")
        self._reap()
        return {"state": "killed"}

    def _kill_event_or_idle(self, deadline: float) -> bool:
        """Whether the armed kill point fired before the deadline. A worker running the tool that claims
        and gets no task has gone past every place it could run it: no need to wait out the deadline."""
        while not self.world.kill_event.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False
            if self.tool and _empty_claim_since(self.control.log(), self.world.changed_at):
                return self.world.kill_event.is_set()
        return True

    def wait_any(self, deadline: float) -> str:
        """Wait until the worker is blocked at its failpoint or idle (a soak round): which of the two."""
        while True:
            answer = self.ask("p1.worker.wait", timeoutMs=WAIT_SLICE_MS)
            state = answer.get("state")
            if state == "blocked":
                self.world.record(self.name, "state", wanted="blocked or idle", answer=answer)
                self._confirm_block(answer)
                self.released = None
                return "blocked"
            log = self.control.log()
            if state == "idle" and _empty_claim_since(log, self.world.changed_at, self.name):
                self.world.record(self.name, "state", wanted="blocked or idle", answer=answer)
                return "idle"
            if state not in ("idle", "running"):
                raise self.world.stop(self.name, "not-as-waited", wanted="blocked or idle", state=state, answer=answer,
                                      released=self.released)
            if state == "idle":
                self.control.await_entries(len(log), NEXT_REQUEST_S)
            if time.monotonic() > deadline:
                wanted, seconds = "blocked or idle", self.world.budget
                raise self.world.stop(self.name, "not-in-time", wanted=wanted, state=state, seconds=seconds)

    def _confirm_block(self, answer: Mapping[str, Any]) -> None:
        """FPT-2: record where the worker blocked and what the kit reads as it stands there (the task's rows,
        the last row of every attempt, its cache and any temporaries); the rules judge it (failpoints.block)."""
        name = answer.get("failpoint")
        task_rows, attempts = _latest_task_rows(functools.partial(self.world.read_journal, self.state_dir))
        tasks_dir = self.state_dir / "tasks"
        names = [name for name in evidence.listing(tasks_dir) if name.endswith(".tmp")]
        temporaries = [evidence.read_cache_file(self.state_dir, tasks_dir / name) for name in names]
        cache = evidence.read_cache(self.state_dir, task_rows[-1]["task_id"]) if task_rows else ("absent", None)
        self.world.judge_now(self.world.record(
            self.name, "blocked", failpoint=name, armed=self.armed, released=self.released,
            rows=[dict(row) for row in task_rows],
            attempts=[dict(row) for row in attempts], cache=list(cache), temporaries=[list(t) for t in temporaries],
        ))
        if "pid" in answer and answer["pid"] != self.pid:
            self._adopt(answer["pid"], "p1.worker.wait")
        self.world.blocked_at.append(str(name))
        self.blocked, self.blocked_name = True, str(name)

    def kill(self) -> None:
        """Kill the worker's process for real (a crash: no exit path may run, CRASH-2) and reap it."""
        if self.pid is None or self.adapter is None or self.adapter.process is None:
            raise self.world.stop(self.name or self.label, "not-running")
        if self.blocked:  # blocked, it writes nothing: its settings can be asked before it dies (ADP-3)
            self.read_settings()
        self._freeze()
        try:
            self.adapter.process.kill_member(self.pid)
        except NotInTree as error:
            refused = {"where": "p1.worker.start", "pid": self.pid, "why": str(error)}
            raise self.world.stop(self.name, "pid-refused", **refused) from None
        except OSError as error:
            raise self.errored(f"cannot kill the worker's pid {self.pid}: {error}") from None
        self.world.record(self.name, "killed", pid=self.pid, signal="SIGKILL", at=self.armed or "kill")
        self._reap()
        assert self.marker is not None
        self.world.judge_now(self.world.record(self.name, "reaped", marker=self.marker.exists()))  # CRASH-2
        self.world.killed_at.append(f"{self.armed or 'kill'}")

    def _after_tool_kill(self) -> None:
        """The tool's writes just after the kill (for the report), and the watch armed for the next worker."""
        writes: dict[str, int] = {}
        for entry in self.control.log():
            if entry.get("kind") == "tool_started" and isinstance(entry.get("cwd"), str):
                for role, name in _tool.FILES.items():
                    text = _read_text(self.world.workspace_root, Path(entry["cwd"]) / name)
                    words = text.split()
                    if len(words) >= 5 and words[-1].isdigit():
                        writes[role] = int(words[-1])
        self.world.record("tool", "writes", after="the kill", writes=writes)
        self.world.watch_next = True

    def _reap(self) -> None:
        pid, tool = self.pid, self.tool
        wrapper = False
        if self.adapter is not None and self.adapter.process is not None:
            process = self.adapter.process
            wrapper = pid != process.pid
            if tool:
                # WRK-5: only the worker's pid dies, as in a real crash; the adapter's tree (where a tool the
                # worker left behind still runs) is ended only when the scenario is over.
                if wrapper:
                    with contextlib.suppress(NotInTree, OSError):
                        process.kill_member(process.pid)
                process.wait(timeout=10.0)
                self.world.held.append(process)
            else:
                if wrapper:
                    process.kill()  # a wrapper around the real worker
                process.wait(timeout=10.0)
                process.kill()
            self.adapter.process = None
        # The kit reaps the adapter itself; a descendant it named must be gone too.
        if wrapper and pid is not None and not wait_pid_gone(pid, timeout=10.0):
            raise self.errored(f"pid {pid} still runs 10 s after it was killed")
        self.adapter = None
        self.pid = None
        self.tool = False
        if self.primary:
            self.world.kill_current = None
        if tool:
            self._after_tool_kill()
        if self.world.layer is not None and self.primary:
            self._power_cut(self.world.layer)

    def _power_cut(self, layer: PowerLayer) -> None:
        """Drop what the dead worker never synced; then every cache must be a whole version (CACHE-3)."""
        try:
            layer.cut("lose", 0)
        except LayerError as error:
            raise Abort(
                result_for(
                    self.case, Outcome.ERRORED, message=f"the power cut failed: {error}", fault_model=POWER_LOSS_MODEL
                )
            ) from None
        caches = {}
        for name in evidence.listing(self.world.state_dir / "tasks"):
            if name.startswith(".") or not name.endswith(".json"):
                continue
            caches[name] = list(evidence.read_cache(self.world.state_dir, name[: -len(".json")]))
        self.world.record("kit", "caches-after-cut", caches=caches)  # CACHE-3 (cache.after_power_cuts)

    def stop(self) -> None:
        """Stop the worker in order (p1.worker.stop): it exits 0 through its exit path (RESUME-5)."""
        answer = self.ask("p1.worker.stop")
        code = answer.get("exitCode")
        assert self.marker is not None
        # RESUME-5 and ADP-2: status 0, through the exit path (resume.orderly_stops, processes.crashes)
        self.world.judge_now(self.world.record(self.name, "stopped", exitCode=code, marker=self.marker.exists()))
        self.read_settings()  # the adapter answers for the process that just exited (ADP-3)
        self.pid = None
        if self.primary:
            self.world.kill_current = None

    def journal_log(self, name: str) -> Path:
        """The file process *name* appends its journal connections to (p1.journal-log)."""
        return self.world.root / f"journal-{name}.jsonl"

    def read_settings(self) -> None:
        """Ask a worker that claims p1.journal for the current process's journal connections (ADP-3)."""
        if self.adapter is not None and self.adapter.process is not None and self.claims_journal and self.name:
            connections = self.ask("p1.journal.settings").get("connections")
            listed = list(connections) if isinstance(connections, list) else [{"invalid": connections}]
            self.settings[self.name] = [c if isinstance(c, Mapping) else {"invalid": c} for c in listed]
            self.world.record(self.name, "settings", connections=[dict(c) for c in self.settings[self.name]])

    def read_journal(self) -> list[Row]:
        """The journal in the worker's state directory, read read-only; unreadable, the scenario fails (JNL-1)."""
        try:
            return self.world.read_journal(self.state_dir)
        except journal_reader.JournalUnreadable as error:
            raise self.world.stop("journal", "unreadable", worker=self.name, error=str(error)) from None

    def observe_journal(self, why: str = "wait") -> list[Row]:
        """``read_journal``, its rows recorded as a read of this worker's journal (JNL-4)."""
        return self.world.observe_journal(self.read_journal, second=not self.primary, why=why, worker=self.name)

    def close(self) -> None:
        """Close the adapter, if one still runs, and end its tree; its stderr tail stays for a later failure."""
        if self.adapter is not None:
            process = self.adapter.process
            self.adapter.close()
            if process is not None:
                self.tail = process.stderr_tail()
            self.adapter = None


def _latest_task_rows(read: Callable[[], list[Row]]) -> tuple[list[Row], list[Row]]:
    """The rows of the task the worker works on now (the task of the journal's latest row), and the last
    row of every attempt of the journal (*read* reads it)."""
    try:
        rows = read()
    except journal_reader.JournalUnreadable:
        return [], []
    if not rows:
        return [], []
    task_id = rows[-1]["task_id"]
    last = {(row["task_id"], row["attempt"]): row for row in rows}
    return [row for row in rows if row["task_id"] == task_id], list(last.values())


def _empty_claim_since(log: Sequence[Mapping[str, Any]], since: int, worker: str | None = None) -> bool:
    """Whether a claim answered without a task came after the kit's last change (OUT-2), from *worker*
    if named (with two workers, one's empty claim says nothing of the other)."""
    granted = served_requests(log)
    return any(
        e.get("kind") == "request"
        and e.get("endpoint") == "claim"
        and e.get("status") == 200
        and e.get("request") not in granted
        and (worker is None or e.get("worker") == worker)
        for e in log[since:]
    )


def _read_text(root: Path, path: Path) -> str:
    """The head of a file the kit's tool wrote in a workspace: a regular file inside *root* only, and only
    its first bytes (a FIFO or a huge file put there by the worker never stalls or fills the kit)."""
    try:
        return _files.read_head(root, path, 4096).decode("utf-8", errors="replace")
    except (_files.Refused, OSError):
        return ""
