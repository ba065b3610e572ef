"""The file-backed, append-only RuntimeEvent ledger (docs/spec/phase0.md, section 9).

This is the imperative shell of the reference: every file the reference reads or writes is read or
written here, and the projection never sees a file. One run's ledger lives at

    <workspace>/sessions/<sessionId>/runs/<runId>/runtime-events.jsonl

and is UTF-8 JSON Lines, one RuntimeEvent object per row (STORE-1). The line feed that ends a row is
its commit marker (STORE-3):

- ``append`` writes the whole row (compact JSON and its ``\\n``) with one write, flushes it and syncs
  it to stable storage before it returns (STORE-2). If the file ends in bytes after its last line
  feed, the trace of an append a crash interrupted, it first cuts them off and syncs the cut, so a
  row never starts in the middle of torn bytes (STORE-7).
- ``read`` returns the committed rows and reports an uncommitted tail without parsing it (STORE-4,
  TORN-1). A committed row that is not a valid RuntimeEvent makes the whole read fail closed with
  ``CorruptLedger`` naming its 1-based line (STORE-5). Reading opens the file read-only and never
  creates, repairs or touches anything (STORE-6).

The store keeps its file open between appends and tracks the committed size and row count in memory;
a new store on an existing file scans it once, at its first append, to find the committed end.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path

from resumekit.reference.durable import sync_directory, sync_fd
from resumekit.reference.phase0.events import event_problem

TYPE_CHECKING = False  # typing and dataclasses are not imported at run time: the store opens sooner
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, BinaryIO, NamedTuple

__all__ = ["LEDGER_FILE_NAME", "CorruptLedger", "LedgerStore", "ReadResult", "TornTail", "validate_id"]

LEDGER_FILE_NAME = "runtime-events.jsonl"
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SCAN_CHUNK = 1 << 20


# --------------------------------------------------------------------------------------------
# Results and errors
# --------------------------------------------------------------------------------------------


# The adapter opens a store right after each start, once per kill of a crash schedule: the two results
# are named tuples, as immutable as frozen dataclasses, without the import of dataclasses (about 10 ms).
if TYPE_CHECKING:

    class TornTail(NamedTuple):
        """Bytes after the last line feed: an append that a crash interrupted (STORE-4)."""

        offset: int
        length: int

    class ReadResult(NamedTuple):
        """The committed prefix of a ledger, and the uncommitted tail if the file has one."""

        events: tuple[dict[str, Any], ...]
        torn_tail: TornTail | None

else:
    TornTail = namedtuple("TornTail", ["offset", "length"])
    TornTail.__doc__ = "Bytes after the last line feed: an append that a crash interrupted (STORE-4)."
    ReadResult = namedtuple("ReadResult", ["events", "torn_tail"])
    ReadResult.__doc__ = "The committed prefix of a ledger, and the uncommitted tail if the file has one."


class CorruptLedger(Exception):
    """A committed row is not a valid RuntimeEvent (STORE-5); the read returns nothing."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(path, line, reason)
        self.path = path
        self.line = line
        self.reason = reason

    def __str__(self) -> str:
        return f"ledger {self.path}, line {self.line}: {self.reason}"


def validate_id(kind: str, value: object) -> str:
    """Return *value* if it is a usable session or run id, else raise ValueError."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise ValueError(f"invalid {kind} {value!r}: an id is 1 to 128 characters of A-Z, a-z, 0-9, '_' and '-'")
    return value


# --------------------------------------------------------------------------------------------
# Rows: encoding and strict decoding
# --------------------------------------------------------------------------------------------


def _plain_json(value: object) -> bool:
    """Whether *value* is plain JSON; the fast yes-or-no that every append asks."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(_plain_json, value))
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_json(item) for key, item in value.items())
    return False


