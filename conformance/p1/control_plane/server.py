"""The kit's simulated control plane (docs/spec/p1-control-plane.md): a real HTTP server on the loopback.

A thin shell around the pure core, the rest of this package (its ``__init__`` maps it): it speaks HTTP
(``ThreadingHTTPServer`` in a daemon thread), holds one lock around the core, reads the origins' refs and
moves branches when the core asks, runs the observer's moment checks (CP-20) before the core stores
anything, appends every log entry to a JSON-lines file, flushed before the answer leaves (CP-19), and then
answers, drops the connection, or holds the answer, as the script says (CP-21). Each worker gets a base
URL of its own, ``/w/<worker>/``, which is how its requests are attributed (CP-1). The kit's own paths
carry a secret of this control plane's, drawn at its birth and never given to the worker (CP-22):
``kit_url`` builds them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import quote, unquote, urlsplit

from resumekit.conformance._process import procfs
from resumekit.conformance.history import History
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.control_plane.kit import (
    fault_from_mapping,
    kit_issue,
    kit_reissue,
    kit_script,
    kit_set_state,
)
from resumekit.conformance.p1.control_plane.lifecycle import move_clock
from resumekit.conformance.p1.control_plane.requests import handle, log_refused_kit_call, prepare, shown_path
from resumekit.conformance.p1.control_plane.state import (
    KIT,
    BranchMove,
    Fault,
    KitError,
    Log,
    Moment,
    Outcome,
    Request,
    State,
    branch_leases,
    lease_view,
    task_view,
)
from resumekit.conformance.p1.origin import Origin
from resumekit.conformance.p1.origin_guard import OriginUnreadable
from resumekit.conformance.schemas import first_violation

MAX_BODY = 1 << 20
_DRAIN_S = 0.5  # how long, at most, a refused request's unread body is read before the connection closes
_DRAIN_READS = 16  # and in at most this many reads: a body the kit refused is not read to its end
SHUTDOWN_POLL_S = 0.02  # how soon close() is noticed by the serving loop
ACTOR = "control-plane"  # the actor of the control plane's log entries in a case's history
_UNREADABLE_KEPT = 4  # failed reads of an origin kept: the first already fails the scenario


class Observer(Protocol):
    """The kit's moment readings (CP-20, EVID-4), made as a request arrives, before it is answered, and recorded
    with the request's number for the checks; each returns the problems the kit had making it (none: done)."""

    def on_first_request(self, worker: str, *, request: int | None = None) -> list[str]:
        """A worker's first request: no stale workspace may be left by then (CLEAN-1)."""
        ...

    def on_submission(
        self, worker: str, task_id: str, attempt: int, key: str, result_hash: str, *, request: int | None = None
    ) -> list[str]:
        """A result submission arrived: its result_pending row must be durable already (SUB-1)."""
        ...

    def on_receipt(
        self, worker: str, task_id: str, attempt: int, commit_oid: str, *, request: int | None = None
    ) -> list[str]:
        """A commit receipt arrived: its commit_done row must be durable already (COMMIT-5, strict)."""
        ...

    def on_push(
        self, task_id: str, attempt: int, ref: str, old: str, new: str, *, request: int | None = None
    ) -> list[str]:
        """A push reached the origin: the attempt's latest durable row must be verification_passed (COMMIT-2)."""
        ...

    def on_kill_point(self, name: str, worker: str) -> None:
        """A kit-side kill point was reached: kill the worker there."""
        ...


_TOOL_MODULE = b"resumekit.conformance.p1._tool"  # what the tool and its grandchild run (p1._tool.MODULE)


