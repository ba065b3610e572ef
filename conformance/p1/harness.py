"""Runs one P1 scenario for real: origins, the control plane, worker processes, kills, and the verdict.

The kit makes everything the worker touches (a workspace root, a state directory, bare git origins, a
decoy tree outside the root), starts the simulated control plane on loopback, drives the worker through
the adapter's ``p1.worker`` commands, kills it with real signals, and then judges from evidence it
collects itself (docs/spec/p1.md, section 16): the control plane's log, the origin's refs and push log,
the journal read read-only, the caches, and listings of the workspace root.

Under simulated power loss (``--fault-model power-loss``) the state directory is the kit's FUSE layer
(``resumekit.conformance.powerloss``): every kill is followed by a power cut that drops what the worker
never synced, the moment checks read the journal as a cut would leave it (so a submission, a receipt or
a push is judged against what was durable when it arrived), and after each cut every task's cache must
be a complete version, old or new, never torn or empty (CACHE-3).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import shlex
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, NotInTree, plausible_pid, wait_pid_gone
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, Reply
from resumekit.conformance.fault_models import NONE_SCRIPTED, PROCESS_CRASH, Abort
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.p1 import _tool, evidence, evidence_checks
from resumekit.conformance.p1.canonical import canonical_json
from resumekit.conformance.p1.cases import MatrixCase, ScenarioCase, SoakCase
from resumekit.conformance.p1.control_plane import ControlPlane
from resumekit.conformance.p1.cp_core import KitError
from resumekit.conformance.p1.cp_faults import FaultError, fault_from_mapping
from resumekit.conformance.p1.origin import GitError, Origin, create_origin
from resumekit.conformance.powerloss import LayerError, PowerLayer, PowerLoss, unavailable
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for, start_failed

Factory = Callable[[], ProcessAdapter]

KILL_MODEL = PROCESS_CRASH
NO_CRASH_MODEL = NONE_SCRIPTED
ANY_FAILPOINT = "*"  # the hit-th failpoint site of any name (capability p1.failpoint-any)
SHRINK_STEPS = 6  # reruns a failing soak may spend on bisecting its rounds
SETTLE_ROUNDS = 10  # lease expiries a soak's final convergence may need, one per claim lost on the way
SCENARIO_BUDGET = 120.0  # seconds of real time a scenario may take before the kit calls it hung
WAIT_SLICE_MS = 1000
DECOY_FILES = {"keep.txt": "precious\n", "deep/also.txt": "precious too\n"}
WATCH_INTERVAL_S = 0.02  # how often the WRK-5 watch samples the workspace root


@dataclass
class _World:
    """Everything the kit made for one scenario, and what it has seen so far."""

    root: Path
    workspace_root: Path
    state_dir: Path
    decoy: Path
    origins: dict[str, Origin]
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # template name -> task as issued
    snapshots: list[evidence.Snapshot] = field(default_factory=list)
    moment_problems: list[Mismatch] = field(default_factory=list)
    start_listing: dict[str, list[str]] = field(default_factory=dict)  # worker name -> root listing at start
    first_seen: set[str] = field(default_factory=set)
    kill_armed: set[str] = field(default_factory=set)
    killed_at: list[str] = field(default_factory=list)
    kill_current: Callable[[], None] | None = None  # kills the running worker through the process guard
    kill_event: threading.Event = field(default_factory=threading.Event)
    changed_at: int = 0  # the control plane's log length at the kit's last change of the world
    layer: PowerLayer | None = None  # the power-loss layer over state_dir, under power loss
    exports: int = 0

    @property
    def kill_model(self) -> str:
        return POWER_LOSS_MODEL if self.layer is not None else KILL_MODEL

    def durable_journal(self) -> list[evidence.Row]:
        """The journal as a power cut now would leave it (EVID-3 read of the durable view)."""
        assert self.layer is not None
        self.exports += 1
        target = self.root / f"durable-{self.exports}"
        try:
            self.layer.export(target)
            return evidence.read_journal(target)
        finally:
            _files.remove(target)
    kills: int = 0  # soak rounds that killed the worker
    swapped: set[str] = field(default_factory=set)  # entries the kit swapped for a link (CLEAN-4 lets them stay)
    blocked_at: list[str] = field(default_factory=list)  # every failpoint a worker blocked at, in order
    until_unreached: bool = False  # a campaign run: a worker idle before its armed point ends the loop
    budget: float = SCENARIO_BUDGET  # seconds of real time the run may take (a soak's own budget)
    tool_flag: Path | None = None  # while this file exists the kit's tool may run (p1.tools); set once one did
    held: list[LineProcess] = field(default_factory=list)  # killed adapters whose trees end with the scenario
    watch_next: bool = False  # a worker running the tool was killed: the next one's first request starts the watch
    watch_for: str | None = None  # the worker whose first request starts the WRK-5 watch
    watch: _RootWatch | None = None
    tool_writes: dict[str, int] = field(default_factory=dict)  # the tool's writes found just after the kill
    # worker name -> (workspace root, state directory), for a scenario's second worker (its own pair)
    homes: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    second_snapshots: list[evidence.Snapshot] = field(default_factory=list)

    def home(self, worker: str | None) -> tuple[Path, Path]:
        """The workspace root and state directory of the worker behind a base-URL name."""
        return self.homes.get(worker or "", (self.workspace_root, self.state_dir))


class _RootWatch:
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
        now = evidence.tree_state(self.root, self.names)
        for path, what in evidence.tree_changes(self.last, now).items():
            self.changes.setdefault(path, what)
        self.last = now
        self.samples += 1

    def stop(self) -> float:
        """Stop sampling after one last sample; how long the watch lasted, in seconds."""
        self._stop.set()
        self._thread.join(10.0)
        self.sample()
        return time.monotonic() - self.started


class _Unreached(Exception):
    """The worker went idle without reaching its armed failpoint: a crash loop has visited every point."""


class _Observer:
    """The kit's moment checks (p1.md EVID-4), run by the control plane as each request arrives."""

    def __init__(self, world: _World, profile: str) -> None:
        self.world, self.profile = world, profile
        self.lock = threading.Lock()

    def _journal(self, worker: str | None = None) -> list[evidence.Row]:
        state_dir = self.world.home(worker)[1]
        if state_dir != self.world.state_dir:
            # A second worker's journal: never on the power-loss layer.
            try:
                return evidence.read_journal(state_dir)
            except evidence.JournalUnreadable:
                return []
        try:
            if self.world.layer is not None:
                with self.lock:
                    return self.world.durable_journal()
            return evidence.read_journal(self.world.state_dir)
        except (evidence.JournalUnreadable, LayerError):
            return []

    def _problem(self, clause: str, pointer: str, expected: Any, actual: Any, note: str) -> list[str]:
        with self.lock:
            self.world.moment_problems.append(Mismatch(pointer, expected, actual, clause, note))
        return [f"{clause}: {note}"]

    def on_first_request(self, worker: str) -> list[str]:
        with self.lock:
            if worker in self.world.first_seen:
                return []
            self.world.first_seen.add(worker)
            if worker == self.world.watch_for and self.world.watch is None:
                # CLEAN-1: cleanup is done by the first request, which waits for this answer meanwhile.
                self.world.watch = _RootWatch(self.world.workspace_root, self.world.start_listing.get(worker, []))
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
        rows = [r for r in self._journal(worker) if r["task_id"] == task_id and r["attempt"] == attempt]
        pending = [r for r in rows if r["phase"] == "result_pending"]
        if not any(r["idempotency_key"] == key and r["result_hash"] == result_hash for r in pending):
            return self._problem(
                "SUB-1",
                f"/tasks/{task_id}/attempts/{attempt}/submission",
                {"phase": "result_pending", "idempotency_key": key, "result_hash": result_hash},
                [{k: r[k] for k in ("phase", "idempotency_key", "result_hash")} for r in rows[-2:]],
                "a submission arrived before its result_pending row was durable",
            )
        return []

    def on_receipt(self, worker: str, task_id: str, attempt: int, commit_oid: str) -> list[str]:
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
        if name not in self.world.kill_armed:
            return
        self.world.kill_armed.discard(name)
        if self.world.kill_current is not None:
            self.world.kill_current()
        self.world.killed_at.append(name)
        self.world.kill_event.set()


