"""The P1 adapter commands of the reference, each request and result checked against its schema."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.adapters import CAPABILITIES as KIT_CAPABILITIES
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.origin import create_origin
from resumekit.conformance.schemas import ADAPTER_REQUEST, BASE, violations
from resumekit.reference.adapter import CAPABILITIES, Harness

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

RESULTS = {
    "hello": "hello.json",
    "p1.worker.start": "p1-worker-start.json",
    "p1.worker.wait": "p1-worker-wait.json",
    "p1.worker.continue": "p1-worker-continue.json",
    "p1.worker.stop": "p1-worker-stop.json",
    "p1.journal.settings": "p1-journal-settings.json",
}


class Talk:
    def __init__(self) -> None:
        self.harness = Harness()
        self.seq = 0

    def __call__(self, cmd: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        request = {"cmd": cmd, "seq": self.seq, **fields}
        assert list(violations(ADAPTER_REQUEST, request)) == []
        response = self.harness.handle(request)
        assert response is not None and "result" in response, response
        result: dict[str, Any] = response["result"]
        assert list(violations(BASE + "adapter/results/" + RESULTS[cmd], result)) == [], result
        return result


def test_the_worker_through_the_protocol(tmp_path: Path) -> None:
    origin = create_origin(tmp_path / "origin", {"README.md": "hello\n"})
    cp = ControlPlane(log_path=tmp_path / "control-plane.jsonl")
    cp.add_origin("acme/widgets", origin)
    cp.start()
    (tmp_path / "ws").mkdir()
    (tmp_path / "state").mkdir()
    marker = tmp_path / "marker"
    cp.issue({"task_id": "t-1", "attempt": 1, "execution_digest": "d-1", "job_id": "job-1",
              "repository": "acme/widgets", "base_oid": origin.base_oid, "expected_branch_oid": origin.base_oid,
              "target_branch": "main", "generation": 1, "kind": "source_capture", "payload": {},
              "origin_url": origin.url})
    talk = Talk()
    try:
        hello = talk("hello", protocol=1)
        # claimed once the bundled kit knows the P1 capabilities; served either way
        assert set(hello["capabilities"]) == set(CAPABILITIES) <= set(KIT_CAPABILITIES)
        config = {"controlPlaneUrl": cp.base_url("w1"), "workspaceRoot": str(tmp_path / "ws"),
                  "stateDir": str(tmp_path / "state")}
        start = talk("p1.worker.start", config=config, failpoint={"name": "after_claimed_row", "hit": 1},
                     marker=str(marker))
        assert start["pid"] > 1
        assert talk("p1.worker.wait", timeoutMs=30000) == {"state": "blocked", "failpoint": "after_claimed_row",
                                                           "pid": start["pid"]}
        assert not marker.exists()
        assert talk("p1.worker.continue", failpoint={"name": "before_release", "hit": 1}) == {}
        assert talk("p1.worker.wait", timeoutMs=30000)["failpoint"] == "before_release"
        assert talk("p1.worker.continue") == {}
        assert talk("p1.worker.wait", timeoutMs=30000) == {"state": "idle"}
        assert talk("p1.journal.settings") == {"connections": [{"synchronous": 2, "journalMode": "wal",
                                                                "busyTimeoutMs": 5000}]}
        assert talk("p1.worker.stop") == {"exitCode": 0}
        assert marker.exists()
        assert talk("p1.worker.wait", timeoutMs=0) == {"state": "exited", "exitCode": 0}
        assert cp.task("t-1")["state"] == "VERIFYING"
    finally:
        talk.harness.shutdown()
        cp.close()


def test_a_second_start_while_running_is_refused(tmp_path: Path) -> None:
    cp = ControlPlane(log_path=tmp_path / "control-plane.jsonl")
    cp.start()
    (tmp_path / "ws").mkdir()
    (tmp_path / "state").mkdir()
    harness = Harness()
    config = {"controlPlaneUrl": cp.base_url("w1"), "workspaceRoot": str(tmp_path / "ws"),
              "stateDir": str(tmp_path / "state")}
    try:
        assert "result" in (harness.handle({"cmd": "p1.worker.start", "seq": 1, "config": config}) or {})
        refused = harness.handle({"cmd": "p1.worker.start", "seq": 2, "config": config}) or {}
        assert "running" in refused["error"]["message"]
    finally:
        harness.shutdown()
        cp.close()


@pytest.mark.parametrize(
    "tool", [{"argv": []}, {"argv": [""]}, {"argv": "python"}, {"argv": ["python"], "env": {}}, {}]
)
def test_a_tool_without_a_usable_argv_is_refused_by_name(tmp_path: Path, tool: dict[str, Any]) -> None:
    harness = Harness()
    config = {"controlPlaneUrl": "http://127.0.0.1:9/w1/", "workspaceRoot": str(tmp_path), "stateDir": str(tmp_path)}
    request = {"cmd": "p1.worker.start", "seq": 1, "config": config, "tool": tool}
    assert list(violations(ADAPTER_REQUEST, request)) != []  # the schema refuses it too
    try:
        refused = harness.handle(request) or {}
        assert "'tool'" in refused["error"]["message"], refused
    finally:
        harness.shutdown()
