"""The reference store under abuse, through the adapter protocol: odd ids and workspaces, huge rows,
two writers on one run.

Each try starts the reference adapter (``python -m resumekit.reference``) in a watched working folder,
speaks to it with the kit's own ``LineProcess`` and ends it. A refusal is a clear error when the
adapter answers with an ``error`` whose exception is a ``ValueError`` (the reference's refusals, with a
message naming the field); any other exception type is an unexpected one (a traceback); a dead adapter
is a traceback; a refusal where a legal input was sent, a file written outside the workspace or an
acknowledged row lost is accepted wrongly.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumekit.conformance._process import LineProcess, ProcessGone, ReadTimeout

TIMEOUT = 60.0
ROWS_PER_WRITER = 16
# Exceptions the reference raises on purpose, with a message naming what is wrong.
_CLEAR = ("RequestError", "ValueError", "CorruptLedger", "FileNotFoundError", "NotADirectoryError", "LedgerBusy")
_RAISED = re.compile(r"^[\w.]+: ([A-Z]\w*): ")


def event(index: int, text: str = "x", run: str = "run-1", session: str = "session-1") -> dict[str, Any]:
    return {
        "id": f"e{index}",
        "invocationId": "inv-1",
        "runId": run,
        "sessionId": session,
        "turnId": "turn-1",
        "ts": 1767225600000 + index,
        "partial": False,
        "role": "user",
        "author": "user",
        "content": {"kind": "text", "text": text},
    }


class Adapter:
    """One reference adapter process, spoken to line by line."""

    def __init__(self, cwd: Path, env: dict[str, str], decoy: Path) -> None:
        self.cwd, self.env, self.decoy = cwd, env, decoy
        self.process = LineProcess([sys.executable, "-m", "resumekit.reference"], cwd=cwd, env=env)
        self.seq = 0
        hello = self.ask({"cmd": "hello", "protocol": 1, "kit": {"name": "resumekit", "version": "fuzz"}})
        assert "result" in hello, hello

    def ask_raw(self, line: bytes) -> dict[str, Any]:
        self.process.send(line + b"\n", timeout=TIMEOUT)
        answer: dict[str, Any] = json.loads(self.process.receive(TIMEOUT))
        return answer

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        return self.ask_raw(json.dumps({**request, "seq": self.seq}).encode())

    def close(self) -> int | None:
        return self.process.stop(5.0)

    def stderr(self) -> str:
        return self.process.stderr_tail()


def refusal(answer: dict[str, Any]) -> str | None:
    """The error message of a refusal, or None if *answer* is a result."""
    error = answer.get("error")
    return None if error is None else str(error.get("message", ""))


def unexpected(message: str) -> bool:
    """Whether a refusal comes from an exception the reference did not mean to raise."""
    raised = _RAISED.match(message)
    return raised is not None and raised.group(1) not in _CLEAR


@dataclass
class StoreTry:
    name: str
    run: Callable[[Adapter, Path], tuple[str, str]]  # (adapter, workspace) -> (category, reason)


def _open(adapter: Adapter, workspace: str, session: str = "session-1", run: str = "run-1") -> dict[str, Any]:
    return adapter.ask({"cmd": "phase0.store.open", "workspace": workspace, "sessionId": session, "runId": run})


def _judge(answer: dict[str, Any], legal: bool, what: str) -> tuple[str, str]:
    message = refusal(answer)
    if message is None:
        return ("accepted correctly", "") if legal else ("accepted wrongly", f"{what} was accepted")
    if unexpected(message):
        return "traceback", f"{what}: {message}"
    if legal:
        return "accepted wrongly", f"{what} was refused: {message}"
    return "clear error", message


ODD_IDS: list[tuple[object, bool]] = [
    ("", False),
    (".", False),
    ("..", False),
    ("../escape", False),
    ("a/b", False),
    ("a\\b", False),
    ("nul\0x", False),
    ("x" * 129, False),
    ("x" * 128, True),
    ("caf\u00e9", False),
    (" lead", False),
    ("new\nline", False),
    ("CON", False),
    ("nul", False),
    ("COM1", False),
    ("LPT9", False),
    ("aux", False),
    (7, False),
    (None, False),
    (["run-1"], False),
    ("run_1-A", True),
]


def _odd_id(value: object, legal: bool, field_name: str) -> StoreTry:
    def attempt(adapter: Adapter, workspace: Path) -> tuple[str, str]:
        ids = {"session": "session-1", "run": "run-1", field_name: value}
        answer = _open(adapter, str(workspace), ids["session"], ids["run"])  # type: ignore[arg-type]
        category, reason = _judge(answer, legal, f"{field_name} id {value!r}"[:80])
        if category == "accepted correctly":
            # The event belongs to the run just opened: a row of another run is refused (STORE-10).
            row = event(1, run=ids["run"], session=ids["session"])  # type: ignore[arg-type]
            appended = adapter.ask({"cmd": "phase0.store.append", "event": row})
            if refusal(appended) is not None:
                return _judge(appended, True, "an append after opening")
        return category, reason

    return StoreTry(f"{field_name} id {value!r}"[:60], attempt)


def _case_twins(adapter: Adapter, workspace: Path) -> tuple[str, str]:
    """Two runs whose ids differ only by case: one file on Windows and macOS, so one must be refused."""
    first = _open(adapter, str(workspace), run="run-a")
    adapter.ask({"cmd": "phase0.store.append", "event": event(1, run="run-a")})
    second = _open(adapter, str(workspace), run="RUN-A")
    if refusal(first) is not None:
        return _judge(first, True, "run-a")
    return _judge(second, False, "RUN-A beside run-a")


def _workspace(value: Callable[[Path], str], legal: bool, what: str) -> StoreTry:
    def attempt(adapter: Adapter, workspace: Path) -> tuple[str, str]:
        answer = _open(adapter, value(workspace))
        if refusal(answer) is None:
            answer = adapter.ask({"cmd": "phase0.store.append", "event": event(1)})
        return _judge(answer, legal, f"workspace {what}")

    return StoreTry(f"workspace {what}", attempt)


def _sessions_link(adapter: Adapter, workspace: Path) -> tuple[str, str]:
    """A ``sessions`` link inside the workspace pointing at the decoy tree: no row may land there."""
    decoy = adapter.decoy / "sessions"
    (workspace / "sessions").symlink_to(decoy, target_is_directory=True)
    answer = _open(adapter, str(workspace), "s", "r")
    if refusal(answer) is None:
        answer = adapter.ask({"cmd": "phase0.store.append", "event": event(1, run="r", session="s")})
    return _judge(answer, False, "a sessions link to outside the workspace")


def _row(text_bytes: int, legal: bool = True) -> StoreTry:
    def attempt(adapter: Adapter, workspace: Path) -> tuple[str, str]:
        _open(adapter, str(workspace))
        answer = adapter.ask({"cmd": "phase0.store.append", "event": event(1, "r" * text_bytes)})
        if refusal(answer) is not None:
            return _judge(answer, legal, f"a row of {text_bytes} bytes")
        read = adapter.ask({"cmd": "phase0.store.read"})
        events = read.get("result", {}).get("events", [])
        if len(events) != 1 or len(events[0]["content"]["text"]) != text_bytes:
            return "accepted wrongly", f"a row of {text_bytes} bytes did not read back"
        return "accepted correctly", ""

    return StoreTry(f"a row of {text_bytes} bytes", attempt)


def _raw_line(name: str, build: Callable[[int], bytes]) -> StoreTry:
    """An append whose request line is not plain JSON; the reference must refuse it."""

    def attempt(adapter: Adapter, workspace: Path) -> tuple[str, str]:
        _open(adapter, str(workspace))
        adapter.seq += 1
        answer = adapter.ask_raw(build(adapter.seq))
        return _judge(answer, False, name)

    return StoreTry(name, attempt)


def _row_json(seq: int, content: bytes) -> bytes:
    head = json.dumps(event(1)).encode()[:-1]
    return b'{"cmd": "phase0.store.append", "seq": %d, "event": %s, "extra": %s}}' % (seq, head, content)


RAW_LINES = [
    ("an event with NaN", lambda seq: _row_json(seq, b"NaN").replace(b'"ts": 1767225600001', b'"ts": NaN')),
    ("an event nested 200,000 deep", lambda seq: _row_json(seq, b"[" * 200_000 + b"]" * 200_000)),
    ("an event with a 5,000-digit integer", lambda seq: _row_json(seq, b"9" * 5000)),
    ("an event with a lone surrogate", lambda seq: _row_json(seq, b'"\\ud800"')),
    ("an event that is a list", lambda seq: b'{"cmd": "phase0.store.append", "seq": %d, "event": [1]}' % seq),
    ("a request that is not JSON", lambda seq: b"\xff\xfe garbage"),
]


def tries(writer_trials: int, row_sizes: tuple[int, ...]) -> list[StoreTry]:
    found = [_odd_id(value, legal, field_name) for field_name in ("session", "run") for value, legal in ODD_IDS]
    found.append(StoreTry("run ids differing only by case", _case_twins))
    found += [
        _workspace(lambda ws: "", False, "''"),
        _workspace(lambda ws: ".", False, "'.' (relative)"),
        _workspace(lambda ws: "relative/ws", False, "relative"),
        _workspace(lambda ws: str(ws / "no" / "such"), False, "not created yet"),
        _workspace(lambda ws: str(ws) + "\0", False, "with a NUL"),
        _workspace(lambda ws: "/dev/null", False, "/dev/null"),
        StoreTry("a sessions link to outside", _sessions_link),
    ]
    if sys.platform == "win32":
        found = [t for t in found if t.name != "a sessions link to outside"]
    found += [_row(size) for size in (0, 1 << 20, 16 << 20)]
    found += [_raw_line(name, build) for name, build in RAW_LINES]
    found += [StoreTry(f"two writers, trial {n + 1}", _writers(n, row_sizes)) for n in range(writer_trials)]
    return found


def _writers(trial: int, row_sizes: tuple[int, ...]) -> Callable[[Adapter, Path], tuple[str, str]]:
    """Two adapters append to one run at once; every row either was refused or is in the ledger once."""

    def attempt(first: Adapter, workspace: Path) -> tuple[str, str]:
        second = Adapter(first.cwd, first.env, first.decoy)
        acknowledged: list[str] = []
        refused: list[str] = []
        lock = threading.Lock()
        size = row_sizes[trial % len(row_sizes)]

        def write(adapter: Adapter, name: str) -> None:
            opened = _open(adapter, str(workspace))
            if refusal(opened) is not None:
                with lock:
                    refused.append(f"{name} open: {refusal(opened)}")
                return
            for index in range(ROWS_PER_WRITER):
                row = event(index, name * size)
                row["id"] = f"{name}-{index}"
                answer = adapter.ask({"cmd": "phase0.store.append", "event": row})
                with lock:
                    (refused if refusal(answer) is not None else acknowledged).append(
                        f"{name} append: {refusal(answer)}" if refusal(answer) is not None else row["id"]
                    )

        threads = [threading.Thread(target=write, args=(a, n)) for a, n in ((first, "a"), (second, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # The first adapter may still hold the run's one writer's lock (STORE-8): read through it when it
        # opened the run, through a fresh adapter once the second has gone otherwise.
        second.close()
        if any(r.startswith("a open:") for r in refused):
            reader = Adapter(first.cwd, first.env, first.decoy)
            try:
                _open(reader, str(workspace))
                read = reader.ask({"cmd": "phase0.store.read"})
            finally:
                reader.close()
        else:
            read = first.ask({"cmd": "phase0.store.read"})
        result = read.get("result", {})
        if result.get("status") != "ok":
            return "accepted wrongly", f"two writers ({size} B rows) left a ledger that reads {result}"[:500]
        ids = [e["id"] for e in result["events"]]
        lost = [row for row in acknowledged if row not in ids]
        if lost or len(ids) != len(set(ids)):
            return "accepted wrongly", f"two writers ({size} B rows): acknowledged rows lost: {lost}"
        unexplained = [r for r in refused if unexpected(r.split(": ", 1)[1])]
        if unexplained:
            return "traceback", f"two writers: {unexplained[0]}"
        if refused:
            return "clear error", refused[0]
        return "accepted correctly", ""

    return attempt


__all__ = ["Adapter", "ProcessGone", "ReadTimeout", "StoreTry", "tries"]