def _look_at_tool(announced: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the kit sees itself, as the tool's announcement arrives, of the ``pid`` and ``grandchild`` it names:
    whether each runs the kit's tool, and in which directory (None: no such process). The announcement comes to
    one of the kit's own paths, whose secret the worker can read, so it is only what it claims. Linux only
    (``/proc``); elsewhere None: the kit did not look."""
    if not sys.platform.startswith("linux"):
        return None
    return {role: procfs.running(announced.get(role), _TOOL_MODULE) for role in ("pid", "grandchild")}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    plane: ControlPlane

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A worker that hangs up mid-request (a kill does exactly that) is no error of the kit: nothing to
        # print. Anything else is a fault of the kit's own server, which must not pass as a verdict.
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            return
        if isinstance(error, OriginUnreadable):  # the worker's doing: its scenario fails, the request is dropped
            self.plane._unreadable_origin(error)
            return
        self.plane._server_error(f"the control plane's server failed on a request: {error!r}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server answers here a request it cannot parse (a malformed request line, a header line too
        # long, a method without a handler), by default with an HTML page: CP-2 wants JSON, 400 bad_request.
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # an unparsed line leaves HTTP/0.9, which gets no status line
        said = message or HTTPStatus(code).phrase
        refusal = f"the request could not be parsed as HTTP/1.1 ({code} {said})"
        method = self.command if isinstance(self.command, str) else ""
        self._send(400, self.server.plane._refuse(method, "", None, refusal))

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def _serve(self) -> None:
        split = urlsplit(self.path)
        worker: str | None = None
        relative = split.path.lstrip("/")
        if split.path.startswith("/w/"):
            name, sep, rest = split.path[3:].partition("/")
            if sep and name:
                worker, relative = unquote(name), rest
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        refusal = None
        if self.headers.get("Transfer-Encoding"):
            refusal = "send bodies with Content-Length, not a Transfer-Encoding"
        elif not 0 <= length <= MAX_BODY:
            refusal = f"Content-Length must be 0 to {MAX_BODY}"
        if refusal is not None:
            # The body cannot be read: answered here, logged all the same, and the connection closed.
            self.close_connection = True
            self._send(400, self.server.plane._refuse(self.command, relative, worker, refusal))
            self._drain()
            return
        body = self.rfile.read(length) if length else b""
        headers: dict[str, tuple[str, ...]] = {}
        for name, value in self.headers.items():
            headers[name.lower()] = (*headers.get(name.lower(), ()), value)
        request = Request(self.command, relative, split.query, headers, body, worker)
        outcome = self.server.plane._serve(request)
        if outcome.transport == "drop":
            self.close_connection = True
            return
        if outcome.transport == "delay":
            time.sleep(outcome.delay_s)
        assert outcome.body is not None
        self._send(outcome.status, outcome.body)

    def _drain(self) -> None:
        """Read what the client still sends of a body left unread, until it hangs up or a moment passes.

        Closing a socket with unread bytes makes the system reset the connection, and a reset can reach the
        client before it has read the answer already sent: the refusal would arrive as a transport failure.
        """
        deadline = time.monotonic() + _DRAIN_S
        with contextlib.suppress(OSError, ValueError):
            self.connection.shutdown(socket.SHUT_WR)
            for _ in range(_DRAIN_READS):
                self.connection.settimeout(max(deadline - time.monotonic(), 0.001))
                if not self.connection.recv(65536):
                    return

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            # The worker is gone (a kill point): nothing is left to answer.
            self.close_connection = True


class ControlPlane:
    """The simulated Task API and Bridge/GitOps authority of one scenario, with its durable log."""

    def __init__(
        self,
        *,
        log_path: Path,
        clock_ms: int = 1_000_000_000_000,
        ttl_ms: int = 30_000,
        retry_after_ms: int = 20,
        observer: Observer | None = None,
        log_opener: Callable[[], IO[bytes]] | None = None,
        history: History | None = None,
    ) -> None:
        # The core validates tasks and submissions through the schemas, which this shell reads from disk.
        self._state = State(
            now_ms=clock_ms,
            ttl_ms=ttl_ms,
            retry_after_ms=retry_after_ms,
            validate=first_violation,
            kit_secret=secrets.token_urlsafe(32),
        )
        self._observer = observer
        self._check_errors: list[str] = []  # moment checks that raised: the scenario is then errored
        self._unreadable: list[OriginUnreadable] = []  # origins a request could not read: the scenario fails
        self._born = time.monotonic()  # requests are stamped with their arrival in real time since (WRK-3)
        self._lock = threading.RLock()
        self._grown = threading.Condition(self._lock)  # notified whenever the log grows
        self._log_path = Path(log_path)
        # How the log is opened for appending: a scenario's opens it in the scratch root it holds, never
        # through a link a worker put at its name; by default, by its path.
        self._log_opener = log_opener or self._open_by_path
        self._log_file: IO[bytes] | None = None
        self._history = history  # the case's, into which every log entry is recorded as it is made
        self._closed = False
        self._entries: list[dict[str, Any]] = []
        self._origins: dict[str, Origin] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("the control plane is already started")
        if self._log_file is None:
            self._log_file = self._log_opener()  # kept open until close()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.plane = self
        self._server = server
        # The serving loop notices shutdown() only between polls: a short poll makes close() prompt.
        serve = functools.partial(server.serve_forever, poll_interval=SHUTDOWN_POLL_S)
        self._thread = threading.Thread(target=serve, name="resumekit-control-plane", daemon=True)
        self._thread.start()
        for repository, origin in self._origins.items():
            self._connect(repository, origin)

    def close(self) -> None:
        """Stop serving and close the log."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            self._closed = True
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The loopback port the control plane listens on (RuntimeError before it starts)."""
        if self._server is None:
            raise RuntimeError("the control plane is not started")
        return int(self._server.server_address[1])

    def base_url(self, worker: str) -> str:
        """The base URL of one worker (CP-1): every request through it is attributed to *worker*."""
        if not worker or "/" in worker:
            raise ValueError(f"a worker name is a non-empty path segment, not {worker!r}")
        return f"http://127.0.0.1:{self.port}/w/{quote(worker, safe='')}/"

    def kit_url(self, path: str) -> str:
        """The URL of one of the kit's own paths (CP-22), such as ``_kit/origin/check``, with this control
        plane's secret in it: ``.../_kit/<secret>/origin/check``. It is for the kit's own callers only (the
        origin's hook, the kit's tool through a file): never put it in an argv, a message or a report."""
        prefix = KIT + "/"
        if not path.startswith(prefix) or path == prefix:
            raise ValueError(f"a kit path starts with {prefix!r} and names an endpoint, not {path!r}")
        return f"http://127.0.0.1:{self.port}/{prefix}{self._state.kit_secret}/{path[len(prefix):]}"

    # ------------------------------------------------------------ the kit's operations

    def add_origin(self, repository: str, origin: Origin) -> None:
        """Serve *origin* for *repository*: its URL becomes the tasks' ``origin_url`` and its hook asks here."""
        with self._lock:
            self._origins[repository] = origin
            self._state.origins[repository] = origin.url
            if self._server is not None:
                self._connect(repository, origin)

    def issue(self, task: Mapping[str, Any]) -> None:
        """Issue a task's first official attempt (QUEUED); ``origin_url`` defaults to the repository's origin."""
        self._kit(lambda log: kit_issue(self._state, log, task))

    def reissue(self, task_id: str, **changes: Any) -> None:
        """Issue the next official attempt, with identity fields changed as given (CP-6)."""
        self._kit(lambda log: kit_reissue(self._state, log, task_id, changes))

    def move_clock(self, delta_ms: int) -> None:
        """Move CP time forward or backward; leases expire at once where due (CP-4, CP-12)."""
        self._kit(lambda log: move_clock(self._state, log, delta_ms))

    def set_state(self, task_id: str, state: str) -> None:
        """Kit only: VERIFYING to SUCCEEDED or FAILED, or an operator's FAILED or RECONCILIATION_REQUIRED."""
        self._kit(lambda log: kit_set_state(self._state, log, task_id, state))

    def script(self, *faults: Fault) -> None:
        """Script faults (CP-21): those that wait for a request fire in order of matching."""
        for fault in faults:
            self._kit(functools.partial(self._script_one, fault))

    def _script_one(self, fault: Fault, log: Log) -> None:
        heads = self._heads() if fault.reads_heads() else {}
        move = kit_script(self._state, log, fault, heads)
        if move is not None:
            self._move_branch(move, log)

    def script_mappings(self, *faults: Mapping[str, Any]) -> None:
        """Script faults written as mappings, as a YAML scenario names them."""
        self.script(*(fault_from_mapping(fault) for fault in faults))

    def _kit(self, action: Callable[[Log], None]) -> None:
        with self._lock:
            log = Log(self._state, None)
            try:
                action(log)
            finally:
                self._write(log.entries)

    # ------------------------------------------------------------ evidence

    def log(self) -> list[dict[str, Any]]:
        """Every log entry so far, in order (copies)."""
        with self._lock:
            return json.loads(json.dumps(self._entries))  # type: ignore[no-any-return]

    def await_entries(self, count: int, timeout: float) -> int:
        """Wait until the log holds more than *count* entries (a request arrived, say), or *timeout* seconds
        pass: how many it holds then. The kit waits on this where it would otherwise poll."""
        with self._grown:
            self._grown.wait_for(lambda: len(self._entries) > count, timeout)
            return len(self._entries)

    def task(self, task_id: str) -> dict[str, Any]:
        """The task's state, current attempt (``task``), stored result, every attempt and their leases."""
        with self._lock:
            if task_id not in self._state.tasks:
                raise KeyError(task_id)
            return task_view(self._state, task_id)

    def leases(self, repository: str, target_branch: str) -> list[dict[str, Any]]:
        """Every lease granted on the branch, in order of grant (copies)."""
        with self._lock:
            return [lease_view(lease) for lease in branch_leases(self._state, repository, target_branch)]

    def pending_faults(self) -> int:
        """How many scripted faults wait for a request that has not come."""
        with self._lock:
            return len(self._state.faults)

    def check_errors(self) -> tuple[str, ...]:
        """The moment checks that raised instead of judging (each with its exception): the checks they were
        to make were not made, so the scenario cannot pass."""
        with self._lock:
            return tuple(self._check_errors)

    def _server_error(self, message: str) -> None:
        with self._lock:
            self._check_errors.append(message)

    def unreadable_origins(self) -> tuple[OriginUnreadable, ...]:
        """The origins a request found the kit could not read (a file the worker changed, a git command
        stopped by its limits): the scenario fails on them (COMMIT-3)."""
        with self._lock:
            return tuple(self._unreadable)

    def _unreadable_origin(self, error: OriginUnreadable) -> None:
        with self._lock:
            if len(self._unreadable) < _UNREADABLE_KEPT:
                self._unreadable.append(error)

    def retry_after_ms(self) -> int:
        """How long, in real time, a worker must wait after a claim answered without a task (WRK-3)."""
        return self._state.retry_after_ms

    def now_ms(self) -> int:
        """The control plane's clock, in milliseconds (the kit moves it; CP-12)."""
        with self._lock:
            return self._state.now_ms

    # ------------------------------------------------------------ the shell

    def _serve(self, request: Request) -> Outcome:
        arrived_ms = round((time.monotonic() - self._born) * 1000, 1)
        with self._lock:
            plan = prepare(self._state, request)
            log = Log(self._state, plan.number)
            log.entries = plan.entries
            for move in plan.move_branches:
                self._move_branch(move, log)
            heads = self._heads() if plan.needs_heads else {}
            checks = [(moment, self._moment(moment, plan.number)) for moment in plan.moments]
            outcome = handle(self._state, request, plan, heads, checks)
            for entry in outcome.entries:
                if entry.get("kind") == "request":  # real time is the shell's to read, not the core's
                    entry["arrived_ms"] = arrived_ms
                elif entry.get("kind") == "tool_started":  # and so are the processes the tool names
                    entry["seen"] = _look_at_tool(entry)
            self._write(outcome.entries)
        if outcome.kill_point is not None and self._observer is not None:
            self._observer.on_kill_point(outcome.kill_point, outcome.kill_worker or "")
        return outcome

    def _refuse(self, method: str, path: str, worker: str | None, message: str) -> dict[str, Any]:
        """Log a request whose body the shell could not read, and give its 400 body."""
        with self._lock:
            number = self._state.next_request
            self._state.next_request += 1
            log = Log(self._state, number)
            log_refused_kit_call(self._state, log, method, path, worker)
            shown = shown_path(path, self._state.kit_secret)
            fields = {"worker": worker, "method": method, "path": shown, "endpoint": None, "idempotency_key": None}
            log.add("request", **fields, body_sha256=None, status=400, answer="answer", message=message)
            self._write(log.entries)
            return {"error": "bad_request", "message": message, "now_ms": self._state.now_ms}

    def _moment(self, moment: Moment, number: int | None) -> list[str]:
        observer = self._observer
        if observer is None:
            return []
        args = moment.args
        try:
            if moment.check == "first_request":
                return list(observer.on_first_request(args["worker"], request=number))
            if moment.check == "submission":
                worker, task_id, attempt, key = args["worker"], args["task_id"], args["attempt"], args["key"]
                return list(observer.on_submission(worker, task_id, attempt, key, args["result_hash"], request=number))
            if moment.check == "receipt":
                worker, task_id, attempt = args["worker"], args["task_id"], args["attempt"]
                return list(observer.on_receipt(worker, task_id, attempt, args["commit_oid"], request=number))
            if moment.check == "push":
                task_id, attempt, ref = args["task_id"], args["attempt"], args["ref"]
                return list(observer.on_push(task_id, attempt, ref, args["old"], args["new"], request=number))
        except Exception as error:  # a broken check errors its scenario, never crashes the control plane
            message = f"the {moment.check} check raised {type(error).__name__}: {error}"
            self._check_errors.append(message)
            return [message]
        return [f"unknown moment check {moment.check!r}"]

    def _heads(self) -> dict[tuple[str, str], str | None]:
        heads: dict[tuple[str, str], str | None] = {}
        for repository, origin in self._origins.items():
            for ref, oid in origin.refs("refs/heads/").items():
                heads[(repository, ref[len("refs/heads/"):])] = oid
        return heads

    def _move_branch(self, move: BranchMove, log: Log) -> None:
        origin = self._origins.get(move.repository)
        if origin is None:
            raise KitError(f"no origin for repository {move.repository!r}")
        before = origin.head(move.branch)
        try:
            origin.git(["update-ref", f"refs/heads/{move.branch}", move.oid])
        except GitError as error:
            log.add("branch_moved", repository=move.repository, branch=move.branch, old=before, new=move.oid,
                    done=False, error=str(error))
            return
        log.add("branch_moved", repository=move.repository, branch=move.branch, old=before, new=move.oid, done=True)

    def _connect(self, repository: str, origin: Origin) -> None:
        origin.connect(
            check_url=self.kit_url("_kit/origin/check"),
            updated_url=self.kit_url("_kit/origin/updated"),
            repository=repository,
        )

    def _write(self, entries: list[dict[str, Any]]) -> None:
        """Append entries to the log: kept in memory, written and flushed before the caller goes on (CP-19).

        Not fsynced: the control plane is the kit's, outside every fault model (the kit is never killed, and
        the power-loss layer covers only the worker's state directory), and the kit judges from the entries
        it holds; the file is for a reader after the run."""
        if not entries:
            return
        lines = []
        with self._grown:
            for entry in entries:
                entry = {"seq": len(self._entries) + 1, **entry}
                self._entries.append(entry)
                lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n")
                if self._history is not None:
                    self._history.record(ACTOR, str(entry["kind"]), **{k: v for k, v in entry.items() if k != "kind"})
            self._grown.notify_all()
        with self._lock:
            if self._log_file is None:
                # Before start() (tasks issued while the scenario is set up), or after close(): written at
                # once all the same, the file kept open until close().
                self._log_file = self._log_opener()
            self._log_file.write("".join(lines).encode("utf-8"))
            self._log_file.flush()
            if self._closed:
                self._log_file.close()
                self._log_file = None

    def _open_by_path(self) -> IO[bytes]:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self._log_path, "ab")
