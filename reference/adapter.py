"""The reference as a protocol server: the adapter protocol v1 (docs/adapter-protocol.md).

``Harness.handle`` turns one request into its response and never raises for a fault of its own:
a failure becomes an ``error`` response carrying the traceback, and a refused request (a
``RequestError``: a missing field, an invalid store id) an ``error`` response and one stderr line,
neither with a traceback. ``serve`` is the loop around it, one JSON line in, one JSON line out.
An armed crash marker (``phase0.crash.arm``) is written only when the process leaves in order (end
of input, ``stop``, an exception that unwinds the loop, an interpreter exit), never before, so that
a marker found after a kill proves the kill was no crash (CRASH-2).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import sys
import threading
from collections.abc import Callable

from resumekit.conformance import __version__

TYPE_CHECKING = False  # typing itself is not imported before hello: annotations are not evaluated
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Any

    from resumekit.reference.p1.control import DiskFault
    from resumekit.reference.p1.worker import WorkerConfig
    from resumekit.reference.phase0.store import CorruptLedger, LedgerStore

# The projection, the store and the P1 worker (with SQLite, git and HTTP), and even pathlib and
# traceback, are imported by the first command that needs them, not before ``hello``: the kit starts
# this process once per crash case and per P1 worker start, and a crash case never needs the worker.

__all__ = ["CAPABILITIES", "IMPLEMENTATION_NAME", "PROFILES", "PROTOCOL_VERSION", "Harness", "serve"]

PROTOCOL_VERSION = 1
IMPLEMENTATION_NAME = "resumekit-reference"
CAPABILITIES = (
    "phase0.projection",
    "phase0.store",
    "phase0.crash",
    "phase0.ledger-file",
    "p1.worker",
    "p1.journal",
    "p1.journal-log",
    "p1.failpoint-any",
    "p1.disk-faults",
    "p1.tools",
)
_STOP_JOIN_S = 60.0
PROFILES = ("core", "strict")


class RequestError(ValueError):
    """A request that does not have the shape its command needs."""


def _field(request: dict[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    cmd = request.get("cmd")
    if name not in request:
        if required:
            raise RequestError(f"{cmd!r} needs the field {name!r}")
        return None
    value = request[name]
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise RequestError(f"{cmd!r}: {name!r} must be {names}, not {value!r}")
    return value


def _corrupt(error: CorruptLedger) -> dict[str, Any]:
    return {"status": "corrupt", "line": error.line, "message": str(error)}


def _refusal(seq: int, cmd: str, error: RequestError) -> dict[str, Any]:
    """The error response to a request refused for what it asks, logged as one line on stderr.

    A refusal is the adapter working as documented, not a fault in it: a traceback would only point at
    the line that refused, so neither stderr nor the response carries one.
    """
    print(f"{IMPLEMENTATION_NAME}: refused {cmd!r}: {error}", file=sys.stderr, flush=True)
    return _error(seq, f"{cmd}: {error}")


def _error(seq: int | None, message: str, trace: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if trace:
        body["context"] = {"traceback": trace}
    return {"seq": seq, "error": body}


class Harness:
    """Answers protocol requests with the reference projection and store."""

    def __init__(self) -> None:
        self.stopped = False
        self._store: LedgerStore | None = None
        self._markers: list[Path] = []
        self._markers_written = False
        self._atexit_registered = False
        self._worker: _RunningWorker | None = None
        self._journal_settings: list[dict[str, Any]] = []
        self._commands: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "hello": self._hello,
            "phase0.plan": self._plan,
            "phase0.store.open": self._store_open,
            "phase0.store.append": self._store_append,
            "phase0.store.read": self._store_read,
            "phase0.store.plan": self._store_plan,
            "phase0.crash.arm": self._crash_arm,
            "phase0.ledger.locate": self._ledger_locate,
            "p1.worker.start": self._worker_start,
            "p1.worker.wait": self._worker_wait,
            "p1.worker.continue": self._worker_continue,
            "p1.worker.stop": self._worker_stop,
            "p1.journal.settings": self._journal_settings_cmd,
        }

    # -- dispatch ---------------------------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The response to *request*, or None for ``stop``, which has none."""
        seq = request.get("seq") if isinstance(request, dict) else None
        if isinstance(seq, bool) or not isinstance(seq, int):
            return _error(None, f"a request is an object with an integer 'seq'; got {request!r}"[:2000])
        cmd = request.get("cmd")
        if cmd == "stop":
            self.stopped = True
            return None
        command = self._commands.get(cmd) if isinstance(cmd, str) else None
        if command is None:
            known = sorted([*self._commands, "stop"])
            return _error(seq, f"unknown command {cmd!r}; this implementation knows {known}")
        try:
            return {"seq": seq, "result": command(request)}
        except RequestError as error:
            return _refusal(seq, str(cmd), error)
        except Exception as error:
            import traceback

            trace = traceback.format_exc()
            print(trace, file=sys.stderr, end="", flush=True)
            return _error(seq, f"{cmd}: {type(error).__name__}: {error}", trace)

    # -- commands ---------------------------------------------------------------------------------

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        protocol = request.get("protocol")
        if protocol != PROTOCOL_VERSION or isinstance(protocol, bool):
            raise RequestError(f"this implementation speaks protocol {PROTOCOL_VERSION}, not {protocol!r}")
        return {
            "protocol": PROTOCOL_VERSION,
            "implementation": {"name": IMPLEMENTATION_NAME, "version": __version__, "language": "python"},
            "capabilities": list(CAPABILITIES),
            "profiles": list(PROFILES),
        }

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        events = _field(request, "events", list)
        return {"plan": self._project(events, request)}

    def _project(self, events: Any, request: dict[str, Any]) -> dict[str, Any]:
        # The plan holds the decoded events themselves (no copy): it is serialised at once.
        profile = _field(request, "profile", str, required=False)
        expected = _field(request, "expectedRuntimeEventHighWater", int, required=False)
        from resumekit.reference.phase0.projection import build_resume_plan

        if profile is None or profile == "strict":
            return build_resume_plan(events, expected_high_water=expected, profile="strict")
        if profile == "core":
            return build_resume_plan(events, expected_high_water=expected, profile="core")
        raise RequestError(f"'profile' must be 'core' or 'strict', not {profile!r}")

    def _open_store(self) -> LedgerStore:
        if self._store is None:
            raise RequestError("no store is open: send 'phase0.store.open' first")
        return self._store

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        workspace = _field(request, "workspace", str)
        session_id = _field(request, "sessionId", str)
        run_id = _field(request, "runId", str)
        from pathlib import Path

        from resumekit.reference.phase0.store import LedgerStore, validate_id

        for kind, value in (("session id", session_id), ("run id", run_id)):
            try:
                validate_id(kind, value)
            except ValueError as error:  # the request names an unusable id: a refusal, not a fault
                raise RequestError(str(error)) from None
        if not workspace or not Path(workspace).is_absolute():
            raise RequestError(f"'phase0.store.open': 'workspace' must be an absolute path, not {workspace!r}")
        # Let go of the earlier store, and its writer lock, before taking the lock again: the same run
        # reopened in this process is a second writer to the lock until the first one is closed.
        self.close_store()
        self._store = LedgerStore(Path(workspace), session_id, run_id)
        return {}

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        event = _field(request, "event", dict)
        return {"rows": self._open_store().append(event)}

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        from resumekit.reference.phase0.store import CorruptLedger

        try:
            read = self._open_store().read()
        except CorruptLedger as error:
            return _corrupt(error)
        tail = read.torn_tail
        torn = None if tail is None else {"offset": tail.offset, "length": tail.length}
        return {"status": "ok", "events": list(read.events), "tornTail": torn}

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        from resumekit.reference.phase0.store import CorruptLedger

        try:
            read = self._open_store().read()
        except CorruptLedger as error:
            return _corrupt(error)
        return {"status": "ok", "plan": self._project(list(read.events), request)}

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        from pathlib import Path

        marker = Path(_field(request, "marker", str)).absolute()
        if marker not in self._markers:
            self._markers.append(marker)
        self._markers_written = False
        if not self._atexit_registered:
            atexit.register(self.write_markers)
            self._atexit_registered = True
        return {"pid": os.getpid()}

    def _ledger_locate(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"path": str(self._open_store().ledger_path.absolute())}

    # -- P1: the worker, run in a thread of this process (ADP-2) ----------------------------------

    def _running(self) -> _RunningWorker:
        if self._worker is None:
            raise RequestError("no worker was started: send 'p1.worker.start' first")
        return self._worker

    def _worker_start(self, request: dict[str, Any]) -> dict[str, Any]:
        config = _field(request, "config", dict)
        failpoint = _failpoint(request)
        disk_fault = _disk_fault(request)
        tool = _tool(request)
        marker = _field(request, "marker", str, required=False)
        journal_log = _field(request, "journalLog", str, required=False)
        if self._worker is not None and self._worker.control.exit_code is None:
            raise RequestError("a worker of this adapter is running; stop it first")
        paths = {}
        for name in ("controlPlaneUrl", "workspaceRoot", "stateDir"):
            value = config.get(name)
            if not isinstance(value, str) or not value:
                raise RequestError(f"'p1.worker.start': config.{name} must be a non-empty string")
            paths[name] = value
        settings: list[dict[str, Any]] = [] if journal_log is None else _LoggedSettings(journal_log)
        self._journal_settings = settings
        from pathlib import Path

        from resumekit.reference.p1.worker import WorkerConfig

        worker_config = WorkerConfig(paths["controlPlaneUrl"], Path(paths["workspaceRoot"]), Path(paths["stateDir"]))
        self._worker = _RunningWorker(worker_config, failpoint, None if marker is None else Path(marker).absolute(),
                                      settings, disk_fault, tool)
        return {"pid": os.getpid()}

    def _worker_wait(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout = _field(request, "timeoutMs", int)
        if timeout < 0:
            raise RequestError("'timeoutMs' must not be negative")
        state = self._running().control.wait(timeout / 1000)
        if state["state"] == "blocked":
            state["pid"] = os.getpid()
        return state

    def _worker_continue(self, request: dict[str, Any]) -> dict[str, Any]:
        self._running().control.release(_failpoint(request))
        return {}

    def _worker_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"exitCode": self._running().stop()}

    def _journal_settings_cmd(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"connections": [dict(entry) for entry in list(self._journal_settings)]}

    # -- exit paths -------------------------------------------------------------------------------

    def write_markers(self) -> None:
        """Write every armed marker; the orderly exit path (CRASH-2). Safe to call more than once."""
        if self._markers_written:
            return
        self._markers_written = True
        for marker in self._markers:
            try:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(f"{IMPLEMENTATION_NAME} pid {os.getpid()} exited in order\n", encoding="utf-8")
            except OSError as error:
                print(f"{IMPLEMENTATION_NAME}: cannot write the exit marker {marker}: {error}", file=sys.stderr)

    def close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def shutdown(self) -> None:
        """Stop a running worker, release the store and write the armed markers."""
        try:
            if self._worker is not None:
                self._worker.stop()
            self.close_store()
        finally:
            self.write_markers()