class _Worker:
    """The adapter process that runs the worker; a new one after every kill."""

    def __init__(
        self,
        case: ScenarioCase,
        factory: Factory,
        world: _World,
        control: ControlPlane,
        label: str = "w",
        home: tuple[Path, Path] | None = None,
    ) -> None:
        self.case, self.factory, self.world, self.control = case, factory, world, control
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
        self.settings: list[Mapping[str, Any]] = []
        self.claims_journal = False
        self.disk_fault: Mapping[str, Any] | None = None  # armed on the current worker (p1.disk-faults)
        self.tool = False  # the current worker runs the kit's tool (p1.tools)
        self.exited = False

    def fail(self, message: str, *mismatches: Mismatch, outcome: Outcome = Outcome.FAILED) -> CaseResult:
        tail = self.adapter.stderr_tail() if self.adapter else ""
        return result_for(
            self.case,
            outcome,
            message=message,
            mismatches=mismatches or (Mismatch("", None, None, None, message),),
            fault_model=self.world.kill_model if self.world.killed_at or self.count > 1 else NO_CRASH_MODEL,
            stderr_tail=tail or None,
        )

    def ask(self, cmd: str, **fields: Any) -> dict[str, Any]:
        assert self.adapter is not None
        reply: Reply = self.adapter.request(cmd, **fields)
        self.transcript.extend(reply.transcript[-4:])
        if reply.outcome == "skipped":
            raise Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message))
        if reply.outcome != "result":
            raise Abort(errored(self.case, reply, cmd))
        if not isinstance(reply.value, dict):
            raise Abort(self.fail(f"{cmd} answered {reply.value!r}, not an object"))
        return reply.value

    def ensure_adapter(self) -> ProcessAdapter:
        if self.adapter is None or self.adapter.process is None or self.adapter.process.poll() is not None:
            if self.adapter is not None:
                self.adapter.kill()
            self.adapter = self.factory()
            try:
                info = self.adapter.start()
            except AdapterStartError as error:
                raise Abort(start_failed(self.case, error)) from None
            self.claims_journal = "p1.journal" in info.capabilities
        return self.adapter

    def start(
        self,
        failpoint: Mapping[str, Any] | None,
        disk_fault: Mapping[str, Any] | None = None,
        tool: Mapping[str, Any] | None = None,
    ) -> None:
        self.ensure_adapter()
        self.count += 1
        self.name = f"{self.label}{self.count}"
        self.world.homes[self.name] = (self.workspace_root, self.state_dir)
        self.world.start_listing[self.name] = evidence.listing(self.workspace_root)
        self.marker = self.world.root / f"exit-{self.name}.marker"
        fields: dict[str, Any] = {
            "config": {
                "controlPlaneUrl": self.control.base_url(self.name),
                "workspaceRoot": str(self.workspace_root),
                "stateDir": str(self.state_dir),
            },
            "marker": str(self.marker),
        }
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
        if self.primary:
            self.world.kill_current = self._kill_now

    def _tool_argv(self, seconds: float) -> list[str]:
        """The kit's tool (p1.tools): this interpreter, so it runs wherever the kit runs."""
        if self.world.tool_flag is None:
            self.world.tool_flag = self.world.root / "tool-may-run"
            self.world.tool_flag.write_text("the kit's tool stops once this file is gone\n", encoding="utf-8")
        announce = self.control.kit_url("_kit/tool/started")
        return [sys.executable, "-m", _tool.MODULE, "--announce", announce,
                "--while-exists", str(self.world.tool_flag), "--seconds", f"{seconds:g}"]

    def _adopt(self, pid: object, where: str) -> None:
        """Take *pid* as the worker's only if the process guard says the kit may kill it."""
        assert self.adapter is not None and self.adapter.process is not None
        if not plausible_pid(pid) or not self.adapter.process.owns(pid):
            raise Abort(
                self.fail(
                    f"{where} reported pid {pid!r}, which the kit will not kill: "
                    "it is not the adapter or one of its descendants"
                )
            )
        assert isinstance(pid, int)
        self.pid = pid

    def _freeze(self) -> None:
        """Under power loss, the instant of the cut, just before a kill: no sync lands after it."""
        if self.world.layer is not None and self.primary:
            with contextlib.suppress(LayerError):  # a layer that fails shows in the cut that follows
                self.world.layer.freeze()

    def _kill_now(self) -> None:
        # Called from the control plane's thread at a kit-side kill point: kill, never wait here.
        process = self.adapter.process if self.adapter is not None else None
        if process is not None and self.pid is not None:
            self._freeze()
            with contextlib.suppress(NotInTree, OSError):
                process.kill_member(self.pid)

    def wait(self, wanted: str, deadline: float) -> dict[str, Any]:
        if wanted == "killed":
            if not self._kill_event_or_idle(deadline):
                if self.tool:
                    raise Abort(self.fail(
                        "the kit's tool never announced itself: the worker did not run the tool of "
                        "p1.worker.start in a workspace (or it never reached a verified workspace)",
                        Mismatch("/tool", "the tool started in a workspace", None, "ADP-2"),
                    ))
                raise Abort(self.fail("the armed kit-side kill point was never reached", outcome=Outcome.FAILED))
            self.world.kill_event.clear()
            self._reap()
            return {"state": "killed"}
        settling = wanted == "settled"
        while True:
            answer = self.ask("p1.worker.wait", timeoutMs=WAIT_SLICE_MS)
            state = answer.get("state")
            # "idle" counts only once the worker has seen the world as the kit last left it: a claim
            # answered without a task after the kit's last change (OUT-2).
            fresh = (wanted, state) not in (("idle", "idle"), ("settled", "idle")) or _empty_claim_since(
                self.control.log(), self.world.changed_at, self.name
            )
            if wanted == "blocked" and state == "idle" and self.world.until_unreached:
                if _empty_claim_since(self.control.log(), self.world.changed_at, self.name):
                    raise _Unreached
                time.sleep(0.01)  # idle, but before a claim that saw the kit's last change
                state = "running"
            if wanted == "settled" and state in ("exited", "idle"):
                wanted = str(state)
            if state == wanted and fresh:
                if wanted == "blocked":
                    self._confirm_block(answer)
                if wanted == "exited":
                    self.exited = True
                    if not settling:
                        self._judge_exit(answer)
                return answer
            if state == wanted:
                # Idle, but before a claim that saw the kit's last change: the worker claims again
                # within its retry_after_ms, so wait a moment instead of asking in a tight loop.
                time.sleep(0.01)
                state = "running"
            if state != "running":
                if wanted == "exited" and self.disk_fault is not None:
                    raise Abort(self.fail(
                        f"after the injected disk error {_disk_text(self.disk_fault)} the worker went on to be "
                        f"{state} instead of exiting: it took the failed operation for a success",
                        Mismatch("/wait/state", "exited", answer, "JNL-8"),
                    ))
                raise Abort(
                    self.fail(
                        f"waited for the worker to be {wanted}, it is {state}",
                        Mismatch("/wait/state", wanted, answer, "ADP-2"),
                    )
                )
            if time.monotonic() > deadline:
                raise Abort(
                    self.fail(
                        f"the worker was not {wanted} within {self.world.budget:.0f} s",
                        Mismatch("/wait/state", wanted, "running", "OUT-2"),
                        outcome=Outcome.ERRORED,
                    )
                )

    def _kill_event_or_idle(self, deadline: float) -> bool:
        """Whether the armed kill point fired before the deadline. A worker running the tool that claims
        and gets no task has gone past every place it could run it: no need to wait out the deadline."""
        while not self.world.kill_event.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False
            if self.tool and _empty_claim_since(self.control.log(), self.world.changed_at):
                return self.world.kill_event.is_set()
        return True

    def _judge_exit(self, answer: Mapping[str, Any]) -> None:
        """An exit after an injected disk error is a fatal error's: a non-zero status (JNL-8)."""
        code = answer.get("exitCode")
        if self.disk_fault is not None and (not isinstance(code, int) or isinstance(code, bool) or code == 0):
            raise Abort(self.fail(
                f"after the injected disk error {_disk_text(self.disk_fault)} the worker exited with status "
                f"{code!r}, not a non-zero one",
                Mismatch("/wait/exitCode", "non-zero", code, "JNL-8"),
            ))

    def wait_any(self, deadline: float) -> str:
        """Wait until the worker is blocked at its failpoint or idle (a soak round): which of the two."""
        while True:
            answer = self.ask("p1.worker.wait", timeoutMs=WAIT_SLICE_MS)
            state = answer.get("state")
            if state == "blocked":
                self._confirm_block(answer)
                return "blocked"
            if state == "idle" and _empty_claim_since(self.control.log(), self.world.changed_at, self.name):
                return "idle"
            if state not in ("idle", "running"):
                raise Abort(
                    self.fail(
                        f"waited for the worker to be blocked or idle, it is {state}",
                        Mismatch("/wait/state", "blocked or idle", answer, "ADP-2"),
                    )
                )
            if state == "idle":
                time.sleep(0.01)
            if time.monotonic() > deadline:
                raise Abort(
                    self.fail(
                        "the worker was neither blocked nor idle in time",
                        Mismatch("/wait/state", "blocked or idle", state, "OUT-2"),
                        outcome=Outcome.ERRORED,
                    )
                )

    def _confirm_block(self, answer: Mapping[str, Any]) -> None:
        """FPT-2: the name is attested; the durable state the catalog names at the site is observed."""
        name = answer.get("failpoint")
        if self.armed == ANY_FAILPOINT and isinstance(name, str):
            if not evidence_checks.known_failpoint(name):
                raise Abort(
                    self.fail(
                        f"blocked at {name!r}, a site the failpoint catalog does not name",
                        Mismatch("/wait/failpoint", "a failpoint of golden/p1/failpoints.yaml", name, "FPT-1"),
                    )
                )
        elif name != self.armed:
            raise Abort(
                self.fail("blocked at another failpoint", Mismatch("/wait/failpoint", self.armed, name, "FPT-2"))
            )
        if "pid" in answer and answer["pid"] != self.pid:
            self._adopt(answer["pid"], "p1.worker.wait")
        task_rows = _latest_task_rows(self.state_dir)
        temporaries = [n for n in evidence.listing(self.state_dir / "tasks") if n.endswith(".tmp")]
        problem = evidence_checks.failpoint_state(str(name), task_rows, temporaries)
        if problem is not None:
            raise Abort(
                self.fail(f"blocked at {name}, but {problem}", Mismatch("/wait/observed", name, problem, "FPT-2"))
            )
        self.world.blocked_at.append(str(name))

    def kill(self) -> None:
        if self.pid is None or self.adapter is None or self.adapter.process is None:
            raise Abort(self.fail("the scenario kills a worker that is not running"))
        self._freeze()
        try:
            self.adapter.process.kill_member(self.pid)
        except NotInTree as error:
            raise Abort(self.fail(f"the kit will not kill pid {self.pid}: {error}")) from None
        except OSError as error:
            raise Abort(self.fail(f"cannot kill the worker's pid {self.pid}: {error}")) from None
        self._reap()
        assert self.marker is not None
        if self.marker.exists():
            raise Abort(
                self.fail(
                    "the exit marker was written: an exit path ran, so this was not a crash",
                    Mismatch("/marker", "absent", "present", "CRASH-2"),
                )
            )
        self.world.killed_at.append(f"{self.armed or 'kill'}")

    def _after_tool_kill(self) -> None:
        """The tool's writes just after the kill (for the report), and the watch armed for the next worker."""
        for entry in self.control.log():
            if entry.get("kind") == "tool_started" and isinstance(entry.get("cwd"), str):
                for role, name in _tool.FILES.items():
                    text = _read_text(Path(entry["cwd"]) / name)
                    words = text.split()
                    if len(words) >= 5 and words[-1].isdigit():
                        self.world.tool_writes[role] = int(words[-1])
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
            raise Abort(self.fail(f"pid {pid} still runs 10 s after it was killed"))
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
        for name in evidence.listing(self.world.state_dir / "tasks"):
            if name.startswith(".") or not name.endswith(".json"):
                continue
            status, raw = evidence.read_cache(self.world.state_dir, name[: -len(".json")])
            if status == "torn":
                self.world.moment_problems.append(
                    Mismatch(
                        f"/caches/{name}/after-power-cut",
                        "a complete cache, old or new",
                        raw[:80] if raw else "empty",
                        "CACHE-3",
                        "after a power cut the cache was torn or empty: its temporary file was not synced before "
                        "the replace",
                    )
                )

    def stop(self) -> None:
        answer = self.ask("p1.worker.stop")
        code = answer.get("exitCode")
        if code != 0:
            raise Abort(self.fail("an orderly stop did not exit 0", Mismatch("/stop/exitCode", 0, code, "RESUME-5")))
        assert self.marker is not None
        if not self.marker.exists():
            raise Abort(
                self.fail(
                    "the exit path never wrote the marker, so a kill cannot be told from an orderly exit",
                    Mismatch("/marker", "present", "absent", "ADP-2"),
                )
            )
        self.pid = None
        if self.primary:
            self.world.kill_current = None

    def read_settings(self) -> None:
        if self.adapter is not None and self.adapter.process is not None and self.claims_journal:
            connections = self.ask("p1.journal.settings").get("connections")
            self.settings = list(connections) if isinstance(connections, list) else [{"invalid": connections}]

    def close(self) -> None:
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None


