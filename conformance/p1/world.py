"""The world of one P1 scenario: everything the kit makes for the worker to touch, and the kit's changes to it.

A scratch directory holds a workspace root, a state directory (under power loss the mount of the kit's
FUSE layer), bare git origins and two decoy trees outside the root. The steps of a scenario change that
world as a crash or a careless neighbour would: a cache damaged, a stale workspace planted, a link to the
decoys put where a cleanup must not follow it, a checked directory swapped for a link (docs/spec/p1.md,
CACHE, CLEAN).

The worker can reach every folder of the world, and can rename any of them and put a link in its place. So
the kit holds each folder it makes by a descriptor from the moment it makes it (``World.dirs``,
``_files.Folder``) and makes every change of its own relative to one: nothing is written through a link the
kit did not make, and a folder the worker made (a workspace, ``tasks/``) is opened without following one.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, new_token, sweep_marked
from resumekit.conformance.events import Event
from resumekit.conformance.fault_models import NONE_SCRIPTED, PROCESS_CRASH, Abort
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.history import History
from resumekit.conformance.p1 import evidence, journal_reader, model
from resumekit.conformance.p1.canonical import canonical_json
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.checks import rules
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


class Stop(Exception):
    """The scenario cannot go on from what a worker just did, which the harness recorded and a rule that stops
    scenarios found wrong: its mismatches are the verdict (``checks.rules.halt``)."""

    def __init__(self, mismatches: Sequence[Mismatch]) -> None:
        super().__init__(mismatches[0].note if mismatches else "stopped")
        self.mismatches = tuple(mismatches)


@dataclass
class World:
    """Everything the kit made for one scenario, and what it has seen so far."""

    root: Path
    workspace_root: Path
    state_dir: Path
    decoy: Path
    origins: dict[str, Origin]
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # template name -> task as issued
    # Everything the kit did and saw in this world, in order: what the checks judge (``views``, ``checks``).
    history: History = field(default_factory=History)
    start_listing: dict[str, list[str]] = field(default_factory=dict)  # worker name -> root listing at start
    first_seen: set[str] = field(default_factory=set)
    kill_armed: set[str] = field(default_factory=set)
    killed_at: list[str] = field(default_factory=list)  # where each kill came, in order (the fault model)
    # Kills the running worker through the process guard: None once it is killed, else why it could not be.
    kill_current: Callable[[], str | None] | None = None
    kill_event: threading.Event = field(default_factory=threading.Event)
    kill_failed: str | None = None  # why the last kit-side kill did not land: the kit's failure, not the worker's
    changed_at: int = 0  # the control plane's log length at the kit's last change of the world
    layer: PowerLayer | None = None  # the power-loss layer over state_dir, under power loss
    profile: str = "strict"  # the profile the run compares in: the rules that stop a scenario read it
    exports: int = 0
    kills: int = 0  # soak rounds that killed the worker
    swapped: set[str] = field(default_factory=set)  # entries the kit swapped for a link (CLEAN-4 lets them stay)
    root_link: Path | None = None  # a link to the workspace root, given to the workers in its place (CLEAN-3)
    kept: set[str] = field(default_factory=set)  # entries the kit planted without the task- prefix (CLEAN-2)
    blocked_at: list[str] = field(default_factory=list)  # every failpoint a worker blocked at, in order
    until_unreached: bool = False  # a campaign run: a worker idle before its armed point ends the loop
    budget: float = SCENARIO_BUDGET  # seconds of real time the run may take (a soak's own budget)
    tool_flag: Path | None = None  # while this file exists the kit's tool may run (p1.tools); set once one did
    held: list[LineProcess] = field(default_factory=list)  # killed adapters whose trees end with the scenario
    watch_next: bool = False  # a worker running the tool was killed: the next one's first request starts the watch
    watch_for: str | None = None  # the worker whose first request starts the WRK-5 watch
    watch: RootWatch | None = None
    # worker name -> (workspace root, state directory), for a scenario's second worker (its own pair)
    homes: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    # every folder the kit made, by its path, held by a descriptor from when the kit made it
    dirs: dict[Path, _files.Folder] = field(default_factory=dict)
    left: str | None = None  # what the kit could not remove of the world once the scenario was over
    # in the environment of every adapter process of this world (RESUMEKIT_CASE_TOKEN), to find what they left
    case_token: str = field(default_factory=new_token)
    # Held while a journal is read and its read recorded: JNL-4 compares consecutive reads, so they must
    # stand in the history in the order they were made, from the harness and the control plane's threads.
    snapshot_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kill_model(self) -> str:
        """The fault model a kill in this world is: a power cut under power loss, a process crash otherwise."""
        return POWER_LOSS_MODEL if self.layer is not None else KILL_MODEL

    def folder(self, path: Path) -> _files.Folder:
        """The kit's folder at *path* (the scratch root, a workspace root, a state directory), held since it
        was made: whatever now stands at the path, the kit writes into the folder it made."""
        return self.dirs[path]

    @contextlib.contextmanager
    def state_folder(self) -> Iterator[_files.Folder]:
        """The first worker's state directory: held since the kit made it; under power loss the layer's mount,
        opened now (a mount point cannot be swapped for a link, and a descriptor held inside the mount would
        keep it busy when a cut unmounts it)."""
        if self.state_dir in self.dirs:
            yield self.dirs[self.state_dir]
            return
        with _files.Folder.open(self.state_dir) as opened:
            yield opened

    def kit_folder(self, name: str) -> _files.Folder:
        """A folder of the kit's own directly in the scratch root, made (and held) on first use."""
        path = self.root / name
        if path not in self.dirs:
            self.dirs[path] = self.folder(self.root).folder(name)
        return self.dirs[path]

    def stop_tool(self) -> None:
        """Take the kit's tool's flag away (a surviving tool stops at its next write), through the held root."""
        if self.tool_flag is not None and self.root in self.dirs:
            with contextlib.suppress(ValueError, _files.Refused):  # the world is gone already
                self.folder(self.root).unlink(self.tool_flag.name)

    def durable_journal(self) -> list[model.Row]:
        """The journal as a power cut now would leave it (EVID-3 read of the durable view)."""
        assert self.layer is not None
        self.exports += 1
        # A name nobody can know beforehand: the layer makes the folder, and refuses anything already there.
        target = self.root / f"durable-{self.exports}-{new_token()[:8]}"
        try:
            self.layer.export(target)
            return journal_reader.read_journal(target)
        finally:
            _files.remove(target)

    def read_journal(self, state_dir: Path) -> list[model.Row]:
        """The journal of a worker's state directory, read in the folder the kit made and holds (whatever a
        process of the worker's put at its path since); JournalUnreadable when it cannot be read (JNL-1)."""
        if state_dir == self.state_dir:
            with self.state_folder() as folder:
                return journal_reader.read_journal(state_dir, folder)
        return journal_reader.read_journal(state_dir, self.dirs.get(state_dir))

    def observe_journal(
        self, read: Callable[[], list[model.Row]], *, second: bool = False, why: str = "wait", **context: Any
    ) -> list[model.Row]:
        """The rows *read* returns, recorded as a read of the first worker's journal (or the second's).

        Reads are made one at a time under ``snapshot_lock``, so each recorded read holds what the journal
        held no earlier than the one before it. A read that raises records nothing.
        """
        with self.snapshot_lock:
            rows = read()
            self.record_rows(rows, second=second, why=why, **context)
        return rows

    def record_rows(self, rows: list[model.Row], *, second: bool = False, why: str, **context: Any) -> None:
        """Record a read of a journal: *why* it was read (``start``, ``moment``, ``wait``, ``final``, ...)."""
        self.history.record(
            "journal", "read", journal="second" if second else "first", why=why, rows=[dict(r) for r in rows], **context
        )

    def record(self, actor: str, kind: str, **data: Any) -> Event | None:
        """Record one thing the kit did or saw in this world."""
        return self.history.record(actor, kind, **data)

    def judge_now(self, event: Event | None) -> None:
        """Ask the rules that stop a scenario about *event*, just recorded: Stop when one of them fails on it."""
        found = rules.halt_at(event, self.profile)
        if found:
            raise Stop(found)

    def stop(self, actor: str, kind: str, **data: Any) -> Stop:
        """Record what a worker did that the scenario cannot go on from, and the Stop the rules make of it."""
        event = self.record(actor, kind, **data)
        return Stop(rules.halt_at(event, self.profile) or rules.unjudged_stop(kind, event))

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
    marked with the world's token left) after; what could not be removed is the world's ``left``."""
    root = _files.scratch("p1")
    layer = None
    dirs: dict[Path, _files.Folder] = {}
    world: World | None = None
    try:
        top = dirs[root] = _files.Folder.open(root)
        workspace_root, state_dir, decoy = root / "workspaces", root / "state", root / "decoy"
        dirs[workspace_root] = top.folder(workspace_root.name)
        if power is None:
            dirs[state_dir] = top.folder(state_dir.name)
        else:
            layer = PowerLayer(root / "state-backing", state_dir, power.sync_delay)
            _files.before_removal(root, layer.stop)  # Ctrl-C: the mount goes before the folder
            _mount(case, layer)
        _make_decoys(top, decoy, workspace_root)
        world = World(root, workspace_root, state_dir, decoy, _origins(case, root), layer=layer, dirs=dirs)
        _files.before_removal(root, functools.partial(sweep_marked, world.case_token, 0.0))
        try:
            yield world
        finally:
            end_tools(world)
            # Whatever ended the run (a verdict, a step that failed), nothing marked as the world's outlives it.
            sweep_marked(world.case_token, 0.0)
    finally:
        for folder in dirs.values():
            folder.close()  # before the layer stops: a descriptor inside a mount keeps it busy
        if layer is not None:
            layer.stop()
        left = _files.remove(root)
        if world is not None:
            world.left = left


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


def _make_decoys(top: _files.Folder, decoy: Path, workspace_root: Path) -> None:
    # Two decoys outside the root: one elsewhere, and a sibling whose name has the root's as a prefix,
    # which a boundary check by string prefix takes for the inside (CLEAN-3).
    for tree in (decoy, _sibling(workspace_root)):
        with top.folder(tree.name) as folder:
            for name, text in DECOY_FILES.items():
                *parents, file = name.split("/")
                _put_nested(folder, parents, file, text.encode("utf-8"))


def _put_nested(folder: _files.Folder, parents: list[str], name: str, data: bytes) -> None:
    """A file of the kit's at *parents*/*name* below *folder*, each parent made or opened without a link."""
    if not parents:
        folder.put(name, data)
        return
    with folder.folder(parents[0]) as child:
        _put_nested(child, parents[1:], name, data)


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

    The kit writes only by replacing a name with a file of its own, inside ``tasks/`` opened without following
    a link from the state directory it holds, so a link, a FIFO or a directory the worker left (a state
    directory swapped for a link at the kill included) is never written through or blocked on; a ``tasks``
    that is not a directory of the state directory is left alone (CACHE-1 then judges what the worker made)."""
    try:
        with world.state_folder() as state:
            tasks = state.folder("tasks")
    except _files.Refused:
        return
    with tasks:
        _damage(world, tasks, task_id, how, at, sweep)
        if world.layer is not None:
            tasks.sync()  # the kit's own damage is durable at once: a later power cut must not quietly repair it


def _damage(world: World, tasks: _files.Folder, task_id: str, how: str, at: int | None, sweep: bool) -> None:
    status, current = evidence.read_cache(world.state_dir, task_id)
    cache: dict[str, Any] = (
        dict(current) if status == "ok" and isinstance(current, dict) else {"cache_version": 1, "task_id": task_id}
    )
    # A forged later phase: a worker that believes it skips a submission or a push the journal still owes.
    ahead = dict(cache, phase="result_submitted", seq=int(cache.get("seq") or 0) + 100, idempotency_key="forged")
    name, temporary = f"{task_id}.json", f".{task_id}.json.tmp"
    put = functools.partial(_put, tasks, durable=world.layer is not None)
    if how == "missing":
        tasks.unlink(name)  # a directory at the name stays
    elif how == "torn":
        data = _current_bytes(world, world.state_dir / "tasks" / name) or b'{"cache_version": 1, "phase": "claimed"}'
        if sweep and at is not None and at >= len(data):
            raise Unreached  # a tear sweep has visited every length short of the whole cache
        put(name, data[: _torn_length(len(data), at)])
    elif how == "garbage":
        put(name, b"\x00\xffnot json at all")
    elif how == "wrong_shape":
        # JSON, but not the CACHE-1 shape: most columns missing, the phase ahead of the journal.
        put(name, canonical_json({"cache_version": 1, "task_id": task_id, "phase": "result_submitted"}))
    elif how == "stale":
        cache.update(phase="claimed", seq=1, result_body=None, result_hash=None, idempotency_key=None)
        put(name, canonical_json(cache))
    elif how == "newer":
        put(name, canonical_json(ahead))
    elif how == "stray_tmp":
        put(temporary, b'{"cache_version": 1, "phase": "result_submitted"')
    elif how == "stray_tmp_newer":
        # A whole, well-formed temporary that was never renamed: a worker never reads it as a cache (CACHE-4).
        put(temporary, canonical_json(ahead))


def _current_bytes(world: World, path: Path) -> bytes | None:
    """The cache's bytes if it is a regular file the kit may read (a FIFO or a link is not), else None."""
    try:
        return _files.read_bytes(world.state_dir, path, evidence.MAX_CACHE)
    except _files.Refused:
        return None


