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
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance.events import for_report
from resumekit.conformance.fault_models import Abort
from resumekit.conformance.history import ReportBudget
from resumekit.conformance.keep import Keeper
from resumekit.conformance.p1 import evidence, journal_settings, kept, verbs
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.cases import ScenarioCase, SoakCase
from resumekit.conformance.p1.checks import journal, rules
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.control_plane.faults import FaultError
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.control_plane.state import KitError
from resumekit.conformance.p1.ending import end_case
from resumekit.conformance.p1.model import Row
from resumekit.conformance.p1.observer import Observer
from resumekit.conformance.p1.origin_guard import OriginUnreadable
from resumekit.conformance.p1.worker import Factory, Worker
from resumekit.conformance.p1.world import NO_CRASH_MODEL, SCENARIO_BUDGET, Stop, World, decoy_entries, open_world
from resumekit.conformance.powerloss import PowerLoss
from resumekit.conformance.results import CaseResult, Outcome
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
    "root_through_link": verbs.root_through_link,
    "watch_root": verbs.watch_root,
})
# A second_worker step takes one of these with the second worker: the schema allows it no other verb, and
# no wait for a kit-side kill, which stays the first worker's.
SECOND_WORKER_STEPS: Mapping[str, verbs.Handler] = MappingProxyType(
    {verb: STEPS[verb] for verb in ("start", "wait", "kill", "stop", "continue")}
)


def run_scenario(
    case: ScenarioCase,
    factory: Factory,
    profile: str,
    power: PowerLoss | None = None,
    keeper: Keeper | None = None,
    budget: ReportBudget | None = None,
) -> CaseResult:
    """Build the scenario's world, run its steps against fresh worker processes, and judge."""
    return run_steps(case, factory, profile, case.steps, None, power=power, keeper=keeper, budget=budget)


def run_steps(
    case: ScenarioCase,
    factory: Factory,
    profile: str,
    steps: Sequence[Mapping[str, Any]],
    blocked_at: list[str] | None,
    stats: dict[str, int] | None = None,
    power: PowerLoss | None = None,
    keeper: Keeper | None = None,
    budget: ReportBudget | None = None,
) -> CaseResult:
    """One run of *steps* in a fresh world. With *blocked_at* (a campaign run) the failpoints reached are
    appended to it, and a worker that goes idle before its armed failpoint raises Unreached. *stats*
    receives the kills of soak rounds and the control-plane faults left unfired. With *keeper*
    (``--keep-failed``) the world of a failing run is kept before it is removed."""
    world: World | None = None
    try:
        with open_world(case, power) as world:
            world.until_unreached = blocked_at is not None
            world.profile = profile
            if blocked_at is not None:
                world.blocked_at = blocked_at
            observer = Observer(world, profile)
            log = functools.partial(world.folder(world.root).append, CONTROL_PLANE_LOG)
            control = ControlPlane(
                log_path=world.root / CONTROL_PLANE_LOG, ttl_ms=case.ttl_ms, observer=observer, log_opener=log,
                history=world.history,
            )
            worker = Worker(case, factory, world, control)
            second = _second_worker(case, factory, world, control, steps)
            control.start()
            try:
                result = _drive(case, world, control, worker, profile, steps, second)
            except Abort as abort:
                result = _with_origins(abort.result, world, control)
            except Stop as stop:
                # What a worker did that the scenario cannot go on from: the rules that stopped it are the verdict.
                result = _with_origins(worker.fail(str(stop), *stop.mismatches), world, control)
            except (KitError, FaultError, GitError) as error:
                result = _with_origins(_could_not(case, error), world, control)
            finally:
                if stats is not None:
                    stats.update(kills=world.kills, unfired=control.pending_faults())
                worker.close()
                if second is not None:
                    second.close()
                control.close()
            result = _with_history(result, world, budget)
            # --keep-failed: a failing case's world is copied while it still exists (open_world removes it).
            if keeper is not None:
                result = kept.keep_world(keeper, case, world, result, world.root / CONTROL_PLANE_LOG)
    except Abort as abort:
        result = abort.result
    except (KitError, FaultError, GitError, _files.Refused) as error:
        result = _could_not(case, error)
    return _with_scratch_left(result, world, profile)