def _failpoint(request: dict[str, Any]) -> tuple[str, int] | None:
    value = _field(request, "failpoint", dict, required=False)
    if value is None:
        return None
    name, hit = value.get("name"), value.get("hit", 1)
    if not isinstance(name, str) or not name or not isinstance(hit, int) or isinstance(hit, bool) or hit < 1:
        raise RequestError(f"'failpoint' is {{\"name\": str, \"hit\": int >= 1}}, not {value!r}")
    return name, hit


def _disk_fault(request: dict[str, Any]) -> DiskFault | None:
    """The optional ``diskFault`` of p1.worker.start (capability p1.disk-faults)."""
    from resumekit.reference.p1.control import DISK_ERRNOS, DISK_FILES, DISK_OPS, DiskFault

    value = _field(request, "diskFault", dict, required=False)
    if value is None:
        return None
    file, op, name, hit = value.get("file"), value.get("op"), value.get("errno"), value.get("hit", 1)
    if file not in DISK_FILES or op not in DISK_OPS or name not in DISK_ERRNOS or not isinstance(hit, int) \
            or isinstance(hit, bool) or hit < 1:
        raise RequestError(
            f"'diskFault' is {{\"file\": {'|'.join(DISK_FILES)}, \"op\": {'|'.join(DISK_OPS)}, "
            f"\"errno\": {'|'.join(DISK_ERRNOS)}, \"hit\": int >= 1}}, not {value!r}"
        )
    return DiskFault(str(file), str(op), str(name), hit)


