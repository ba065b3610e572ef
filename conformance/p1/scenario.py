"""Runs one P1 scenario for real: origins, the control plane, worker processes, kills, and the verdict.

The kit makes everything the worker touches (a workspace root, a state directory, bare git origins, a
decoy tree outside the root), starts the simulated control plane on loopback, drives the worker through
the adapter's ``p1.worker`` commands, kills it with real signals, and then judges from evidence it
collects itself (docs/spec/p1.md, section 16): the control plane's log, the origin's refs and push log,
the journal read read-only, the caches, and listings of the workspace root.

Each step names one verb; the table below says which handler of ``verbs`` takes it.

Under simulated power loss (``--fault-model power-loss``) the state directory is the kit's FUSE layer
(``resumekit.conformance.powerloss``): every kill is followed by a power cut that drops what the worker
never synced, the moment checks read the journal as a cut would leave it (so a submission, a receipt or
a push is judged against what was durable when it arrived), and after each cut every task's cache must
be a complete version, old or new, never torn or empty (CACHE-3).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance.fault_models import Abort
from resumekit.conformance.keep import Keeper
from resumekit.conformance.p1 import evidence, evidence_checks, journal_settings, kept, log_views, verbs
from resumekit.conformance.p1.cases import ScenarioCase, SoakCase
from resumekit.conformance.p1.control_plane import ControlPlane
from resumekit.conformance.p1.cp_core import KitError
from resumekit.conformance.p1.cp_faults import FaultError
from resumekit.conformance.p1.ending import end_case
from resumekit.conformance.p1.evidence_data import capped
from resumekit.conformance.p1.observer import Observer
from resumekit.conformance.p1.origin import GitError, OriginUnreadable
from resumekit.conformance.p1.origin_checks import unreadable
from resumekit.conformance.p1.worker import Factory, Worker, served_requests
from resumekit.conformance.p1.world import NO_CRASH_MODEL, SCENARIO_BUDGET, World, decoy_entries, open_world
from resumekit.conformance.powerloss import PowerLoss
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import result_for

CONTROL_PLANE_LOG = "control-plane.jsonl"  # in the scratch root, for a reader after the run

# verb -> handler: every verb a scenario's step may name (schemas/golden/p1-scenarios.json, $defs/step), and
# the two the campaigns' generated steps add, crash_or_idle and settle, which no golden file may write.
STEPS: Mapping[str, verbs.Handler] = MappingProxyType({
    "start": verbs.start,
    "restart_if_exited": verbs.restart_if_exited,
    "wait": verbs.wait,
    "kill": verbs.kill,
    "stop": verbs.stop,
    "continue": verbs.continue_,
    "clock": verbs.clock,
    "crash_or_idle": verbs.crash_or_idle,
    "settle": verbs.settle,
    "expire_unrecorded": verbs.expire_unrecorded,
    "issue": verbs.issue,
    "reissue": verbs.reissue,
    "fault": verbs.fault,
    "state": verbs.state,
    "damage_cache": verbs.damage_cache,
    "plant": verbs.plant,
    "tamper_workspace": verbs.tamper_workspace,
    "link_workspaces_to_decoy": verbs.link_workspaces_to_decoy,
    "swap_for_link": verbs.swap_for_link,
    "watch_root": verbs.watch_root,
})
# A second_worker step takes one of these with the second worker: the schema allows it no other verb, and
# no wait for a kit-side kill, which stays the first worker's.
SECOND_WORKER_STEPS: Mapping[str, verbs.Handler] = MappingProxyType(
    {verb: STEPS[verb] for verb in ("start", "wait", "kill", "stop", "continue")}
)


def run_scenario(
    case: ScenarioCase, factory: Factory, profile: str, power: PowerLoss | None = None, keeper: Keeper | None = None
) -> CaseResult:
    """Build the scenario's world, run its steps against fresh worker processes, and judge."""
    return run_steps(case, factory, profile, case.steps, None, power=power, keeper=keeper)


