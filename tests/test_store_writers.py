"""One writer per run (STORE-8) and the paths the reference store refuses to write through.

The two-writer campaign runs a few trials here; ``RESUMEKIT_WRITER_TRIALS`` asks for more
(``nox -s writers`` runs 50).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from resumekit.reference.adapter import Harness
from resumekit.reference.phase0.store import LedgerBusy, LedgerStore, read_ledger
from tests.store_writer import event
from tests.support import ROOT

SESSION, RUN = "session-1", "run-1"
TRIALS = int(os.environ.get("RESUMEKIT_WRITER_TRIALS", "2"))
ROWS_PER_WRITER = 4
BIGGEST_ROW = 2 * 1024 * 1024


def _open_request(workspace: str, seq: int = 1) -> dict[str, object]:
    return {"cmd": "phase0.store.open", "seq": seq, "workspace": workspace, "sessionId": SESSION, "runId": RUN}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


# --------------------------------------------------------------------------------------------
# One writer per run
# --------------------------------------------------------------------------------------------


def test_a_second_store_on_an_open_run_is_refused_until_the_first_closes(workspace: Path) -> None:
    first = LedgerStore(workspace, SESSION, RUN)
    first.append(event("a", 0, 10))
    with pytest.raises(LedgerBusy, match="STORE-8"):
        LedgerStore(workspace, SESSION, RUN)
    assert first.append(event("a", 1, 10)) == 2  # the refused store changed nothing
    first.close()
    with LedgerStore(workspace, SESSION, RUN) as second:
        assert second.append(event("b", 0, 10)) == 3


def test_another_run_of_the_same_session_is_not_locked_out(workspace: Path) -> None:
    with LedgerStore(workspace, SESSION, RUN), LedgerStore(workspace, SESSION, "run-2") as other:
        assert other.append(dict(event("b", 0, 10), runId="run-2")) == 1


def test_a_second_process_is_refused_while_a_store_is_open(workspace: Path) -> None:
    probe = (
        "import sys; from pathlib import Path\n"
        "from resumekit.reference.phase0.store import LedgerBusy, LedgerStore\n"
        "try:\n    LedgerStore(Path(sys.argv[1]), 'session-1', 'run-1')\n"
        "except LedgerBusy as error:\n    print('busy:', error); sys.exit(3)\n"
    )
    with LedgerStore(workspace, SESSION, RUN):
        held = subprocess.run([sys.executable, "-c", probe, str(workspace)], capture_output=True, text=True, timeout=60)
    assert held.returncode == 3, held.stderr
    assert "one writer at a time" in held.stdout
    free = subprocess.run([sys.executable, "-c", probe, str(workspace)], capture_output=True, text=True, timeout=60)
    assert free.returncode == 0, free.stdout + free.stderr


def test_a_second_adapter_gets_a_clear_error_from_open(workspace: Path) -> None:
    holder, second = Harness(), Harness()
    try:
        assert holder.handle(_open_request(str(workspace))) == {"seq": 1, "result": {}}
        refused = second.handle(_open_request(str(workspace)))
        assert refused is not None
        assert "LedgerBusy" in refused["error"]["message"]
        assert "one writer at a time" in refused["error"]["message"]
        # The holder reopening its own run is not a second writer.
        assert holder.handle(_open_request(str(workspace), seq=2)) == {"seq": 2, "result": {}}
    finally:
        holder.shutdown()
        second.shutdown()


@pytest.mark.parametrize("trial", range(TRIALS))
def test_two_writers_on_one_run_lose_no_acknowledged_row(tmp_path: Path, trial: int) -> None:
    """Two processes append rows of up to 2 MB to one run; every row either printed survives, once."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store_writer", str(workspace), name, str(ROWS_PER_WRITER),
             str(BIGGEST_ROW), str(trial * 2 + offset)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for offset, name in enumerate(("a", "b"))
    ]
    acknowledged: list[str] = []
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        acknowledged += out.split()
    assert len(acknowledged) == 2 * ROWS_PER_WRITER
    result = read_ledger(workspace, SESSION, RUN)
    ids = [row["id"] for row in result.events]
    assert result.torn_tail is None
    assert sorted(ids) == sorted(acknowledged), f"trial {trial}: lost {sorted(set(acknowledged) - set(ids))}"
    for name in ("a", "b"):  # each writer's rows in its own order
        assert [i for i in ids if i.startswith(f"{name}-")] == [f"{name}-{n}" for n in range(ROWS_PER_WRITER)]


# --------------------------------------------------------------------------------------------
# Paths: the store writes only below its workspace
# --------------------------------------------------------------------------------------------


def test_an_empty_workspace_string_is_refused_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="empty string"):
        LedgerStore("", SESSION, RUN)
    harness = Harness()
    refused = harness.handle(_open_request(""))
    harness.shutdown()
    assert refused is not None and "absolute path" in refused["error"]["message"]
    assert list(tmp_path.iterdir()) == []


def test_a_sessions_symlink_leading_outside_the_workspace_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    try:
        (workspace / "sessions").symlink_to(outside, target_is_directory=True)
    except OSError as error:  # Windows without the symlink privilege
        pytest.skip(f"cannot make a symbolic link here: {error}")
    with pytest.raises(ValueError, match="symbolic link"):
        LedgerStore(workspace, SESSION, RUN)
    assert list(outside.iterdir()) == []


def test_a_symlinked_run_folder_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    runs = workspace / "sessions" / SESSION / "runs"
    runs.mkdir(parents=True)
    try:
        (runs / RUN).symlink_to(outside, target_is_directory=True)
    except OSError as error:
        pytest.skip(f"cannot make a symbolic link here: {error}")
    with pytest.raises(ValueError, match="symbolic link"):
        LedgerStore(workspace, SESSION, RUN)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name", ["CON", "nul", "Prn", "aux", "COM1", "com9", "LPT1", "lpt9"])
@pytest.mark.parametrize("which", ["session", "run"])
def test_windows_device_names_are_refused_as_ids(workspace: Path, name: str, which: str) -> None:
    ids = {"session": SESSION, "run": RUN, which: name}
    with pytest.raises(ValueError, match=f"invalid {which} id.*reserves"):
        LedgerStore(workspace, ids["session"], ids["run"])
    assert list(workspace.iterdir()) == []


@pytest.mark.parametrize("name", ["CONSOLE", "COM10", "LPT0", "NULL", "con-1"])
def test_names_that_only_look_like_devices_are_accepted(workspace: Path, name: str) -> None:
    with LedgerStore(workspace, name, name) as store:
        assert store.append(dict(event("a", 0, 5), sessionId=name, runId=name)) == 1


@pytest.mark.parametrize("which", ["session", "run"])
def test_an_id_differing_only_in_case_from_an_existing_one_is_refused(workspace: Path, which: str) -> None:
    with LedgerStore(workspace, "Session-1", "Run-1") as first:
        first.append(dict(event("a", 0, 5), sessionId="Session-1", runId="Run-1"))
    ids = {"session": "Session-1", "run": "Run-1", which: {"session": SESSION, "run": RUN}[which]}
    before = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*"))
    with pytest.raises(ValueError, match="differs only in letter case"):
        LedgerStore(workspace, ids["session"], ids["run"])
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*")) == before
