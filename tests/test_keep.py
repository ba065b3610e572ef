"""``resumekit run --keep-failed DIR``: a failing case's world kept safely, and the command it notes runs the case
again with the same failure.

The copy reads what the implementation left, so it is tried on a hand-made world holding what a hostile
worker could leave: links to a file and to a folder outside, a FIFO, a file larger than the kit copies, a
world folder swapped for a link; DIR itself may hold a link at a case's name. Nothing outside DIR may change,
no link may be copied or followed, no FIFO opened, and the note must list what was left out.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from resumekit.conformance import _keep_copy, keep
from resumekit.conformance._keep_copy import MAX_FILE
from resumekit.conformance.cli import COMMANDS, EXIT_NOT_CERTIFIED, EXIT_USAGE, _parser
from tests.support import GUARD, ROOT, python_command, run_resumekit

POSIX = sys.platform != "win32"
SECRET = b"a secret outside the world\n"
RERUN = keep.Rerun("python:some.adapter:build", 7, ("--profile", "core"), "/where/it/ran")


def _tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry below *root*, never following a link: relative path -> (kind, bytes or link target)."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = ("dir", b"")
            elif path.is_file():
                found[relative] = ("file", path.read_bytes())
            else:
                found[relative] = ("other", b"")
    return found


def _world(tmp_path: Path) -> tuple[Path, Path]:
    """A world as a hostile worker could leave it, and a folder outside it with a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    world = tmp_path / "world"
    state = world / "state"
    (state / "tasks").mkdir(parents=True)
    (state / "checkpoints.sqlite3").write_bytes(b"SQLite format 3\x00 journal")
    (state / "tasks" / "t-1.json").write_bytes(b'{"cache_version": 1}')
    (state / "big.bin").touch()
    os.truncate(state / "big.bin", MAX_FILE + 1)  # sparse: larger than the kit copies, cheap to make
    if POSIX:
        os.symlink(outside / "secret.txt", state / "tasks" / "t-2.json")
        os.symlink(outside, state / "escape")
        os.mkfifo(state / "journal-wal.fifo")
        os.symlink(outside, world / "state-swapped")  # a world folder swapped for a link
    (world / "control-plane.jsonl").write_bytes(b'{"kind": "request"}\n')
    workspace = world / "workspaces" / "task-t-1-a1" / "src"
    workspace.mkdir(parents=True)
    (workspace / "left-over.txt").write_bytes(b"x")
    if POSIX:
        os.symlink(outside, workspace.parent / "escape")
    return world, outside


def _keep(keeper: keep.Keeper, world: Path, case_id: str = "p1-some-case") -> Path:
    """``keep`` on the world, in a thread: a FIFO opened for reading would block it, and the guard says so."""
    kept: list[Path] = []
    work = threading.Thread(
        target=lambda: kept.append(
            keeper.keep(
                case_id,
                kind="p1",
                copies={"state": world / "state", "control-plane.jsonl": world / "control-plane.jsonl",
                        "state-swapped": world / "state-swapped", "missing": world / "nothing-here"},
                listings={"workspaces-root": world / "workspaces"},
                history=[{"seq": 0, "atMs": 0.0, "actor": "kit", "kind": "step", "data": {"index": 0}}],
                result={"id": case_id, "outcome": "failed", "message": "2 check(s) failed", "clauses": ["COMMIT-3"]},
                about={"state": "the worker's state directory"},
            )
        ),
        daemon=True,
    )  # fmt: skip
    work.start()
    work.join(GUARD)
    assert not work.is_alive(), "the copy blocked (on the FIFO?)"
    return kept[0]


