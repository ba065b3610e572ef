"""The world of one P1 scenario: everything the kit makes for the worker to touch, and the kit's changes to it.

A scratch directory holds a workspace root, a state directory (under power loss the mount of the kit's
FUSE layer), bare git origins and two decoy trees outside the root. The steps of a scenario change that
world as a crash or a careless neighbour would: a cache damaged, a stale workspace planted, a link to the
decoys put where a cleanup must not follow it, a checked directory swapped for a link (docs/spec/p1.md,
CACHE, CLEAN).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, new_token, sweep_marked
from resumekit.conformance.fault_models import NONE_SCRIPTED, PROCESS_CRASH, Abort
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.p1 import evidence
from resumekit.conformance.p1.canonical import canonical_json
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.origin import Origin, create_origin
from resumekit.conformance.p1.watch import RootWatch, end_tools
from resumekit.conformance.powerloss import LayerError, PowerLayer, PowerLoss
from resumekit.conformance.results import Mismatch, Outcome
from resumekit.conformance.runner import result_for

KILL_MODEL = PROCESS_CRASH
NO_CRASH_MODEL = NONE_SCRIPTED
SCENARIO_BUDGET = 120.0  # seconds of real time a scenario may take before the kit calls it hung
DECOY_FILES = {"keep.txt": "precious\n", "deep/also.txt": "precious too\n"}


class Unreached(Exception):
    """The worker went idle without reaching its armed failpoint: a crash loop has visited every point."""


@dataclass
class World:
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
    open_at_start: dict[str, list[evidence.Row]] = field(default_factory=dict)  # worker name -> open attempts
    rows_at_start: dict[str, int] = field(default_factory=dict)  # worker name -> its journal's rows at its start
    first_seen: set[str] = field(default_factory=set)
    kill_armed: set[str] = field(default_factory=set)
    killed_at: list[str] = field(default_factory=list)
    kill_current: Callable[[], None] | None = None  # kills the running worker through the process guard
    kill_event: threading.Event = field(default_factory=threading.Event)
    changed_at: int = 0  # the control plane's log length at the kit's last change of the world
    layer: PowerLayer | None = None  # the power-loss layer over state_dir, under power loss
    exports: int = 0
    kills: int = 0  # soak rounds that killed the worker
    swapped: set[str] = field(default_factory=set)  # entries the kit swapped for a link (CLEAN-4 lets them stay)
    blocked_at: list[str] = field(default_factory=list)  # every failpoint a worker blocked at, in order
    until_unreached: bool = False  # a campaign run: a worker idle before its armed point ends the loop
    budget: float = SCENARIO_BUDGET  # seconds of real time the run may take (a soak's own budget)
    tool_flag: Path | None = None  # while this file exists the kit's tool may run (p1.tools); set once one did
    held: list[LineProcess] = field(default_factory=list)  # killed adapters whose trees end with the scenario
    watch_next: bool = False  # a worker running the tool was killed: the next one's first request starts the watch
    watch_for: str | None = None  # the worker whose first request starts the WRK-5 watch
    watch: RootWatch | None = None
    tool_writes: dict[str, int] = field(default_factory=dict)  # the tool's writes found just after the kill
    # worker name -> (workspace root, state directory), for a scenario's second worker (its own pair)
    homes: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    second_snapshots: list[evidence.Snapshot] = field(default_factory=list)
    # in the environment of every adapter process of this world (RESUMEKIT_CASE_TOKEN), to find what they left
    case_token: str = field(default_factory=new_token)
    # Held while a journal is read and its snapshot kept: JNL-4 compares consecutive snapshots, so the
    # snapshots must stand in the order of the reads, from the harness and the control plane's threads.
    snapshot_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kill_model(self) -> str:
        """The fault model a kill in this world is: a power cut under power loss, a process crash otherwise."""
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

    def observe_journal(self, read: Callable[[], list[evidence.Row]], *, second: bool = False) -> list[evidence.Row]:
        """The rows *read* returns, kept as a snapshot of the first worker's journal (or the second's).

        Reads are made one at a time under ``snapshot_lock``, so each snapshot holds what the journal held
        no earlier than the one before it. A read that raises keeps nothing.
        """
        with self.snapshot_lock:
            rows = read()
            (self.second_snapshots if second else self.snapshots).append(evidence.Snapshot.of(rows))
        return rows

    def home(self, worker: str | None) -> tuple[Path, Path]:
        """The workspace root and state directory of the worker behind a base-URL name."""
        return self.homes.get(worker or "", (self.workspace_root, self.state_dir))


def task_from(
    template: Mapping[str, Any], origins: Mapping[str, Origin], repositories: Mapping[str, Any]
) -> dict[str, Any]:
    """The task the kit issues from a scenario's task template, based on its origin's base commit."""
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
def open_world(case: ScenarioCase, power: PowerLoss | None = None) -> Iterator[World]:
    """Make the scenario's world in a scratch directory, and remove all of it (and the tools and every process
    marked with the world's token left) after."""
    root = _files.scratch("p1")
    layer = None
    try:
        workspace_root, state_dir, decoy = root / "workspaces", root / "state", root / "decoy"
        workspace_root.mkdir()
        if power is None:
            state_dir.mkdir()
        else:
            layer = PowerLayer(root / "state-backing", state_dir, power.sync_delay)
            _mount(case, layer)
        _make_decoys(decoy, workspace_root)
        world = World(root, workspace_root, state_dir, decoy, _origins(case, root), layer=layer)
        try:
            yield world
        finally:
            end_tools(world)
            # Whatever ended the run (a verdict, a step that failed), nothing marked as the world's outlives it.
            sweep_marked(world.case_token, 0.0)
    finally:
        if layer is not None:
            layer.stop()
        _files.remove(root)