def _put(folder: _files.Folder, name: str, data: bytes, *, durable: bool) -> None:
    """Put a file of the kit's at *name*: written under a name the worker cannot guess, then renamed over it."""
    with contextlib.suppress(_files.Refused):  # a directory at the name: the damage is not made, and the
        folder.put(name, data, sync=durable)  # worker's own cache is judged


def plant(world: World, spec: Mapping[str, Any]) -> None:
    """Put an entry in the workspace root as a worker that died would leave it, or a link out of the root."""
    root = world.folder(world.workspace_root)
    name = spec["name"]
    if spec.get("link_to_decoy") or spec.get("link_to_sibling"):
        to = world.decoy if spec.get("link_to_decoy") else _sibling(world.workspace_root)
        root.link(name, to)
        _planted_link(world, name, to)
        return
    if spec.get("file"):
        root.create(name, b"a stale file, no workspace\n")
        return
    if spec.get("fifo"):
        root.fifo(name)
        return
    if spec.get("nested_task"):
        # A task- name one level down is no candidate of its own (CLEAN-2): it stays with its parent.
        with root.folder(name) as parent, parent.folder("task-nested") as nested:
            nested.create("kept.txt", b"inside an entry that is no workspace\n")
        world.kept.add(name)
        return
    with root.folder(name) as target, target.folder("src") as src:
        # The files and the directory holding them lose their write bits when read only (a root user
        # deletes them anyway).
        read_only = bool(spec.get("read_only"))
        src.put("left-over.txt", b"from a worker that died\n", 0o444 if read_only else 0o666)
        if spec.get("link_inside_to_decoy"):
            target.link("escape", world.decoy)
            _planted_link(world, f"{name}/escape", world.decoy)
        if spec.get("nested_links"):
            _nested_links(world, target)
            _planted_link(world, f"{name}/a", world.decoy)
        if read_only:
            src.chmod(0o555)


