"""The kit's workspace snapshots see every change a read could make, not only changed bytes (STORE-6)."""

from __future__ import annotations

import os
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