def _with_history(result: CaseResult, world: World, budget: ReportBudget | None) -> CaseResult:
    """A failed or errored result carries its story: a bounded copy of the case's history (the run's *budget*
    bounds them all); a passed one carries none."""
    if result.outcome not in (Outcome.FAILED, Outcome.ERRORED):
        return result
    story = for_report(world.history.events(), world.history.cut, budget)
    return dataclasses.replace(result, history=tuple(story))


def _with_scratch_left(result: CaseResult, world: World | None, profile: str) -> CaseResult:
    """The result, told what the kit could not remove of the world once every process of the case had ended:
    something the worker started still wrote there (WRK-5, strict: ``processes.scratch_left``; a sentence of the
    message in core)."""
    if world is None or world.left is None:
        return result
    event = world.record("kit", "scratch-left", left=world.left)
    story = Story([] if event is None else [event], profile)
    found = rules.named("processes.scratch_left", story, Scenario({}, {}, profile))
    if profile == "strict" and found and result.outcome in (Outcome.PASSED, Outcome.FAILED):
        note = found[0].note
        message = note if result.outcome is Outcome.PASSED else f"{result.message}; WRK-5: {note}"
        mismatches = (*result.mismatches, *found)
        return dataclasses.replace(result, outcome=Outcome.FAILED, mismatches=mismatches, message=message)
    note = f"the kit could not remove the scenario's folder once every process of the case had ended: {world.left}"
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
    origins = {n: {"branch": o.branch, "base": o.base_oid, "later": o.later_oid} for n, o in world.origins.items()}
    world.record(
        "kit", "world", case=case.id, workspaceRoot=str(world.workspace_root.resolve()),
        stateDir=str(world.state_dir), ttlMs=case.ttl_ms, retryAfterMs=control.retry_after_ms(), origins=origins,
    )
    for repository, origin in world.origins.items():
        control.add_origin(repository, origin)
    for name in case.issue:
        verbs.issue_task(drive, name)
    for fault in case.faults:
        verbs.script_fault(drive, fault)
    drive.changed()
    world.record("kit", "decoys", when="before", entries=decoy_entries(world))
    read = False
    try:
        for index, step in enumerate(steps):
            _take(drive, index, step)
        _read_at_end(drive)
        read = True
    except OriginUnreadable as error:  # the worker changed its origin: no evidence of it can be trusted
        _record_unreadable(world, error)
    # Every process the case started ends before the verdict; one that outlived its worker fails WRK-5.
    note = end_case(case, world, (worker, second), profile)
    drive.summary = "; ".join(part for part in (drive.summary, note) if part) or None
    return _verdict(drive, read)


def _with_origins(result: CaseResult, world: World, control: ControlPlane) -> CaseResult:
    """A scenario that ended early, failed with COMMIT-3 first if a request found an origin the kit could not
    read: what the worker did to its origin is why, and it is the worker's to answer for, never an error."""
    for error in control.unreadable_origins():
        _record_unreadable(world, error)
    story = Story(world.history.events(), world.profile)
    unread = rules.named("commit.unreadable_origins", story, Scenario({}, {}, world.profile))
    if not unread or result.outcome not in (Outcome.FAILED, Outcome.ERRORED):
        return result
    message = f"{unread[0].note}; then: {result.message}" if result.message else unread[0].note
    mismatches = (*unread, *result.mismatches)
    return dataclasses.replace(result, outcome=Outcome.FAILED, message=message, mismatches=mismatches)


def _record_unreadable(world: World, error: OriginUnreadable) -> None:
    """Record an origin the kit could not read safely, under its repository's name (COMMIT-3)."""
    names = [repository for repository, origin in world.origins.items() if origin.path == error.origin]
    world.record(
        "origin", "unreadable", repository=names[0] if names else error.origin.name, where=error.where,
        expected=error.expected, found=error.found,
    )


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
    drive.world.record("kit", "step", index=index, verb=verb, argument=argument, worker=worker.label)
    handler(drive, worker, argument)


