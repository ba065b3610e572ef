"""The reference worker against the kit's own control plane (conformance/p1/control_plane/) and origin."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.origin import Origin, create_origin
from resumekit.reference.p1.control import Control
from resumekit.reference.p1.journal import COLUMNS, JOURNAL_NAME
from resumekit.reference.p1.results import idempotency_key
from resumekit.reference.p1.worker import Worker, WorkerConfig

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

REPO = "acme/widgets"


class Env:
    def __init__(self, tmp: Path) -> None:
        self.origin: Origin = create_origin(tmp / "origin", {"README.md": "hello\n", "src/a.txt": "a\n"})
        self.cp = ControlPlane(log_path=tmp / "cp" / "log.jsonl")
        self.cp.add_origin(REPO, self.origin)
        self.cp.start()
        self.root, self.state = tmp / "ws", tmp / "state"
        self.root.mkdir()
        self.state.mkdir()

    def task(self, kind: str) -> dict[str, Any]:
        payload: dict[str, Any] = {} if kind == "source_capture" else {
            "commit": {"email": "p1@resumekit.invalid", "message": "p1: t-1\n", "name": "resumekit",
                       "timestamp": 1767225600},
            "writes": [{"content": "hello\n", "path": "notes/hello.txt"}]}
        return {"task_id": "t-1", "execution_digest": "d-1", "job_id": "job-1", "repository": REPO,
                "base_oid": self.origin.base_oid, "expected_branch_oid": self.origin.base_oid,
                "target_branch": "main", "generation": 1, "kind": kind, "payload": payload}

    def start(self, failpoint: tuple[str, int] | None = None) -> tuple[Control, threading.Thread]:
        control = Control(failpoint)
        worker = Worker(WorkerConfig(self.cp.base_url("w1"), self.root, self.state), control)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        return control, thread

    def phases(self) -> list[str]:
        db = sqlite3.connect(f"file:{(self.state / JOURNAL_NAME).as_posix()}?mode=ro", uri=True, timeout=5)
        try:
            return [row[0] for row in db.execute("SELECT phase FROM checkpoints ORDER BY seq")]
        finally:
            db.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path)
    yield made
    made.cp.close()


def _stop(control: Control, thread: threading.Thread) -> int | None:
    control.request_stop()
    thread.join(60)
    return control.exit_code


@pytest.mark.parametrize("kind", ["source_capture", "commit"])
def test_each_kind_reaches_result_submitted(env: Env, kind: str) -> None:
    env.cp.issue(env.task(kind))
    control, thread = env.start()
    assert control.wait(60) == {"state": "idle"}
    assert env.phases()[-1] == "result_submitted"
    task = env.cp.task("t-1")
    assert task["state"] == "VERIFYING"
    assert task["stored"]["idempotency_key"] == idempotency_key("t-1", 1, "d-1")
    if kind == "commit":
        assert len(env.origin.commits_since(env.origin.base_oid)) == 1
        assert task["stored"]["result"]["commit_oid"] == env.origin.head()
    assert _stop(control, thread) == 0
    assert "phase" in COLUMNS


@pytest.mark.parametrize(("kind", "phase"), [
    ("source_capture", "claimed"), ("source_capture", "verification_passed"),
    ("source_capture", "source_capture_done"), ("source_capture", "result_pending"),
    ("commit", "workspace_prepared"), ("commit", "verification_passed"), ("commit", "commit_done"),
    ("commit", "result_pending"),
])
def test_a_kill_free_restart_resumes_from_each_phase(env: Env, kind: str, phase: str) -> None:
    env.cp.issue(env.task(kind))
    control, thread = env.start((f"after_{phase}_cache", 1))
    assert control.wait(60) == {"state": "blocked", "failpoint": f"after_{phase}_cache"}
    assert _stop(control, thread) == 0
    before = env.phases()
    assert before[-1] == phase
    control, thread = env.start()
    assert control.wait(60) == {"state": "idle"}
    after = env.phases()
    assert after[: len(before)] == before and after[-1] == "result_submitted"
    assert len(after) == len(set(after))
    assert env.cp.task("t-1")["state"] == "VERIFYING"
    if kind == "commit":
        assert len(env.origin.commits_since(env.origin.base_oid)) == 1
    assert _stop(control, thread) == 0
