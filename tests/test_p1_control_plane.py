"""The simulated control plane (docs/spec/p1-control-plane.md), over real HTTP, with a real git origin."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1 import _tool
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, parse_json, result_hash
from resumekit.conformance.p1.control_plane import claim_faults as C
from resumekit.conformance.p1.control_plane import faults as F
from resumekit.conformance.p1.control_plane.kit import fault_from_mapping, kit_issue
from resumekit.conformance.p1.control_plane.requests import prepare
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.p1.control_plane.state import TASK_SCHEMA, KitError, Log, Request, State
from resumekit.conformance.p1.origin import _KIT_IDENTITY, Origin, create_origin, git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

REPO = "acme/widgets"
T0 = 1_000_000_000_000
KEY = "p1-result:" + "a" * 64


class Recorder:
    """An observer that records every call and answers the problems it is told to."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.requests: list[int | None] = []  # the number of the request each call was made for
        self.problems: list[str] = []
        self.at_kill: list[list[dict[str, Any]]] = []
        self.log_path: Path | None = None

    def on_first_request(self, worker: str, *, request: int | None = None) -> list[str]:
        self.calls.append(("first_request", worker))
        self.requests.append(request)
        return list(self.problems)

    def on_submission(
        self, worker: str, task_id: str, attempt: int, key: str, result_hash: str, *, request: int | None = None
    ) -> list[str]:
        self.calls.append(("submission", worker, task_id, attempt, key, result_hash))
        self.requests.append(request)
        return list(self.problems)

    def on_receipt(
        self, worker: str, task_id: str, attempt: int, commit_oid: str, *, request: int | None = None
    ) -> list[str]:
        self.calls.append(("receipt", worker, task_id, attempt, commit_oid))
        self.requests.append(request)
        return list(self.problems)

    def on_push(
        self, task_id: str, attempt: int, ref: str, old: str, new: str, *, request: int | None = None
    ) -> list[str]:
        self.calls.append(("push", task_id, attempt, ref, old, new))
        self.requests.append(request)
        return list(self.problems)

    def on_kill_point(self, name: str, worker: str) -> None:
        self.calls.append(("kill", name, worker))
        assert self.log_path is not None
        self.at_kill.append(_read_log(self.log_path))


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.origin: Origin = create_origin(tmp_path / "origin", {"README.md": "hello\n", "src/a.txt": "a\n"})
        self.observer = Recorder()
        self.log_path = tmp_path / "cp" / "log.jsonl"
        self.observer.log_path = self.log_path
        self.cp = ControlPlane(log_path=self.log_path, observer=self.observer)
        self.cp.add_origin(REPO, self.origin)
        self.cp.start()

    def task(self, task_id: str = "t-1", kind: str = "source_capture", **over: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        if kind == "commit":
            payload = {
                "commit": {"email": "p1@resumekit.invalid", "message": f"p1: {task_id}\n", "name": "resumekit",
                           "timestamp": 1767225600},
                "writes": [{"content": "hello\n", "path": "notes/hello.txt"}],
            }
        task = {
            "task_id": task_id, "execution_digest": f"d-{task_id}", "job_id": f"job-{task_id}", "repository": REPO,
            "base_oid": self.origin.base_oid, "expected_branch_oid": self.origin.base_oid, "target_branch": "main",
            "generation": 1, "kind": kind, "payload": payload,
        }
        task.update(over)
        return task

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        worker: str = "w1",
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, dict[str, Any]]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode("utf-8"))
        request = urllib.request.Request(self.cp.base_url(worker) + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            # Straight to 127.0.0.1, as the kit's own requests go: a proxy in the environment is not asked.
            with _tool.direct_opener().open(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def claim(self, worker: str = "w1") -> dict[str, Any]:
        status, body = self.call("POST", "v1/claims", {}, worker=worker)
        assert status == 200
        return body

    def submit(self, task_id: str, attempt: int, lease_id: str, result: dict[str, Any], *, key: str = KEY,
               digest: str | None = None, **kw: Any) -> tuple[int, dict[str, Any]]:
        body = {"attempt": attempt, "execution_digest": f"d-{task_id}", "lease_id": lease_id,
                "result_hash": digest or result_hash(result), "result": result}
        return self.call("POST", f"v1/tasks/{task_id}/result", body, headers={"Idempotency-Key": key}, **kw)

    def capture(self, extra: str = "") -> dict[str, Any]:
        return {"base_oid": self.origin.base_oid, "files": [{"path": "README.md" + extra, "sha256": "b" * 64}],
                "kind": "source_capture"}

    def governed_commit(self, name: str = "w") -> tuple[Path, str]:
        work = self.tmp / name
        git(["clone", "--quiet", self.origin.url, str(work)], cwd=self.tmp)
        (work / "notes").mkdir()
        (work / "notes" / "hello.txt").write_text("hello\n", encoding="utf-8")
        git(["add", "--all"], cwd=work)
        git(["commit", "--quiet", "--no-gpg-sign", "-m", "governed"], cwd=work, env=_KIT_IDENTITY)
        return work, git(["rev-parse", "HEAD"], cwd=work).strip()

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [entry for entry in self.cp.log() if entry["kind"] == kind]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path)
    try:
        yield made
    finally:
        made.cp.close()


# ---------------------------------------------------------------- canonical JSON (TASK-2)


def test_canonical_json_is_exact() -> None:
    value = {"b": "\u00e9/\"\\\b\t\n\f\r\x01\x7f", "a": [1, True, None]}
    assert canonical_json(value) == '{"a":[1,true,null],"b":"\u00e9/\\"\\\\\\b\\t\\n\\f\\r\\u0001\x7f"}'.encode()
    with pytest.raises(NotCanonical):
        canonical_json({"x": 1.0})
    with pytest.raises(NotCanonical):
        parse_json(b'{"a":1,"a":2}')
    with pytest.raises(NotCanonical):
        parse_json(b'{"a":1e3}')


# ---------------------------------------------------------------- CP-1, CP-4, CP-19, CP-20


def test_clock_moves_only_when_the_kit_moves_it_and_requests_are_attributed(env: Env) -> None:
    assert env.call("GET", "v1/clock") == (200, {"now_ms": T0})
    env.cp.move_clock(-5)
    assert env.call("GET", "v1/clock", worker="w2") == (200, {"now_ms": T0 - 5})
    assert env.call("GET", "v1/clock", worker="w2")[0] == 200
    requests = env.kinds("request")
    assert [(r["worker"], r["path"], r["status"]) for r in requests] == [
        ("w1", "v1/clock", 200), ("w2", "v1/clock", 200), ("w2", "v1/clock", 200)]
    assert [c for c in env.observer.calls if c[0] == "first_request"] == [("first_request", "w1"),
                                                                        ("first_request", "w2")]
    assert env.kinds("clock")[0]["delta_ms"] == -5
    assert env.call("GET", "v2/clock")[0] == 404
    assert env.call("GET", "v1/clock", raw=b"{}")[0] == 400  # a GET has no body


def test_a_chunked_body_is_refused_and_logged(env: Env) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", env.cp.port, timeout=10)
    connection.request("POST", "/w/w1/v1/claims", body=iter([b"{}"]), headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    assert (answer.status, json.loads(answer.read())["error"]) == (400, "bad_request")
    connection.close()
    assert [(r["worker"], r["path"], r["status"]) for r in env.kinds("request")] == [("w1", "v1/claims", 400)]


@pytest.mark.parametrize("line", [b"GARBAGE\r\n\r\n", b"POST /w/w1/v1/claims HTTP/9.9\r\n\r\n",
                                  b"HEAD /w/w1/v1/claims HTTP/1.1\r\nHost: x\r\n\r\n",
                                  b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"])
def test_a_request_http_cannot_parse_gets_a_json_400_and_is_logged(env: Env, line: bytes) -> None:
    with socket.create_connection(("127.0.0.1", env.cp.port), timeout=10) as connection:
        connection.sendall(line)
        connection.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n")[0], head
    assert b"application/json" in head, head
    if not line.startswith(b"HEAD"):  # a HEAD answer carries no body
        parsed = json.loads(body)
        assert parsed["error"] == "bad_request" and "could not be parsed" in parsed["message"], parsed
        assert isinstance(parsed["now_ms"], int)
    assert [entry["status"] for entry in env.kinds("request")] == [400]


def test_a_client_that_hangs_up_mid_request_prints_nothing(env: Env, capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", env.cp.port), timeout=10) as connection:
            connection.sendall(b"POST /w/w1/v1/claims HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
    env.claim()  # the server still serves, and by now it has met every hang-up
    assert "Traceback" not in capfd.readouterr().err
    assert env.cp.check_errors() == ()


def test_every_entry_is_durable_before_the_answer_leaves(env: Env) -> None:
    env.cp.issue(env.task())
    env.claim()
    on_disk = _read_log(env.log_path)
    assert on_disk == env.cp.log()
    assert on_disk[-1]["kind"] == "request" and on_disk[-1]["endpoint"] == "claim" and on_disk[-1]["status"] == 200
    assert [e["seq"] for e in on_disk] == list(range(1, len(on_disk) + 1))


def test_moment_problems_are_logged_and_never_change_the_answer(env: Env) -> None:
    env.observer.problems = ["the check could not read the journal"]
    env.cp.issue(env.task())
    lease = env.claim()["lease"]
    status, _ = env.submit("t-1", 1, lease["lease_id"], env.capture())
    assert status == 201
    moments = env.kinds("moment")
    assert {m["check"] for m in moments} == {"first_request", "submission"}
    assert all(m["problems"] == ["the check could not read the journal"] and m["ok"] is False for m in moments)
    assert ("submission", "w1", "t-1", 1, KEY, result_hash(env.capture())) in env.observer.calls
    # each reading is made for the request it is logged with, so that the checks can pair the two
    assert env.observer.requests == [m["request"] for m in moments]


# ---------------------------------------------------------------- CP-5 to CP-8


def test_a_claim_grants_the_lease_and_runs_the_task(env: Env) -> None:
    body = env.claim()
    assert body["task"] is None and body["lease"] is None and body["retry_after_ms"] == 20
    env.cp.issue(env.task())
    body = env.claim()
    assert body["task"]["attempt"] == 1 and body["task"]["origin_url"] == env.origin.url
    lease = body["lease"]
    assert lease["state"] == "ACTIVE" and lease["expires_at_ms"] == T0 + 30_000
    assert lease["current_head_oid"] == env.origin.base_oid and lease["generation"] == 1
    status, view = env.call("GET", "v1/tasks/t-1")
    assert (status, view["state"], view["stored"]) == (200, "RUNNING", None)
    assert env.claim()["task"] is None  # the branch has an ACTIVE lease
    assert env.call("GET", "v1/tasks/nope")[0] == 404
    assert env.call("POST", "v1/claims", {"worker": "x"})[0] == 400


def test_issue_validates_the_task(env: Env) -> None:
    with pytest.raises(KitError, match=r"task\.json"):
        env.cp.issue(env.task(base_oid="xyz"))
    env.cp.issue(env.task())
    with pytest.raises(KitError, match="already issued"):
        env.cp.issue(env.task())


def test_the_core_validates_through_the_function_the_shell_hands_in() -> None:
    # The pure core, on plain values: no server, no origin, and no schema file unless the shell passes one in.
    asked: list[tuple[str, Any]] = []

    def refuse(uri: str, instance: Any) -> str:
        asked.append((uri, instance))
        return "at /base_oid: too short"

    task = {"task_id": "t-1", "repository": REPO, "origin_url": "file:///nowhere", "kind": "source_capture"}
    state = State(now_ms=T0, ttl_ms=30_000, retry_after_ms=20, validate=refuse)
    log = Log(state, None)
    with pytest.raises(KitError, match=r"^task 't-1' breaks schemas/p1/task\.json at /base_oid: too short$"):
        kit_issue(state, log, task)
    assert asked == [(TASK_SCHEMA, {**task, "attempt": 1})]
    assert state.tasks == {} and log.entries == []
    state = State(now_ms=T0, ttl_ms=30_000, retry_after_ms=20, validate=lambda uri, instance: None)
    log = Log(state, None)
    kit_issue(state, log, task)
    assert [entry["kind"] for entry in log.entries] == ["attempt_issued", "task_state"]
    assert state.tasks["t-1"].state == "QUEUED"


def test_the_shell_reads_the_heads_only_for_a_request_that_shows_one() -> None:
    # A lease's CP-9 view and a receipt's visibility carry the branch's head, and each report of the origin's
    # hook is logged with the branch as the kit read it; an idle poll carries none, so the core asks the shell
    # for no read of the origin (most of a worker's requests are polls).
    state = State(now_ms=T0, ttl_ms=30_000, retry_after_ms=20, validate=lambda uri, instance: None)

    def needs_heads(path: str, body: bytes = b"{}", method: str = "POST") -> bool:
        request = Request(method, path, "", {"content-type": ("application/json",)}, body, "w1")
        return prepare(state, request).needs_heads

    assert not needs_heads("v1/claims")
    task = {"task_id": "t-1", "execution_digest": "d-t-1", "job_id": "job-t-1", "repository": REPO,
            "origin_url": "file:///nowhere", "base_oid": "a" * 40, "expected_branch_oid": "a" * 40,
            "target_branch": "main", "generation": 1, "kind": "source_capture", "payload": {}}
    kit_issue(state, Log(state, None), task)
    assert needs_heads("v1/claims")
    receipt = {"task_id": "t-1", "attempt": 1, "lease_id": "lease-1", "commit_oid": "b" * 40}
    assert needs_heads("v1/jobs/job-t-1/receipt", json.dumps(receipt).encode(), "PUT")
    state.kit_secret = "s3cret"
    check = {"repository": REPO, "updates": [{"ref": "refs/heads/main", "old": "a" * 40, "new": "b" * 40}]}
    request = Request("POST", "_kit/s3cret/origin/check", "", {}, json.dumps(check).encode(), None)
    plan = prepare(state, request)
    assert plan.endpoint == "origin_check" and plan.needs_heads
    request = Request("POST", "_kit/s3cret/origin/updated", "", {}, json.dumps(check).encode(), None)
    plan = prepare(state, request)
    assert plan.endpoint == "origin_updated" and plan.needs_heads
    assert not needs_heads("v1/leases?repository=acme%2Fwidgets&target_branch=main", method="GET")


# ---------------------------------------------------------------- CP-9, CP-10


def test_result_submission_rules_in_order(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    result = env.capture()
    assert env.submit("t-9", 1, lease_id, result)[0] == 404
    assert env.submit("t-1", 1, lease_id, result, digest="c" * 64)[1]["error"] == "bad_request"
    assert env.submit("t-1", 2, lease_id, result)[0] == 400
    assert env.submit("t-1", 1, lease_id, {"kind": "commit", "commit_oid": "a" * 40, "target_branch": "main"})[0] == 400
    assert env.submit("t-1", 1, lease_id, result, key="has space")[0] == 400
    status, body = env.call("POST", "v1/tasks/t-1/result", {"attempt": 1}, headers={"Idempotency-Key": KEY})
    assert (status, body["error"]) == (400, "bad_request")
    status, body = env.submit("t-1", 1, "lease-99", result)
    assert (status, body["error"]) == (403, "lease_not_active")
    status, body = env.submit("t-1", 1, lease_id, result)
    assert status == 201 and body["state"] == "VERIFYING" and body["stored"]["idempotency_key"] == KEY
    # a replay, with the body in another member order, is the same body
    reordered = dict(reversed(list(result.items())))
    status, again = env.submit("t-1", 1, lease_id, reordered)
    assert (status, again["stored"]) == (200, body["stored"])
    status, body = env.submit("t-1", 1, lease_id, env.capture("x"))
    assert (status, body["error"]) == (422, "idempotency_key_reused")
    status, body = env.submit("t-1", 1, lease_id, result, key="another-key")
    assert (status, body["reason"], body["state"]) == (409, "result_exists", "VERIFYING")
    assert body["stored"]["result_hash"] == result_hash(result)
    assert len(env.kinds("result_stored")) == 1
    assert env.kinds("result_stored")[0]["body"] == canonical_json(result).decode()
    with pytest.raises(KitError, match="CP-10"):
        env.cp.reissue("t-1")


def test_a_submission_to_a_task_not_running_is_a_409_with_its_state(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    report = {"attempt": 1, "lease_id": lease_id, "state": "FAILED", "reason": "task_invalid"}
    assert env.call("POST", "v1/tasks/t-1/report", report) == (200, {"state": "FAILED", "now_ms": T0})
    status, body = env.submit("t-1", 1, lease_id, env.capture())
    assert (status, body["reason"], body["state"], body["stored"]) == (409, "state", "FAILED", None)


def test_reports_change_only_a_running_current_attempt(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    report = {"attempt": 2, "lease_id": lease_id, "state": "FAILED", "reason": "x"}
    assert env.call("POST", "v1/tasks/t-1/report", report)[1]["state"] == "RUNNING"
    report["attempt"] = 1
    report["state"] = "RECONCILIATION_REQUIRED"
    assert env.call("POST", "v1/tasks/t-1/report", report)[1]["state"] == "RECONCILIATION_REQUIRED"
    assert env.call("POST", "v1/tasks/t-1/report", report)[1]["state"] == "RECONCILIATION_REQUIRED"
    assert [r["applied"] for r in env.kinds("report")] == [False, True, False]
    assert env.call("POST", "v1/tasks/t-1/report", {**report, "state": "DONE"})[0] == 400
    # an operator's decision: the next official attempt, with another identity field
    env.cp.reissue("t-1", execution_digest="d-t-1b")
    assert env.cp.task("t-1")["task"]["attempt"] == 2 and env.cp.task("t-1")["state"] == "QUEUED"


# ---------------------------------------------------------------- CP-12 to CP-15


def test_renew_expiry_and_the_automatic_reissue(env: Env) -> None:
    env.cp.issue(env.task())
    lease = env.claim()["lease"]
    lease_id = lease["lease_id"]
    env.cp.move_clock(10_000)
    status, body = env.call("POST", f"v1/leases/{lease_id}/renew", {})
    assert status == 200 and body["lease"]["expires_at_ms"] == T0 + 40_000
    env.cp.move_clock(30_000)  # reaches expires_at_ms
    assert env.cp.leases(REPO, "main")[0]["state"] == "EXPIRED"
    view = env.cp.task("t-1")
    assert (view["state"], view["task"]["attempt"]) == ("QUEUED", 2)
    env.cp.move_clock(-60_000)  # a clock moved back revives nothing
    status, body = env.call("POST", f"v1/leases/{lease_id}/renew", {})
    assert (status, body["error"], body["lease"]["state"]) == (409, "lease_not_active", "EXPIRED")
    assert env.submit("t-1", 1, lease_id, env.capture())[0] == 403
    assert env.call("POST", f"v1/leases/{lease_id}/release", {})[1]["lease"]["state"] == "EXPIRED"
    assert env.call("POST", "v1/leases/lease-99/renew", {})[0] == 404
    assert env.call("POST", f"v1/leases/{lease_id}/renew", {"x": 1})[0] == 400
    second = env.claim()
    assert second["task"]["attempt"] == 2
    status, body = env.call("POST", f"v1/leases/{second['lease']['lease_id']}/release", {})
    assert (status, body["lease"]["state"]) == (200, "RELEASED")
    assert env.cp.task("t-1")["task"]["attempt"] == 3  # released while RUNNING with no result
    status, body = env.call("GET", "v1/leases?repository=acme%2Fwidgets&target_branch=main")
    assert [lease["state"] for lease in body["leases"]] == ["EXPIRED", "RELEASED"]
    assert env.call("GET", "v1/leases?repository=acme%2Fwidgets")[0] == 400
    events = [e["event"] for e in env.kinds("lease")]
    assert events == ["granted", "renewed", "expired", "granted", "released"]


def test_fencing_and_stale_generations(env: Env) -> None:
    env.cp.issue(env.task())
    first = env.claim()["lease"]
    env.cp.script(F.Fence(task_id="t-1"))
    leases = env.cp.leases(REPO, "main")
    assert [(x["state"], x["generation"]) for x in leases] == [("EXPIRED", 1), ("ACTIVE", 2)]
    assert "fenced" in [e["event"] for e in env.kinds("lease")]
    assert env.cp.task("t-1")["task"]["attempt"] == 2
    assert env.submit("t-1", 1, first["lease_id"], env.capture())[0] == 403
    env.cp.move_clock(30_000)  # the kit's lease expires; attempt 2 still has generation 1
    assert env.claim()["task"] is None
    env.cp.script(C.ServeStale(task_id="t-1"))
    served = env.claim()
    assert served["task"]["attempt"] == 2 and served["task"]["generation"] == 1


def test_a_second_lease_and_duplicate_delivery(env: Env) -> None:
    env.cp.issue(env.task())
    first = env.claim("w1")
    env.cp.script(F.SecondLease(task_id="t-1"), C.DuplicateDelivery(task_id="t-1"))
    assert [x["state"] for x in env.cp.leases(REPO, "main")] == ["ACTIVE", "ACTIVE"]
    again = env.claim("w2")
    assert again["task"] == first["task"] and again["lease"]["lease_id"] == first["lease"]["lease_id"]
    assert env.kinds("duplicate_delivery")[0]["task_id"] == "t-1"


# ---------------------------------------------------------------- CP-16 to CP-18: receipts and the origin


def _push(work: Path) -> None:
    git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)


def test_the_origin_refuses_a_push_without_an_active_lease_and_accepts_one_with_it(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    work, commit = env.governed_commit()
    with pytest.raises(GitError, match="ACTIVE lease"):
        _push(work)
    assert env.origin.head() == env.origin.base_oid
    env.claim()
    _push(work)
    assert env.origin.head() == commit
    pushes = env.kinds("push")
    assert [(p["accepted"], p["task_id"]) for p in pushes] == [(False, None), (True, "t-1")]
    assert pushes[1]["lease"]["state"] == "ACTIVE" and pushes[1]["old"] == env.origin.base_oid
    assert ("push", "t-1", 1, "refs/heads/main", env.origin.base_oid, commit) in env.observer.calls
    assert [p["accepted"] for p in env.origin.pushes()] == [False, True]
    assert env.kinds("origin_ref_updated")[0]["new"] == commit


def test_each_report_of_the_hook_is_logged_with_the_branch_as_the_kit_read_it(env: Env) -> None:
    # The hook's check comes before git moves the branch and its report after: the kit's own reading of the
    # branch is logged beside each, so that a rule holds the report to it (COMMIT-3).
    env.cp.issue(env.task(kind="commit"))
    work, commit = env.governed_commit()
    env.claim()
    _push(work)
    base = env.origin.base_oid
    assert [(p["old"], p["new"], p["read"]) for p in env.kinds("push")] == [(base, commit, base)]
    assert [(u["new"], u["read"]) for u in env.kinds("origin_ref_updated")] == [(commit, commit)]
    # A report the worker forges with the secret (it can read the origin's policy) is logged with what the kit
    # read, not with what it claims: here the branch is still at C.
    policy = json.loads((env.origin.path / "resumekit-policy.json").read_text(encoding="utf-8"))
    body = {"repository": REPO, "updates": [{"ref": "refs/heads/main", "old": commit, "new": base}]}
    request = urllib.request.Request(policy["control_plane"]["updated_url"], json.dumps(body).encode(),
                                     {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    assert [(u["new"], u["read"]) for u in env.kinds("origin_ref_updated")][1] == (base, commit)
    body["updates"][0]["ref"] = "refs/tags/t"  # a ref that is no branch: the kit reads none
    request.data = json.dumps(body).encode()
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    assert env.kinds("origin_ref_updated")[2]["read"] is None


def test_the_origin_refuses_other_refs_and_commits_that_skip_a_parent(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    env.claim()
    work, _ = env.governed_commit()
    with pytest.raises(GitError, match="not the target branch"):
        git(["push", "--quiet", "origin", "HEAD:refs/heads/other"], cwd=work)
    git(["commit", "--quiet", "--allow-empty", "--no-gpg-sign", "-m", "two"], cwd=work, env=_KIT_IDENTITY)
    with pytest.raises(GitError, match="only parent"):
        _push(work)
    assert env.origin.head() == env.origin.base_oid


def test_the_origin_refuses_when_the_control_plane_is_unreachable(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    env.claim()
    work, _ = env.governed_commit()
    env.cp.close()
    with pytest.raises(GitError, match="could not be asked"):
        _push(work)
    assert env.origin.head() == env.origin.base_oid


def test_receipts_confirm_delay_and_conflict(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    lease_id = env.claim()["lease"]["lease_id"]
    work, commit = env.governed_commit()
    _push(work)
    env.cp.script(F.DelayVisibility(job_id="job-t-1", polls=1))
    receipt = {"task_id": "t-1", "attempt": 1, "lease_id": lease_id, "commit_oid": commit}
    status, body = env.call("PUT", "v1/jobs/job-t-1/receipt", receipt)
    assert (status, body["receipt"]["visibility"]) == (200, "not_visible")
    assert env.cp.leases(REPO, "main")[0]["current_head_oid"] == env.origin.base_oid
    status, body = env.call("PUT", "v1/jobs/job-t-1/receipt", receipt)
    assert body["receipt"] == {"job_id": "job-t-1", "commit_oid": commit, "visibility": "confirmed"}
    assert env.cp.leases(REPO, "main")[0]["current_head_oid"] == commit
    status, body = env.call("PUT", "v1/jobs/job-t-1/receipt", {**receipt, "commit_oid": "e" * 40})
    assert (status, body["error"], body["receipt"]["commit_oid"]) == (409, "receipt_conflict", commit)
    assert env.call("PUT", "v1/jobs/nope/receipt", receipt)[0] == 404
    assert env.call("PUT", "v1/jobs/job-t-1/receipt", {**receipt, "attempt": 2})[0] == 400
    assert env.call("PUT", "v1/jobs/job-t-1/receipt", {**receipt, "lease_id": "lease-9"})[0] == 403
    assert env.call("PUT", "v1/jobs/job-t-1/receipt", {**receipt, "extra": 1})[0] == 400
    assert [r["recorded"] for r in env.kinds("receipt")] == [True, False]
    assert ("receipt", "w1", "t-1", 1, commit) in env.observer.calls


def test_a_moved_branch_is_not_visible(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    lease_id = env.claim()["lease"]["lease_id"]
    work, commit = env.governed_commit()
    _push(work)
    env.cp.script(F.MoveBranch(repository=REPO, branch="main", oid=env.origin.base_oid, on="receipt"))
    receipt = {"task_id": "t-1", "attempt": 1, "lease_id": lease_id, "commit_oid": commit}
    assert env.call("PUT", "v1/jobs/job-t-1/receipt", receipt)[1]["receipt"]["visibility"] == "not_visible"
    assert env.origin.head() == env.origin.base_oid
    assert env.kinds("branch_moved")[0]["new"] == env.origin.base_oid


# ---------------------------------------------------------------- CP-21: scripted faults


def test_5xx_before_and_after_the_effect(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    env.cp.script(F.Answer(on="result", status=503, effect=False), F.Answer(on="result", status=500, effect=True))
    status, body = env.submit("t-1", 1, lease_id, env.capture())
    assert (status, body["error"]) == (503, "unavailable") and env.cp.task("t-1")["stored"] is None
    status, body = env.submit("t-1", 1, lease_id, env.capture())
    assert (status, body["error"]) == (500, "unavailable") and env.cp.task("t-1")["stored"] is not None
    assert env.submit("t-1", 1, lease_id, env.capture())[0] == 200
    assert [r["status"] for r in env.kinds("request") if r["endpoint"] == "result"] == [503, 500, 200]


def test_a_dropped_answer_and_a_delayed_one_keep_the_effect(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    env.cp.script(F.Drop(on="result"), F.Delay(on="renew", seconds=1.0))
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        env.submit("t-1", 1, lease_id, env.capture())
    assert env.cp.task("t-1")["state"] == "VERIFYING"
    env.cp.move_clock(1_000)
    with pytest.raises((urllib.error.URLError, socket.timeout, TimeoutError)):
        env.call("POST", f"v1/leases/{lease_id}/renew", {}, timeout=0.3)
    assert env.cp.leases(REPO, "main")[0]["expires_at_ms"] == T0 + 31_000
    assert [r["answer"] for r in env.kinds("request")][-2:] == ["drop", "delay"]


@pytest.mark.parametrize(
    ("stored", "reason", "attempt", "same_hash"),
    [("same", "result_exists", 1, True), ("other_body", "result_exists", 1, False),
     ("other_attempt", "result_exists", 2, True), (None, "state", None, None)],
)
def test_scripted_409s_agree_with_the_task(
    env: Env, stored: str | None, reason: str, attempt: int | None, same_hash: bool | None
) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    env.cp.script(F.Conflict409(state="SUCCEEDED", stored=stored))
    status, body = env.submit("t-1", 1, lease_id, env.capture())
    assert (status, body["reason"], body["state"]) == (409, reason, "SUCCEEDED")
    assert env.call("GET", "v1/tasks/t-1")[1]["stored"] == body["stored"]
    if attempt is None:
        assert body["stored"] is None
    else:
        assert body["stored"]["attempt"] == attempt
        assert (body["stored"]["result_hash"] == result_hash(env.capture())) is same_hash


def test_kill_points_call_back_after_the_log_is_durable(env: Env) -> None:
    env.cp.issue(env.task(kind="commit"))
    env.cp.script(
        F.KillPoint("server_claim_granted"),
        F.KillPoint("server_receipt_recorded"),
        F.KillPoint("origin_ref_updated"),
        F.KillPoint("server_result_received"),
        F.KillPoint("server_result_stored"),
    )
    lease_id = env.claim()["lease"]["lease_id"]  # the callback does not kill here, so the answer comes
    work, commit = env.governed_commit()
    _push(work)
    receipt = {"task_id": "t-1", "attempt": 1, "lease_id": lease_id, "commit_oid": commit}
    assert env.call("PUT", "v1/jobs/job-t-1/receipt", receipt)[0] == 200
    result = {"commit_oid": commit, "kind": "commit", "target_branch": "main"}
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        env.submit("t-1", 1, lease_id, result)
    assert env.cp.task("t-1")["stored"] is None  # received, nothing stored
    assert env.submit("t-1", 1, lease_id, result)[0] == 201
    kills = [c for c in env.observer.calls if c[0] == "kill"]
    assert kills == [("kill", "server_claim_granted", "w1"), ("kill", "origin_ref_updated", "w1"),
                     ("kill", "server_receipt_recorded", "w1"), ("kill", "server_result_received", "w1"),
                     ("kill", "server_result_stored", "w1")]
    claim_log = env.observer.at_kill[0]
    assert any(e["kind"] == "lease" and e["event"] == "granted" for e in claim_log)
    assert any(e["kind"] == "result_stored" for e in env.observer.at_kill[4])


def test_faults_from_mappings() -> None:
    fault = fault_from_mapping({"fault": "Answer", "on": "result", "status": 502, "effect": True})
    assert fault == F.Answer(on="result", status=502, effect=True)
    assert fault_from_mapping(F.fault_to_mapping(fault)) == fault
    for bad, words in [
        ({"fault": "Nope"}, "unknown fault"),
        ({"fault": "Answer", "on": "result", "colour": 1}, "no field"),
        ({"fault": "Answer"}, "needs"),
        ({"fault": "Answer", "on": "result", "status": 418}, "5xx status or one of"),
        ({"fault": "Answer", "on": "result", "status": 404, "effect": True}, "cannot have an effect"),
        ({"fault": "KillPoint", "name": "nowhere"}, "unknown kill point"),
        ({"fault": "Drop", "on": "nowhere"}, "unknown endpoint"),
        ({"fault": "Delay", "on": "result", "seconds": 99}, "between"),
        ({"fault": "Answer", "on": "result", "effect": "yes"}, "true or false"),
    ]:
        with pytest.raises(F.FaultError, match=words):
            fault_from_mapping(bad)


def test_unknown_body_members_are_400_everywhere(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    for method, path in [("POST", "v1/claims"), ("POST", f"v1/leases/{lease_id}/renew"),
                         ("POST", f"v1/leases/{lease_id}/release"), ("POST", "v1/tasks/t-1/report")]:
        status, body = env.call(method, path, {"attempt": 1, "lease_id": lease_id, "state": "FAILED",
                                               "reason": "x", "unknown": True})
        assert (status, body["error"]) == (400, "bad_request"), path
        assert "now_ms" in body
    result = {"attempt": 1, "execution_digest": "d-t-1", "lease_id": lease_id,
              "result_hash": result_hash(env.capture()), "result": env.capture(), "more": 1}
    assert env.call("POST", "v1/tasks/t-1/result", result, headers={"Idempotency-Key": KEY})[0] == 400
    assert env.cp.leases(REPO, "main")[0]["state"] == "ACTIVE"


def test_a_scripted_rejection_is_a_4xx_with_its_error_code_and_never_an_effect() -> None:
    from resumekit.conformance.p1.control_plane.faults import Answer, FaultError

    assert fault_from_mapping({"fault": "Answer", "on": "result", "status": 422}).status == 422
    with pytest.raises(FaultError, match="cannot have an effect"):
        Answer(on="result", status=400, effect=True)
    with pytest.raises(FaultError, match="5xx status or one of"):
        Answer(on="result", status=418)


# ---------------------------------------------------------------- CP-21: deliveries CP-5 and CP-7 never make


def test_serve_stale_waits_for_the_task_to_be_queued(env: Env) -> None:
    # A claim that arrives between the kit's scripting of the fault and its issue of the stale task must not
    # use the fault up (the cause of a flaky strict scenario under load).
    env.cp.issue(env.task())
    env.cp.script(F.Fence(task_id="t-1"))  # generation 2 on the branch; t-1's next attempt is stale
    env.cp.move_clock(30_000)
    env.cp.script(C.ServeStale(task_id="t-2"))
    assert env.claim()["task"] is None  # before t-2 exists: the fault waits
    assert env.cp.pending_faults() == 1
    env.cp.issue(env.task("t-2"))
    served = env.claim()["task"]
    assert (served["task_id"], served["generation"]) == ("t-2", 1)


def test_a_superseded_attempt_replayed_comes_with_its_own_lease_revived(env: Env) -> None:
    env.cp.issue(env.task())
    first = env.claim()
    env.cp.script(C.ReplayAttempt(task_id="t-1", attempt=1))
    assert env.claim()["task"] is None and env.cp.pending_faults() == 1  # attempt 1 is not superseded yet
    env.cp.move_clock(30_000)  # expired: attempt 2 is issued, and the replay fires before it is served
    replayed = env.claim()
    assert replayed["task"] == first["task"] and replayed["lease"]["lease_id"] == first["lease"]["lease_id"]
    assert replayed["lease"]["state"] == "ACTIVE"
    lease_id = first["lease"]["lease_id"]
    assert env.call("POST", f"v1/leases/{lease_id}/renew", {})[0] == 200
    status, body = env.submit("t-1", 1, lease_id, env.capture())
    assert (status, body["reason"]) == (409, "attempt_superseded")
    assert env.call("POST", f"v1/leases/{lease_id}/release", {})[0] == 200
    assert env.claim()["task"]["attempt"] == 2  # releasing the revived lease issues nothing new
    (entry,) = env.kinds("replayed_delivery")
    assert (entry["attempt"], entry["worker"], entry["lease_id"]) == (1, "w1", lease_id)


def test_an_attempt_served_with_another_identity_gets_a_lease_no_attempt_holds(env: Env) -> None:
    env.cp.issue(env.task())
    first = env.claim()
    env.cp.script(C.ConflictingIdentity(task_id="t-1", changes={"job_id": "job-other"}, worker="w2"))
    assert env.claim("w1")["task"] is None  # another worker's claim does not fire it
    served = env.claim("w2")
    assert served["task"] == {**first["task"], "job_id": "job-other"}
    assert served["lease"]["lease_id"] != first["lease"]["lease_id"] and served["lease"]["state"] == "ACTIVE"
    assert env.cp.task("t-1")["task"]["job_id"] == "job-t-1"  # the control plane's own record is unchanged
    assert env.submit("t-1", 1, served["lease"]["lease_id"], env.capture())[0] == 403
    assert env.kinds("conflicting_delivery")[0]["task"]["job_id"] == "job-other"
    for changes in ({"attempt": 2}, {"task_id": "t-9"}, {}):
        with pytest.raises(F.FaultError):
            C.ConflictingIdentity(task_id="t-1", changes=changes)
    with pytest.raises(F.FaultError):
        fault_from_mapping({"fault": "ReplayAttempt", "task_id": "t-1", "attempt": 0})


# ---------------------------------------------------------------- text a worker sends (issue 36)


def test_a_lone_surrogate_in_a_body_is_answered_and_logged_as_its_escape(env: Env) -> None:
    env.cp.issue(env.task())
    lease_id = env.claim()["lease"]["lease_id"]
    # \ud800 is a valid JSON escape that no UTF-8 text carries; NUL and ESC are JSON's own escapes.
    reason = b'"\\ud800 \\u0000 \\u001b[2J"'
    raw = b'{"attempt": 1, "lease_id": "' + lease_id.encode() + b'", "state": "FAILED", "reason": ' + reason + b"}"
    status, answer = env.call("POST", "v1/tasks/t-1/report", raw=raw)
    assert (status, answer["state"]) == (200, "FAILED")
    assert [entry["reason"] for entry in env.kinds("report")] == ["\\ud800 \x00 \x1b[2J"]
    assert _read_log(env.log_path)[-1]["status"] == 200, "the durable log holds the request"
    status, answer = env.call("POST", "v1/claims", raw=b'{"\\udfff": 1}')
    assert (status, answer["error"], answer["message"]) == (400, "bad_request", "the body has unknown members \\udfff")


def test_a_body_nested_past_the_parsers_depth_is_a_400(env: Env) -> None:
    status, answer = env.call("POST", "v1/claims", raw=b"[" * 100_000 + b"]" * 100_000)
    assert (status, answer["error"]) == (400, "bad_request")
    assert "the body is not JSON" in answer["message"]