def run_steps(
    case: ScenarioCase,
    factory: Factory,
    profile: str,
    steps: Sequence[Mapping[str, Any]],
    blocked_at: list[str] | None,
    stats: dict[str, int] | None = None,
    power: PowerLoss | None = None,
    keeper: Keeper | None = None,
) -> CaseResult:
    """One run of *steps* in a fresh world. With *blocked_at* (a campaign run) the failpoints reached are
    appended to it, and a worker that goes idle before its armed failpoint raises Unreached. *stats*
    receives the kills of soak rounds and the control-plane faults left unfired. With *keeper*
    (``--keep-failed``) the world of a failing run is kept before it is removed."""
    world: World | None = None
    try:
        with open_world(case, power) as world:
            world.until_unreached = blocked_at is not None
            if blocked_at is not None:
                world.blocked_at = blocked_at
            observer = Observer(world, profile)
            log = functools.partial(world.folder(world.root).append, CONTROL_PLANE_LOG)
            control = ControlPlane(
                log_path=world.root / CONTROL_PLANE_LOG, ttl_ms=case.ttl_ms, observer=observer, log_opener=log
            )
            worker = Worker(case, factory, world, control)
            second = _second_worker(case, factory, world, control, steps)
            control.start()
            try:
                result = _drive(case, world, control, worker, profile, steps, second)
            except Abort as abort:
                result = _with_origins(abort.result, world, control)
            except (KitError, FaultError, GitError) as error:
                result = _with_origins(_could_not(case, error), world, control)
            finally:
                if stats is not None:
                    stats.update(kills=world.kills, unfired=control.pending_faults())
                worker.close()
                if second is not None:
                    second.close()
                control.close()
            # --keep-failed: a failing case's world is copied while it still exists (open_world removes it).
            if keeper is not None:
                result = kept.keep_world(keeper, case, world, result, world.root / CONTROL_PLANE_LOG)
    except Abort as abort:
        result = abort.result
    except (KitError, FaultError, GitError, _files.Refused) as error:
        result = _could_not(case, error)
    return _with_scratch_left(result, world.left if world is not None else None, profile)


def _with_scratch_left(result: CaseResult, left: str | None, profile: str) -> CaseResult:
    """The result, told what the kit could not remove of the world once every process of the case had ended:
    something the worker started still wrote there (WRK-5, strict; a sentence of the message in core)."""
    if left is None:
        return result
    note = f"the kit could not remove the scenario's folder once every process of the case had ended: {left}"
    if profile == "strict" and result.outcome in (Outcome.PASSED, Outcome.FAILED):
        mismatch = Mismatch("/scratch", "the scenario's folder removed", left, "WRK-5", note)
        message = note if result.outcome is Outcome.PASSED else f"{result.message}; WRK-5: {note}"
        return dataclasses.replace(
            result, outcome=Outcome.FAILED, mismatches=(*result.mismatches, mismatch), message=message
        )
    return dataclasses.replace(result, message="; ".join(part for part in (result.message, note) if part))


def _could_not(case: ScenarioCase, error: Exception) -> CaseResult:
    """A world the kit could not build or a step it could not take (git missing, a task or fault the control
    plane refuses, a folder of the kit's that something else took the place of): the scenario says nothing
    about the worker, so it is errored, not failed."""
    message = f"the kit could not carry out this scenario ({case.source}): {error}"
    return result_for(case, Outcome.ERRORED, message=message)


def _drive(
    case: ScenarioCase,
    world: World,
    control: ControlPlane,
    worker: Worker,
    profile: str,
    steps: Sequence[Mapping[str, Any]],
    second: Worker | None = None,
) -> CaseResult:
    """Set the world up on the control plane, take every step in turn, and judge what the steps left."""
    world.budget = case.budget if isinstance(case, SoakCase) else SCENARIO_BUDGET
    drive = verbs.Drive(case, world, control, worker, second, time.monotonic() + world.budget)
    for repository, origin in world.origins.items():
        control.add_origin(repository, origin)
    for name in case.issue:
        verbs.issue_task(drive, name)
    for fault in case.faults:
        verbs.script_fault(drive, fault)
    drive.changed()
    decoy_before = decoy_entries(world)
    gathered: evidence_checks.Evidence | None = None
    try:
        for index, step in enumerate(steps):
            _take(drive, index, step)
        gathered = _gather(drive, profile, decoy_before)
    except OriginUnreadable as error:  # the worker changed its origin: no evidence of it can be trusted
        world.moment_problems.append(_unreadable(world, error))
    # Every process the case started ends before the verdict; one that outlived its worker fails WRK-5.
    note = end_case(case, world, (worker, second), profile)
    drive.summary = "; ".join(part for part in (drive.summary, note) if part) or None
    return _verdict(drive, gathered)


