"""Where the operating systems differ: killing, syncing files and directories, handles after a kill.

Each test runs on the systems it names; CI runs the suite on Linux, macOS and Windows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, pid_alive, wait_pid_gone
from resumekit.reference.phase0 import store
from tests.support import minimal_event

SLEEPER = [sys.executable, "-c", "import time, sys; print('up', flush=True); time.sleep(600)"]


def _start(*extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([*SLEEPER, *extra], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline().strip() == b"up"
    return process


def test_kill_member_ends_the_process_at_once_on_every_system() -> None:
    process = LineProcess(SLEEPER)
    assert process.receive(30) == b"up\n"
    assert pid_alive(process.pid)
    process.kill_member(process.pid)
    code = process.wait(timeout=30)
    process.kill()  # reaps it
    assert wait_pid_gone(process.pid, timeout=10)
    if os.name == "nt":
        assert code != 0  # TerminateProcess: the exit code is the one passed, never -9
    else:
        assert code == -9


@pytest.mark.skipif(os.name != "nt", reason="Windows only: files of a killed process")
def test_windows_releases_a_killed_writers_file(tmp_path: Path) -> None:
    target = tmp_path / "held.txt"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; f = open({str(target)!r}, 'ab'); f.write(b'x'); f.flush(); "
            "print('up', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"up"
    holder.kill()
    holder.wait(timeout=30)
    assert target.read_bytes() == b"x"
    _files.remove(tmp_path)
    assert not tmp_path.exists()


@pytest.mark.skipif(sys.platform != "darwin", reason="macOS only: F_FULLFSYNC")
def test_macos_uses_the_full_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    calls: list[int] = []
    real = fcntl.fcntl

    def spy(fd: int, command: int, *args: object) -> object:
        calls.append(command)
        return real(fd, command, *args)  # type: ignore[call-overload]

    monkeypatch.setattr(fcntl, "fcntl", spy)
    with store.LedgerStore(tmp_path, "s", "r") as ledger:
        ledger.append(minimal_event())
    assert fcntl.F_FULLFSYNC in calls  # type: ignore[attr-defined]


@pytest.mark.skipif(os.name == "nt", reason="POSIX only: directories can be synced")
def test_posix_syncs_the_directories_a_new_ledger_creates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = store.sync_directory

    def spy(path: Path) -> None:
        synced.append(Path(path).relative_to(tmp_path).as_posix() or ".")
        real(path)

    monkeypatch.setattr(store, "sync_directory", spy)
    with store.LedgerStore(tmp_path, "s", "r") as ledger:
        event = minimal_event()
        ledger.append(event)
        first = list(synced)
        ledger.append(dict(event, id="f"))
    assert "sessions/s/runs/r" in first and "." in first
    assert synced == first, "a later append to an existing file syncs no directory"


@pytest.mark.skipif(os.name != "nt", reason="Windows only: directories cannot be opened for syncing")
def test_windows_skips_the_directory_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[object] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    store.sync_directory(tmp_path)
    assert opened == []


def test_remove_retries_until_a_tree_is_gone(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "file").write_bytes(b"data")
    os.chmod(tree / "a" / "b" / "file", 0o400)
    _files.remove(tree)
    assert not tree.exists()
