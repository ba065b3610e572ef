"""The reference's file-backed ledger (docs/spec/phase0.md, section 9), on real files.

Covers STORE-1 to STORE-7, TORN-1 and, with a real child process killed mid-run, CRASH-1 and CRASH-2.
"""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import resumekit.reference.phase0.store as store_module
from resumekit.reference.adapter import Harness, serve
from resumekit.reference.phase0.store import CorruptLedger, LedgerStore, ReadResult, TornTail

ROOT = Path(__file__).resolve().parent.parent
SESSION = "session-1"
RUN = "run-1"
CHILD_TIMEOUT = 30.0


def make_event(index: int, **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "id": f"evt-{index}",
        "invocationId": "inv-1",
        "runId": RUN,
        "sessionId": SESSION,
        "turnId": "turn-1",
        "ts": 1_700_000_000_000 + index,
        "partial": False,
        "role": "user",
        "author": "user",
        "content": {"kind": "text", "text": f"message {index}"},
    }
    event.update(fields)
    return event


EVENTS = [
    make_event(1, content={"kind": "text", "text": "héllo wörld, ünïcode ✓ and a line separator \u2028 inside"}),
    make_event(
        2,
        role="model",
        author="agent",
        content={"kind": "function_call", "id": "call-1", "name": "write_file", "args": None},
    ),
    make_event(
        3,
        role="tool",
        author="tool",
        content={"kind": "function_response", "id": "call-1", "name": "write_file", "result": {"ok": 1.5}},
    ),
    make_event(4, status="completed", role="model", author="agent", content={"kind": "text", "text": "ünïcode end"}),
]


def row(event: dict[str, Any]) -> bytes:
    """A ledger row written independently of the store: compact UTF-8 JSON and a line feed."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def store(workspace: Path) -> Iterator[LedgerStore]:
    with LedgerStore(workspace, SESSION, RUN) as opened:
        yield opened


def ledger(workspace: Path) -> Path:
    return workspace / "sessions" / SESSION / "runs" / RUN / "runtime-events.jsonl"


def write_ledger(workspace: Path, data: bytes) -> Path:
    path = ledger(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def open_request(workspace: Path, *, seq: int) -> dict[str, Any]:
    return {
        "cmd": "phase0.store.open",
        "seq": seq,
        "workspace": str(workspace),
        "sessionId": SESSION,
        "runId": RUN,
    }


def read_fresh(workspace: Path) -> ReadResult:
    """The ledger as a reader sees it, without a store (a store would be a second writer)."""
    return store_module.read_ledger(workspace, SESSION, RUN)


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file and directory under root: bytes and mtime_ns for files, None for directories."""
    state: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        state[key] = (path.read_bytes(), path.stat().st_mtime_ns) if path.is_file() else None
    return state


# --------------------------------------------------------------------------------------------
# Appending and reading
# --------------------------------------------------------------------------------------------


def test_round_trip_returns_the_events_unchanged_and_in_order(store: LedgerStore) -> None:
    for event in EVENTS:
        store.append(event)
    result = store.read()
    assert result == ReadResult(tuple(EVENTS), None)
    assert [json.dumps(e, sort_keys=True) for e in result.events] == [json.dumps(e, sort_keys=True) for e in EVENTS]


def test_append_returns_the_committed_row_count(store: LedgerStore) -> None:
    assert [store.append(event) for event in EVENTS] == [1, 2, 3, 4]


def test_rows_are_compact_utf8_json_lines_at_the_documented_path(workspace: Path, store: LedgerStore) -> None:
    for event in EVENTS:
        store.append(event)
    assert store.ledger_path == ledger(workspace)
    assert ledger(workspace).read_bytes() == b"".join(row(event) for event in EVENTS)


def test_reopening_finds_the_committed_end(workspace: Path) -> None:
    with LedgerStore(workspace, SESSION, RUN) as first:
        first.append(EVENTS[0])
        first.append(EVENTS[1])
    with LedgerStore(workspace, SESSION, RUN) as second:
        assert second.append(EVENTS[2]) == 3
    assert ledger(workspace).read_bytes() == row(EVENTS[0]) + row(EVENTS[1]) + row(EVENTS[2])
    assert read_fresh(workspace).events == tuple(EVENTS[:3])


