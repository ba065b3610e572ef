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
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import NotInTree, plausible_pid, wait_pid_gone
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, Reply
from resumekit.conformance.fixtures import ScenarioCase
from resumekit.conformance.p1 import checks, evidence
from resumekit.conformance.p1.canonical import canonical_json
from resumekit.conformance.p1.control_plane import ControlPlane
from resumekit.conformance.p1.cp_core import KitError
from resumekit.conformance.p1.faults import FaultError, fault_from_mapping
from resumekit.conformance.p1.origin import GitError, Origin, create_origin
from resumekit.conformance.powerloss import FAULT_MODEL as POWER_LOSS_MODEL
from resumekit.conformance.powerloss import LayerError, PowerLayer, PowerLoss
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for, start_failed

Factory = Callable[[], ProcessAdapter]

KILL_MODEL = (
    "process crash (TerminateProcess); not power loss" if os.name == "nt" else "process crash (SIGKILL); not power loss"
)
NO_CRASH_MODEL = "none: scripted control-plane faults only"
SCENARIO_BUDGET = 120.0  # seconds of real time a scenario may take before the kit calls it hung
WAIT_SLICE_MS = 1000
DECOY_FILES = {"keep.txt": "precious\n", "deep/also.txt": "precious too\n"}


class _Abort(Exception):
    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.message or result.outcome.value)
        self.result = result


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


