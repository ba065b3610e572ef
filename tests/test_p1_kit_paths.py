"""The kit's own paths on the control plane (docs/spec/p1-control-plane.md CP-22): they carry a secret the
worker is never given, a request without it is refused and logged, and the case then fails on CP-22."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1 import _tool
from resumekit.conformance.p1.checks import rules
from resumekit.conformance.p1.checks.story import Scenario
from resumekit.conformance.p1.control_plane.requests import is_kit_call
from resumekit.conformance.p1.control_plane.server import ControlPlane
from tests.p1_stories import Told, judged

KIT_PATHS = ("_kit/origin/check", "_kit/origin/updated", "_kit/tool/started")
# Bodies with exactly the members each kit endpoint takes: a forged call is refused for its path, not its body.
BODIES = {
    "_kit/origin/check": {"repository": "acme/widgets", "updates": []},
    "_kit/origin/updated": {"repository": "acme/widgets", "updates": []},
    "_kit/tool/started": {"pid": 1, "grandchild": None, "cwd": "/nowhere", "writes": 1},
}


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(log_path=tmp_path / "cp" / "log.jsonl")
    plane.start()
    try:
        yield plane
    finally:
        plane.close()


def _secret(cp: ControlPlane) -> str:
    """The secret, as the kit's own URLs carry it: ``http://127.0.0.1:PORT/_kit/SECRET/...``."""
    return cp.kit_url("_kit/tool/started").split("/")[4]