def _read_at_end(drive: verbs.Drive) -> None:
    """Once the last step is done, read what the steps left and record it: the journals, the caches, the
    control plane's tasks and leases, the origins, the result the kit computes for each task, the decoys."""
    world, control, worker, second = drive.world, drive.control, drive.worker, drive.second
    worker.read_settings()
    rows = worker.observe_journal(why="final")
    if second is not None:
        second.read_settings()
        second.observe_journal(why="final")
    settings = journal_settings.of_scenario(worker, second)
    world.record("kit", "journal-settings", settings=None if settings is None else dataclasses.asdict(settings))
    tasks = {task["task_id"]: dict(control.task(task["task_id"])) for task in world.tasks.values()}
    world.record(
        "kit", "at-end",
        tasks=tasks,
        leases=_leases(control, world),
        commits=_commits(world),
        expected=_expected(control, world),
        caches=_caches(world, rows),
        last_wait=drive.last_wait,
        retry_after_ms=control.retry_after_ms(),
    )
    # every ref of every origin, read once after the last step (CP-17, COMMIT-3), and the pushes placed
    origins = evidence.origin_evidence(world.origins, control.log(), tasks)
    fast = [[*key, known] for key, known in origins.pop("fast_forward").items()]
    world.record("kit", "origins-at-end", **origins, fast_forward=fast)
    world.record("kit", "decoys", when="after", entries=decoy_entries(world))
    places = tool_places(world.workspace_root, control.log())
    if places:
        world.record("kit", "tool-places", places=places)


def tool_places(workspace_root: Path, log: Sequence[Mapping[str, Any]], most: int = 64) -> dict[str, bool]:
    """For each folder the kit's tool said it ran in (at most *most*), whether the folder holding it is the
    workspace root: the same folder, however the tool's ``getcwd()`` spelled it (a Windows 8.3 short name, a
    link, macOS's /private), for ADP-2's ``processes.tool``."""
    places: dict[str, bool] = {}
    for entry in log:
        cwd = entry.get("cwd") if entry.get("kind") == "tool_started" else None
        if isinstance(cwd, str) and cwd not in places and len(places) < most:
            places[cwd] = _files.same_place(PurePath(cwd).parent, workspace_root)
    return places


def _caches(world: World, rows: Sequence[Row]) -> dict[str, list[Any]]:
    """The cache of every task of the journal: [status, what it holds] (``evidence.read_cache``)."""
    return {task_id: list(evidence.read_cache(world.state_dir, task_id)) for task_id in {r["task_id"] for r in rows}}


def _leases(control: ControlPlane, world: World) -> list[Mapping[str, Any]]:
    leases: list[Mapping[str, Any]] = []
    branches = {(task["repository"], task["target_branch"]) for task in world.tasks.values()}
    for repository, branch in sorted(branches):
        leases += control.leases(repository, branch)
    return leases


def _commits(world: World) -> dict[str, list[str]]:
    """Each commit task's branch: the commits it gained above the task's expected_branch_oid."""
    commits: dict[str, list[str]] = {}
    for task in world.tasks.values():
        if task["kind"] == "commit":
            origin = world.origins[task["repository"]]
            commits[task["task_id"]] = origin.commits_since(task["expected_branch_oid"], task["target_branch"])
    return commits


def _verdict(drive: verbs.Drive, complete: bool) -> CaseResult:
    """The scenario's result: passed, or failed with the rules that failed, at most ``capped`` of each clause;
    not *complete* when what the steps left could not be read (an origin the kit could not read safely): the
    rules that judge what was seen as the run went judge it then."""
    case, world = drive.case, drive.world
    for error in drive.control.unreadable_origins():
        _record_unreadable(world, error)
    story, scenario = Story(world.history.events(), world.profile), Scenario.of(case, world.profile)
    broken = drive.control.check_errors()
    if broken and not rules.named("commit.unreadable_origins", story, scenario):
        # a check that was to be made at a moment was not: no verdict can stand on it
        message = f"the kit could not make {len(broken)} moment check(s): {broken[0]}"
        return drive.worker.fail(message, outcome=Outcome.ERRORED)
    verdict = rules.judge(story, scenario) if complete else rules.judge_moments(story, scenario)
    found = verdict
    mismatches = tuple(rules.capped(found))
    marks = journal.attested(story.settings if complete else None, world.blocked_at)
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


def _expected(control: ControlPlane, world: World) -> dict[str, dict[str, Any]]:
    """The result body the kit computes for each task's current attempt, from the task and its origin."""
    expected = {}
    for issued in world.tasks.values():
        task = control.task(issued["task_id"])["task"]
        expected[task["task_id"]] = evidence.expected_result(task, world.origins[task["repository"]])
    return expected