def _check_json(value: object, where: str) -> None:
    """Raise ValueError unless *value* is plain JSON that round-trips unchanged."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}/{index}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the key {key!r}; JSON object keys are strings")
            _check_json(item, f"{where}/{key}")
        return
    raise ValueError(f"{where} is a {type(value).__name__}, which is not a JSON value")


def encode_row(event: Mapping[str, Any]) -> bytes:
    """The ledger row for *event*: compact UTF-8 JSON and its terminating line feed."""
    if not isinstance(event, Mapping):
        raise ValueError(f"an event is a JSON object, not a {type(event).__name__}")
    value = dict(event)
    try:
        if not _plain_json(value):
            _check_json(value, "event")  # the slow walk that says where
    except RecursionError:
        raise ValueError("the event is nested too deeply (or contains itself)") from None
    problem = event_problem(value)
    if problem is not None:
        raise ValueError(f"the event is not a valid RuntimeEvent: {problem}")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError as error:  # a lone surrogate in a string
        raise ValueError(f"the event holds text that is not valid Unicode: {error}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _decode_row(path: Path, line: int, row: bytes) -> dict[str, Any]:
    """The RuntimeEvent in one committed row, or CorruptLedger."""
    try:
        text = row.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptLedger(path, line, f"the row is not UTF-8 ({error})") from None
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except (ValueError, RecursionError) as error:
        raise CorruptLedger(path, line, f"the row is not JSON ({error})") from None
    if not isinstance(value, dict):
        raise CorruptLedger(path, line, f"the row is a JSON {type(value).__name__}, not an object")
    problem = event_problem(value)
    if problem is not None:
        raise CorruptLedger(path, line, f"the row is not a valid RuntimeEvent: {problem}")
    return value


def parse_ledger(path: Path, data: bytes) -> ReadResult:
    """Split ledger bytes into committed events and an uncommitted tail (STORE-3 to STORE-5)."""
    committed_end = data.rfind(b"\n") + 1
    tail = len(data) - committed_end
    rows = data[:committed_end].split(b"\n")[:-1]
    events = tuple(_decode_row(path, number, row) for number, row in enumerate(rows, start=1))
    return ReadResult(events, TornTail(committed_end, tail) if tail else None)


# --------------------------------------------------------------------------------------------
# Durability
# --------------------------------------------------------------------------------------------


def _scan(path: Path) -> tuple[int, int, int]:
    """(committed end, committed rows, file size) of the ledger file at *path*."""
    committed_end = rows = size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_SCAN_CHUNK):
            rows += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            if last >= 0:
                committed_end = size + last + 1
            size += len(chunk)
    return committed_end, rows, size


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class LedgerStore:
    """One run's append-only RuntimeEvent ledger in a workspace directory.

    Creating a store touches no file. The first ``append`` creates the run's directories and ledger
    file as needed (the workspace itself must exist) and keeps the file open until ``close``.
    """

    def __init__(self, workspace: Path, session_id: str, run_id: str) -> None:
        self._workspace = Path(workspace)
        self._session_id = validate_id("session id", session_id)
        self._run_id = validate_id("run id", run_id)
        self._path = self._workspace / "sessions" / self._session_id / "runs" / self._run_id / LEDGER_FILE_NAME
        self._handle: BinaryIO | None = None
        self._committed_end = 0  # bytes up to and including the last line feed
        self._rows = 0  # committed rows
        self._size = 0  # file size, the committed end plus any uncommitted tail
        self._failure: str | None = None

    # -- identity ---------------------------------------------------------------------------------

    @property
    def ledger_path(self) -> Path:
        """The ledger file of this run (it may not exist yet)."""
        return self._path

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def run_id(self) -> str:
        return self._run_id

    def __repr__(self) -> str:
        return f"LedgerStore({str(self._workspace)!r}, {self._session_id!r}, {self._run_id!r})"

    # -- writing ----------------------------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> int:
        """Append *event* durably and return the number of committed rows in the ledger.

        Raises ValueError, before touching any file, if *event* is not a JSON object that is a valid
        RuntimeEvent: a row the store's own read would reject must never be written. Returns only
        after the row is written, flushed and synced (STORE-2).
        """
        row = encode_row(event)
        if self._failure is not None:
            raise OSError(
                f"{self._path}: an earlier append failed ({self._failure}); whether its row is durable is "
                "unknown, so this store takes no more appends: open a new LedgerStore, which rescans the file"
            )
        handle, new_directories = self._open_for_append()
        try:
            fd = handle.fileno()
            if os.fstat(fd).st_size != self._size:  # changed behind our back: learn it again
                self._committed_end, self._rows, self._size = _scan(self._path)
            if self._size > self._committed_end:  # STORE-7: cut the torn tail back, durably
                handle.truncate(self._committed_end)
                handle.seek(0, os.SEEK_END)
                sync_fd(fd)
                self._size = self._committed_end
            handle.write(row)
            handle.flush()
            sync_fd(fd)
            # The directories that gained an entry when this store created the file (STORE-2);
            # deepest first, the run directory holding the new file among them.
            for directory in new_directories:
                sync_directory(directory)
        except BaseException as error:
            self._failure = f"{type(error).__name__}: {error}"
            self._close_handle()
            raise
        self._committed_end += len(row)
        self._size = self._committed_end
        self._rows += 1
        return self._rows

    def _open_for_append(self) -> tuple[BinaryIO, list[Path]]:
        """The open ledger file, and the directories to sync because this call created entries in them."""
        if self._handle is not None:
            return self._handle, []
        if not self._workspace.is_dir():
            raise FileNotFoundError(f"the workspace {self._workspace} is not an existing directory")
        run_dir = self._path.parent
        missing = []
        for directory in (run_dir, *run_dir.parents):
            if directory == self._workspace or directory.is_dir():
                break
            missing.append(directory)
        for directory in reversed(missing):
            directory.mkdir(exist_ok=True)
        created = not self._path.exists()
        handle = self._path.open("ab")
        try:
            self._committed_end, self._rows, self._size = _scan(self._path)
        except BaseException:
            handle.close()
            raise
        self._handle = handle
        # A new file is an entry of the run directory; every new directory is an entry of its parent.
        gained = [run_dir] if created else []
        gained += [directory.parent for directory in missing]
        return handle, list(dict.fromkeys(gained))

    # -- reading ----------------------------------------------------------------------------------

    def read(self) -> ReadResult:
        """The committed prefix; raise CorruptLedger if a committed row is not a RuntimeEvent.

        Opens the ledger read-only and changes nothing (STORE-6). A missing file is an empty ledger.
        """
        try:
            with self._path.open("rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return ReadResult((), None)
        return parse_ledger(self._path, data)

    # -- life cycle -------------------------------------------------------------------------------

    def _close_handle(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):  # every acknowledged row was already flushed and synced
                handle.close()

    def close(self) -> None:
        """Release the file. The store can append again later; it then rescans the file."""
        self._close_handle()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