def test_the_copy_takes_regular_files_only_and_lists_every_link_fifo_and_oversized_file(tmp_path: Path) -> None:
    world, outside = _world(tmp_path)
    before_world, before_outside = _tree(world), _tree(outside)
    target = tmp_path / "kept"
    keep.prepare(target)
    where = _keep(keep.Keeper(target, RERUN), world)
    copied = _tree(where)
    assert copied["state/checkpoints.sqlite3"] == ("file", b"SQLite format 3\x00 journal")
    assert copied["state/tasks/t-1.json"] == ("file", b'{"cache_version": 1}')
    assert copied["control-plane.jsonl"] == ("file", b'{"kind": "request"}\n')
    assert {kind for kind, _ in copied.values()} == {"file", "dir"}  # no link, no FIFO
    assert "state/big.bin" not in copied
    assert not any(SECRET in data for kind, data in copied.values() if isinstance(data, bytes))
    note = (where / "README.txt").read_text(encoding="utf-8")
    assert f"too big    state/big.bin  ({MAX_FILE + 1} bytes, more than {MAX_FILE})" in note
    assert "missing    missing" in note
    if POSIX:
        assert f"link       state/tasks/t-2.json  (-> {outside / 'secret.txt'}, not followed)" in note
        assert f"link       state/escape  (-> {outside}, not followed)" in note
        assert "fifo       state/journal-wal.fifo  (not a regular file: never opened)" in note
        assert f"link       state-swapped  (-> {outside}, not followed)" in note
        assert "state-swapped" not in copied
        listing = (where / "workspaces-root.listing.txt").read_text(encoding="utf-8")
        assert f"link   task-t-1-a1/escape -> {outside}" in listing
        assert "file   task-t-1-a1/src/left-over.txt (1 bytes)" in listing
    assert _tree(world) == before_world and _tree(outside) == before_outside  # read, never changed


