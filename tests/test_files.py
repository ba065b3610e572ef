"""The kit's workspace snapshots see every change a read could make, not only changed bytes (STORE-6)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from resumekit.conformance import _files


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    runs = tmp_path / "workspace" / "runs"
    runs.mkdir(parents=True)
    (runs / "ledger.jsonl").write_bytes(b'{"id": "a"}\n{"id": "b"}\n')
    return tmp_path / "workspace"


def test_reading_a_file_changes_nothing(workspace: Path) -> None:
    before = _files.snapshot(workspace, settle=True)
    (workspace / "runs" / "ledger.jsonl").read_bytes()
    assert _files.describe_changes(before, _files.snapshot(workspace)) == []


def test_a_rewrite_of_the_same_bytes_is_a_change(workspace: Path) -> None:
    ledger = workspace / "runs" / "ledger.jsonl"
    before = _files.snapshot(workspace, settle=True)
    ledger.write_bytes(ledger.read_bytes())
    [change] = _files.describe_changes(before, _files.snapshot(workspace))
    assert change.startswith("runs/ledger.jsonl changed") and "same bytes" in change


def test_a_touch_is_a_change(workspace: Path) -> None:
    before = _files.snapshot(workspace, settle=True)
    os.utime(workspace / "runs" / "ledger.jsonl")
    [change] = _files.describe_changes(before, _files.snapshot(workspace))
    assert "modification time" in change


def test_a_file_removed_and_made_again_with_its_bytes_and_times_is_a_change(workspace: Path) -> None:
    ledger = workspace / "runs" / "ledger.jsonl"
    before = _files.snapshot(workspace, settle=True)
    data, info = ledger.read_bytes(), ledger.stat()
    ledger.unlink()
    ledger.write_bytes(data)
    os.utime(ledger, ns=(info.st_atime_ns, info.st_mtime_ns))
    changes = _files.describe_changes(before, _files.snapshot(workspace))
    assert any(change.startswith("runs/ledger.jsonl ") for change in changes), changes


def test_a_new_empty_file_is_a_change(workspace: Path) -> None:
    before = _files.snapshot(workspace, settle=True)
    (workspace / "runs" / "recovered.flag").touch()
    changes = _files.describe_changes(before, _files.snapshot(workspace))
    assert "runs/recovered.flag created (file, 0 bytes)" in changes


def test_a_new_empty_folder_is_a_change(workspace: Path) -> None:
    before = _files.snapshot(workspace, settle=True)
    (workspace / "lock").mkdir()
    changes = _files.describe_changes(before, _files.snapshot(workspace))
    assert "lock created (dir, 0 bytes)" in changes


def test_the_kit_backdates_the_damaged_ledger_it_writes_so_a_same_tick_rewrite_shows(workspace: Path) -> None:
    ledger = workspace / "runs" / "ledger.jsonl"
    _files.write_bytes(workspace, ledger, b'{"id": "a"}\n')
    before = _files.snapshot(workspace)  # no settling: the write just happened
    with open(ledger, "r+b") as handle:
        handle.write(b'{"id": "a"}\n')
    assert _files.describe_changes(before, _files.snapshot(workspace)) != []


# -- removing a scratch tree --------------------------------------------------------------------------

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="descriptors of folders are POSIX")

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
def sticky(tmp_path: Path) -> Path:
    """A folder with /tmp's mode (everyone's, sticky), standing for TMPDIR."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    return folder


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@posix_only
def test_removing_a_tree_a_process_keeps_writing_in_never_changes_its_parent(sticky: Path) -> None:
    tree = sticky / "scratch"
    (tree / "deep").mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(tree)], stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"up\n"
        left = _files.remove(tree)
        assert _mode(sticky) == 0o1777
        # Gone (the kit won a moment when the folder was empty), or reported, naming it: never fought forever.
        assert (left is None and not tree.exists()) or (left is not None and str(tree) in left), left
    finally:
        writer.kill()
        writer.wait()
    _files.remove(tree)
    assert _mode(sticky) == 0o1777