def _tool(request: dict[str, Any]) -> tuple[str, ...] | None:
    """The optional ``tool`` of p1.worker.start (capability p1.tools): its argv."""
    value = _field(request, "tool", dict, required=False)
    if value is None:
        return None
    argv = value.get("argv")
    if set(value) != {"argv"} or not isinstance(argv, list) or not argv \
            or not all(isinstance(item, str) and item for item in argv):
        raise RequestError(f"'tool' is {{\"argv\": [non-empty strings, at least one]}}, not {value!r}")
    return tuple(argv)


class _LoggedSettings(list):  # type: ignore[type-arg]
    """The settings of each journal connection, each also appended as a JSON line to the kit's journal log
    (capability p1.journal-log) as the journal records it: before the connection's first write, so that a
    process killed later has reported it."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def append(self, entry: dict[str, Any]) -> None:
        super().append(entry)
        with open(self.path, "a", encoding="utf-8", newline="\n") as log:
            log.write(json.dumps(entry, sort_keys=True) + "\n")


class _RunningWorker:
    """One worker process's life inside the adapter: a thread running :class:`Worker`.

    The marker is written when the worker leaves in order (stop, or its own exit) and never on a kill,
    which runs no code at all.
    """

    def __init__(self, config: WorkerConfig, failpoint: tuple[str, int] | None, marker: Path | None,
                 settings: list[dict[str, Any]], disk_fault: DiskFault | None = None,
                 tool: tuple[str, ...] | None = None) -> None:
        from resumekit.reference.p1.control import Control
        from resumekit.reference.p1.worker import Worker

        self.control = Control(failpoint, disk_fault, tool)
        self.marker = marker
        self._marker_lock = threading.Lock()
        self.control.before_exit = self.write_marker  # a fatal exit is the worker's own, orderly too (JNL-8)
        self._worker = Worker(config, self.control, settings)
        self._thread = threading.Thread(target=self._main, name="p1-worker", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self._worker.run()
        finally:
            if self.control.exit_code is None:  # run() failed before its own exit path: that exit is still ours
                self.control.exited(1)

    def write_marker(self) -> None:
        with self._marker_lock:
            marker, self.marker = self.marker, None
        if marker is None:
            return
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{IMPLEMENTATION_NAME} worker in pid {os.getpid()} exited in order\n", encoding="utf-8")
        except OSError as error:
            print(f"{IMPLEMENTATION_NAME}: cannot write the exit marker {marker}: {error}", file=sys.stderr)

    def stop(self) -> int:
        """Stop at the next step boundary (RESUME-5); the exit code once the worker has exited."""
        self.control.request_stop()
        self._thread.join(_STOP_JOIN_S)
        code = self.control.exit_code
        if code is None:
            raise RuntimeError(f"the worker did not stop within {_STOP_JOIN_S:.0f} s")
        self.write_marker()
        return code


# --------------------------------------------------------------------------------------------
# The line loop
# --------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decode_request(raw: bytes) -> dict[str, Any] | str:
    """The request object in one input line, or why there is none."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return f"the request line is not UTF-8 JSON ({error})"
    if not isinstance(value, dict):
        return f"a request is a JSON object, not a {type(value).__name__}"
    return value