def test_the_note_holds_the_one_command_that_reruns_the_case_and_the_history_is_kept_whole(tmp_path: Path) -> None:
    world, _ = _world(tmp_path)
    keep.prepare(tmp_path / "kept")
    where = _keep(keep.Keeper(tmp_path / "kept", RERUN), world)
    command = (where / "rerun.txt").read_text(encoding="utf-8").strip()
    words = ["resumekit", "run", "--adapter", "python:some.adapter:build", "--only", "p1-some-case", "--kind", "p1",
             "--seed", "7", "--profile", "core"]  # fmt: skip
    assert (shlex.split(command) if POSIX else command.split()) == words
    assert f"  {command}" in (where / "README.txt").read_text(encoding="utf-8")
    assert "from /where/it/ran:" in (where / "README.txt").read_text(encoding="utf-8")
    lines = (where / "history.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["step"]
    assert json.loads((where / "result.json").read_text(encoding="utf-8"))["clauses"] == ["COMMIT-3"]


def test_dir_must_be_new_empty_or_the_kits_own(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("a user's file")
    with pytest.raises(keep.KeepError, match="holds files the kit did not put there"):
        keep.prepare(foreign)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(keep.KeepError, match=r"cannot be made|is not a directory"):
        keep.prepare(a_file)
    if POSIX:
        empty = tmp_path / "empty"
        empty.mkdir()
        os.symlink(empty, tmp_path / "to-empty")
        with pytest.raises(keep.KeepError, match="not a directory"):
            keep.prepare(tmp_path / "to-empty")
        assert list(empty.iterdir()) == []
    fresh = tmp_path / "deep" / "fresh"
    keep.prepare(fresh)
    assert [p.name for p in fresh.iterdir()] == [keep.MARK]
    keep.prepare(fresh)  # an earlier --keep-failed's DIR is taken again


@pytest.mark.skipif(not POSIX, reason="a link in DIR: made here with os.symlink, which Windows gives only to some")
def test_a_link_in_dir_at_a_cases_name_is_never_written_through(tmp_path: Path) -> None:
    world, outside = _world(tmp_path)
    target = tmp_path / "kept"
    keep.prepare(target)
    os.symlink(outside, target / "p1-some-case")
    before = _tree(outside)
    where = _keep(keep.Keeper(target, RERUN), world)
    assert where == target / "p1-some-case-2"
    assert _tree(outside) == before
    assert (target / "p1-some-case").is_symlink()
    again = _keep(keep.Keeper(target, RERUN), world)
    assert again == target / "p1-some-case-3"


def test_the_runs_bytes_are_bounded_and_what_they_leave_out_is_listed(tmp_path: Path) -> None:
    world, _ = _world(tmp_path)
    keep.prepare(tmp_path / "kept")
    where = _keep(keep.Keeper(tmp_path / "kept", RERUN, total=25), world)  # room for the journal, not the cache
    note = (where / "README.txt").read_text(encoding="utf-8")
    assert (where / "state" / "checkpoints.sqlite3").is_file()
    assert not (where / "state" / "tasks" / "t-1.json").exists()
    assert "not kept   state/tasks/t-1.json  (the run's bytes for kept worlds are used up)" in note


def test_a_folder_of_more_entries_than_a_case_looks_at_is_walked_only_in_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = tmp_path / "world"
    (world / "state").mkdir(parents=True)
    for n in range(10):
        (world / "state" / f"f{n}").write_bytes(b"x")
    monkeypatch.setattr(_keep_copy, "MAX_ENTRIES", 4)
    monkeypatch.setattr(_keep_copy, "MAX_FILES", 3)
    keep.prepare(tmp_path / "kept")
    where = keep.Keeper(tmp_path / "kept", RERUN).keep(
        "p1-many", copies={"state": world / "state"}, listings={"state": world / "state"}, history=(), result={}
    )
    assert len(list((where / "state").iterdir())) == 3
    note = (where / "README.txt").read_text(encoding="utf-8")
    assert "too many   state  (more than 4 entries in the case: the rest not looked at)" in note
    assert re.search(r"too many   state/f\d  \(more than 3 files in one case\)", note)
    listing = (where / "state.listing.txt").read_text(encoding="utf-8").splitlines()
    assert len(listing) == 1 + 3 + 1 and listing[-1] == "... (more than 3 entries: the rest not listed)"


def test_run_refuses_a_keep_failed_dir_that_holds_other_files_before_starting(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    out, err = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(["run", "--adapter", "reference", "--keep-failed", str(tmp_path)])
    assert COMMANDS["run"](arguments, out, err) == EXIT_USAGE
    assert "--keep-failed" in err.getvalue() and "holds files the kit did not put there" in err.getvalue()
    assert "cases:" not in out.getvalue()  # no case ran


BUG = "recommits-after-commit-done"  # pushes again after a restart at commit_done (COMMIT-3)
SCENARIO = "p1-restart-at-commit-done-pushes-nothing-again"


def _failure(document: dict[str, object]) -> tuple[object, list[tuple[object, object]]]:
    (result,) = document["results"]  # type: ignore[misc]
    return result["outcome"], sorted((m.get("clause"), m["pointer"]) for m in result["mismatches"])  # type: ignore[index]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_command_a_kept_case_notes_runs_it_again_with_the_same_failure(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    adapter = python_command("-m", "tests.broken.workers", BUG)
    code, first, output = run_resumekit(
        tmp_path / "first.json", "--adapter", adapter, "--only", SCENARIO, "--kind", "p1", "--keep-failed", str(kept)
    )
    assert code == EXIT_NOT_CERTIFIED, output
    where = kept / SCENARIO
    assert f"its world is kept in {where}" in output
    assert (where / "state" / "checkpoints.sqlite3").is_file()
    assert (where / "control-plane.jsonl").stat().st_size > 0
    assert any(path.name.startswith("origin-") for path in where.iterdir())
    assert "COMMIT-3" in (where / "README.txt").read_text(encoding="utf-8")
    assert f"from {ROOT}:" in (where / "README.txt").read_text(encoding="utf-8")
    command = (where / "rerun.txt").read_text(encoding="utf-8").strip()
    program = [sys.executable, "-m", "resumekit.conformance"]
    if POSIX:
        words = shlex.split(command)
        assert words[0] == "resumekit"
        argv: list[str] | str = [*program, *words[1:], "-q", "--report-json", str(tmp_path / "again.json")]
    else:  # quoted for Windows' own parsing of a command line
        assert command.startswith("resumekit ")
        report = f' -q --report-json "{tmp_path / "again.json"}"'
        argv = subprocess.list2cmdline(program) + command[len("resumekit") :] + report
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == EXIT_NOT_CERTIFIED, done.stdout + done.stderr
    again = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert _failure(again) == _failure(first)
    assert "COMMIT-3" in {clause for clause, _ in _failure(again)[1]}