def test_a_store_reopened_after_close_continues_counting(store: LedgerStore) -> None:
    store.append(EVENTS[0])
    store.close()
    assert store.append(EVENTS[1]) == 2
    assert store.read().events == tuple(EVENTS[:2])


def test_each_append_is_synced_after_its_bytes_are_written(store: LedgerStore, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []
    real_sync = store_module.sync_fd

    def recording_sync(fd: int) -> None:
        seen.append(store.ledger_path.read_bytes())
        real_sync(fd)

    monkeypatch.setattr(store_module, "sync_fd", recording_sync)
    monkeypatch.setattr(store_module, "sync_directory", lambda path: None)  # covered below
    store.append(EVENTS[0])
    assert seen == [row(EVENTS[0])]
    store.append(EVENTS[1])
    assert seen[-1] == row(EVENTS[0]) + row(EVENTS[1])


def test_creating_the_ledger_syncs_every_directory_that_gained_an_entry(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(store_module, "sync_directory", synced.append)
    run_dir = ledger(workspace).parent
    with LedgerStore(workspace, SESSION, RUN) as first:
        # Opening made the directories and the lock file: every parent that gained an entry, deepest first.
        assert synced == [run_dir, run_dir.parent, run_dir.parent.parent, workspace / "sessions", workspace]
        synced.clear()
        first.append(EVENTS[0])
        first.append(EVENTS[1])  # the file exists now: no directory gained anything
    assert synced == [run_dir]  # the ledger file's entry

    synced.clear()
    with LedgerStore(workspace, SESSION, RUN) as reopened:
        reopened.append(EVENTS[2])
    assert synced == []

    with LedgerStore(workspace, SESSION, "run-2") as other:
        other.append(dict(EVENTS[0], runId="run-2"))
    run_2 = workspace / "sessions" / SESSION / "runs" / "run-2"
    assert synced == [run_2, run_dir.parent, run_2]


def test_a_missing_ledger_reads_as_empty_and_nothing_is_created(workspace: Path, store: LedgerStore) -> None:
    opened = snapshot(workspace)
    assert [path.name for path in ledger(workspace).parent.iterdir()] == ["runtime-events.jsonl.lock"]
    assert store.read() == ReadResult((), None)
    assert store_module.read_ledger(workspace, SESSION, RUN) == ReadResult((), None)
    assert snapshot(workspace) == opened


def test_opening_needs_an_existing_workspace(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="workspace"):
        LedgerStore(tmp_path / "absent", SESSION, RUN)
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("bad", ["", "a/b", "..", ".", "a" * 129, "sessión", "a b", "a\n", "a\\b", "C:", None, 7])
@pytest.mark.parametrize("which", ["session", "run"])
def test_ids_outside_the_pattern_are_refused(workspace: Path, bad: Any, which: str) -> None:
    ids = {"session": SESSION, "run": RUN, which: bad}
    with pytest.raises(ValueError, match=f"invalid {which} id"):
        LedgerStore(workspace, ids["session"], ids["run"])


@pytest.mark.parametrize("good", ["a", "A-z_0-9", "x" * 128])
def test_ids_inside_the_pattern_are_accepted(workspace: Path, good: str) -> None:
    with LedgerStore(workspace, good, good) as opened:
        assert opened.append(dict(EVENTS[0], sessionId=good, runId=good)) == 1
        assert opened.ledger_path == workspace / "sessions" / good / "runs" / good / "runtime-events.jsonl"


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (["not", "an", "object"], "JSON object"),
        (make_event(1, ts=float("nan")), "nan"),
        (make_event(1, ts=float("inf")), "inf"),
        (make_event(1, refs={1: "x"}), "key"),
        (make_event(1, refs={"s": {1, 2}}), "set"),
        (make_event(1, refs={"t": (1, 2)}), "tuple"),
        (make_event(1, content={"kind": "text", "text": "\ud800"}), "Unicode"),
        (make_event(1, role="robot"), "RuntimeEvent"),
        ({"id": "only-an-id"}, "RuntimeEvent"),
    ],
)
def test_append_refuses_what_a_read_would_reject_and_writes_nothing(
    workspace: Path, store: LedgerStore, event: Any, why: str
) -> None:
    opened = snapshot(workspace)
    with pytest.raises(ValueError, match=why):
        store.append(event)
    assert snapshot(workspace) == opened
    assert store.append(EVENTS[0]) == 1  # a refused event leaves the store usable