@posix_only
def test_a_live_scratch_is_removed_through_the_kits_descriptor_never_through_a_link_at_its_path(
    sticky: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(sticky))
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_bytes(b"precious\n")
    root = _files.scratch("t")
    (root / "sub").mkdir()
    (root / "sub" / "file").write_bytes(b"kit's\n")
    moved = sticky / "moved-away"
    os.rename(root, moved)  # what a process of the same user can do to the kit's folder
    os.symlink(outside, root)
    left = _files.remove(root)
    assert left is not None and str(root) in left and "descriptor" in left
    assert (outside / "sub" / "keep.txt").read_bytes() == b"precious\n"
    assert list(moved.iterdir()) == [], "the kit's own folder was emptied where it was moved"
    assert not os.path.lexists(root), "the link at the kit's name goes, as a link"
    assert _mode(sticky) == 0o1777


@posix_only
def test_a_tree_far_deeper_than_the_folders_held_at_once_is_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    fd = os.open(tree, os.O_RDONLY)
    for _ in range(1500):  # far past the recursion limit of a recursive walk
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    assert _files.remove(tree) is None
    assert not tree.exists()


@posix_only
def test_folders_left_without_any_bits_are_removed_and_nothing_outside_changes_mode(sticky: Path) -> None:
    tree = sticky / "scratch"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "file").write_bytes(b"x")
    os.chmod(tree / "a" / "b", 0)
    os.chmod(tree / "a", 0)
    assert _files.remove(tree) is None
    assert not tree.exists() and _mode(sticky) == 0o1777


@posix_only
def test_a_link_at_a_path_to_remove_goes_as_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious\n")
    os.symlink(outside, tmp_path / "link")
    assert _files.remove(tmp_path / "link") is None
    assert not os.path.lexists(tmp_path / "link") and (outside / "keep.txt").read_bytes() == b"precious\n"


def test_an_interruption_removes_the_live_scratch_of_the_threads_named_and_stops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made: list[Path] = []
    stopped: list[BaseException] = []
    go_on, interrupted = threading.Event(), threading.Event()

    def case() -> None:
        made.append(_files.scratch("case"))
        (made[0] / "work").mkdir()
        go_on.set()
        interrupted.wait(30)
        try:
            made.append(_files.scratch("next"))
        except _files.Interrupted as error:
            stopped.append(error)

    thread = threading.Thread(target=case)
    thread.start()
    assert go_on.wait(30)
    mine = _files.scratch("main")  # the main thread's: not one of the threads named
    hooked: list[Path] = []
    _files.before_removal(made[0], lambda: hooked.append(made[0]))
    assert _files.interrupt([thread]) == []
    interrupted.set()
    thread.join(30)
    assert not made[0].exists() and hooked == [made[0]]
    assert len(made) == 1 and len(stopped) == 1
    assert mine.exists()
    assert _files.remove(mine) is None


@pytest.mark.skipif(sys.platform != "linux", reason="a FUSE mount of the kit's own power layer (Linux)")
def test_removal_never_deletes_through_a_mount_inside_the_tree(tmp_path: Path) -> None:
    from resumekit.conformance import powerloss

    if powerloss.unavailable() is not None:
        pytest.skip(f"no FUSE here: {powerloss.unavailable()}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious\n")
    tree = tmp_path / "tree"
    (tree / "mnt").mkdir(parents=True)
    (tree / "file").write_bytes(b"kit's\n")
    # What a worker of the same user can do: mount a file system that shows a folder outside, in its folder.
    layer = powerloss.PowerLayer(outside, tree / "mnt", sync_delay=0.0)
    layer.start()
    try:
        left = _files.remove(tree)
        assert left is not None and "mnt" in left and "mount" in left
        assert (outside / "keep.txt").read_bytes() == b"precious\n"
        assert not (tree / "file").exists()
    finally:
        layer.stop()
    assert _files.remove(tree) is None and not tree.exists()


@posix_only
def test_a_file_at_a_path_to_remove_goes_and_removal_never_raises(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    assert _files.remove(tmp_path / "file") is None and not (tmp_path / "file").exists()
    assert _files.remove(tmp_path / "absent") is None
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "inside").write_bytes(b"x")
    os.chmod(tmp_path / "root", 0)  # the root itself left without bits
    assert _files.remove(tmp_path / "root") is None and not (tmp_path / "root").exists()