def _task(
    template: Mapping[str, Any], origins: Mapping[str, Origin], repositories: Mapping[str, Any]
) -> dict[str, Any]:
    origin = origins[template["repository"]]
    return {
        "task_id": template["task_id"],
        "attempt": 1,
        "execution_digest": template["execution_digest"],
        "job_id": template["job_id"],
        "repository": template["repository"],
        "base_oid": origin.base_oid,
        "expected_branch_oid": origin.base_oid,
        "target_branch": template.get("target_branch", repositories[template["repository"]]["branch"]),
        "generation": template["generation"],
        "kind": template["kind"],
        "payload": dict(template.get("payload", {})),
    }


@contextlib.contextmanager
def _world(case: ScenarioCase, power: PowerLoss | None = None) -> Iterator[_World]:
    root = _files.scratch("p1")
    layer = None
    try:
        workspace_root, state_dir, decoy = root / "workspaces", root / "state", root / "decoy"
        workspace_root.mkdir()
        if power is None:
            state_dir.mkdir()
        else:
            layer = PowerLayer(root / "state-backing", state_dir, power.sync_delay)
            try:
                layer.start()
            except LayerError as error:
                raise Abort(
                    result_for(
                        case,
                        Outcome.ERRORED,
                        message=f"cannot mount the power layer: {error}",
                        fault_model=POWER_LOSS_MODEL,
                    )
                ) from None
        # Two decoys outside the root: one elsewhere, and a sibling whose name has the root's as a prefix,
        # which a boundary check by string prefix takes for the inside (CLEAN-3).
        for tree in (decoy, _sibling(workspace_root)):
            for name, text in DECOY_FILES.items():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                (tree / name).write_text(text, encoding="utf-8")
        origins = {}
        for index, (repository, spec) in enumerate(sorted(case.repositories.items())):
            origins[repository] = create_origin(
                root / f"origin-{index}",
                spec["files"],
                branch=spec["branch"],
                branches=spec.get("branches", ()),
                later=spec.get("later"),
            )
        world = _World(root, workspace_root, state_dir, decoy, origins, layer=layer)
        try:
            yield world
        finally:
            _end_tools(world)
    finally:
        if layer is not None:
            layer.stop()
        _files.remove(root)