def _with_origins(result: CaseResult, world: World, control: ControlPlane) -> CaseResult:
    """A scenario that ended early, failed with COMMIT-3 first if a request found an origin the kit could not
    read: what the worker did to its origin is why, and it is the worker's to answer for, never an error."""
    unread = [_unreadable(world, error) for error in control.unreadable_origins()]
    if not unread or result.outcome not in (Outcome.FAILED, Outcome.ERRORED):
        return result
    message = f"{unread[0].note}; then: {result.message}" if result.message else unread[0].note
    mismatches = (*unread, *result.mismatches)
    return dataclasses.replace(result, outcome=Outcome.FAILED, message=message, mismatches=mismatches)


def _unreadable(world: World, error: OriginUnreadable) -> Mismatch:
    """COMMIT-3 for an origin the kit could not read, under the repository's name."""
    names = [repository for repository, origin in world.origins.items() if origin.path == error.origin]
    return unreadable(names[0] if names else error.origin.name, error.where, error.expected, error.found)


def _take(drive: verbs.Drive, index: int, step: Mapping[str, Any]) -> None:
    """Take one step: its verb's handler from the table, or a second_worker step's from the sub-table."""
    ((verb, argument),) = step.items()
    table, worker = STEPS, drive.worker
    if verb == "second_worker" and drive.second is not None:
        ((verb, argument),) = argument.items()
        table, worker = SECOND_WORKER_STEPS, drive.second
    handler = table.get(verb)
    if handler is None:  # the schema allows no other verb
        raise Abort(drive.worker.fail(f"step {index} has the unknown verb {verb!r}", outcome=Outcome.ERRORED))
    handler(drive, worker, argument)


def _gather(drive: verbs.Drive, profile: str, decoy_before: Mapping[str, str]) -> evidence_checks.Evidence:
    """What the steps left, read by the kit itself: the journals, the caches, the control plane, the origins."""
    world, control, worker, second = drive.world, drive.control, drive.worker, drive.second
    if world.tool_flag is not None:
        # A worker ran with the tool: it must have run it, in a workspace, or the scenario proved nothing.
        announced = [e for e in control.log() if e.get("kind") == "tool_started"]
        world.moment_problems.extend(evidence_checks.tool_problems(announced, str(world.workspace_root.resolve())))
    worker.read_settings()
    rows = worker.observe_journal()
    second_rows: list[evidence.Row] = []
    if second is not None:
        second.read_settings()
        second_rows = second.observe_journal()
    facts = _control_evidence(control, world)
    decoy_after = decoy_entries(world)
    return evidence_checks.Evidence(
        rows=rows,
        snapshots=tuple(world.snapshots),
        **facts,
        # every ref of every origin, read once after the last step (CP-17, COMMIT-3), and the pushes placed
        **evidence.origin_evidence(world.origins, control.log(), facts["tasks"]),
        expected=_expected(control, world),
        caches={task_id: evidence.read_cache(world.state_dir, task_id) for task_id in {r["task_id"] for r in rows}},
        idle=drive.last_wait == "idle",
        settings=journal_settings.of_scenario(worker, second),
        decoy_changed=decoy_after != decoy_before,
        decoy_changes=evidence_checks.decoy_changes(decoy_before, decoy_after),
        strict=profile == "strict",
        deliveries=_faulty_deliveries(control.log()),
        revivals=log_views.revived_after_loss(control.log()),
        stopped=log_views.effects_after_stops(control.log(), drive.stops),
        reports=[
            {name: e.get(name) for name in ("task_id", "attempt", "state", "reason")}
            for e in control.log()
            if e.get("kind") == "report"
        ],
        kit_calls=_kit_calls(control.log()),
        second_rows=second_rows,
        second_snapshots=tuple(world.second_snapshots),
        clock_moves=tuple(drive.clock_moves),
        lease_log=log_views.lease_log(control.log()),
        cache_damages=tuple(drive.damages),
    )


