"""The file-backed, append-only RuntimeEvent ledger (docs/spec/phase0.md, section 9).

This is the imperative shell of the reference: every file the reference reads or writes is read or
written here, and the projection never sees a file. One run's ledger lives at

    <workspace>/sessions/<sessionId>/runs/<runId>/runtime-events.jsonl

and is UTF-8 JSON Lines, one RuntimeEvent object per row (STORE-1). The line feed that ends a row is
its commit marker (STORE-3).

The reference takes the strict reading of every choice the source leaves open (section 9):

- ``append`` writes the whole row (compact JSON and its ``\\n``) with one write, flushes it and syncs
  it to stable storage before it returns (STORE-2). If the file ends in bytes after its last line
  feed that are provably the trace of an append a crash interrupted (a proper prefix of a JSON
  object, or a complete row of this run without its line feed: STORE-9), it first cuts them off and
  syncs the cut, so a row never starts in the middle of torn bytes (STORE-7). Any other tail it
  refuses to cut: the append fails with ``CorruptLedger`` and the file keeps every byte. An event of
  another session or run is refused before any file is touched (STORE-10).
- ``read`` returns the committed rows and reports a torn tail without making a fact of it (STORE-4,
  TORN-1); a complete row without its line feed is uncommitted too (STORE-3). A committed row that is
  not a valid RuntimeEvent, or a row of another session or run, makes the whole read fail closed with
  ``CorruptLedger`` naming its 1-based line (STORE-5, STORE-10), and so does a tail that cannot be a
  torn append (STORE-9). Reading opens the file read-only and never creates, repairs or touches
  anything (STORE-6).

One writer per run (STORE-8): opening a store creates the run's directories and a lock file beside the
ledger, ``runtime-events.jsonl.lock``, and takes an exclusive lock on it (``flock`` on POSIX,
``msvcrt.locking`` on Windows) that it holds until ``close``. A second store on the same run, in this
process or another, fails at its construction with ``LedgerBusy`` and touches nothing. The operating
system drops the lock when the holder dies, so a crash never leaves a run locked. The lock file is
never removed: removing it could let two writers lock two different files of one name.

The store keeps its file open between appends and tracks the committed size and row count in memory;
a new store on an existing file scans it once, at its first append, to find the committed end.

Paths: the store writes only below its workspace. It refuses an empty workspace string (which would
mean the current directory), a symbolic link or junction anywhere between the workspace and the
ledger, ids that Windows reserves for devices (``CON``, ``NUL``, ``COM1`` ...) and an id that differs
only in letter case from an existing sibling directory, since Windows and macOS fold case and the two
runs would share one ledger.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from collections import namedtuple
from collections.abc import Callable, Mapping
from pathlib import Path

from resumekit.reference.durable import sync_directory, sync_fd
from resumekit.reference.phase0.events import event_problem
from resumekit.reference.phase0.jsonprefix import INCOMPLETE, INVALID, object_prefix_state

TYPE_CHECKING = False  # typing and dataclasses are not imported at run time: the store opens sooner
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, BinaryIO, NamedTuple

__all__ = [
    "LEDGER_FILE_NAME",
    "LOCK_FILE_NAME",
    "CorruptLedger",
    "LedgerBusy",
    "LedgerStore",
    "ReadResult",
    "TornTail",
    "read_ledger",
    "validate_id",
]

LEDGER_FILE_NAME = "runtime-events.jsonl"
LOCK_FILE_NAME = LEDGER_FILE_NAME + ".lock"
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Names Windows gives to devices in every directory, whatever the case (ids hold no dot, so no extension).
_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{kind}{n}" for kind in ("COM", "LPT") for n in range(1, 10)]
)
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


class LedgerBusy(OSError):
    """Another open store holds this run's ledger: one writer per run (STORE-8)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "the ledger is busy"


