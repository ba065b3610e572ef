"""The reference worker end to end against a real git origin and the kit's control plane (real HTTP)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1.control_plane import faults as F
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.origin import Origin, create_origin, git
from resumekit.reference.p1.cache import cache_bytes, cache_path
from resumekit.reference.p1.control import Control
from resumekit.reference.p1.journal import COLUMNS, JOURNAL_NAME, Row
from resumekit.reference.p1.results import canonical_json, idempotency_key, result_hash
from resumekit.reference.p1.worker import Worker, WorkerConfig

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

FILES = {"README.md": "hello\n", "src/a.txt": "a\n", "src/é.txt": "accent\n"}
COMMIT = {"email": "p1@resumekit.invalid", "message": "p1: governed commit of t-2\n", "name": "resumekit",
          "timestamp": 1767225600}
WAIT_S = 60.0
TTL_MS = 30000


@dataclass
class Scene:
    tmp: Path
    origin: Origin
    cp: ControlPlane
    root: Path
    state: Path

    def config(self) -> WorkerConfig:
        return WorkerConfig(self.cp.base_url("w1"), self.root, self.state)

    def task(self, kind: str, task_id: str = "t-1", **changes: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {} if kind == "source_capture" else {
            "commit": COMMIT, "writes": [{"content": "hello\n", "path": "notes/hello.txt"},
                                         {"content": "changed\n", "path": "README.md"}]}
        task = {"task_id": task_id, "attempt": 1, "execution_digest": "d-1", "job_id": f"job-{task_id}",
                "repository": "acme/widgets", "base_oid": self.origin.base_oid,
                "expected_branch_oid": self.origin.base_oid, "target_branch": "main", "generation": 1,
                "kind": kind, "payload": payload, "origin_url": self.origin.url}
        task.update(changes)
        return task

    def requests(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        """The workers' requests in the control plane's log, optionally those to one endpoint."""
        return [entry for entry in self.cp.log()
                if entry.get("kind") == "request" and endpoint in (None, entry.get("endpoint"))]

    def lease(self, lease_id: str) -> dict[str, Any]:
        return next(lease for lease in self.cp.leases("acme/widgets", "main") if lease["lease_id"] == lease_id)

    def rows(self) -> list[Row]:
        db = sqlite3.connect(f"file:{(self.state / JOURNAL_NAME).as_posix()}?mode=ro", uri=True, timeout=5)
        try:
            return [Row(*values) for values in
                    db.execute(f"SELECT {', '.join(COLUMNS)} FROM checkpoints ORDER BY seq").fetchall()]
        finally:
            db.close()


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    origin = create_origin(tmp_path / "origin", FILES)
    cp = ControlPlane(log_path=tmp_path / "control-plane.jsonl", ttl_ms=TTL_MS)
    cp.add_origin("acme/widgets", origin)
    cp.start()
    root, state = tmp_path / "workspaces", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    yield Scene(tmp_path, origin, cp, root, state)
    cp.close()


class Running:
    def __init__(self, scene: Scene, failpoint: tuple[str, int] | None = None) -> None:
        self.control = Control(failpoint)
        self.settings: list[dict[str, Any]] = []
        self.worker = Worker(scene.config(), self.control, self.settings)
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def wait(self) -> dict[str, Any]:
        return self.control.wait(WAIT_S)

    def stop(self) -> int | None:
        self.control.request_stop()
        self.thread.join(WAIT_S)
        return self.control.exit_code


def _run_to_idle(scene: Scene, failpoint: tuple[str, int] | None = None) -> Running:
    running = Running(scene, failpoint)
    assert running.wait() == {"state": "idle"}
    return running


def _expected_capture(origin: Origin) -> dict[str, Any]:
    files = sorted(FILES.items(), key=lambda item: item[0].encode())
    return {"base_oid": origin.base_oid, "kind": "source_capture",
            "files": [{"path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()} for path, text in files]}


def _expected_commit(origin: Origin) -> str:
    # The tree by git itself from a scratch clone, the commit object by hand from TASK-4's text.
    scratch = origin.path.parent / "expected"
    git(["clone", "--quiet", origin.url, str(scratch)], cwd=origin.path.parent)
    git(["checkout", "--quiet", "--detach", origin.base_oid], cwd=scratch)
    (scratch / "notes").mkdir()
    (scratch / "notes" / "hello.txt").write_bytes(b"hello\n")
    (scratch / "README.md").write_bytes(b"changed\n")
    git(["-c", "core.autocrlf=false", "add", "--all"], cwd=scratch)
    tree = git(["write-tree"], cwd=scratch).strip()
    text = (f"tree {tree}\nparent {origin.base_oid}\nauthor resumekit <p1@resumekit.invalid> 1767225600 +0000\n"
            "committer resumekit <p1@resumekit.invalid> 1767225600 +0000\n\np1: governed commit of t-2\n")
    oid = git(["hash-object", "-t", "commit", "--stdin"], cwd=scratch, stdin=text.encode()).strip()
    shutil.rmtree(scratch)
    return oid


def _phases(rows: list[Row]) -> list[str]:
    return [row.phase for row in rows]


def test_source_capture_to_result_submitted(scene: Scene) -> None:
    scene.cp.issue(scene.task("source_capture"))
    running = _run_to_idle(scene)
    rows = scene.rows()
    assert _phases(rows) == ["claimed", "workspace_prepared", "verification_passed", "source_capture_done",
                             "result_pending", "result_submitted"]
    body = _expected_capture(scene.origin)
    stored = scene.cp.task("t-1")["stored"]
    assert stored["result_hash"] == result_hash(body) and stored["result"] == body
    assert stored["idempotency_key"] == idempotency_key("t-1", 1, "d-1")
    assert rows[0].task == canonical_json(scene.task("source_capture"))
    assert all(row.lease_id == "lease-1" for row in rows)
    assert scene.lease("lease-1")["state"] == "RELEASED"
    assert cache_path(scene.state, "t-1").read_bytes() == cache_bytes(rows[-1])
    assert list(scene.root.iterdir()) == []  # the terminal attempt's workspace is removed
    assert scene.origin.pushes() == []
    assert running.settings == [{"synchronous": 2, "journalMode": "wal", "busyTimeoutMs": 5000}]
    assert running.stop() == 0


def test_commit_to_result_submitted_with_one_push(scene: Scene) -> None:
    scene.cp.issue(scene.task("commit"))
    running = _run_to_idle(scene)
    rows = scene.rows()
    assert _phases(rows) == ["claimed", "workspace_prepared", "verification_passed", "commit_done",
                             "result_pending", "result_submitted"]
    expected = _expected_commit(scene.origin)
    assert scene.origin.head() == expected == rows[-1].commit_oid
    assert [push["accepted"] for push in scene.origin.pushes()] == [True]
    receipts = [entry for entry in scene.cp.log() if entry.get("kind") == "receipt"]
    assert [(entry["job_id"], entry["visibility"]) for entry in receipts] == [("job-t-1", "confirmed")]
    stored = scene.cp.task("t-1")["stored"]
    assert stored["result"] == {"commit_oid": expected, "kind": "commit", "target_branch": "main"}
    # every governed side effect follows a renewal (LEASE-3)
    log = [entry["endpoint"] for entry in scene.requests()]
    for side in ("receipt", "result"):
        assert log[log.index(side) - 1] == "renew"
    assert running.stop() == 0


RESUME_POINTS = [
    ("source_capture", "claimed"), ("source_capture", "workspace_prepared"),
    ("source_capture", "verification_passed"), ("source_capture", "source_capture_done"),
    ("source_capture", "result_pending"),
    ("commit", "claimed"), ("commit", "workspace_prepared"), ("commit", "verification_passed"),
    ("commit", "commit_done"), ("commit", "result_pending"),
]


@pytest.mark.parametrize(("kind", "phase"), RESUME_POINTS)
def test_an_orderly_stop_after_each_phase_resumes_from_it(scene: Scene, kind: str, phase: str) -> None:
    scene.cp.issue(scene.task(kind))
    first = Running(scene, (f"after_{phase}_cache", 1))
    assert first.wait() == {"state": "blocked", "failpoint": f"after_{phase}_cache"}
    assert scene.rows()[-1].phase == phase
    assert first.stop() == 0
    before = scene.rows()
    assert before[-1].phase == phase  # stopped at the next step boundary, no row after it
    (scene.state / "tasks" / "t-1.json").write_bytes(b"{torn")  # a damaged cache changes nothing
    second = _run_to_idle(scene)
    rows = scene.rows()
    assert rows[: len(before)] == before
    assert rows[-1].phase == "result_submitted"
    assert len({row.lease_id for row in rows}) == 1  # not claimed again (LEASE-1)
    assert len({row.phase for row in rows}) == len(rows)  # no durable phase done again
    keys = {entry["idempotency_key"] for entry in scene.requests("result")}
    assert keys == {idempotency_key("t-1", 1, "d-1")}
    if kind == "commit":
        assert [push["accepted"] for push in scene.origin.pushes()] == [True]
        assert len(scene.origin.commits_since(scene.origin.base_oid)) == 1
    assert cache_path(scene.state, "t-1").read_bytes() == cache_bytes(rows[-1])
    assert second.stop() == 0


def test_a_push_made_before_commit_done_is_adopted(scene: Scene) -> None:
    scene.cp.issue(scene.task("commit"))
    first = Running(scene, ("before_commit_done_row", 1))
    assert first.wait()["failpoint"] == "before_commit_done_row"
    assert first.stop() == 0
    assert _phases(scene.rows()) == ["claimed", "workspace_prepared", "verification_passed"]
    second = _run_to_idle(scene)
    assert scene.rows()[-1].phase == "result_submitted"
    assert [push["accepted"] for push in scene.origin.pushes()] == [True]  # adopted, never pushed again
    assert second.stop() == 0


def test_a_blocked_failpoint_shows_its_durable_state_and_continues(scene: Scene) -> None:
    scene.cp.issue(scene.task("source_capture"))
    running = Running(scene, ("before_result_pending_row", 1))
    assert running.wait() == {"state": "blocked", "failpoint": "before_result_pending_row"}
    requests = len(scene.requests())
    assert scene.rows()[-1].phase == "source_capture_done"
    assert len(scene.requests()) == requests  # no request while blocked
    running.control.release(("before_release", 1))
    assert running.wait() == {"state": "blocked", "failpoint": "before_release"}
    assert scene.rows()[-1].phase == "result_submitted"
    assert scene.lease("lease-1")["state"] == "ACTIVE"
    running.control.release(None)
    assert running.wait() == {"state": "idle"}
    assert scene.lease("lease-1")["state"] == "RELEASED"
    assert running.stop() == 0


def test_a_moved_branch_ends_in_reconciliation_and_a_report(scene: Scene) -> None:
    other = scene.task("commit", expected_branch_oid="f" * 40)
    scene.cp.issue(other)
    running = _run_to_idle(scene)
    rows = scene.rows()
    assert rows[-1].phase == "reconciliation_required" and rows[-1].reason == "branch_moved"
    assert scene.origin.pushes() == []
    assert scene.cp.task("t-1")["state"] == "RECONCILIATION_REQUIRED"
    assert scene.requests("result") == []
    assert running.stop() == 0


def test_resends_after_5xx_and_a_dropped_answer_keep_key_and_body(scene: Scene) -> None:
    scene.cp.issue(scene.task("source_capture"))
    # a 503 and then a dropped answer, each after the result was stored
    scene.cp.script(F.Answer(on="result", status=503, effect=True), F.Drop(on="result", effect=True))
    running = _run_to_idle(scene)
    sends = scene.requests("result")
    assert len(sends) == 3
    assert len({send["body_sha256"] for send in sends}) == 1
    assert len({send["idempotency_key"] for send in sends}) == 1
    assert scene.rows()[-1].phase == "result_submitted"
    assert running.stop() == 0


def test_a_409_without_an_exact_match_is_a_hard_failure(scene: Scene) -> None:
    scene.cp.issue(scene.task("source_capture"))
    # the control plane holds another body for the task, which stays RUNNING
    scene.cp.script(F.Conflict409(state="RUNNING", stored="other_body"))
    running = _run_to_idle(scene)
    rows = scene.rows()
    assert rows[-1].reason == "result_conflict"
    assert len(scene.requests("result")) == 1
    assert scene.cp.task("t-1")["state"] == "FAILED"
    assert running.stop() == 0


def test_a_lease_expired_while_blocked_abandons_the_attempt_and_the_next_converges(scene: Scene) -> None:
    scene.cp.issue(scene.task("commit"))
    running = Running(scene, ("before_push", 1))
    assert running.wait()["failpoint"] == "before_push"
    scene.cp.move_clock(40_000)  # past expires_at_ms: the renewal before the push sees it
    running.control.release(None)
    assert running.wait() == {"state": "idle"}
    rows = scene.rows()
    first = [row for row in rows if row.attempt == 1]
    assert first[-1].phase == "verification_passed"  # abandoned, no row
    assert rows[-1].attempt == 2 and rows[-1].phase == "result_submitted"
    assert [push["accepted"] for push in scene.origin.pushes()] == [True]
    assert running.stop() == 0


def test_a_later_attempt_with_an_identical_binding_reuses_result_pending(scene: Scene) -> None:
    scene.cp.issue(scene.task("source_capture"))
    running = Running(scene, ("before_result_submit", 1))
    assert running.wait()["failpoint"] == "before_result_submit"
    scene.cp.move_clock(40_000)
    running.control.release(None)
    assert running.wait() == {"state": "idle"}
    rows = scene.rows()
    second = [row for row in rows if row.attempt == 2]
    assert _phases(second) == ["claimed", "result_pending", "result_submitted"]
    source = next(row for row in rows if row.attempt == 1 and row.phase == "result_pending")
    assert second[1].reused_from == source.seq
    assert second[1].idempotency_key == idempotency_key("t-1", 2, "d-1") != source.idempotency_key
    assert running.stop() == 0


def test_startup_cleanup_comes_before_any_request(scene: Scene) -> None:
    stale = scene.root / "task-old-1-00000000"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "f.txt").write_text("x", encoding="utf-8")
    (scene.root / "keep-me").mkdir()
    running = Running(scene, ("cleanup_before_remove", 1))
    assert running.wait()["failpoint"] == "cleanup_before_remove"
    assert stale.exists() and scene.requests() == []
    running.control.release(None)
    assert running.wait() == {"state": "idle"}
    assert not stale.exists() and (scene.root / "keep-me").is_dir()
    assert running.stop() == 0


@pytest.mark.parametrize(
    ("url", "windows", "source"),
    [
        ("file:///tmp/o/origin.git", False, "/tmp/o/origin.git"),
        ("file://localhost/tmp/a%20b/origin.git", False, "/tmp/a b/origin.git"),
        ("file:///C:/Users/x/origin.git", True, "C:/Users/x/origin.git"),
        ("file://server/share/origin.git", False, "file://server/share/origin.git"),  # another machine's
        ("file:///tmp/o/origin.git?x=1", False, "file:///tmp/o/origin.git?x=1"),
        ("https://example.invalid/o.git", False, "https://example.invalid/o.git"),
    ],
)
def test_a_file_url_of_this_machine_is_cloned_from_its_path(url: str, windows: bool, source: str) -> None:
    from resumekit.reference.p1.git import clone_source

    assert clone_source(url, windows=windows) == source


def test_a_workspace_cloned_from_the_origins_path_is_its_base_commit(scene: Scene) -> None:
    from resumekit.reference.p1.git import prepare_workspace

    task = {"task_id": "t-9", "attempt": 1, "origin_url": scene.origin.url, "base_oid": scene.origin.base_oid}
    root = scene.tmp / "clones"
    root.mkdir()
    path = root / prepare_workspace(root, task)
    assert git(["rev-parse", "HEAD"], cwd=path).strip() == scene.origin.base_oid
    assert git(["status", "--porcelain"], cwd=path) == ""
    assert {name: (path / name).read_text(encoding="utf-8") for name in FILES} == FILES