def _verdict(drive: verbs.Drive, gathered: evidence_checks.Evidence | None) -> CaseResult:
    """The scenario's result: passed, or failed with the moment problems and the checks that failed, at most
    ``capped`` of each clause; *gathered* is None when an origin could not be read (a moment problem says so)."""
    case, world = drive.case, drive.world
    unread = [_unreadable(world, error) for error in drive.control.unreadable_origins()]
    world.moment_problems.extend(unread)
    broken = drive.control.check_errors()
    if broken and not unread:  # a check that was to be made at a moment was not: no verdict can stand on it
        message = f"the kit could not make {len(broken)} moment check(s): {broken[0]}"
        return drive.worker.fail(message, outcome=Outcome.ERRORED)
    names = {name: template["task_id"] for name, template in case.tasks.items()}
    verdict = [] if gathered is None else evidence_checks.judge(case.expect, names, gathered)
    found = [*world.moment_problems, *verdict]
    mismatches = tuple(capped(found))
    marks = evidence_checks.attested(gathered.settings if gathered else None, world.blocked_at)
    if mismatches:
        headline = f"{len(found)} check(s) failed"
        # A survivor of a killed worker is named in the message itself: the paths say what it did.
        survivors = [m.note for m in mismatches if m.clause == "WRK-5" and m.note]
        failed = drive.worker.fail(headline + (f"; WRK-5: {survivors[0]}" if survivors else ""), *mismatches)
        return dataclasses.replace(failed, attested=marks)
    model = world.kill_model if world.killed_at else NO_CRASH_MODEL
    return result_for(case, Outcome.PASSED, message=drive.summary, fault_model=model, attested=marks)


def _second_worker(
    case: ScenarioCase, factory: Factory, world: World, control: ControlPlane, steps: Sequence[Mapping[str, Any]]
) -> Worker | None:
    """The scenario's second worker, if a step names it: its own adapter process, workspace root and state
    directory, on the same control plane and origins (a task handed to two workers, RESUME-4, LEASE-4)."""
    if not any("second_worker" in step for step in steps):
        return None
    home = (world.kit_folder("workspaces-second").path, world.kit_folder("state-second").path)
    return Worker(case, factory, world, control, label="b", home=home)


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


def _kit_calls(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each request the control plane refused for a kit path without the kit's secret (CP-22): the kit's own
    callers always carry it, so each is a worker's; as logged, with any secret already shown as <secret>."""
    return [
        {"worker": e.get("worker"), "method": e.get("method"), "path": e.get("path")}
        for e in log
        if e.get("kind") == "kit_path_refused"
    ]


def _expected(control: ControlPlane, world: World) -> dict[str, dict[str, Any]]:
    """The result body the kit computes for each task's current attempt, from the task and its origin."""
    expected = {}
    for issued in world.tasks.values():
        task = control.task(issued["task_id"])["task"]
        expected[task["task_id"]] = evidence.expected_result(task, world.origins[task["repository"]])
    return expected


def _told_to_wait(entry: Mapping[str, Any], served: set[Any]) -> bool:
    """Whether a claim's answer reached the worker without a task, so that WRK-3's wait applies after it."""
    return entry.get("request") not in served and entry.get("answer", "answer") != "drop"


def _control_evidence(control: ControlPlane, world: World) -> dict[str, Any]:
    """The control plane's and the origins' side of the evidence, as plain data."""
    log = control.log()
    answered = {entry["request"]: entry for entry in log if entry.get("kind") == "request"}
    served = served_requests(log)
    conflicts = log_views.conflict_answers(log)  # what each 409 to a submission carried (SUB-5)
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
                    "answer": conflicts.get(entry.get("request")),
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
    claims = [
        # Only an answer the worker got asks it to wait: a dropped one is a transport failure to it.
        {"worker": e.get("worker"), "arrived_ms": e.get("arrived_ms"), "empty": _told_to_wait(e, served)}
        for e in log
        if e.get("kind") == "request" and e.get("endpoint") == "claim" and e.get("status") == 200
    ]
    commits: dict[str, list[str]] = {}
    for task in world.tasks.values():
        if task["kind"] == "commit":
            origin = world.origins[task["repository"]]
            commits[task["task_id"]] = origin.commits_since(task["expected_branch_oid"], task["target_branch"])
    facts = {"submissions": submissions, "tasks": tasks, "leases": leases, "pushes": pushes, "commits": commits}
    requests = [
        {"worker": e.get("worker"), "endpoint": e.get("endpoint"), "path": e.get("path")}
        for e in log
        if e.get("kind") == "request"
    ]
    pacing = {"claims": claims, "retry_after_ms": control.retry_after_ms()}
    return {**facts, **pacing, "requests": requests, "open_at_start": dict(world.open_at_start)}