def validate_id(kind: str, value: object) -> str:
    """Return *value* if it is a usable session or run id, else raise ValueError."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise ValueError(f"invalid {kind} {value!r}: an id is 1 to 128 characters of A-Z, a-z, 0-9, '_' and '-'")
    if value.upper() in _RESERVED:
        raise ValueError(f"invalid {kind} {value!r}: Windows reserves that name for a device in every folder")
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


def _identity_problem(event: Mapping[str, Any], run: tuple[str, str] | None) -> str | None:
    """Why *event* is not a row of the run (session id, run id) this store holds, or None (STORE-10)."""
    if run is None or (event.get("sessionId"), event.get("runId")) == run:
        return None
    return (
        f"the row belongs to session {event.get('sessionId')!r}, run {event.get('runId')!r}, not to session "
        f"{run[0]!r}, run {run[1]!r} that this ledger holds"
    )


def _decode_own_row(path: Path, line: int, row: bytes, run: tuple[str, str] | None) -> dict[str, Any]:
    event = _decode_row(path, line, row)
    problem = _identity_problem(event, run)
    if problem is not None:
        raise CorruptLedger(path, line, problem)
    return event


def tail_problem(path: Path, line: int, tail: bytes, run: tuple[str, str] | None) -> CorruptLedger | None:
    """Why the bytes after the last line feed are not the trace of an interrupted append, or None.

    A torn append leaves a proper prefix of its row, or the whole row without its line feed; anything
    else is corruption that neither a read may skip nor an append cut (STORE-9).
    """
    state = object_prefix_state(tail)
    if state == INCOMPLETE:
        return None
    if state == INVALID:
        return CorruptLedger(
            path, line, "the bytes after the last line feed cannot be the start of a row, so they are no torn append"
        )
    try:
        _decode_own_row(path, line, tail, run)
    except CorruptLedger as error:
        return CorruptLedger(path, line, f"an unterminated row that is no row of this run: {error.reason}")
    return None


def parse_ledger(path: Path, data: bytes, run: tuple[str, str] | None = None) -> ReadResult:
    """Split ledger bytes into committed events and an uncommitted tail (STORE-3 to STORE-5, STORE-9, STORE-10).

    *run* is the (session id, run id) every row must carry; None reads rows of any run.
    """
    committed_end = data.rfind(b"\n") + 1
    tail = len(data) - committed_end
    rows = data[:committed_end].split(b"\n")[:-1]
    events = tuple(_decode_own_row(path, number, row, run) for number, row in enumerate(rows, start=1))
    if tail:
        problem = tail_problem(path, len(rows) + 1, data[committed_end:], run)
        if problem is not None:
            raise problem
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
# One writer per run: the lock file, and the path below the workspace
# --------------------------------------------------------------------------------------------


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock on the open lock file *fd* without waiting; False if another holds it."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:  # a byte-range lock on the first byte; locking past the end of a file is allowed
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    # flock, not lockf: an fcntl lock is per process, so a second store in this very process would be
    # let in, and closing any descriptor of the file would drop the lock.
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_patience(platform: str = sys.platform) -> float:
    """Seconds a new store keeps trying for the lock before it calls the ledger busy. Windows releases a killed
    process's byte-range locks "after a time that depends on available system resources", so a store opened
    right after a kill would find its dead predecessor's lock: it tries for two seconds. POSIX drops a flock as
    its holder dies: one try."""
    return 2.0 if platform == "win32" else 0.0


def _lock(fd: int, patience_s: float, try_lock: Callable[[int], bool] = _try_lock) -> bool:
    """Take the lock on *fd*, trying again for *patience_s* seconds (no event says a lock was released:
    short, growing pauses); False if it is still held then."""
    deadline, pause = time.monotonic() + patience_s, 0.005
    while not try_lock(fd):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.1)
    return True


def _unlock_and_close(fd: int) -> None:
    try:
        if sys.platform == "win32":
            import msvcrt

            # Windows may release a region only some time after its handle closes: release it first.
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    finally:
        os.close(fd)


def _is_link(path: Path) -> bool:
    is_junction = getattr(path, "is_junction", None)  # Windows junctions, Python 3.12 and later
    return path.is_symlink() or bool(is_junction is not None and is_junction())


def _case_twin(directory: Path, name: str) -> str | None:
    """An entry of *directory* that differs from *name* only in letter case, if there is one."""
    folded = name.casefold()
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return None
    return next((entry for entry in entries if entry != name and entry.casefold() == folded), None)


def _prepare_directories(workspace: Path, names: tuple[str, ...]) -> list[Path]:
    """Make ``workspace/names...`` below *workspace*; the directories that gained an entry, deepest first.

    Refuses a symbolic link or junction on the way (it could lead outside the workspace) and a name
    whose case twin exists (on a case-folding file system the two are one folder).
    """
    gained: list[Path] = []
    current = workspace
    for name in names:
        path = current / name
        if _is_link(path):
            raise ValueError(f"{path} is a symbolic link or junction; the store writes only below its workspace")
        twin = _case_twin(current, name)
        if twin is not None:
            raise ValueError(
                f"{path}: {current / twin} differs only in letter case, and Windows and macOS would take one "
                "for the other"
            )
        if not path.is_dir():
            path.mkdir(exist_ok=True)
            gained.append(current)
        current = path
    return gained[::-1]


def _workspace_path(workspace: str | os.PathLike[str]) -> Path:
    if isinstance(workspace, str) and not workspace:
        raise ValueError("the workspace is an empty string, which would mean the current directory; give a folder")
    return Path(workspace)


def read_ledger(workspace: str | os.PathLike[str], session_id: str, run_id: str) -> ReadResult:
    """Read one run's ledger without opening a store: no lock, nothing created (STORE-6)."""
    path = _workspace_path(workspace) / "sessions" / validate_id("session id", session_id) / "runs"
    path = path / validate_id("run id", run_id) / LEDGER_FILE_NAME
    try:
        with path.open("rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return ReadResult((), None)
    return parse_ledger(path, data, (session_id, run_id))


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class LedgerStore:
    """One run's append-only RuntimeEvent ledger in a workspace directory, and its only writer.

    Creating a store opens it: it makes the run's directories below the workspace (which must exist),
    creates the lock file if needed and takes the run's writer lock, or raises LedgerBusy if another
    store holds it (STORE-8). The ledger file itself is created by the first ``append``. ``close``
    releases the file and the lock; a later ``append`` takes the lock again.
    """

    def __init__(self, workspace: str | os.PathLike[str], session_id: str, run_id: str) -> None:
        self._workspace = _workspace_path(workspace)
        self._session_id = validate_id("session id", session_id)
        self._run_id = validate_id("run id", run_id)
        self._path = self._workspace / "sessions" / self._session_id / "runs" / self._run_id / LEDGER_FILE_NAME
        self._handle: BinaryIO | None = None
        self._lock_fd: int | None = None
        self._committed_end = 0  # bytes up to and including the last line feed
        self._rows = 0  # committed rows
        self._size = 0  # file size, the committed end plus any uncommitted tail
        self._failure: str | None = None
        self._acquire()

    # -- identity ---------------------------------------------------------------------------------

    @property
    def ledger_path(self) -> Path:
        """The ledger file of this run (it may not exist yet)."""
        return self._path

    @property
    def lock_path(self) -> Path:
        """The file whose lock makes this store the run's one writer."""
        return self._path.with_name(LOCK_FILE_NAME)

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def run_id(self) -> str:
        return self._run_id

    def __repr__(self) -> str:
        return f"LedgerStore({str(self._workspace)!r}, {self._session_id!r}, {self._run_id!r})"

    # -- the writer lock --------------------------------------------------------------------------

    def _acquire(self) -> None:
        """Make the run's directories and take its writer lock (STORE-8)."""
        if self._lock_fd is not None:
            return
        if not self._workspace.is_dir():
            raise FileNotFoundError(f"the workspace {self._workspace} is not an existing directory")
        names = ("sessions", self._session_id, "runs", self._run_id)
        gained = _prepare_directories(self._workspace, names)
        lock = self.lock_path
        for path in (lock, self._path):
            if _is_link(path):
                raise ValueError(f"{path} is a symbolic link; the store writes only below its workspace")
        created = not lock.exists()
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(lock, flags, 0o644)
        try:
            if not _lock(fd, lock_patience()):
                raise LedgerBusy(
                    f"the ledger {self._path} is open for writing by another store (its lock file {lock.name} is "
                    "held): a run has one writer at a time (STORE-8)"
                )
            # Directories this open created hold the ledger: make their entries durable now (STORE-2).
            for directory in dict.fromkeys([*([lock.parent] if created else []), *gained]):
                sync_directory(directory)
        except BaseException:
            _unlock_and_close(fd)
            raise
        self._lock_fd = fd

    def _release(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                _unlock_and_close(fd)

    # -- writing ----------------------------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> int:
        """Append *event* durably and return the number of committed rows in the ledger.

        Raises ValueError, before touching any file, if *event* is not a JSON object that is a valid
        RuntimeEvent: a row the store's own read would reject must never be written. Returns only
        after the row is written, flushed and synced (STORE-2).
        """
        row = encode_row(event)
        problem = _identity_problem(event, (self._session_id, self._run_id))
        if problem is not None:
            raise ValueError(f"the event is not one of this run's (STORE-10): {problem.replace('the row', 'it')}")
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
                self._refuse_untorn_tail()
                handle.truncate(self._committed_end)
                handle.seek(0, os.SEEK_END)
                sync_fd(fd)
                self._size = self._committed_end
            handle.write(row)
            handle.flush()
            sync_fd(fd)
            # The run directory gained the ledger file when this store created it (STORE-2).
            for directory in new_directories:
                sync_directory(directory)
        except CorruptLedger:
            raise  # refused before any byte changed: the store stays usable
        except BaseException as error:
            self._failure = f"{type(error).__name__}: {error}"
            self._close_handle()
            raise
        self._committed_end += len(row)
        self._size = self._committed_end
        self._rows += 1
        return self._rows

    def _refuse_untorn_tail(self) -> None:
        """Raise CorruptLedger unless the uncommitted tail is provably a torn append (STORE-9)."""
        with self._path.open("rb") as reader:
            reader.seek(self._committed_end)
            tail = reader.read()
        problem = tail_problem(self._path, self._rows + 1, tail, (self._session_id, self._run_id))
        if problem is not None:
            raise CorruptLedger(
                self._path, problem.line, f"{problem.reason}; the append leaves them as they are and refuses"
            )

    def _open_for_append(self) -> tuple[BinaryIO, list[Path]]:
        """The open ledger file, and the directories to sync because this call created entries in them."""
        if self._handle is not None:
            return self._handle, []
        self._acquire()
        if _is_link(self._path):
            raise ValueError(f"{self._path} is a symbolic link; the store writes only below its workspace")
        created = not self._path.exists()
        handle = self._path.open("ab")
        try:
            self._committed_end, self._rows, self._size = _scan(self._path)
        except BaseException:
            handle.close()
            raise
        self._handle = handle
        return handle, [self._path.parent] if created else []

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
        return parse_ledger(self._path, data, (self._session_id, self._run_id))

    # -- life cycle -------------------------------------------------------------------------------

    def _close_handle(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):  # every acknowledged row was already flushed and synced
                handle.close()

    def close(self) -> None:
        """Release the file and the writer lock. A later append takes the lock again and rescans the file."""
        self._close_handle()
        self._release()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # A store dropped without close must not keep the run locked for the rest of the process.
        with contextlib.suppress(Exception):
            self.close()