# --------------------------------------------------------------------------------------------
# Torn tails (STORE-3, STORE-4, TORN-1)
# --------------------------------------------------------------------------------------------


def test_a_torn_last_row_is_never_surfaced_at_any_byte(workspace: Path) -> None:
    prefix = row(EVENTS[0]) + row(EVENTS[1])
    last = row(EVENTS[3])  # holds multi-byte characters, so some cuts split one
    assert len(last) > len(EVENTS[3]["content"]["text"]) + 20
    for cut in range(len(last)):  # every length short of the line feed
        write_ledger(workspace, prefix + last[:cut])
        result = read_fresh(workspace)
        expected_tail = TornTail(len(prefix), cut) if cut else None
        assert result == ReadResult(tuple(EVENTS[:2]), expected_tail), f"cut after {cut} bytes of the last row"


def test_a_complete_object_without_its_line_feed_is_not_committed(workspace: Path) -> None:
    unterminated = row(EVENTS[1])[:-1]
    json.loads(unterminated)  # it parses, yet the missing line feed means no commit
    write_ledger(workspace, row(EVENTS[0]) + unterminated)
    assert read_fresh(workspace) == ReadResult((EVENTS[0],), TornTail(len(row(EVENTS[0])), len(unterminated)))


def test_a_terminated_row_always_counts(workspace: Path) -> None:
    data = b"".join(row(event) for event in EVENTS)
    write_ledger(workspace, data)
    assert read_fresh(workspace) == ReadResult(tuple(EVENTS), None)
    write_ledger(workspace, row(EVENTS[0]))
    assert read_fresh(workspace) == ReadResult((EVENTS[0],), None)


def test_a_lone_torn_first_row_leaves_an_empty_prefix(workspace: Path) -> None:
    write_ledger(workspace, row(EVENTS[0])[:7])
    assert read_fresh(workspace) == ReadResult((), TornTail(0, 7))


def test_append_cuts_a_torn_tail_before_writing(workspace: Path) -> None:
    committed = row(EVENTS[0]) + row(EVENTS[1])
    write_ledger(workspace, committed + row(EVENTS[2])[:25])
    with LedgerStore(workspace, SESSION, RUN) as reopened:
        assert reopened.append(EVENTS[3]) == 3
    assert ledger(workspace).read_bytes() == committed + row(EVENTS[3])
    assert read_fresh(workspace) == ReadResult((EVENTS[0], EVENTS[1], EVENTS[3]), None)


def test_append_cuts_a_tail_that_appeared_while_the_store_was_open(workspace: Path, store: LedgerStore) -> None:
    store.append(EVENTS[0])
    with ledger(workspace).open("ab") as intruder:
        intruder.write(b'{"id":"half')
    assert store.append(EVENTS[1]) == 2
    assert ledger(workspace).read_bytes() == row(EVENTS[0]) + row(EVENTS[1])


def test_append_counts_rows_added_behind_its_back(workspace: Path, store: LedgerStore) -> None:
    store.append(EVENTS[0])
    with ledger(workspace).open("ab") as other:
        other.write(row(EVENTS[1]))
    assert store.append(EVENTS[2]) == 3
    assert read_fresh(workspace).events == tuple(EVENTS[:3])


# --------------------------------------------------------------------------------------------
# Corrupt committed rows (STORE-5)
# --------------------------------------------------------------------------------------------


def _flip_first_brace(data: bytes) -> bytes:
    assert data[0:1] == b"{"
    return bytes([data[0] ^ 0x01]) + data[1:]


def _duplicate_chunk(data: bytes) -> bytes:
    return data[:30] + data[12:30] + data[30:]


def _invalid_utf8(data: bytes) -> bytes:
    at = data.index("é".encode())
    return data[:at] + b"\xff" + data[at + 2 :]