def _end_tools(world: _World) -> None:
    """Stop what a scenario with the kit's tool left running: the flag first (a surviving tool stops at its
    next write), then the trees of the adapters killed with it."""
    if world.watch is not None:
        world.watch.stop()
    if world.tool_flag is not None:
        with contextlib.suppress(OSError):
            world.tool_flag.unlink()
        time.sleep(5 * _tool.INTERVAL_S)  # a write under way when the flag went finishes before the root goes
    for process in world.held:
        with contextlib.suppress(OSError):
            process.kill()
    world.held.clear()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _watch_root(worker: _Worker, world: _World, ms: int) -> str:
    """WRK-5: keep watching the root for *ms* more, then judge every change since the watch began."""
    watch = world.watch
    if watch is None:
        raise Abort(worker.fail(
            "watch_root needs a kill of a worker that ran the kit's tool, then a worker whose first request "
            "starts the watch; the scenario has neither",
            outcome=Outcome.ERRORED,
        ))
    time.sleep(ms / 1000)
    elapsed = watch.stop()
    world.watch = None
    world.moment_problems.extend(evidence_checks.watch_problems(watch.changes))
    announced = [e for e in worker.control.log() if e.get("kind") == "tool_started"]
    writes = ", ".join(f"{role} {count}" for role, count in sorted(world.tool_writes.items())) or "none found"
    first = announced[0] if announced else {}
    return (
        f"the kit's tool (pid {first.get('pid')}, grandchild pid {first.get('grandchild')}) announced itself after "
        f"{first.get('writes')} write(s) and the worker was killed there; writes found just after the kill: "
        f"{writes}; the workspace root was watched from the next worker's first request for {elapsed:.1f} s "
        f"({watch.samples} samples): {len(watch.changes)} change(s)"
    )


