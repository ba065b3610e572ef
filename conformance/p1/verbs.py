"""The verbs of a P1 scenario's steps, one small handler each (schemas/golden/p1-scenarios.json, $defs/step).

A handler takes the drive (what the steps of one run share), the worker the step is for and the verb's
argument. Which handler takes which verb is the table at the top of ``scenario``, which takes the steps;
a ``second_worker`` step takes one of the worker verbs there with the scenario's second worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.p1 import model, watch, world
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.control_plane.kit import fault_from_mapping
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.control_plane.state import KitError
from resumekit.conformance.p1.origin import Origin
from resumekit.conformance.p1.worker import Worker
from resumekit.conformance.p1.world import World

SETTLE_ROUNDS = 10  # lease expiries a soak's final convergence may need, one per claim lost on the way


@dataclass
class Drive:
    """One run of a scenario's steps: what every handler may touch, and what the steps leave for the verdict."""

    case: ScenarioCase
    world: World
    control: ControlPlane
    worker: Worker
    second: Worker | None
    deadline: float  # time.monotonic() by which the run must be over
    last_wait: str = ""  # the state the first worker was last waited for
    summary: str | None = None  # what the WRK-5 watch saw, for the report

    def changed(self) -> None:
        """The kit changed the world: from now on a worker is idle only after a claim that saw it (OUT-2)."""
        self.world.changed_at = len(self.control.log())


Handler = Callable[[Drive, Worker, Any], None]


