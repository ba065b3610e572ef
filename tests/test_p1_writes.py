"""The kit writes into a P1 world only where the worker cannot redirect it: never through a link it planted.

The worker runs as the same user as the kit and knows the scratch paths, so these tests do to the kit's
world what a worker could: swap the workspace root or the state directory for a link to a folder outside,
or put a link at the name of a file the kit makes next. Each step of the kit must then leave the folder
outside as it was.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from resumekit.conformance.adapters import process_factory
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1 import world as worlds
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.scenario import _with_scratch_left
from resumekit.conformance.p1.worker import Worker
from resumekit.conformance.results import Outcome
from resumekit.conformance.runner import result_for

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(sys.platform == "win32", reason="links need privileges on Windows; the fallback is by path"),
]

OUTSIDE = {"keep.txt": b"precious\n", "tasks/t-capture.json": b'{"mine": true}\n', "task-1/notes.txt": b"mine\n"}


def _case() -> ScenarioCase:
    (case,) = [c for c in load_suite().cases if c.id == "p1-capture-completes"]
    assert isinstance(case, ScenarioCase)
    return case


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry below *root*: a file's bytes, a folder's or a link's kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        found[name] = "link" if path.is_symlink() else "dir" if path.is_dir() else path.read_bytes()
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the kit's world, where a worker's link points."""
    folder = tmp_path / "outside"
    for name, data in OUTSIDE.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture
def world() -> Iterator[worlds.World]:
    with worlds.open_world(_case()) as made:
        yield made


def _swap_for_link(path: Path, target: Path) -> None:
    """What a worker can do to any folder of the world: rename it away and put a link in its place."""
    os.rename(path, path.with_name(path.name + "-moved-away"))
    os.symlink(target, path, target_is_directory=True)


STEPS: dict[str, Callable[[worlds.World], None]] = {
    "tamper": worlds.tamper,
    "link_workspaces": worlds.link_workspaces,
    "plant": lambda world: worlds.plant(world, {"name": "task-planted", "nested_links": True, "read_only": True}),
    "swap_for_link": lambda world: worlds.swap_for_link(world, "task-1"),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_no_step_writes_through_a_workspace_root_swapped_for_a_link(
    world: worlds.World, outside: Path, step: str
) -> None:
    (world.workspace_root / "task-1").mkdir()  # a workspace the worker left
    before = _tree(outside)
    _swap_for_link(world.workspace_root, outside)
    STEPS[step](world)
    assert _tree(outside) == before
    moved = world.workspace_root.with_name(world.workspace_root.name + "-moved-away")
    assert _tree(moved) != {"task-1": "dir"}, "the step went to the root the kit made, where it was moved"


@pytest.mark.parametrize("how", ["torn", "garbage", "stale", "newer", "missing", "stray_tmp"])
def test_cache_damage_never_goes_through_a_state_directory_swapped_for_a_link(
    world: worlds.World, outside: Path, how: str
) -> None:
    before = _tree(outside)
    _swap_for_link(world.state_dir, outside)  # as at the moment of a kill
    worlds.damage_cache(world, "t-capture", how)
    assert _tree(outside) == before


def test_cache_damage_replaces_a_link_at_the_caches_name_and_never_follows_it(
    world: worlds.World, outside: Path
) -> None:
    (world.state_dir / "tasks").mkdir()
    os.symlink(outside / "keep.txt", world.state_dir / "tasks" / "t-capture.json")
    worlds.damage_cache(world, "t-capture", "garbage")
    assert (outside / "keep.txt").read_bytes() == b"precious\n"
    cache = world.state_dir / "tasks" / "t-capture.json"
    assert not cache.is_symlink() and cache.read_bytes().startswith(b"\x00\xff")


@pytest.fixture
def worker(world: worlds.World, tmp_path: Path) -> Iterator[Worker]:
    control = ControlPlane(log_path=tmp_path / "control-plane.jsonl")
    control.start()
    started = Worker(_case(), process_factory("reference"), world, control)
    try:
        yield started
    finally:
        started.close()
        control.close()


def test_the_next_journal_log_replaces_a_link_planted_at_its_name(
    world: worlds.World, worker: Worker, outside: Path
) -> None:
    os.symlink(outside / "keep.txt", world.root / "journal-w1.jsonl")
    worker.start(None)
    assert (outside / "keep.txt").read_bytes() == b"precious\n"
    log = world.root / "journal-w1.jsonl"
    assert not log.is_symlink() and log.is_file()


def test_the_tools_announce_file_and_flag_replace_links_planted_at_their_names(
    world: worlds.World, worker: Worker, outside: Path
) -> None:
    for name in ("tool-announce", "tool-may-run"):
        os.symlink(outside / "keep.txt", world.root / name)
    worker.start(None, tool={"seconds": 0.1})
    assert (outside / "keep.txt").read_bytes() == b"precious\n"
    for name in ("tool-announce", "tool-may-run"):
        assert not (world.root / name).is_symlink() and (world.root / name).is_file()


def test_a_directory_at_the_journal_logs_name_fails_the_case_naming_it(world: worlds.World, worker: Worker) -> None:
    from resumekit.conformance.p1.world import Stop

    (world.root / "journal-w1.jsonl").mkdir()
    with pytest.raises(Stop) as caught:
        worker.start(None)
    (found,) = caught.value.mismatches
    assert (found.clause, found.check) == ("ADP-3", "processes.kit_files") and "journal-w1.jsonl" in str(caught.value)


_WRITER = """
import os, sys
folder = sys.argv[1]
print("up", flush=True)
number = 0
while os.path.isdir(folder):
    number += 1
    try:
        open(os.path.join(folder, f"more-{number}"), "w").close()
    except OSError:
        pass
"""


@pytest.fixture
def sticky_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A TMPDIR of the kit's scratch folders with /tmp's mode: everyone's, sticky."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_world_a_process_keeps_writing_in_is_reported_and_tmpdir_keeps_its_mode(sticky_tmpdir: Path) -> None:
    with worlds.open_world(_case()) as world:
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(world.root)], stdout=subprocess.PIPE)
        assert writer.stdout is not None and writer.stdout.readline() == b"up\n"
    try:
        assert stat.S_IMODE(sticky_tmpdir.stat().st_mode) == 0o1777
        assert world.left is not None or not world.root.exists()
        if world.left is not None:
            assert str(world.root) in world.left
    finally:
        writer.kill()
        writer.wait()


def test_a_scenario_folder_left_behind_fails_wrk5_in_strict_and_is_said_in_core(world: worlds.World) -> None:
    passed = result_for(_case(), Outcome.PASSED, message=None)
    assert _with_scratch_left(passed, world, "strict") == passed  # nothing left
    world.left = "the kit could not remove '/x' in 8 tries"
    strict = _with_scratch_left(passed, world, "strict")
    assert strict.outcome is Outcome.FAILED
    assert [(m.clause, m.check) for m in strict.mismatches] == [("WRK-5", "processes.scratch_left")]
    core = _with_scratch_left(passed, world, "core")
    assert core.outcome is Outcome.PASSED and "'/x'" in (core.message or "")
    errored = dataclasses.replace(passed, outcome=Outcome.ERRORED, message="boom")
    assert _with_scratch_left(errored, world, "strict").outcome is Outcome.ERRORED
    world.left = None