def _post(cp: ControlPlane, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """POST *path* as it is, percent-encoding and all, the way a worker could forge it."""
    connection = http.client.HTTPConnection("127.0.0.1", cp.port, timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _told(cp: ControlPlane) -> Told:
    """A history holding the control plane's log as it was made: the refused calls among its entries."""
    told = Told()
    for entry in cp.log():
        told.logged(**entry)
    return told


def _forgeries(cp: ControlPlane, path: str) -> list[str]:
    """Every way a worker could call *path* without the kit's secret, or with it through its base URL."""
    rest = path[len("_kit/"):]
    return [
        f"/{path}",  # the server's root, no secret
        f"/_kit/not-the-secret/{rest}",  # a guess
        f"/%5Fkit/{rest}",  # _kit spelled another way
        f"/w/w1/{path}",  # under a worker's base URL
        f"/w/w1/_kit/{_secret(cp)}/{rest}",  # a worker's base URL, even with the secret
    ]


def test_a_kit_path_without_the_secret_is_refused_logged_and_never_served(cp: ControlPlane) -> None:
    secret = _secret(cp)
    sent = 0
    for path in KIT_PATHS:
        for forged in _forgeries(cp, path):
            status, body = _post(cp, forged, BODIES[path])
            sent += 1
            assert (status, body["error"]) == (404, "not_found"), forged
            assert "CP-22" in body["message"] and secret not in body["message"], forged
    log = cp.log()
    refused = [entry for entry in log if entry["kind"] == "kit_path_refused"]
    assert len(refused) == sent
    assert {entry["worker"] for entry in refused} == {None, "w1"}
    assert "_kit/<secret>/tool/started" in {entry["path"] for entry in refused}
    # Nothing a forged call asks for happened, and the secret is in no line of the log.
    assert not [entry for entry in log if entry["kind"] in ("push", "origin_ref_updated", "tool_started")]
    assert {entry["status"] for entry in log if entry["kind"] == "request"} == {404}
    assert secret not in json.dumps(log)


def test_the_kits_own_call_carries_the_secret_and_is_served(cp: ControlPlane, tmp_path: Path) -> None:
    url = cp.kit_url("_kit/tool/started")
    status, _ = _post(cp, url[url.index("/_kit/"):], BODIES["_kit/tool/started"])
    assert status == 200
    assert [entry["kind"] for entry in cp.log()] == ["tool_started", "request"]
    assert cp.log()[-1]["path"] == "_kit/<secret>/tool/started"
    assert _secret(cp) not in (tmp_path / "cp" / "log.jsonl").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="'v1/claims'"):
        cp.kit_url("v1/claims")
    # A core with no secret serves no kit path at all, and the secret is compared whole.
    assert not is_kit_call("_kit//tool/started", None, "")
    assert not is_kit_call(f"_kit/{_secret(cp)[:-1]}/tool/started", None, _secret(cp))


def test_a_call_to_a_kit_path_fails_the_case_on_cp22_naming_the_path(cp: ControlPlane) -> None:
    assert judged("processes.kit_paths", Told()) == []  # no such call: nothing to fail
    assert judged("processes.kit_paths", _told(cp)) == []
    _post(cp, "/w/w1/_kit/origin/check", BODIES["_kit/origin/check"])
    _post(cp, "/w/w1/_kit/tool/started", BODIES["_kit/tool/started"])
    _post(cp, f"/_kit/{_secret(cp)}x/tool/started", BODIES["_kit/tool/started"])
    found = judged("processes.kit_paths", _told(cp))
    assert [(m.clause, m.pointer, m.actual) for m in found] == [
        ("CP-22", "/control-plane/kit-paths", "POST _kit/<secret>x/tool/started"),
        ("CP-22", "/control-plane/kit-paths/w1", "POST _kit/origin/check"),
    ]
    assert "2 request(s)" in str(found[1].note) and "'w1'" in str(found[1].note)
    assert not any(_secret(cp) in f"{m.actual} {m.note}" for m in found)
    # The verdict carries it: a scenario with such a call does not pass.
    verdict = rules.judge(_told(cp).story(), Scenario({}, {}))
    assert [m.clause for m in verdict].count("CP-22") == 2


def test_the_tool_reads_its_announce_url_only_from_a_small_regular_file(tmp_path: Path) -> None:
    good = tmp_path / "announce"
    good.write_text("http://127.0.0.1:1/_kit/s/tool/started\n", encoding="utf-8")
    assert _tool.read_announce_file(good) == "http://127.0.0.1:1/_kit/s/tool/started"
    big = tmp_path / "big"
    big.write_text("http://" + "a" * 5000, encoding="utf-8")
    with pytest.raises(ValueError, match="over 4096"):
        _tool.read_announce_file(big)
    other = tmp_path / "other"
    other.write_text("file:///etc/passwd\n", encoding="utf-8")
    with pytest.raises(ValueError, match="one http URL"):
        _tool.read_announce_file(other)
    with pytest.raises(ValueError, match="not a regular file"):
        _tool.read_announce_file(tmp_path)
    if sys.platform != "win32":
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="not a regular file"):
            _tool.read_announce_file(fifo)  # opened without blocking, though no one writes it
        link = tmp_path / "link"
        link.symlink_to(good)
        with pytest.raises(OSError, match="symbolic links"):  # ELOOP: the link is not followed
            _tool.read_announce_file(link)


def test_the_kits_tool_announces_through_its_file_and_its_argv_holds_no_secret(
    cp: ControlPlane, tmp_path: Path
) -> None:
    workspace, flag, announce = tmp_path / "ws", tmp_path / "tool-may-run", tmp_path / "tool-announce"
    workspace.mkdir()
    flag.write_text("run\n", encoding="utf-8")
    announce.write_text(cp.kit_url("_kit/tool/started") + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", _tool.MODULE, "--announce-file", str(announce), "--while-exists", str(flag),
            "--seconds", "5"]
    assert _secret(cp) not in " ".join(argv)
    tool = subprocess.Popen(argv, cwd=workspace, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not [e for e in cp.log() if e["kind"] == "tool_started"] and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        flag.unlink()
        _, stderr = tool.communicate(timeout=20)
    (started,) = [e for e in cp.log() if e["kind"] == "tool_started"]
    assert started["cwd"] == str(workspace)
    assert not [e for e in cp.log() if e["kind"] == "kit_path_refused"]
    assert _secret(cp).encode() not in stderr