def kept_entries(world: World, root: Path) -> dict[str, str]:
    """Every path of the entries the kit planted under *root* without the ``task-`` prefix, as ``<name>/<path>``
    (the entry itself as ``<name>``), read without following a link: what cleanup never touches (CLEAN-2)."""
    if root != world.workspace_root:
        return {}
    entries = {}
    for name in sorted(world.kept):
        path = root / name
        if not path.is_dir() or path.is_symlink():
            entries[name] = "link" if path.is_symlink() else ("absent" if not path.exists() else "other")
            continue
        entries[name] = "dir"
        entries.update({f"{name}/{inner}": what for inner, what in evidence.tree_entries(path).items()})
    return entries


def _planted_link(world: World, name: str, target: Path) -> None:
    """Record that the entry *name* of the root is, or holds, a link the kit made to the decoy tree *target*:
    CLEAN-4 holds that tree to be left untouched, CLEAN-3 the sibling ``<root>-evil`` in particular."""
    world.record("kit", "planted-link", name=name, tree=target.name, sibling=target == _sibling(world.workspace_root))


def given_root(world: World) -> Path:
    """The path the workers are told is the workspace root: the root itself, or a link to it that the kit
    made in its scratch (``root_through_link``), which a worker resolves once (CLEAN-3)."""
    return world.root_link if world.root_link is not None else world.workspace_root