def _mount(case: ScenarioCase, layer: PowerLayer) -> None:
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


def _make_decoys(decoy: Path, workspace_root: Path) -> None:
    # Two decoys outside the root: one elsewhere, and a sibling whose name has the root's as a prefix,
    # which a boundary check by string prefix takes for the inside (CLEAN-3).
    for tree in (decoy, _sibling(workspace_root)):
        for name, text in DECOY_FILES.items():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_text(text, encoding="utf-8")


def _origins(case: ScenarioCase, root: Path) -> dict[str, Origin]:
    origins = {}
    for index, (repository, spec) in enumerate(sorted(case.repositories.items())):
        origins[repository] = create_origin(
            root / f"origin-{index}",
            spec["files"],
            branch=spec["branch"],
            branches=spec.get("branches", ()),
            later=spec.get("later"),
        )
    return origins


def _torn_length(size: int, at: int | None) -> int:
    """How many bytes of a cache of ``size`` bytes a tear at ``at`` keeps: always fewer than ``size``."""
    if at is None:
        return max(1, size // 2) if size > 1 else 0
    kept = at if at >= 0 else size + at
    return min(max(kept, 0), max(size - 1, 0))


def damage_cache(world: World, task_id: str, how: str, at: int | None = None, sweep: bool = False) -> None:
    """Damage a task's cache as *how* names (CACHE-4); a sweep's tear at or past the cache's length is Unreached.

    The kit writes only by replacing a name with a file of its own, so a link, a FIFO or a directory the
    worker left there is never written through or blocked on; a ``tasks`` folder that is not a directory
    of the state directory is left alone (CACHE-1 then judges what the worker made)."""
    tasks = world.state_dir / "tasks"
    if not tasks.exists() and not tasks.is_symlink():
        tasks.mkdir()
    if tasks.is_symlink() or not tasks.is_dir():
        return
    status, current = evidence.read_cache(world.state_dir, task_id)
    cache: dict[str, Any] = (
        dict(current) if status == "ok" and isinstance(current, dict) else {"cache_version": 1, "task_id": task_id}
    )
    # A forged later phase: a worker that believes it skips a submission or a push the journal still owes.
    ahead = dict(cache, phase="result_submitted", seq=int(cache.get("seq") or 0) + 100, idempotency_key="forged")
    name, temporary = f"{task_id}.json", f".{task_id}.json.tmp"
    if how == "missing":
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            (tasks / name).unlink()
    elif how == "torn":
        data = _current_bytes(world, tasks / name) or b'{"cache_version": 1, "phase": "claimed"}'
        if sweep and at is not None and at >= len(data):
            raise Unreached  # a tear sweep has visited every length short of the whole cache
        _put(tasks, name, data[: _torn_length(len(data), at)])
    elif how == "garbage":
        _put(tasks, name, b"\x00\xffnot json at all")
    elif how == "wrong_shape":
        # JSON, but not the CACHE-1 shape: most columns missing, the phase ahead of the journal.
        _put(tasks, name, canonical_json({"cache_version": 1, "task_id": task_id, "phase": "result_submitted"}))
    elif how == "stale":
        cache.update(phase="claimed", seq=1, result_body=None, result_hash=None, idempotency_key=None)
        _put(tasks, name, canonical_json(cache))
    elif how == "newer":
        _put(tasks, name, canonical_json(ahead))
    elif how == "stray_tmp":
        _put(tasks, temporary, b'{"cache_version": 1, "phase": "result_submitted"')
    elif how == "stray_tmp_newer":
        # A whole, well-formed temporary that was never renamed: a worker never reads it as a cache (CACHE-4).
        _put(tasks, temporary, canonical_json(ahead))
    if world.layer is not None:
        # The kit's own damage is durable at once: a later power cut must not quietly repair it.
        for entry in (tasks / name, tasks / temporary):
            if entry.is_file() and not entry.is_symlink():
                _files.sync_path(entry)
        _files.sync_path(tasks)


def _current_bytes(world: World, path: Path) -> bytes | None:
    """The cache's bytes if it is a regular file the kit may read (a FIFO or a link is not), else None."""
    try:
        return _files.read_bytes(world.state_dir, path, evidence.MAX_CACHE)
    except _files.Refused:
        return None


def _put(folder: Path, name: str, data: bytes) -> None:
    """Put a file of the kit's at *name*: written under a name the worker cannot guess, then renamed over it."""
    staged = f".resumekit-{new_token()[:8]}"
    if not _files.create_in(folder, staged, data):
        return
    try:
        os.replace(folder / staged, folder / name)
    except OSError:  # a directory at the name: the damage is not made, and the worker's own cache is judged
        with contextlib.suppress(OSError):
            (folder / staged).unlink()


def plant(world: World, spec: Mapping[str, Any]) -> None:
    """Put an entry in the workspace root as a worker that died would leave it, or a link out of the root."""
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


def decoy_digest(world: World) -> str:
    """The checksum of both decoy trees outside the root."""
    return evidence.tree_digest(world.decoy) + evidence.tree_digest(_sibling(world.workspace_root))


def decoy_entries(world: World) -> dict[str, str]:
    """Every path of both decoy trees outside the root, as ``<tree>/<path>`` (``decoy/keep.txt``,
    ``workspaces-evil/deep/also.txt``) -> its kind and content (``evidence.tree_entries``)."""
    entries = {}
    for tree in (world.decoy, _sibling(world.workspace_root)):
        entries.update({f"{tree.name}/{path}": what for path, what in evidence.tree_entries(tree).items()})
    return entries


def _read_only(target: Path) -> None:
    # The files and the directory holding them lose their write bits (a root user deletes them anyway).
    for path in (target / "src" / "left-over.txt", target / "src"):
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _nested_links(world: World, target: Path) -> None:
    deep = target / "a" / "b"
    deep.mkdir(parents=True, exist_ok=True)
    os.symlink(world.decoy, deep / "escape", target_is_directory=True)  # a link to a tree outside
    os.symlink(world.decoy / "keep.txt", deep / "file-escape")  # a link to a file outside
    os.symlink(target, deep / "loop", target_is_directory=True)  # a link back up: a walk that follows never ends
    os.symlink(deep / "escape", target / "a" / "hop", target_is_directory=True)  # a link to a link


def link_workspaces(world: World) -> None:
    """Put a link to the decoy inside every workspace a killed worker left (CLEAN-4, CLEAN-5)."""
    for name in evidence.listing(world.workspace_root):
        path = world.workspace_root / name
        if name.startswith("task-") and path.is_dir() and not path.is_symlink():
            _files.create_in(path, f"escape-{new_token()[:8]}", link_to=world.decoy)


def swap_for_link(world: World, name: str) -> None:
    """While the worker waits at cleanup_before_remove, swap the checked directory for a link (CLEAN-4)."""
    target = world.workspace_root / name
    moved = world.root / "moved-out"
    moved.mkdir(exist_ok=True)
    os.replace(target, moved / name)
    os.symlink(world.decoy, target, target_is_directory=True)
    world.swapped.add(name)


def tamper(world: World) -> None:
    """Write a file of the kit's into every workspace a worker left: it must never reach a result.

    The name carries a token the worker cannot guess, and the file is created without following
    anything, so that what a worker put in its workspace is never written through (a link out of it, a
    FIFO, a directory)."""
    for name in evidence.listing(world.workspace_root):
        path = world.workspace_root / name
        if name.startswith("task-") and path.is_dir() and not path.is_symlink():
            _files.create_in(path, f"tampered-by-the-kit-{new_token()[:8]}.txt", b"must never reach a result\n")