def _cut_utf8(data: bytes) -> bytes:
    at = data.index("é".encode())
    return data[: at + 1] + data[at + 2 :]


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda data: b"#! this is not json at all\n",
    "zero bytes": lambda data: b"\x00" * (len(data) - 1) + b"\n",
    "flipped bit in the opening brace": _flip_first_brace,
    "duplicated chunk": _duplicate_chunk,
    "invalid UTF-8": _invalid_utf8,
    "a multi-byte character cut in half": _cut_utf8,
    "a JSON array": lambda data: b"[1,2,3]\n",
    "a JSON string": lambda data: b'"evt"\n',
    "an empty line": lambda data: b"\n",
    "schema-invalid object": lambda data: row({"id": "evt-x", "note": "no other field"}),
    "schema-invalid role": lambda data: row(make_event(9, role="robot")),
    "unknown field": lambda data: row(make_event(9, extra=True)),
    "NaN": lambda data: data.replace(b'"ts":1700000000002', b'"ts":NaN'),
    "overflowing number": lambda data: data.replace(b'"ts":1700000000002', b'"ts":1e999'),
    "duplicate key": lambda data: data.replace(b'{"id":"evt-2",', b'{"id":"evt-2","id":"evt-x",'),
}


@pytest.mark.parametrize("mutation", MUTATIONS, ids=list(MUTATIONS))
@pytest.mark.parametrize("line", [1, 2, 4])
def test_a_corrupt_committed_row_fails_closed_naming_its_line(workspace: Path, mutation: str, line: int) -> None:
    rows = [row(event) for event in EVENTS]
    if mutation in {"invalid UTF-8", "a multi-byte character cut in half"}:
        rows[line - 1] = row(make_event(line + 10, content={"kind": "text", "text": "café"}))
    if mutation in {"NaN", "overflowing number", "duplicate key"}:
        rows[line - 1] = row(EVENTS[1])
    broken = MUTATIONS[mutation](rows[line - 1])
    assert broken != rows[line - 1]
    assert broken.endswith(b"\n")
    rows[line - 1] = broken
    path = write_ledger(workspace, b"".join(rows) + b'{"torn')
    with pytest.raises(CorruptLedger) as caught:
        read_fresh(workspace)
    assert (caught.value.path, caught.value.line) == (path, line)
    assert str(path) in str(caught.value)
    assert f"line {line}" in str(caught.value)
    assert caught.value.reason


def test_the_first_corrupt_row_is_the_one_reported(workspace: Path) -> None:
    write_ledger(workspace, row(EVENTS[0]) + b"bad\n" + row(EVENTS[2]) + b"worse\n")
    with pytest.raises(CorruptLedger) as caught:
        read_fresh(workspace)
    assert caught.value.line == 2


def test_a_corrupt_row_is_reported_as_the_corrupt_result_over_the_protocol(workspace: Path) -> None:
    write_ledger(workspace, row(EVENTS[0]) + b"\x00\x00\x00\n")
    harness = Harness()
    harness.handle(open_request(workspace, seq=1))
    read = harness.handle({"cmd": "phase0.store.read", "seq": 2})
    plan = harness.handle({"cmd": "phase0.store.plan", "seq": 3, "profile": "strict"})
    harness.shutdown()
    for response, seq in ((read, 2), (plan, 3)):
        assert response is not None
        assert response["seq"] == seq
        assert response["result"]["status"] == "corrupt"
        assert response["result"]["line"] == 2
        assert str(ledger(workspace)) in response["result"]["message"]


# --------------------------------------------------------------------------------------------
# Reads change nothing (STORE-6)
# --------------------------------------------------------------------------------------------

LEDGER_STATES: dict[str, bytes | None] = {
    "missing": None,
    "clean": row(EVENTS[0]) + row(EVENTS[1]),
    "torn tail": row(EVENTS[0]) + row(EVENTS[1])[:20],
    "corrupt row": row(EVENTS[0]) + b"garbage\n" + row(EVENTS[2])[:5],
}


