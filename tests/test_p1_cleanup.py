"""The reference's startup cleanup removes stale workspaces and nothing outside the root."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from resumekit.reference.p1.cleanup import CleanupRefused, remove_stale_workspaces, remove_tree


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "keep.txt").write_text("precious\n", encoding="utf-8")
    (outside / "deep" / "also.txt").write_text("precious too\n", encoding="utf-8")
    return outside


def _link_or_skip(target: Path, link: Path) -> None:
    try:
        os.symlink(target, link, target_is_directory=target.is_dir())
    except (OSError, NotImplementedError) as error:  # Windows without the symlink privilege
        pytest.skip(f"cannot create a symlink here: {error}")


def test_stale_workspaces_go_and_everything_else_stays(tmp_path: Path, decoy: Path) -> None:
    root = tmp_path / "workspaces"
    (root / "task-a" / "src").mkdir(parents=True)
    (root / "task-a" / "src" / "f.txt").write_text("x", encoding="utf-8")
    (root / "task-b").mkdir()
    (root / "other").mkdir()
    (root / "task-file").write_text("not a workspace", encoding="utf-8")
    (root / "other" / "task-nested").mkdir()  # a task- name deeper down is no candidate (CLEAN-2)
    before = _digest(decoy)
    removed = list(remove_stale_workspaces(root))
    # CLEAN-1 names every task- entry, a regular file included.
    assert removed == ["task-a", "task-b", "task-file"]
    assert sorted(p.name for p in root.iterdir()) == ["other"]
    assert (root / "other" / "task-nested").is_dir()
    assert _digest(decoy) == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="this system has no FIFOs")
def test_a_task_fifo_is_removed_without_being_opened(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    os.mkfifo(root / "task-fifo")  # opening it for reading would block: the removal never opens it
    assert list(remove_stale_workspaces(root)) == ["task-fifo"]
    assert not os.path.lexists(root / "task-fifo")


def test_a_kept_workspace_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    (root / "task-live").mkdir(parents=True)
    (root / "task-dead").mkdir()
    assert list(remove_stale_workspaces(root, keep=lambda name: name == "task-live")) == ["task-dead"]
    assert (root / "task-live").is_dir()


def test_a_task_link_pointing_outside_is_removed_as_a_link(tmp_path: Path, decoy: Path) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    _link_or_skip(decoy, root / "task-evil")
    before = _digest(decoy)
    assert list(remove_stale_workspaces(root)) == ["task-evil"]
    assert not os.path.lexists(root / "task-evil")
    assert _digest(decoy) == before


def test_a_link_inside_a_workspace_is_never_followed(tmp_path: Path, decoy: Path) -> None:
    root = tmp_path / "workspaces"
    (root / "task-x").mkdir(parents=True)
    _link_or_skip(decoy, root / "task-x" / "escape")
    before = _digest(decoy)
    assert list(remove_stale_workspaces(root)) == ["task-x"]
    assert _digest(decoy) == before


def test_a_sibling_sharing_the_roots_prefix_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    sibling = tmp_path / "tasks-evil" / "task-1"
    sibling.mkdir(parents=True)
    root.mkdir()
    with pytest.raises(CleanupRefused):
        remove_tree(root, sibling)
    assert sibling.is_dir()


@pytest.mark.skipif(sys.platform != "win32", reason="Windows only: junctions")
def test_a_task_junction_is_removed_as_a_link_and_its_target_kept(tmp_path: Path, decoy: Path) -> None:
    import _winapi  # type: ignore[import-not-found,unused-ignore]

    root = tmp_path / "workspaces"
    (root / "task-holder").mkdir(parents=True)
    _winapi.CreateJunction(str(decoy), str(root / "task-junction"))
    _winapi.CreateJunction(str(decoy), str(root / "task-holder" / "inner"))
    before = _digest(decoy)
    assert sorted(remove_stale_workspaces(root)) == ["task-holder", "task-junction"]
    assert not os.path.lexists(root / "task-junction")
    assert _digest(decoy) == before


@pytest.mark.skipif(sys.platform != "win32", reason="Windows only: read-only files block deletion")
def test_a_read_only_file_in_a_stale_workspace_is_removed(tmp_path: Path) -> None:
    import stat

    root = tmp_path / "workspaces"
    (root / "task-ro").mkdir(parents=True)
    locked = root / "task-ro" / "locked.txt"
    locked.write_text("x", encoding="utf-8")
    os.chmod(locked, stat.S_IREAD)
    assert list(remove_stale_workspaces(root)) == ["task-ro"]
    assert not (root / "task-ro").exists()