class _Observer:
    """The kit's moment checks (p1.md EVID-4), run by the control plane as each request arrives."""

    def __init__(self, world: _World, profile: str) -> None:
        self.world, self.profile = world, profile
        self.lock = threading.Lock()

    def _journal(self) -> list[evidence.Row]:
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
        before = [name for name in self.world.start_listing.get(worker, []) if name.startswith("task-")]
        now = set(evidence.listing(self.world.workspace_root))
        left = sorted(name for name in before if name in now)
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
        rows = [r for r in self._journal() if r["task_id"] == task_id and r["attempt"] == attempt]
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
        rows = [r for r in self._journal() if r["task_id"] == task_id and r["attempt"] == attempt]
        if not rows or (rows[-1]["phase"] != "commit_done" and "commit_done" not in {r["phase"] for r in rows}):
            return self._problem(
                "COMMIT-5",
                f"/tasks/{task_id}/attempts/{attempt}/receipt",
                "commit_done durable",
                rows[-1]["phase"] if rows else None,
                "a receipt arrived before commit_done was durable",
            )
        return []

    def on_push(self, task_id: str, attempt: int, ref: str, old: str, new: str) -> list[str]:
        rows = [r for r in self._journal() if r["task_id"] == task_id and r["attempt"] == attempt]
        latest = rows[-1]["phase"] if rows else None
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

    def __init__(self, case: ScenarioCase, factory: Factory, world: _World, control: ControlPlane) -> None:
        self.case, self.factory, self.world, self.control = case, factory, world, control
        self.adapter: ProcessAdapter | None = None
        self.count = 0
        self.name = ""
        self.pid: int | None = None
        self.marker: Path | None = None
        self.armed: str | None = None
        self.transcript: list[str] = []
        self.settings: list[Mapping[str, Any]] = []
        self.claims_journal = False

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
            raise _Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message))
        if reply.outcome != "result":
            raise _Abort(errored(self.case, reply, cmd))
        if not isinstance(reply.value, dict):
            raise _Abort(self.fail(f"{cmd} answered {reply.value!r}, not an object"))
        return reply.value

    def ensure_adapter(self) -> ProcessAdapter:
        if self.adapter is None or self.adapter.process is None or self.adapter.process.poll() is not None:
            if self.adapter is not None:
                self.adapter.kill()
            self.adapter = self.factory()
            try:
                info = self.adapter.start()
            except AdapterStartError as error:
                raise _Abort(start_failed(self.case, error)) from None
            self.claims_journal = "p1.journal" in info.capabilities
        return self.adapter

    def start(self, failpoint: Mapping[str, Any] | None) -> None:
        self.ensure_adapter()
        self.count += 1
        self.name = f"w{self.count}"
        self.world.start_listing[self.name] = evidence.listing(self.world.workspace_root)
        self.marker = self.world.root / f"exit-{self.name}.marker"
        fields: dict[str, Any] = {
            "config": {
                "controlPlaneUrl": self.control.base_url(self.name),
                "workspaceRoot": str(self.world.workspace_root),
                "stateDir": str(self.world.state_dir),
            },
            "marker": str(self.marker),
        }
        if failpoint:
            fields["failpoint"] = {"name": failpoint["name"], "hit": failpoint.get("hit", 1)}
            self.armed = failpoint["name"]
        else:
            self.armed = None
        pid = self.ask("p1.worker.start", **fields).get("pid")
        self._adopt(pid, "p1.worker.start")
        self.world.kill_current = self._kill_now

    def _adopt(self, pid: object, where: str) -> None:
        """Take *pid* as the worker's only if the process guard says the kit may kill it."""
        assert self.adapter is not None and self.adapter.process is not None
        if not plausible_pid(pid) or not self.adapter.process.owns(pid):
            raise _Abort(
                self.fail(
                    f"{where} reported pid {pid!r}, which the kit will not kill: "
                    "it is not the adapter or one of its descendants"
                )
            )
        assert isinstance(pid, int)
        self.pid = pid

    def _freeze(self) -> None:
        """Under power loss, the instant of the cut, just before a kill: no sync lands after it."""
        if self.world.layer is not None:
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
            remaining = max(0.0, deadline - time.monotonic())
            if not self.world.kill_event.wait(remaining):
                raise _Abort(self.fail("the armed kit-side kill point was never reached", outcome=Outcome.FAILED))
            self.world.kill_event.clear()
            self._reap()
            return {"state": "killed"}
        while True:
            answer = self.ask("p1.worker.wait", timeoutMs=WAIT_SLICE_MS)
            state = answer.get("state")
            # "idle" counts only once the worker has seen the world as the kit last left it: a claim
            # answered without a task after the kit's last change (OUT-2).
            fresh = wanted != "idle" or _empty_claim_since(self.control.log(), self.world.changed_at)
            if state == wanted and fresh:
                if wanted == "blocked":
                    self._confirm_block(answer)
                return answer
            if state == wanted:
                # Idle, but before a claim that saw the kit's last change: the worker claims again
                # within its retry_after_ms, so wait a moment instead of asking in a tight loop.
                time.sleep(0.01)
                state = "running"
            if state != "running":
                raise _Abort(
                    self.fail(
                        f"waited for the worker to be {wanted}, it is {state}",
                        Mismatch("/wait/state", wanted, answer, "ADP-2"),
                    )
                )
            if time.monotonic() > deadline:
                raise _Abort(
                    self.fail(
                        f"the worker was not {wanted} within {SCENARIO_BUDGET:.0f} s",
                        Mismatch("/wait/state", wanted, "running", "OUT-2"),
                        outcome=Outcome.ERRORED,
                    )
                )

    def _confirm_block(self, answer: Mapping[str, Any]) -> None:
        """FPT-2: the name is attested; the durable state the catalog names at the site is observed."""
        name = answer.get("failpoint")
        if name != self.armed:
            raise _Abort(
                self.fail("blocked at another failpoint", Mismatch("/wait/failpoint", self.armed, name, "FPT-2"))
            )
        if "pid" in answer and answer["pid"] != self.pid:
            self._adopt(answer["pid"], "p1.worker.wait")
        task_rows = _latest_task_rows(self.world)
        temporaries = [n for n in evidence.listing(self.world.state_dir / "tasks") if n.endswith(".tmp")]
        problem = checks.failpoint_state(str(name), task_rows, temporaries)
        if problem is not None:
            raise _Abort(
                self.fail(f"blocked at {name}, but {problem}", Mismatch("/wait/observed", name, problem, "FPT-2"))
            )

    def kill(self) -> None:
        if self.pid is None or self.adapter is None or self.adapter.process is None:
            raise _Abort(self.fail("the scenario kills a worker that is not running"))
        self._freeze()
        try:
            self.adapter.process.kill_member(self.pid)
        except NotInTree as error:
            raise _Abort(self.fail(f"the kit will not kill pid {self.pid}: {error}")) from None
        except OSError as error:
            raise _Abort(self.fail(f"cannot kill the worker's pid {self.pid}: {error}")) from None
        self._reap()
        assert self.marker is not None
        if self.marker.exists():
            raise _Abort(
                self.fail(
                    "the exit marker was written: an exit path ran, so this was not a crash",
                    Mismatch("/marker", "absent", "present", "CRASH-2"),
                )
            )
        self.world.killed_at.append(f"{self.armed or 'kill'}")

    def _reap(self) -> None:
        pid = self.pid
        wrapper = False
        if self.adapter is not None and self.adapter.process is not None:
            process = self.adapter.process
            wrapper = pid != process.pid
            if wrapper:
                process.kill()  # a wrapper around the real worker
            process.wait(timeout=10.0)
            process.kill()
            self.adapter.process = None
        # The kit reaps the adapter itself; a descendant it named must be gone too.
        if wrapper and pid is not None and not wait_pid_gone(pid, timeout=10.0):
            raise _Abort(self.fail(f"pid {pid} still runs 10 s after it was killed"))
        self.adapter = None
        self.pid = None
        self.world.kill_current = None
        if self.world.layer is not None:
            self._power_cut(self.world.layer)

    def _power_cut(self, layer: PowerLayer) -> None:
        """Drop what the dead worker never synced; then every cache must be a whole version (CACHE-3)."""
        try:
            layer.cut("lose", 0)
        except LayerError as error:
            raise _Abort(
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
            raise _Abort(self.fail("an orderly stop did not exit 0", Mismatch("/stop/exitCode", 0, code, "RESUME-5")))
        assert self.marker is not None
        if not self.marker.exists():
            raise _Abort(
                self.fail(
                    "the exit path never wrote the marker, so a kill cannot be told from an orderly exit",
                    Mismatch("/marker", "present", "absent", "ADP-2"),
                )
            )
        self.pid = None
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
                raise _Abort(
                    result_for(
                        case,
                        Outcome.ERRORED,
                        message=f"cannot mount the power layer: {error}",
                        fault_model=POWER_LOSS_MODEL,
                    )
                ) from None
        for name, text in DECOY_FILES.items():
            (decoy / name).parent.mkdir(parents=True, exist_ok=True)
            (decoy / name).write_text(text, encoding="utf-8")
        origins = {}
        for index, (repository, spec) in enumerate(sorted(case.repositories.items())):
            origins[repository] = create_origin(
                root / f"origin-{index}",
                spec["files"],
                branch=spec["branch"],
                branches=spec.get("branches", ()),
                later=spec.get("later"),
            )
        yield _World(root, workspace_root, state_dir, decoy, origins, layer=layer)
    finally:
        if layer is not None:
            layer.stop()
        _files.remove(root)


def _damage_cache(world: _World, task_id: str, how: str) -> None:
    tasks = world.state_dir / "tasks"
    path = tasks / f"{task_id}.json"
    tasks.mkdir(exist_ok=True)
    if how == "missing":
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif how == "torn":
        data = path.read_bytes() if path.exists() else b'{"cache_version": 1, "phase": "claimed"}'
        path.write_bytes(data[: max(1, len(data) // 2)])
    elif how == "garbage":
        path.write_bytes(b"\x00\xffnot json at all")
    elif how in ("stale", "newer"):
        status, cache = evidence.read_cache(world.state_dir, task_id)
        cache = dict(cache) if status == "ok" and isinstance(cache, dict) else {"cache_version": 1, "task_id": task_id}
        if how == "stale":
            cache.update(phase="claimed", seq=1, result_body=None, result_hash=None, idempotency_key=None)
        else:
            cache.update(phase="result_submitted", seq=int(cache.get("seq") or 0) + 100, idempotency_key="forged")
        path.write_bytes(canonical_json(cache))
    elif how == "stray_tmp":
        (tasks / f".{task_id}.json.tmp").write_bytes(b'{"cache_version": 1, "phase": "result_submitted"')
    if world.layer is not None:
        # The kit's own damage is durable at once: a later power cut must not quietly repair it.
        for entry in tasks.iterdir():
            _sync_path(entry)
        _sync_path(tasks)


def _sync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _plant(world: _World, spec: Mapping[str, Any]) -> None:
    target = world.workspace_root / spec["name"]
    if spec.get("link_to_decoy"):
        os.symlink(world.decoy, target, target_is_directory=True)
        return
    (target / "src").mkdir(parents=True, exist_ok=True)
    (target / "src" / "left-over.txt").write_text("from a worker that died\n", encoding="utf-8")
    if spec.get("link_inside_to_decoy"):
        os.symlink(world.decoy, target / "escape", target_is_directory=True)


def _tamper(world: _World) -> None:
    for name in evidence.listing(world.workspace_root):
        path = world.workspace_root / name
        if name.startswith("task-") and path.is_dir() and not path.is_symlink():
            (path / "tampered-by-the-kit.txt").write_text("must never reach a result\n", encoding="utf-8")


def run_scenario(case: ScenarioCase, factory: Factory, profile: str, power: PowerLoss | None = None) -> CaseResult:
    """Build the scenario's world, run its steps against fresh worker processes, and judge."""
    try:
        with _world(case, power) as world:
            observer = _Observer(world, profile)
            control = ControlPlane(log_path=world.root / "control-plane.jsonl", ttl_ms=case.ttl_ms, observer=observer)
            worker = _Worker(case, factory, world, control)
            control.start()
            try:
                return _drive(case, world, control, worker, profile)
            finally:
                worker.close()
                control.close()
    except _Abort as abort:
        return abort.result
    except (KitError, FaultError, GitError) as error:
        # A world the kit could not build or a step it could not take (git missing, a task or fault the
        # control plane refuses): the scenario says nothing about the worker, so it is errored, not failed.
        message = f"the kit could not carry out this scenario ({case.source}): {error}"
        return result_for(case, Outcome.ERRORED, message=message)


def _drive(case: ScenarioCase, world: _World, control: ControlPlane, worker: _Worker, profile: str) -> CaseResult:
    deadline = time.monotonic() + SCENARIO_BUDGET
    for repository, origin in world.origins.items():
        control.add_origin(repository, origin)
    for name in case.issue:
        world.tasks[name] = _task(case.tasks[name], world.origins, case.repositories)
        control.issue(world.tasks[name])
    for fault in case.faults:
        _script(control, world, fault)
    world.changed_at = len(control.log())
    decoy_before = evidence.tree_digest(world.decoy)
    last_wait = ""
    for index, step in enumerate(case.steps):
        ((verb, argument),) = step.items()
        if verb == "start":
            worker.start(argument.get("failpoint"))
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
            _damage_cache(world, case.tasks[argument["task"]]["task_id"], argument["how"])
        elif verb == "plant":
            _plant(world, argument)
        elif verb == "tamper_workspace":
            _tamper(world)
        else:  # the schema allows no other verb
            raise _Abort(worker.fail(f"step {index} has the unknown verb {verb!r}", outcome=Outcome.ERRORED))
    worker.read_settings()
    rows = _journal_or_abort(worker, world)
    world.snapshots.append(evidence.Snapshot.of(rows))
    names = {name: template["task_id"] for name, template in case.tasks.items()}
    gathered = checks.Evidence(
        rows=rows,
        snapshots=tuple(world.snapshots),
        **_control_evidence(control, world),
        expected=_expected(control, world),
        caches={task_id: evidence.read_cache(world.state_dir, task_id) for task_id in {r["task_id"] for r in rows}},
        idle=last_wait == "idle",
        settings=worker.settings if worker.claims_journal else None,
        decoy_changed=evidence.tree_digest(world.decoy) != decoy_before,
    )
    verdict = checks.judge(case.expect, names, gathered)
    mismatches = tuple(world.moment_problems) + tuple(verdict)
    if mismatches:
        return worker.fail(f"{len(mismatches)} check(s) failed", *mismatches)
    model = world.kill_model if world.killed_at else NO_CRASH_MODEL
    return result_for(case, Outcome.PASSED, fault_model=model)


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
    control.script(fault_from_mapping(fault))


def _expected(control: ControlPlane, world: _World) -> dict[str, dict[str, Any]]:
    """The result body the kit computes for each task's current attempt, from the task and its origin."""
    expected = {}
    for issued in world.tasks.values():
        task = control.task(issued["task_id"])["task"]
        expected[task["task_id"]] = evidence.expected_result(task, world.origins[task["repository"]])
    return expected


def _latest_task_rows(world: _World) -> list[evidence.Row]:
    """The rows of the task the worker works on now: the task of the journal's latest row."""
    try:
        rows = evidence.read_journal(world.state_dir)
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


def _empty_claim_since(log: Sequence[Mapping[str, Any]], since: int) -> bool:
    """Whether a claim answered without a task came after the kit's last change (OUT-2)."""
    granted = {e.get("request") for e in log if e.get("kind") == "lease" and e.get("event") == "granted"}
    return any(
        e.get("kind") == "request"
        and e.get("endpoint") == "claim"
        and e.get("status") == 200
        and e.get("request") not in granted
        for e in log[since:]
    )


def _journal_or_abort(worker: _Worker, world: _World) -> list[evidence.Row]:
    try:
        return evidence.read_journal(world.state_dir)
    except evidence.JournalUnreadable as error:
        raise _Abort(worker.fail(str(error), Mismatch("/journal", "readable as JNL-1", str(error), "JNL-1"))) from None


def runner(factory: Factory, *, profile: str, power: PowerLoss | None = None) -> Callable[[Any], CaseResult]:
    """The case runner for P1 scenarios, bound to a maker of fresh worker adapters.

    With *power* the scenarios that kill run under simulated power loss; where the layer cannot run,
    those are not run, with the reason (the others run as usual).
    """

    def run(case: ScenarioCase) -> CaseResult:
        if power is not None and _kills(case):
            from resumekit.conformance.powerloss import unavailable

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


__all__: Sequence[str] = ("KILL_MODEL", "run_scenario", "runner")