@pytest.mark.parametrize("state", LEDGER_STATES, ids=list(LEDGER_STATES))
def test_reading_changes_no_byte_of_the_workspace(workspace: Path, state: str) -> None:
    data = LEDGER_STATES[state]
    if data is not None:
        write_ledger(workspace, data)
    LedgerStore(workspace, SESSION, RUN).close()  # opening makes the lock file; reading makes nothing
    before = snapshot(workspace)
    for _ in range(3):
        with LedgerStore(workspace, SESSION, RUN) as reader:
            try:
                reader.read()
            except CorruptLedger:
                assert state == "corrupt row"
    assert snapshot(workspace) == before
    if data is not None:
        assert ledger(workspace).read_bytes() == data


def test_planning_over_the_protocol_changes_nothing(workspace: Path) -> None:
    write_ledger(workspace, row(EVENTS[0]) + row(EVENTS[1]) + b'{"torn')
    harness = Harness()
    harness.handle(open_request(workspace, seq=1))
    before = snapshot(workspace)  # as the kit does: after open, which may prepare the store
    first = harness.handle({"cmd": "phase0.store.plan", "seq": 2, "profile": "strict"})
    second = harness.handle({"cmd": "phase0.store.plan", "seq": 3, "profile": "strict"})
    harness.shutdown()
    assert snapshot(workspace) == before
    assert first is not None
    assert second is not None
    assert first["result"] == second["result"]
    assert first["result"]["plan"]["sourceRuntimeEventHighWater"] == 2
    assert first["result"]["plan"]["disposition"] == "blocked"  # the call has no response


# --------------------------------------------------------------------------------------------
# The protocol's messages match their schemas
# --------------------------------------------------------------------------------------------

SCHEMA_BASE = "https://resumekit.dev/schemas/"