def _torn_length(size: int, at: int | None) -> int:
    """How many bytes of a cache of ``size`` bytes a tear at ``at`` keeps: always fewer than ``size``."""
    if at is None:
        return max(1, size // 2) if size > 1 else 0
    kept = at if at >= 0 else size + at
    return min(max(kept, 0), max(size - 1, 0))


def _damage_cache(world: _World, task_id: str, how: str, at: int | None = None, sweep: bool = False) -> None:
    tasks = world.state_dir / "tasks"
    path = tasks / f"{task_id}.json"
    tasks.mkdir(exist_ok=True)
    status, current = evidence.read_cache(world.state_dir, task_id)
    cache: dict[str, Any] = (
        dict(current) if status == "ok" and isinstance(current, dict) else {"cache_version": 1, "task_id": task_id}
    )
    # A forged later phase: a worker that believes it skips a submission or a push the journal still owes.
    ahead = dict(cache, phase="result_submitted", seq=int(cache.get("seq") or 0) + 100, idempotency_key="forged")
    if how == "missing":
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif how == "torn":
        data = path.read_bytes() if path.exists() else b'{"cache_version": 1, "phase": "claimed"}'
        if sweep and at is not None and at >= len(data):
            raise _Unreached  # a tear sweep has visited every length short of the whole cache
        path.write_bytes(data[: _torn_length(len(data), at)])
    elif how == "garbage":
        path.write_bytes(b"\x00\xffnot json at all")
    elif how == "wrong_shape":
        # JSON, but not the CACHE-1 shape: most columns missing, the phase ahead of the journal.
        path.write_bytes(canonical_json({"cache_version": 1, "task_id": task_id, "phase": "result_submitted"}))
    elif how == "stale":
        cache.update(phase="claimed", seq=1, result_body=None, result_hash=None, idempotency_key=None)
        path.write_bytes(canonical_json(cache))
    elif how == "newer":
        path.write_bytes(canonical_json(ahead))
    elif how == "stray_tmp":
        (tasks / f".{task_id}.json.tmp").write_bytes(b'{"cache_version": 1, "phase": "result_submitted"')
    elif how == "stray_tmp_newer":
        # A whole, well-formed temporary that was never renamed: a worker never reads it as a cache (CACHE-4).
        (tasks / f".{task_id}.json.tmp").write_bytes(canonical_json(ahead))
    if world.layer is not None:
        # The kit's own damage is durable at once: a later power cut must not quietly repair it.
        for entry in tasks.iterdir():
            _files.sync_path(entry)
        _files.sync_path(tasks)


def _plant(world: _World, spec: Mapping[str, Any]) -> None:
    target = world.workspace_root / spec["name"]
    if spec.get("link_to_decoy"):
        os.symlink(world.decoy, target, target_is_directory=True)
        return
    if spec.get("link_to_sibling"):
        os.symlink(_sibling(world.workspace_root), target, target_is_directory=True)
        return
    (target / "src").mkdir(parents=True, exist_ok=True)
    (target / "src" / "left-over.txt").write_text("from a worker that died\n", encoding="utf-8")
    if spec.get("link_inside_to_decoy"):
        os.symlink(world.decoy, target / "escape", target_is_directory=True)
    if spec.get("nested_links"):
        _nested_links(world, target)
    if spec.get("read_only"):
        _read_only(target)


def _sibling(workspace_root: Path) -> Path:
    return workspace_root.with_name(workspace_root.name + "-evil")


def _decoy_digest(world: _World) -> str:
    """The checksum of both decoy trees outside the root."""
    return evidence.tree_digest(world.decoy) + evidence.tree_digest(_sibling(world.workspace_root))


def _read_only(target: Path) -> None:
    # The files and the directory holding them lose their write bits (a root user deletes them anyway).
    for path in (target / "src" / "left-over.txt", target / "src"):
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _nested_links(world: _World, target: Path) -> None:
    deep = target / "a" / "b"
    deep.mkdir(parents=True, exist_ok=True)
    os.symlink(world.decoy, deep / "escape", target_is_directory=True)  # a link to a tree outside
    os.symlink(world.decoy / "keep.txt", deep / "file-escape")  # a link to a file outside
    os.symlink(target, deep / "loop", target_is_directory=True)  # a link back up: a walk that follows never ends
    os.symlink(deep / "escape", target / "a" / "hop", target_is_directory=True)  # a link to a link


def _link_workspaces(world: _World) -> None:
    """Put a link to the decoy inside every workspace a killed worker left (CLEAN-4, CLEAN-5)."""
    for name in evidence.listing(world.workspace_root):
        path = world.workspace_root / name
        if name.startswith("task-") and path.is_dir() and not path.is_symlink():
            os.symlink(world.decoy, path / "escape", target_is_directory=True)


def _swap_for_link(world: _World, name: str) -> None:
    """While the worker waits at cleanup_before_remove, swap the checked directory for a link (CLEAN-4)."""
    target = world.workspace_root / name
    moved = world.root / "moved-out"
    moved.mkdir(exist_ok=True)
    os.replace(target, moved / name)
    os.symlink(world.decoy, target, target_is_directory=True)
    world.swapped.add(name)


def _tamper(world: _World) -> None:
    for name in evidence.listing(world.workspace_root):
        path = world.workspace_root / name
        if name.startswith("task-") and path.is_dir() and not path.is_symlink():
            (path / "tampered-by-the-kit.txt").write_text("must never reach a result\n", encoding="utf-8")


def _disk_text(fault: Mapping[str, Any]) -> str:
    return f"({fault['errno']} from {fault['op']} #{fault['hit']} of the {fault['file']})"


def run_scenario(case: ScenarioCase, factory: Factory, profile: str, power: PowerLoss | None = None) -> CaseResult:
    """Build the scenario's world, run its steps against fresh worker processes, and judge."""
    return _run(case, factory, profile, case.steps, None, power=power)


def _run(
    case: ScenarioCase,
    factory: Factory,
    profile: str,
    steps: Sequence[Mapping[str, Any]],
    blocked_at: list[str] | None,
    stats: dict[str, int] | None = None,
    power: PowerLoss | None = None,
) -> CaseResult:
    """One run of *steps* in a fresh world. With *blocked_at* (a campaign run) the failpoints reached are
    appended to it, and a worker that goes idle before its armed failpoint raises _Unreached. *stats*
    receives the kills of soak rounds and the control-plane faults left unfired."""
    try:
        with _world(case, power) as world:
            world.until_unreached = blocked_at is not None
            if blocked_at is not None:
                world.blocked_at = blocked_at
            observer = _Observer(world, profile)
            control = ControlPlane(log_path=world.root / "control-plane.jsonl", ttl_ms=case.ttl_ms, observer=observer)
            worker = _Worker(case, factory, world, control)
            second = _second_worker(case, factory, world, control, steps)
            control.start()
            try:
                return _drive(case, world, control, worker, profile, steps, second)
            finally:
                if stats is not None:
                    stats.update(kills=world.kills, unfired=control.pending_faults())
                worker.close()
                if second is not None:
                    second.close()
                control.close()
    except Abort as abort:
        return abort.result
    except (KitError, FaultError, GitError) as error:
        # A world the kit could not build or a step it could not take (git missing, a task or fault the
        # control plane refuses): the scenario says nothing about the worker, so it is errored, not failed.
        message = f"the kit could not carry out this scenario ({case.source}): {error}"
        return result_for(case, Outcome.ERRORED, message=message)


def _drive(
    case: ScenarioCase,
    world: _World,
    control: ControlPlane,
    worker: _Worker,
    profile: str,
    steps: Sequence[Mapping[str, Any]],
    second: _Worker | None = None,
) -> CaseResult:
    world.budget = case.budget if isinstance(case, SoakCase) else SCENARIO_BUDGET
    deadline = time.monotonic() + world.budget
    for repository, origin in world.origins.items():
        control.add_origin(repository, origin)
    for name in case.issue:
        world.tasks[name] = _task(case.tasks[name], world.origins, case.repositories)
        control.issue(world.tasks[name])
    for fault in case.faults:
        _script(control, world, fault)
    world.changed_at = len(control.log())
    decoy_before = _decoy_digest(world)
    last_wait = ""
    summary: str | None = None
    for index, step in enumerate(steps):
        ((verb, argument),) = step.items()
        if verb == "start":
            worker.start(argument.get("failpoint"), argument.get("diskFault"), argument.get("tool"))
        elif verb == "restart_if_exited":
            if worker.exited:
                worker.start(None)
        elif verb == "wait":
            worker.wait(argument, deadline)
            last_wait = argument
            world.snapshots.append(evidence.Snapshot.of(_journal_or_abort(worker, world)))
        elif verb == "kill":
            worker.kill()
        elif verb == "stop":
            worker.stop()
        elif verb == "continue":
            point = argument.get("failpoint")
            fields = {"failpoint": {"name": point["name"], "hit": point.get("hit", 1)}} if point else {}
            worker.ask("p1.worker.continue", **fields)
            worker.armed = argument["failpoint"]["name"] if argument.get("failpoint") else None
        elif verb == "clock":
            control.move_clock(int(argument))
            world.changed_at = len(control.log())
        elif verb == "crash_or_idle":
            # A soak round: kill the worker where it stands, at its failpoint or idle.
            worker.wait_any(deadline)
            worker.kill()
            world.kills += 1
            _expire_unrecorded(case, control, world, _journal_or_abort(worker, world))
        elif verb == "settle":
            for _ in range(SETTLE_ROUNDS):
                worker.wait("idle", deadline)
                if not _expire_unrecorded(case, control, world, _journal_or_abort(worker, world)):
                    break
            last_wait = "idle"
            world.snapshots.append(evidence.Snapshot.of(_journal_or_abort(worker, world)))
        elif verb == "expire_unrecorded":
            _expire_unrecorded(case, control, world, _journal_or_abort(worker, world))
        elif verb == "issue":
            world.tasks[argument] = _task(case.tasks[argument], world.origins, case.repositories)
            control.issue(world.tasks[argument])
            world.changed_at = len(control.log())
        elif verb == "reissue":
            template = case.tasks[argument["task"]]
            changes = _resolve(argument.get("changes", {}), world.origins, template["repository"])
            control.reissue(template["task_id"], **changes)
            world.changed_at = len(control.log())
        elif verb == "fault":
            _script(control, world, argument)
            world.changed_at = len(control.log())
        elif verb == "state":
            control.set_state(case.tasks[argument["task"]]["task_id"], argument["to"])
            world.changed_at = len(control.log())
        elif verb == "damage_cache":
            task_id = case.tasks[argument["task"]]["task_id"]
            _damage_cache(world, task_id, argument["how"], argument.get("at"), bool(argument.get("sweep")))
        elif verb == "plant":
            _plant(world, argument)
        elif verb == "tamper_workspace":
            _tamper(world)
        elif verb == "link_workspaces_to_decoy":
            _link_workspaces(world)
        elif verb == "swap_for_link":
            _swap_for_link(world, argument["name"])
        elif verb == "watch_root":
            summary = _watch_root(worker, world, int(argument.get("ms", 1000)))
        elif verb == "second_worker" and second is not None:
            _second_step(second, world, argument, deadline)
        else:  # the schema allows no other verb
            raise Abort(worker.fail(f"step {index} has the unknown verb {verb!r}", outcome=Outcome.ERRORED))
    if world.tool_flag is not None:
        # A worker ran with the tool: it must have run it, in a workspace, or the scenario proved nothing.
        announced = [e for e in control.log() if e.get("kind") == "tool_started"]
        world.moment_problems.extend(evidence_checks.tool_problems(announced, str(world.workspace_root.resolve())))
    worker.read_settings()
    rows = _journal_or_abort(worker, world)
    world.snapshots.append(evidence.Snapshot.of(rows))
    names = {name: template["task_id"] for name, template in case.tasks.items()}
    second_rows: list[evidence.Row] = []
    if second is not None:
        second.read_settings()
        second_rows = _journal_or_abort(second, world, second.state_dir)
        world.second_snapshots.append(evidence.Snapshot.of(second_rows))
    gathered = evidence_checks.Evidence(
        rows=rows,
        snapshots=tuple(world.snapshots),
        **_control_evidence(control, world),
        expected=_expected(control, world),
        caches={task_id: evidence.read_cache(world.state_dir, task_id) for task_id in {r["task_id"] for r in rows}},
        idle=last_wait == "idle",
        settings=worker.settings if worker.claims_journal else None,
        decoy_changed=_decoy_digest(world) != decoy_before,
        strict=profile == "strict",
        deliveries=_faulty_deliveries(control.log()),
        second_rows=second_rows,
        second_snapshots=tuple(world.second_snapshots),
    )
    verdict = evidence_checks.judge(case.expect, names, gathered)
    mismatches = tuple(world.moment_problems) + tuple(verdict)
    if mismatches:
        headline = f"{len(mismatches)} check(s) failed"
        # A survivor of a killed worker is named in the message itself: the paths say what it did.
        survivors = [m.note for m in mismatches if m.clause == "WRK-5" and m.note]
        return worker.fail(headline + (f"; WRK-5: {survivors[0]}" if survivors else ""), *mismatches)
    model = world.kill_model if world.killed_at else NO_CRASH_MODEL
    return result_for(case, Outcome.PASSED, message=summary, fault_model=model)


def _resolve(changes: Mapping[str, Any], origins: Mapping[str, Origin], repository: str) -> dict[str, Any]:
    """A re-issue's changes with the names of the kit's commits (``@base``, ``@later``) made object names."""
    origin = origins[changes.get("repository", repository)]
    named = {"@base": origin.base_oid, "@later": origin.later_oid}
    resolved = {}
    for key, value in changes.items():
        if isinstance(value, str) and value.startswith("@"):
            if named.get(value) is None:
                raise KitError(f"{value!r} names no commit of {origin.path.name}; give the repository 'later' files")
            value = named[value]
        resolved[key] = value
    return resolved


def _script(control: ControlPlane, world: _World, fault: Mapping[str, Any]) -> None:
    if fault.get("fault") == "KillPoint":
        world.kill_armed.add(str(fault["name"]))
    if fault.get("fault") == "ConflictingIdentity" and isinstance(fault.get("changes"), Mapping):
        # The changed identity may name the kit's commits (@base, @later) as a re-issue does.
        try:
            repository = control.task(str(fault.get("task_id")))["task"]["repository"]
        except KeyError:
            raise KitError(f"ConflictingIdentity names the task {fault.get('task_id')!r}, not issued yet") from None
        fault = {**fault, "changes": _resolve(fault["changes"], world.origins, repository)}
    control.script(fault_from_mapping(fault))


# ---------------------------------------------------------------- a second worker on the same control plane


def _second_worker(
    case: ScenarioCase, factory: Factory, world: _World, control: ControlPlane, steps: Sequence[Mapping[str, Any]]
) -> _Worker | None:
    """The scenario's second worker, if a step names it: its own adapter process, workspace root and state
    directory, on the same control plane and origins (a task handed to two workers, RESUME-4, LEASE-4)."""
    if not any("second_worker" in step for step in steps):
        return None
    home = (world.root / "workspaces-second", world.root / "state-second")
    for path in home:
        path.mkdir()
    return _Worker(case, factory, world, control, label="b", home=home)


def _second_step(second: _Worker, world: _World, step: Mapping[str, Any], deadline: float) -> None:
    """One step of the second worker: start, wait, kill, stop or continue, as for the first (the schema
    allows no other verb, and no wait for a kit-side kill, which stays the first worker's)."""
    ((verb, argument),) = step.items()
    if verb == "start":
        second.start(argument.get("failpoint"))
    elif verb == "wait":
        second.wait(argument, deadline)
        world.second_snapshots.append(evidence.Snapshot.of(_journal_or_abort(second, world, second.state_dir)))
    elif verb == "kill":
        second.kill()
    elif verb == "stop":
        second.stop()
    else:
        point = argument.get("failpoint")
        fields = {"failpoint": {"name": point["name"], "hit": point.get("hit", 1)}} if point else {}
        second.ask("p1.worker.continue", **fields)
        second.armed = point["name"] if point else None


def _faulty_deliveries(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each attempt the control plane served against CP-5 or CP-7 (ReplayAttempt, ConflictingIdentity),
    with the governed side effects that followed it from the worker it was served to, up to that worker's
    next claim: one attempt at a time (WRK-2), so every one of them was made for the attempt served."""
    found = []
    for index, entry in enumerate(log):
        if entry.get("kind") not in ("replayed_delivery", "conflicting_delivery"):
            continue
        worker, number = entry.get("worker"), entry.get("request")
        governed: list[dict[str, Any]] = []
        for later in log[index + 1 :]:
            if later.get("request") == number:
                continue  # the claim that carried the delivery
            if later.get("kind") == "request" and later.get("worker") == worker:
                if later.get("endpoint") == "claim":
                    break
                if later.get("endpoint") in ("result", "receipt"):
                    governed.append({"endpoint": later["endpoint"], "path": later.get("path"),
                                     "status": later.get("status")})
            elif later.get("kind") == "push" and later.get("task_id") == entry.get("task_id"):
                governed.append({"endpoint": "push", "ref": later.get("ref"), "accepted": later.get("accepted")})
        found.append({
            "kind": entry["kind"],
            "task_id": entry.get("task_id"),
            "attempt": entry.get("attempt"),
            "worker": worker,
            "task": entry.get("task"),
            "governed": governed,
        })
    return found


def _expected(control: ControlPlane, world: _World) -> dict[str, dict[str, Any]]:
    """The result body the kit computes for each task's current attempt, from the task and its origin."""
    expected = {}
    for issued in world.tasks.values():
        task = control.task(issued["task_id"])["task"]
        expected[task["task_id"]] = evidence.expected_result(task, world.origins[task["repository"]])
    return expected


def _expire_unrecorded(case: ScenarioCase, control: ControlPlane, world: _World, rows: Sequence[evidence.Row]) -> bool:
    """FPT-4: a claim granted but never recorded converges only once its lease has expired."""
    if not _unrecorded_claims(control, world, rows):
        return False
    control.move_clock(case.ttl_ms + 1)
    world.changed_at = len(control.log())
    return True


def _unrecorded_claims(control: ControlPlane, world: _World, rows: Sequence[evidence.Row]) -> bool:
    """Whether a task is RUNNING in an attempt of which the journal holds no row (FPT-4), and no other
    RUNNING attempt is still workable in the journal, whose lease the expiry would take away."""
    last: dict[tuple[str, int], str] = {(row["task_id"], row["attempt"]): row["phase"] for row in rows}
    unrecorded = False
    for issued in world.tasks.values():
        view = control.task(issued["task_id"])
        if view["state"] != "RUNNING":
            continue
        phase = last.get((issued["task_id"], view["task"]["attempt"]))
        if phase is None:
            unrecorded = True
        elif phase not in evidence.TERMINAL:
            return False
    return unrecorded


def _latest_task_rows(state_dir: Path) -> list[evidence.Row]:
    """The rows of the task the worker works on now: the task of the journal's latest row."""
    try:
        rows = evidence.read_journal(state_dir)
    except evidence.JournalUnreadable:
        return []
    if not rows:
        return []
    task_id = rows[-1]["task_id"]
    return [row for row in rows if row["task_id"] == task_id]


def _control_evidence(control: ControlPlane, world: _World) -> dict[str, Any]:
    """The control plane's and the origins' side of the evidence, as plain data."""
    log = control.log()
    answered = {entry["request"]: entry for entry in log if entry.get("kind") == "request"}
    submissions = []
    for entry in log:
        if entry.get("kind") == "moment" and entry.get("check") == "submission":
            request = answered.get(entry.get("request"))
            submissions.append(
                {
                    "task_id": entry["task_id"],
                    "attempt": entry["attempt"],
                    "key": entry["key"],
                    "result_hash": entry["result_hash"],
                    "status": request["status"] if request and isinstance(request.get("status"), int) else 0,
                }
            )
    tasks = {task["task_id"]: dict(control.task(task["task_id"])) for task in world.tasks.values()}
    for entry in log:
        # A result the kit's own fault stored (a scripted 409) is not the worker's to answer for.
        if entry.get("kind") == "result_stored" and entry.get("cause") == "scripted" and entry["task_id"] in tasks:
            tasks[entry["task_id"]]["scripted_result"] = True
    leases: list[Mapping[str, Any]] = []
    branches = {(task["repository"], task["target_branch"]) for task in world.tasks.values()}
    for repository, branch in sorted(branches):
        leases += control.leases(repository, branch)
    pushes = [entry for entry in log if entry.get("kind") == "push"]
    commits: dict[str, list[str]] = {}
    for task in world.tasks.values():
        if task["kind"] == "commit":
            origin = world.origins[task["repository"]]
            commits[task["task_id"]] = origin.commits_since(task["expected_branch_oid"], task["target_branch"])
    return {"submissions": submissions, "tasks": tasks, "leases": leases, "pushes": pushes, "commits": commits}


def _empty_claim_since(log: Sequence[Mapping[str, Any]], since: int, worker: str | None = None) -> bool:
    """Whether a claim answered without a task came after the kit's last change (OUT-2), from *worker*
    if named (with two workers, one's empty claim says nothing of the other)."""
    granted = {e.get("request") for e in log if e.get("kind") == "lease" and e.get("event") == "granted"}
    # Claims answered with a task but no new lease: a duplicate, replayed or conflicting delivery.
    delivered = ("duplicate_delivery", "replayed_delivery", "conflicting_delivery")
    granted |= {e.get("request") for e in log if e.get("kind") in delivered}
    return any(
        e.get("kind") == "request"
        and e.get("endpoint") == "claim"
        and e.get("status") == 200
        and e.get("request") not in granted
        and (worker is None or e.get("worker") == worker)
        for e in log[since:]
    )


def _journal_or_abort(worker: _Worker, world: _World, state_dir: Path | None = None) -> list[evidence.Row]:
    try:
        return evidence.read_journal(world.state_dir if state_dir is None else state_dir)
    except evidence.JournalUnreadable as error:
        raise Abort(worker.fail(str(error), Mismatch("/journal", "readable as JNL-1", str(error), "JNL-1"))) from None


def runner(factory: Factory, *, profile: str, power: PowerLoss | None = None) -> Callable[[Any], CaseResult]:
    """The case runner for P1 scenarios, bound to a maker of fresh worker adapters.

    With *power* the scenarios that kill run under simulated power loss; where the layer cannot run,
    those are not run, with the reason (the others run as usual).
    """

    def run(case: ScenarioCase) -> CaseResult:
        if power is not None and _kills(case):

            reason = unavailable()
            if reason is not None:
                message = f"power loss cannot be simulated here: {reason}"
                return result_for(case, Outcome.NOT_RUN, message=message, fault_model=POWER_LOSS_MODEL)
            return run_scenario(case, factory, profile, power)
        return run_scenario(case, factory, profile)

    return run


def _kills(case: ScenarioCase) -> bool:
    """Whether a scenario kills its worker: a kill step, or a kit-side kill point among its faults."""
    steps = any("kill" in step for step in case.steps)
    faults = [*case.faults, *(step["fault"] for step in case.steps if "fault" in step)]
    return steps or any(fault.get("fault") == "KillPoint" for fault in faults)


def campaign_runner(
    factory: Factory, *, profile: str, seed: int | None = None, adapter_spec: str = "ADAPTER"
) -> Callable[[Any], CaseResult]:
    """The case runner for P1 campaigns (the crash matrix, the soak), bound to a maker of fresh worker
    adapters; *seed* (the run's --seed, if given) replaces a soak's own."""

    def run(case: Any) -> CaseResult:
        if isinstance(case, SoakCase):
            return run_soak(case, factory, profile, case.seed if seed is None else seed, adapter_spec)
        return run_matrix(case, factory, profile)

    return run


# The control-plane faults a soak draws from: each leaves the outcome unknown or late, never changes what
# the task must converge to (FPT-4): 5xx with and without the effect, and answers dropped.
SOAK_FAULTS: tuple[dict[str, Any], ...] = (
    *(
        {"fault": "Answer", "on": on, "status": 503, "effect": effect}
        for on in ("claim", "result", "renew", "receipt", "release")
        for effect in (False, True)
    ),
    *(
        {"fault": "Drop", "on": on, "effect": effect}
        for on in ("claim", "result", "renew", "receipt")
        for effect in (False, True)
    ),
)


def soak_steps(case: SoakCase, seed: int) -> list[dict[str, Any]]:
    """The whole schedule of a soak, drawn from *seed*: each round scripts a few control-plane faults,
    starts the worker armed at a random hit of any failpoint, and kills it there (or idle)."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for _ in range(case.rounds):
        for _ in range(rng.randint(0, case.faults_per_round)):
            steps.append({"fault": dict(rng.choice(SOAK_FAULTS))})
        steps += [{"start": {"failpoint": _any(rng.randint(1, case.max_hit))}}, {"crash_or_idle": {}}]
    return [*steps, {"start": {}}, {"settle": {}}]


def run_soak(case: SoakCase, factory: Factory, profile: str, seed: int, adapter_spec: str) -> CaseResult:
    """A seeded random soak: K tasks, random kills and HTTP faults, then every task must have converged."""
    started = time.monotonic()
    steps = soak_steps(case, seed)
    scripted = sum(1 for step in steps if "fault" in step)
    stats: dict[str, int] = {}
    result = _run(case, factory, profile, steps, None, stats)
    fired = scripted - stats.get("unfired", 0)
    summary = (
        f"{len(case.issue)} tasks, seed {seed}: {stats.get('kills', 0)} worker kills and {fired} control-plane "
        f"faults fired ({scripted} scripted), {stats.get('kills', 0) + fired} faults in "
        f"{time.monotonic() - started:.0f} s"
    )
    if result.ok:
        return dataclasses.replace(result, message=summary)
    replay = f"resumekit run --adapter {shlex.quote(adapter_spec)} --kind p1-campaign --only {case.id} --seed {seed}"
    rounds = _shrink(case, factory, profile, seed, started + case.budget)
    shrunk = (
        f"; the first {rounds} of its {case.rounds} rounds already fail (set rounds: {rounds} in a copy of the "
        "soak's file and run that with --golden)"
        if rounds < case.rounds
        else ""
    )
    message = f"soak failed ({summary}): {result.message}{shrunk}"
    return dataclasses.replace(result, message=message, replay=replay)


def _shrink(case: SoakCase, factory: Factory, profile: str, seed: int, deadline: float) -> int:
    """Bisect the rounds of a failing soak: the fewest leading rounds found to fail still, within
    SHRINK_STEPS reruns and the soak's budget. A schedule's first k rounds are the k-round schedule of
    the same seed, so a prefix is a soak of its own; timing may still make a rerun pass."""
    low, high = 0, case.rounds
    for _ in range(SHRINK_STEPS):
        if high - low <= 1 or time.monotonic() > deadline:
            break
        middle = (low + high) // 2
        shorter = dataclasses.replace(case, rounds=middle)
        if _run(shorter, factory, profile, soak_steps(shorter, seed), None).ok:
            low = middle
        else:
            high = middle
    return high


def _crash(failpoint: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Start a worker armed at *failpoint*, kill it there, and let an unrecorded claim's lease expire."""
    return [{"start": {"failpoint": failpoint}}, {"wait": "blocked"}, {"kill": {}}, {"expire_unrecorded": {}}]


_CONVERGE: tuple[dict[str, Any], ...] = ({"start": {}}, {"wait": "idle"})


def _tear_steps(case: MatrixCase, length: int) -> list[dict[str, Any]]:
    """A kill at the sweep's failpoint, the cache torn to *length* bytes, then the restart (CACHE-4)."""
    tear = {"task": case.task, "how": "torn", "at": length, "sweep": True}
    return [*_crash({"name": case.tear, "hit": 1}), {"damage_cache": tear}, *_CONVERGE]


def _any(hit: int) -> dict[str, Any]:
    return {"name": ANY_FAILPOINT, "hit": hit}


class _Matrix:
    """The runs of one crash matrix so far, and the first failed one."""

    def __init__(self, case: MatrixCase, factory: Factory, profile: str) -> None:
        self.case, self.factory, self.profile = case, factory, profile
        self.visited: list[tuple[str, ...]] = []  # the points each converged run crashed at
        self.failed: CaseResult | None = None
        self.firsts = 0  # first crashes whose recovery path was crashed in turn

    def run(self, steps: Sequence[Mapping[str, Any]], label: str) -> tuple[str, ...] | None:
        """The points one run crashed at, None when its last armed point was not reached (or it failed)."""
        blocked: list[str] = []
        try:
            result = _run(self.case, self.factory, self.profile, steps, blocked)
        except _Unreached:
            return (*blocked, "")  # "" marks the armed point that was never reached
        if not result.ok:
            where = " then ".join(blocked) or label
            note = f"crash matrix, run {len(self.visited) + 1} ({label}: {where}): {result.message}"
            self.failed = dataclasses.replace(result, message=note)
            return None
        self.visited.append(tuple(blocked) or (label,))
        return tuple(blocked)

    def summary(self, started: float) -> str:
        kind = self.case.tasks[self.case.task]["kind"]
        text = f"{len(self.visited)} crash points visited for the {kind} task"
        if self.case.tear:
            text = f"{len(self.visited)} tears of the {kind} task's cache visited, after a kill at {self.case.tear}"
        if self.case.crashes == 2:
            text += f" ({self.firsts} first crashes, each followed by a crash at every point of its recovery path)"
        return text + f", {len(self.visited)} runs in {time.monotonic() - started:.0f} s"


def run_matrix(case: Any, factory: Factory, profile: str) -> CaseResult:
    """SQLite's crash loop applied to a worker (p1.md FPT-5): crash at the 1st, 2nd, ... point it reaches,
    restart, require convergence, and advance the point until the task completes without reaching it."""
    assert isinstance(case, MatrixCase)
    started = time.monotonic()
    matrix = _Matrix(case, factory, profile)
    if case.tear:
        done = _loop(matrix, lambda n: _tear_steps(case, n - 1), "tear")
    elif case.crashes == 1:
        done = _loop(matrix, lambda n: [*_crash(_any(n)), *_CONVERGE], "first crash")
    else:
        done = _recovery_loops(matrix)
    for point in case.kit_points if done else ():
        steps: list[dict[str, Any]] = [{"fault": {"fault": "KillPoint", "name": point}}, {"start": {}}]
        steps.append({"wait": "killed"})
        steps += [{"expire_unrecorded": {}}, *_CONVERGE]
        if matrix.run(steps, point) is None:
            break
    if matrix.failed is not None:
        return matrix.failed
    if not done:
        message = f"the worker still reached a new failpoint after {case.limit} points: the loop never ends"
        return result_for(case, Outcome.FAILED, message=message, mismatches=(Mismatch("", case.limit, None, "FPT-5"),))
    return result_for(case, Outcome.PASSED, message=matrix.summary(started), fault_model=KILL_MODEL)


def _loop(matrix: _Matrix, steps_for: Callable[[int], list[dict[str, Any]]], label: str) -> bool:
    """Advance the armed hit until a run ends without reaching it; False on a failure or at the limit."""
    for hit in range(1, matrix.case.limit + 1):
        crashed = matrix.run(steps_for(hit), f"{label} at hit {hit} of any failpoint")
        if crashed is None:
            return False
        if crashed and crashed[-1] == "":
            return True
    return False


def _recovery_loops(matrix: _Matrix) -> bool:
    """For each first crash, a crash at every point of the recovery path that follows it."""
    case = matrix.case
    firsts: list[dict[str, Any]] = [{"name": name, "hit": 1} for name in case.first]
    for number in range(1, case.limit + 1):
        if case.first and number > len(firsts):
            return True
        first = firsts[number - 1] if case.first else _any(number)
        matrix.firsts += 1
        for hit in range(1, case.limit + 1):
            steps = [*_crash(first), *_crash(_any(hit)), *_CONVERGE]
            crashed = matrix.run(steps, f"first crash at {first['name']} hit {first['hit']}, then hit {hit}")
            if crashed is None:
                return False
            if crashed and crashed[-1] == "":
                if len(crashed) == 1:  # the first crash itself was not reached
                    if case.first:
                        matrix.failed = result_for(
                            case,
                            Outcome.FAILED,
                            message=f"the armed failpoint {first['name']} was never reached",
                            mismatches=(Mismatch("/wait/failpoint", first["name"], None, "FPT-2"),),
                        )
                        return False
                    matrix.firsts -= 1
                    return True
                break
        else:
            return False
    return False


__all__: Sequence[str] = ("KILL_MODEL", "campaign_runner", "run_matrix", "run_scenario", "runner")
