"""A small in-process control plane for the reference worker's tests (p1-control-plane.md, simplified).

It serves the endpoints a worker calls, keeps CP time still unless a test moves it, grants one lease
per claim, re-issues a task when its lease stops being ACTIVE without a result, and logs every request.
Faults are scripted per endpoint with ``fail_next``. The kit's own control plane is the normative one.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from resumekit.reference.p1.results import canonical_json, result_hash

TTL_MS = 30000


class FakeControlPlane:
    def __init__(self, heads: Callable[[str, str], str | None] = lambda repository, branch: None) -> None:
        self.now = 1_000_000_000_000
        self.heads = heads
        self.tasks: dict[str, dict[str, Any]] = {}
        self.queue: list[str] = []
        self.leases: dict[str, dict[str, Any]] = {}
        self.receipts: dict[str, dict[str, Any]] = {}
        self.log: list[dict[str, Any]] = []
        self.faults: dict[str, list[int]] = {}
        self.hooks: dict[str, Callable[[], None]] = {}
        self._lock = threading.RLock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, answer = fake.handle(self.command, self.path, body, self.headers.get("Idempotency-Key"))
                if status == 0:
                    self.close_connection = True
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/w1/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the kit's side ---------------------------------------------------------------------------

    def issue(self, task: dict[str, Any]) -> None:
        with self._lock:
            self.tasks[task["task_id"]] = {"task": dict(task), "state": "QUEUED", "stored": None, "lease_id": None}
            self.queue.append(task["task_id"])

    def fail_next(self, endpoint: str, *statuses: int) -> None:
        """Answer the next requests to *endpoint* (``result``, ``receipt``, ...) with these statuses (0: drop)."""
        self.faults.setdefault(endpoint, []).extend(statuses)

    def requests(self, endpoint: str) -> list[dict[str, Any]]:
        return [entry for entry in self.log if entry["endpoint"] == endpoint]

    # -- the server -------------------------------------------------------------------------------

    def _expire(self) -> None:
        for lease in self.leases.values():
            if lease["state"] == "ACTIVE" and lease["expires_at_ms"] <= self.now:
                self._end_lease(lease, "EXPIRED")

    def _end_lease(self, lease: dict[str, Any], state: str) -> None:
        lease["state"] = state
        record = self.tasks[lease["task_id"]]
        if record["lease_id"] == lease["lease_id"] and record["state"] == "RUNNING" and record["stored"] is None:
            task = dict(record["task"], attempt=record["task"]["attempt"] + 1)
            record.update(task=task, state="QUEUED", lease_id=None)
            self.queue.append(task["task_id"])

    def _active(self, lease_id: Any) -> dict[str, Any] | None:
        lease = self.leases.get(lease_id)
        return lease if lease is not None and lease["state"] == "ACTIVE" else None

    def handle(self, method: str, raw_path: str, body: Any, key: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            parsed = urllib.parse.urlsplit(raw_path)
            path = parsed.path.removeprefix("/w1/")
            parts = [urllib.parse.unquote(p) for p in path.split("/")]
            endpoint = parts[-1] if len(parts) > 2 else parts[1] if len(parts) > 1 else path
            self.log.append({"method": method, "path": path, "endpoint": endpoint, "key": key, "body": body})
            self._expire()
            hook = self.hooks.pop(endpoint, None)
            if hook is not None:
                hook()
            status, answer = self._route(method, parts, parse_qs(parsed.query), body, key)
            fault = self.faults.get(endpoint)
            if fault:
                return fault.pop(0), {"error": "unavailable", "now_ms": self.now}
            answer["now_ms"] = self.now
            return status, answer

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: Any,
               key: str | None) -> tuple[int, dict[str, Any]]:
        if parts == ["v1", "clock"]:
            return 200, {}
        if parts == ["v1", "claims"]:
            return self._claim()
        if parts[:2] == ["v1", "tasks"] and len(parts) == 3:
            record = self.tasks[parts[2]]
            return 200, {"task": record["task"], "state": record["state"], "stored": record["stored"]}
        if parts[:2] == ["v1", "tasks"] and parts[3] == "result":
            return self._result(parts[2], body, key)
        if parts[:2] == ["v1", "tasks"] and parts[3] == "report":
            record = self.tasks[parts[2]]
            if body["attempt"] == record["task"]["attempt"] and record["state"] == "RUNNING":
                record["state"] = body["state"]
            return 200, {"state": record["state"]}
        if parts[:2] == ["v1", "leases"] and len(parts) == 4:
            lease = self.leases.get(parts[2])
            if lease is None:
                return 404, {"error": "not_found"}
            if parts[3] == "release":
                if lease["state"] == "ACTIVE":
                    self._end_lease(lease, "RELEASED")
                return 200, {"lease": dict(lease)}
            if lease["state"] != "ACTIVE":
                return 409, {"error": "lease_not_active", "lease": dict(lease)}
            lease["expires_at_ms"] = self.now + lease["ttl_ms"]
            return 200, {"lease": dict(lease)}
        if parts == ["v1", "leases"]:
            found = [dict(lease) for lease in self.leases.values()
                     if lease["repository"] == query["repository"] and lease["target_branch"] == query["target_branch"]]
            return 200, {"leases": found}
        if parts[:2] == ["v1", "jobs"]:
            return self._receipt(parts[2], body)
        return 404, {"error": "not_found"}

    def _claim(self) -> tuple[int, dict[str, Any]]:
        for task_id in list(self.queue):
            task = self.tasks[task_id]["task"]
            busy = any(lease["state"] == "ACTIVE" and lease["repository"] == task["repository"]
                       and lease["target_branch"] == task["target_branch"] for lease in self.leases.values())
            if busy:
                continue
            self.queue.remove(task_id)
            lease_id = f"lease-{len(self.leases) + 1}"
            lease = {"lease_id": lease_id, "repository": task["repository"], "target_branch": task["target_branch"],
                     "task_id": task_id, "attempt": task["attempt"], "generation": task["generation"],
                     "state": "ACTIVE", "ttl_ms": TTL_MS, "acquired_at_ms": self.now,
                     "expires_at_ms": self.now + TTL_MS,
                     "current_head_oid": self.heads(task["repository"], task["target_branch"])}
            self.leases[lease_id] = lease
            self.tasks[task_id].update(state="RUNNING", lease_id=lease_id)
            return 200, {"task": dict(task), "lease": dict(lease), "retry_after_ms": 20}
        return 200, {"task": None, "lease": None, "retry_after_ms": 20}

    def _result(self, task_id: str, body: Any, key: str | None) -> tuple[int, dict[str, Any]]:
        record = self.tasks[task_id]
        if result_hash(body["result"]) != body["result_hash"]:
            return 400, {"error": "bad_request"}
        lease = self._active(body["lease_id"])
        if lease is None or lease["task_id"] != task_id or lease["attempt"] != body["attempt"]:
            return 403, {"error": "lease_not_active"}
        stored = record["stored"]
        if stored is not None and stored["idempotency_key"] == key:
            if stored["result_hash"] == body["result_hash"]:
                return 200, {"stored": stored, "state": record["state"]}
            return 422, {"error": "idempotency_key_reused"}
        if stored is not None:
            return 409, {"error": "conflict", "reason": "result_exists", "state": record["state"], "stored": stored}
        if record["state"] != "RUNNING" or body["attempt"] != record["task"]["attempt"]:
            return 409, {"error": "conflict", "reason": "state", "state": record["state"], "stored": None}
        record["stored"] = {"attempt": body["attempt"], "idempotency_key": key, "result_hash": body["result_hash"],
                            "result": json.loads(canonical_json(body["result"]))}
        record["state"] = "VERIFYING"
        return 201, {"stored": record["stored"], "state": "VERIFYING"}

    def _receipt(self, job_id: str, body: Any) -> tuple[int, dict[str, Any]]:
        lease = self._active(body["lease_id"])
        if lease is None:
            return 403, {"error": "lease_not_active"}
        held = self.receipts.get(job_id)
        if held is not None and held["commit_oid"] != body["commit_oid"]:
            return 409, {"error": "receipt_conflict", "receipt": held}
        head = self.heads(lease["repository"], lease["target_branch"])
        visibility = "confirmed" if head == body["commit_oid"] else "not_visible"
        receipt = {"job_id": job_id, "commit_oid": body["commit_oid"], "visibility": visibility}
        self.receipts[job_id] = receipt
        if visibility == "confirmed":
            lease["current_head_oid"] = body["commit_oid"]
        return 200, {"receipt": receipt}


def parse_qs(query: str) -> dict[str, str]:
    return {name: values[0] for name, values in urllib.parse.parse_qs(query).items()}