def root_through_link(world: World) -> None:
    """From now on, tell each worker the workspace root through a symbolic link to it (CLEAN-3)."""
    name = world.workspace_root.name + "-link"
    world.folder(world.root).link(name, world.workspace_root)
    world.root_link = world.root / name
    world.record("kit", "root-through-link", link=str(world.root_link))


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


def _nested_links(world: World, target: _files.Folder) -> None:
    with target.folder("a") as a, a.folder("b") as deep:
        deep.link("escape", world.decoy)  # a link to a tree outside
        deep.link("file-escape", world.decoy / "keep.txt")  # a link to a file outside
        deep.link("loop", target.path)  # a link back up: a walk that follows never ends
        a.link("hop", deep.path / "escape")  # a link to a link


def _workspaces(world: World) -> Iterator[_files.Folder]:
    """Every ``task-*`` directory a worker left in the workspace root, opened without following a link (a
    link or anything else at such a name is left alone)."""
    root = world.folder(world.workspace_root)
    for name in root.names():
        if name.startswith("task-"):
            workspace = root.child(name)
            if workspace is not None:
                with workspace:
                    yield workspace


def link_workspaces(world: World) -> None:
    """Put a link to the decoy inside every workspace a killed worker left (CLEAN-4, CLEAN-5)."""
    for workspace in _workspaces(world):
        name = f"escape-{new_token()[:8]}"
        with contextlib.suppress(_files.Refused):
            workspace.link(name, world.decoy)
            _planted_link(world, f"{workspace.path.name}/{name}", world.decoy)


def swap_for_link(world: World, name: str) -> None:
    """While the worker waits at cleanup_before_remove, swap the checked directory for a link (CLEAN-4)."""
    root = world.folder(world.workspace_root)
    root.move(name, world.kit_folder("moved-out"), name)
    root.link(name, world.decoy)
    world.swapped.add(name)
    world.record("kit", "swapped-for-link", name=name)
    _planted_link(world, name, world.decoy)  # CLEAN-4 lets it stay: CLEAN-1 does not count it


def tamper(world: World) -> None:
    """Write a file of the kit's into every workspace a worker left: it must never reach a result.

    The name carries a token the worker cannot guess, and the file is created exclusively in the workspace
    opened without following a link from the workspace root the kit holds, so that what a worker put in or
    around its workspace is never written through (a link out of it, a FIFO, a directory, a workspace root
    swapped for a link)."""
    written = []
    for workspace in _workspaces(world):
        name = f"tampered-by-the-kit-{new_token()[:8]}.txt"
        with contextlib.suppress(_files.Refused):
            workspace.create(name, b"must never reach a result\n")
            written.append(name)
    world.record("kit", "tampered", files=written)  # RESUME-3: no result names them (restarts.replayed)