@pytest.fixture(scope="module")
def registry() -> Registry[Any]:
    resources = []
    for path in sorted((ROOT / "schemas").rglob("*.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], Resource.from_contents(contents, default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


def schema_errors(registry: Registry[Any], name: str, instance: Any) -> list[str]:
    validator = Draft202012Validator(registry.contents(SCHEMA_BASE + name), registry=registry)
    return [error.message for error in validator.iter_errors(instance)]


def test_the_harness_answers_every_command_as_the_schemas_say(registry: Registry[Any], workspace: Path) -> None:
    marker = workspace.parent / "marker"
    requests: list[tuple[dict[str, Any], str]] = [
        ({"cmd": "hello", "seq": 0, "protocol": 1, "kit": {"name": "resumekit", "version": "0"}}, "hello"),
        ({"cmd": "phase0.plan", "seq": 1, "case": "c", "profile": "core", "events": EVENTS[:2]}, "plan"),
        (open_request(workspace, seq=2), "store-open"),
        ({"cmd": "phase0.store.append", "seq": 3, "event": EVENTS[0]}, "store-append"),
        ({"cmd": "phase0.store.read", "seq": 4}, "store-read"),
        (
            {"cmd": "phase0.store.plan", "seq": 5, "profile": "strict", "expectedRuntimeEventHighWater": 1},
            "store-plan",
        ),
        ({"cmd": "phase0.crash.arm", "seq": 6, "marker": str(marker)}, "crash-arm"),
        ({"cmd": "phase0.ledger.locate", "seq": 7}, "ledger-locate"),
    ]
    harness = Harness()
    try:
        for request, result_schema in requests:
            assert schema_errors(registry, "adapter/request.json", request) == [], request["cmd"]
            response = harness.handle(request)
            assert response is not None
            assert "result" in response, (request["cmd"], response)
            assert response["seq"] == request["seq"]
            assert schema_errors(registry, "adapter/response.json", response) == [], request["cmd"]
            assert schema_errors(registry, f"adapter/results/{result_schema}.json", response["result"]) == []
        assert not marker.exists()  # arming writes nothing yet
        error = harness.handle({"cmd": "phase0.store.append", "seq": 8, "event": {"id": "x"}})
        assert error is not None
        assert "error" in error
        assert error["seq"] == 8
        assert schema_errors(registry, "adapter/response.json", error) == []
        assert harness.handle({"cmd": "stop", "seq": 9}) is None
    finally:
        harness.shutdown()
    assert marker.exists()


def test_the_schemas_reject_what_the_protocol_forbids(registry: Registry[Any]) -> None:
    assert schema_errors(registry, "adapter/response.json", {"seq": 1, "result": {}, "error": {"message": "x"}})
    assert schema_errors(registry, "adapter/response.json", {"seq": 1, "skipped": {}})
    assert schema_errors(registry, "adapter/request.json", {"cmd": "phase0.store.append", "seq": 1, "event": {}})
    assert schema_errors(registry, "adapter/request.json", {"cmd": "phase0.nope", "seq": 1})
    assert schema_errors(registry, "adapter/results/store-read.json", {"status": "ok", "events": []})
    assert schema_errors(registry, "adapter/results/store-plan.json", {"status": "corrupt", "line": 0, "message": "m"})
    assert schema_errors(registry, "adapter/results/plan.json", {"plan": {"disposition": "maybe"}})


def _lines(*messages: dict[str, Any]) -> str:
    return "".join(json.dumps(message, ensure_ascii=False) + "\n" for message in messages)


def test_serve_writes_the_marker_when_its_loop_ends_not_before(tmp_path: Path) -> None:
    marker = tmp_path / "served.marker"

    class Input(io.StringIO):
        def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
            line = super().readline()
            if not line:  # the loop is about to see end of input: nothing may be written yet
                assert not marker.exists()
            return line

    out = io.StringIO()
    assert serve(Input(_lines({"cmd": "phase0.crash.arm", "seq": 1, "marker": str(marker)})), out) == 0
    assert marker.exists()  # by serve's own exit path, before any interpreter exit hook
    assert json.loads(out.getvalue())["result"]["pid"] == os.getpid()


def test_an_exception_that_unwinds_serve_writes_the_marker(tmp_path: Path) -> None:
    marker = tmp_path / "unwound.marker"

    class Failing(io.StringIO):
        calls = 0

        def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
            self.calls += 1
            if self.calls == 2:
                raise OSError("stdin broke")
            return super().readline()

    with pytest.raises(OSError, match="stdin broke"):
        serve(Failing(_lines({"cmd": "phase0.crash.arm", "seq": 1, "marker": str(marker)})), io.StringIO())
    assert marker.exists()


def test_serve_answers_bad_lines_with_errors_and_ignores_blank_ones() -> None:
    requests = "\n\r\nnot json\n" + _lines({"cmd": "nope", "seq": 4}) + '{"cmd":"hello","seq":5,"protocol":1}\r\n'
    out = io.StringIO()
    assert serve(io.StringIO(requests), out) == 0
    responses = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
    assert [r["seq"] for r in responses] == [None, 4, 5]
    assert "error" in responses[0]
    assert "error" in responses[1]
    assert responses[2]["result"]["protocol"] == 1


# --------------------------------------------------------------------------------------------
# A real process, really killed (CRASH-1, CRASH-2)
# --------------------------------------------------------------------------------------------


class Child:
    """``python -m reference`` driven over its stdin and stdout."""

    def __init__(self, stderr_path: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._stderr = stderr_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "resumekit.reference"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=ROOT,
            env=env,
        )
        self._stderr_path = stderr_path
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._seq = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, cmd: str, **fields: Any) -> None:
        assert self.process.stdin is not None
        self._seq += 1
        message = {"cmd": cmd, "seq": self._seq, **fields}
        self.process.stdin.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
        self.process.stdin.flush()

    def answer(self, cmd: str, **fields: Any) -> dict[str, Any]:
        """The whole response to one request, a result or an error."""
        self.send(cmd, **fields)
        try:
            line = self._lines.get(timeout=CHILD_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no response to {cmd!r}; stderr: {self.stderr()}")
        assert line.endswith(b"\n"), line
        assert not line.endswith(b"\r\n"), line
        response: dict[str, Any] = json.loads(line.decode("utf-8"))
        assert response.get("seq") == self._seq, response
        return response

    def request(self, cmd: str, **fields: Any) -> Any:
        response = self.answer(cmd, **fields)
        assert "result" in response, (response, self.stderr())
        return response["result"]

    def stderr(self) -> str:
        self._stderr.flush()
        return self._stderr_path.read_text(encoding="utf-8", errors="replace")

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def wait(self) -> int:
        code = self.process.wait(timeout=CHILD_TIMEOUT)
        self._reader.join(timeout=CHILD_TIMEOUT)
        return code

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=CHILD_TIMEOUT)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self._stderr.close()


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    started = Child(tmp_path / "child-stderr.log")
    try:
        yield started
    finally:
        started.cleanup()


def _prepare(child: Child, workspace: Path, marker: Path) -> None:
    hello = child.request("hello", protocol=1, kit={"name": "resumekit", "version": "test"})
    assert hello["protocol"] == 1
    assert hello["implementation"]["name"] == "resumekit-reference"
    from resumekit.conformance.adapters import CAPABILITIES

    assert set(hello["capabilities"]) == set(CAPABILITIES)  # the reference claims every capability the kit knows
    assert child.request("phase0.store.open", workspace=str(workspace), sessionId=SESSION, runId=RUN) == {}
    armed = child.request("phase0.crash.arm", marker=str(marker))
    assert isinstance(armed["pid"], int)
    assert armed["pid"] > 0
    assert not marker.exists()


def test_a_killed_process_keeps_every_acknowledged_row_and_runs_no_exit_path(
    child: Child, workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "finally.marker"
    _prepare(child, workspace, marker)
    for count, event in enumerate(EVENTS[:3], start=1):
        assert child.request("phase0.store.append", event=event) == {"rows": count}
    child.process.kill()
    code = child.wait()
    if sys.platform == "win32":
        assert code != 0  # TerminateProcess: exit status 1
    else:
        assert code == -signal.SIGKILL
    assert not marker.exists(), "the exit path ran, so the kill was not a crash"
    assert read_fresh(workspace) == ReadResult(tuple(EVENTS[:3]), None)


@pytest.mark.parametrize("how", ["end of input", "stop"])
def test_an_orderly_exit_writes_the_marker(child: Child, workspace: Path, tmp_path: Path, how: str) -> None:
    marker = tmp_path / "finally.marker"
    _prepare(child, workspace, marker)
    assert child.request("phase0.store.append", event=EVENTS[0]) == {"rows": 1}
    if how == "stop":
        child.send("stop")
    child.close_stdin()
    assert child.wait() == 0, child.stderr()
    assert marker.exists()
    assert read_fresh(workspace) == ReadResult((EVENTS[0],), None)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is TerminateProcess on Windows, a crash")
def test_a_terminate_signal_is_an_orderly_exit(child: Child, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "finally.marker"
    _prepare(child, workspace, marker)
    child.process.send_signal(signal.SIGTERM)
    assert child.wait() != 0
    assert marker.exists()


@pytest.mark.parametrize(("field", "bad"), [("sessionId", "../x"), ("runId", "CON"), ("runId", "")])
def test_an_invalid_store_id_is_refused_in_one_line_without_a_traceback(
    child: Child, workspace: Path, field: str, bad: str
) -> None:
    child.request("hello", protocol=1)
    ids = {"sessionId": SESSION, "runId": RUN, field: bad}
    refused = child.answer("phase0.store.open", workspace=str(workspace), **ids)
    assert "result" not in refused, refused
    assert repr(bad) in refused["error"]["message"] and "context" not in refused["error"], refused
    child.close_stdin()
    assert child.wait() == 0
    err = child.stderr()
    assert "Traceback" not in err, err
    [line] = err.splitlines()  # one line per refusal, naming the id
    assert line.startswith("resumekit-reference: refused 'phase0.store.open': ") and repr(bad) in line, line
    assert not (workspace / "sessions").exists()  # refused before anything was made


# --------------------------------------------------------------------------------------------
# The strict reading of the tail and of identity (STORE-9, STORE-10)
# --------------------------------------------------------------------------------------------

UNTORN_TAILS = {
    "cannot be a JSON prefix": b'{"id":]',
    "garbage": b"\x8f#garbage",
    "a complete object that is no RuntimeEvent": b"{}",
    "an array": b'["a"',
    "a row of another run, unterminated": row(dict(EVENTS[1], runId="run-9"))[:-1],
}


@pytest.mark.parametrize("tail", UNTORN_TAILS, ids=list(UNTORN_TAILS))
def test_a_tail_that_cannot_be_a_torn_append_fails_the_read_and_the_append_leaves_it(
    workspace: Path, tail: str
) -> None:
    data = row(EVENTS[0]) + row(EVENTS[1]) + UNTORN_TAILS[tail]
    write_ledger(workspace, data)
    with pytest.raises(CorruptLedger) as caught:
        read_fresh(workspace)
    assert caught.value.line == 3
    with LedgerStore(workspace, SESSION, RUN) as store:
        with pytest.raises(CorruptLedger, match="refuses"):
            store.append(EVENTS[2])
        assert ledger(workspace).read_bytes() == data
        with pytest.raises(CorruptLedger):  # refused again, and still nothing cut
            store.append(EVENTS[2])
    assert ledger(workspace).read_bytes() == data


def test_a_torn_prefix_in_any_character_is_still_torn(workspace: Path) -> None:
    last = row(EVENTS[0])  # holds multi-byte characters and a U+2028
    for cut in range(1, len(last) - 1):
        write_ledger(workspace, last[:cut])
        assert read_fresh(workspace) == ReadResult((), TornTail(0, cut)), f"cut after {cut} bytes"


@pytest.mark.parametrize("field", ["sessionId", "runId"])
@pytest.mark.parametrize("line", [1, 3])
def test_a_committed_row_of_another_run_fails_the_read_closed(workspace: Path, field: str, line: int) -> None:
    rows = [row(event) for event in EVENTS]
    rows[line - 1] = row(dict(EVENTS[line - 1], **{field: "someone-else"}))
    write_ledger(workspace, b"".join(rows))
    with pytest.raises(CorruptLedger, match="not to session") as caught:
        read_fresh(workspace)
    assert caught.value.line == line


@pytest.mark.parametrize("field", ["sessionId", "runId"])
def test_an_event_of_another_run_is_refused_on_append_and_writes_nothing(
    workspace: Path, store: LedgerStore, field: str
) -> None:
    store.append(EVENTS[0])
    with pytest.raises(ValueError, match="STORE-10"):
        store.append(dict(EVENTS[1], **{field: "someone-else"}))
    assert ledger(workspace).read_bytes() == row(EVENTS[0])
    assert store.append(EVENTS[1]) == 2


def test_turn_and_invocation_are_not_part_of_the_identity_the_store_binds(workspace: Path, store: LedgerStore) -> None:
    store.append(EVENTS[0])
    store.append(dict(EVENTS[1], turnId="turn-2", invocationId="inv-2"))
    assert len(read_fresh(workspace).events) == 2


def test_a_complete_row_of_this_run_without_its_line_feed_is_cut_by_the_next_append(workspace: Path) -> None:
    write_ledger(workspace, row(EVENTS[0]) + row(EVENTS[1])[:-1])
    with LedgerStore(workspace, SESSION, RUN) as store:
        assert store.append(EVENTS[2]) == 2
    assert ledger(workspace).read_bytes() == row(EVENTS[0]) + row(EVENTS[2])


@pytest.mark.parametrize(
    ("data", "state"),
    [
        (b"", "incomplete"),
        (b"  {", "incomplete"),
        (b'{"a":[1,2.5e-3,true,null,"\\u00e', "incomplete"),
        (b'{"a":1.', "incomplete"),
        ('{"é'.encode()[:-1], "incomplete"),  # a character cut in two
        (b'{"a":{}}', "complete"),
        (b'{"a":[]} ', "complete"),
        (b'{"id":]', "invalid"),
        (b"{}x", "invalid"),
        (b"[1]", "invalid"),
        (b'{"a":01', "invalid"),
        (b'{"a":1.e', "invalid"),
        (b'{"a":tru}', "invalid"),
        (b'{"a":"\\x"', "invalid"),
        (b'{"a":"\x01"', "invalid"),
        (b"\xff{", "invalid"),
    ],
)
def test_the_torn_row_test_tells_a_prefix_from_garbage(data: bytes, state: str) -> None:
    from resumekit.reference.phase0.jsonprefix import object_prefix_state

    assert object_prefix_state(data) == state