def _encode_response(response: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(response, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        seq = response.get("seq")
        text = json.dumps(_error(seq if isinstance(seq, int) else None, f"the response is not JSON: {error}"))
    return text.encode("utf-8", "backslashreplace") + b"\n"


def serve(stdin: IO[Any], stdout: IO[Any], harness: Harness | None = None) -> int:
    """Answer requests from *stdin* on *stdout* until end of input or ``stop``; return the exit status.

    Lines are read and written as UTF-8 bytes through the streams' binary buffers when they have
    them (so no platform newline translation or locale encoding applies), else as text.
    """
    source: IO[Any] = getattr(stdin, "buffer", stdin)
    sink: IO[Any] = getattr(stdout, "buffer", stdout)
    binary_out = not isinstance(sink, io.TextIOBase)

    def read_line() -> bytes:
        line = source.readline()
        return line.encode("utf-8", "surrogateescape") if isinstance(line, str) else bytes(line)

    def write(response: dict[str, Any]) -> None:
        data = _encode_response(response)
        if sink is not stdout:
            stdout.flush()
        if binary_out:
            sink.write(data)
        else:
            sink.write(data.decode("utf-8"))
        sink.flush()

    harness = harness if harness is not None else Harness()
    try:
        while True:
            raw = read_line()
            if not raw:
                return 0
            if not raw.strip():
                continue
            request = _decode_request(raw)
            if isinstance(request, str):
                response: dict[str, Any] | None = _error(None, request)
            else:
                # stdout carries protocol lines only: anything printed while handling goes to stderr.
                with contextlib.redirect_stdout(sys.stderr):
                    response = harness.handle(request)
            if response is not None:
                try:
                    write(response)
                except BrokenPipeError:
                    return 1
            if harness.stopped:
                return 0
    finally:
        harness.shutdown()