def start(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Start a worker process, armed as the step says: at a failpoint, at a disk fault, running the kit's tool."""
    worker.start(argument.get("failpoint"), argument.get("diskFault"), argument.get("tool"))


def restart_if_exited(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Start a new worker, unarmed, when the last one has exited; nothing when it is still running."""
    if worker.exited:
        worker.start(None)


def wait(drive: Drive, worker: Worker, argument: str) -> None:
    """Wait until the worker reports the state named, then take a snapshot of its journal."""
    worker.wait(argument, drive.deadline)
    if worker.primary:
        drive.last_wait = argument
    worker.observe_journal()


def kill(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Kill the worker's process for real."""
    worker.kill()


def stop(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Stop the worker in order. A worker that was blocked or idle has no request under way, so the log between
    the stop and its exit shows every request it made after the stop (RESUME-5)."""
    name, before = worker.name, len(drive.control.log())
    worker.stop()
    if worker.primary and drive.last_wait in ("blocked", "idle"):
        # RESUME-5: the control plane's log between the stop and the exit shows what the worker did after it
        drive.world.record("kit", "stopped-in-order", worker=name, logFrom=before, logTo=len(drive.control.log()))


def continue_(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Release a worker blocked at its failpoint, arming another if the step names one."""
    point = argument.get("failpoint")
    fields = {"failpoint": {"name": point["name"], "hit": point.get("hit", 1)}} if point else {}
    worker.ask("p1.worker.continue", **fields)
    worker.armed = point["name"] if point else None
    worker.released = worker.blocked_name  # ADP-2: from here on, no wait may report this block


def clock(drive: Drive, worker: Worker, argument: int) -> None:
    """Move the control plane's clock on by the milliseconds given, noting the first worker's journal length
    just before and just after, so the rows written between two moves are known (LEASE-3)."""
    before = len(drive.worker.read_journal())
    drive.control.move_clock(int(argument))
    seq = next(entry["seq"] for entry in reversed(drive.control.log()) if entry.get("kind") == "clock")
    # LEASE-3: the rows the first worker's journal held just before and just after the move
    after = len(drive.worker.read_journal())
    drive.world.record("kit", "clock-moved", deltaMs=int(argument), seq=seq, rowsBefore=before, rowsAfter=after)
    drive.changed()


def crash_or_idle(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """A soak round: kill the worker where it stands, at its failpoint or idle."""
    worker.wait_any(drive.deadline)
    worker.kill()
    drive.world.kills += 1
    _expire_unrecorded(drive, worker.read_journal())


def settle(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """A soak's end: wait until the worker is idle with no claim left unrecorded, then take a snapshot."""
    for _ in range(SETTLE_ROUNDS):
        worker.wait("idle", drive.deadline)
        if not _expire_unrecorded(drive, worker.read_journal()):
            break
    drive.last_wait = "idle"
    worker.observe_journal()


def expire_unrecorded(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Let the lease of a claim the journal never recorded expire (FPT-4)."""
    _expire_unrecorded(drive, worker.read_journal())


def issue(drive: Drive, worker: Worker, argument: str) -> None:
    """Issue one more of the scenario's tasks."""
    issue_task(drive, argument)
    drive.changed()


def reissue(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Re-issue a task with changes, which may name the kit's commits (``@base``, ``@later``)."""
    template = drive.case.tasks[argument["task"]]
    changes = _resolve(argument.get("changes", {}), drive.world.origins, template["repository"])
    drive.control.reissue(template["task_id"], **changes)
    drive.changed()


def fault(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Script one more control-plane fault."""
    script_fault(drive, argument)
    drive.changed()


def state(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Move a task to another state on the control plane."""
    drive.control.set_state(drive.case.tasks[argument["task"]]["task_id"], argument["to"])
    drive.changed()


def damage_cache(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Damage a task's cache in the state directory."""
    task_id = drive.case.tasks[argument["task"]]["task_id"]
    rows = [row for row in drive.worker.read_journal() if row["task_id"] == task_id]
    held = rows[-1] if rows and rows[-1]["phase"] not in model.TERMINAL else None
    world.damage_cache(drive.world, task_id, argument["how"], argument.get("at"), bool(argument.get("sweep")))
    # CACHE-4: the attempt of the task the journal then held open, by its last row
    drive.world.record("kit", "cache-damaged", task_id=task_id, how=argument["how"], at=argument.get("at"), open=held)


def plant(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Plant an entry in the workspace root."""
    world.plant(drive.world, argument)


def tamper_workspace(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Write a file of the kit's into the workspaces left in the root."""
    world.tamper(drive.world)


def link_workspaces_to_decoy(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Put a link to the decoy inside every workspace left in the root."""
    world.link_workspaces(drive.world)


def root_through_link(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Tell the workers started from now on the workspace root through a link to it."""
    world.root_through_link(drive.world)


def swap_for_link(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Swap a directory the worker checked for a link to the decoy."""
    world.swap_for_link(drive.world, argument["name"])


def watch_root(drive: Drive, worker: Worker, argument: Mapping[str, Any]) -> None:
    """Watch the workspace root a while longer and judge its changes (WRK-5); the summary goes to the report."""
    drive.summary = watch.watch_root(worker, drive.world, int(argument.get("ms", 1000)))


def issue_task(drive: Drive, name: str) -> None:
    """Issue the scenario's task *name* on the control plane, as the world records it."""
    drive.world.tasks[name] = world.task_from(drive.case.tasks[name], drive.world.origins, drive.case.repositories)
    drive.control.issue(drive.world.tasks[name])
    drive.world.record("kit", "issued", name=name, task=drive.world.tasks[name])


def script_fault(drive: Drive, spec: Mapping[str, Any]) -> None:
    """Script a control-plane fault; a kit-side kill point is armed for the observer as well."""
    if spec.get("fault") == "KillPoint":
        drive.world.kill_armed.add(str(spec["name"]))
    if spec.get("fault") == "ConflictingIdentity" and isinstance(spec.get("changes"), Mapping):
        # The changed identity may name the kit's commits (@base, @later) as a re-issue does.
        try:
            repository = drive.control.task(str(spec.get("task_id")))["task"]["repository"]
        except KeyError:
            raise KitError(f"ConflictingIdentity names the task {spec.get('task_id')!r}, not issued yet") from None
        spec = {**spec, "changes": _resolve(spec["changes"], drive.world.origins, repository)}
    drive.control.script(fault_from_mapping(spec))


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


def _expire_unrecorded(drive: Drive, rows: Sequence[model.Row]) -> bool:
    """FPT-4: a claim granted but never recorded converges only once its lease has expired."""
    if not _unrecorded_claims(drive, rows):
        return False
    drive.control.move_clock(drive.case.ttl_ms + 1)
    drive.changed()
    return True


def _unrecorded_claims(drive: Drive, rows: Sequence[model.Row]) -> bool:
    """Whether a task is RUNNING in an attempt of which the journal holds no row (FPT-4), and no other
    RUNNING attempt is still workable in the journal, whose lease the expiry would take away."""
    last: dict[tuple[str, int], str] = {(row["task_id"], row["attempt"]): row["phase"] for row in rows}
    unrecorded = False
    for issued in drive.world.tasks.values():
        view = drive.control.task(issued["task_id"])
        if view["state"] != "RUNNING":
            continue
        phase = last.get((issued["task_id"], view["task"]["attempt"]))
        if phase is None:
            unrecorded = True
        elif phase not in model.TERMINAL:
            return False
    return unrecorded
