"""Ledger stores that survive a process crash and lose acknowledged rows to a power cut:
``python -m tests.broken.durability MODE``.

Each is the reference adapter with its append replaced by a plain one (write the whole row with one
``write``, acknowledge) that gets durability wrong in one way. A SIGKILL leaves what each wrote in the
operating system's cache, so every process-crash case passes; the power-loss fault model must fail
each. ``P1_MODES`` do the same to the reference P1 worker.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from resumekit.reference.adapter import Harness, serve
from resumekit.reference.phase0.store import encode_row


def _sync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PlainAppend(Harness):
    """Appends with one write per row; ``settle`` is where each mode syncs, or does not."""

    def __init__(self) -> None:
        super().__init__()
        self._fd: int | None = None
        self._rows = 0
        self._new_dirs: list[Path] = []  # directories that gained an entry when this process created it

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        self._close_fd()
        return super()._store_open(request)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close_store(self) -> None:
        self._close_fd()
        super().close_store()

    def _open_ledger(self) -> int:
        path = self._open_store().ledger_path
        missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
        for directory in reversed(missing):
            directory.mkdir()
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        committed = data.rfind(b"\n") + 1
        if committed < len(data):  # a torn tail: cut it off so the next row starts on a line of its own
            os.ftruncate(fd, committed)
        self._rows = data[:committed].count(b"\n")
        self._new_dirs = ([path.parent] if created else []) + [d.parent for d in missing]
        return fd

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        row = encode_row(request["event"])
        if self._fd is None:
            self._fd = self._open_ledger()
        os.write(self._fd, row)
        self._rows += 1
        self.settle(self._fd, self._new_dirs)
        self._new_dirs = []
        return {"rows": self._rows}

    def settle(self, fd: int, new_dirs: list[Path]) -> None:
        raise NotImplementedError


class NoFsync(PlainAppend):
    """Never syncs anything: the operating system's cache is all it has."""

    def settle(self, fd: int, new_dirs: list[Path]) -> None:
        pass


class FsyncsWrongDescriptor(PlainAppend):
    """Syncs the run directory's descriptor where it meant the ledger's: the name is durable, the rows are not."""

    def settle(self, fd: int, new_dirs: list[Path]) -> None:
        _sync_path(self._open_store().ledger_path.parent)
        for directory in new_dirs:
            _sync_path(directory)


class AcksBeforeFsync(PlainAppend):
    """Hands the sync to a background thread and acknowledges at once: right after a cut, the row is gone."""

    def settle(self, fd: int, new_dirs: list[Path]) -> None:
        def later() -> None:
            os.fsync(fd)
            for directory in new_dirs:
                _sync_path(directory)

        threading.Thread(target=later, daemon=True).start()


class NoDirectorySync(PlainAppend):
    """Syncs every row but never the directory that gained the new ledger file: the file may vanish."""

    def settle(self, fd: int, new_dirs: list[Path]) -> None:
        os.fsync(fd)


def _cache_without_syncing_the_temporary() -> None:
    """The P1 cache replaced by rename without syncing the temporary first (CACHE-3): a cut leaves it empty."""
    from resumekit.reference.p1 import cache

    cache.sync_fd = lambda fd: None  # type: ignore[assignment]


# P1 workers: the reference adapter with one durability step of the worker left out.
P1_MODES = {"p1-cache-unsynced": _cache_without_syncing_the_temporary}

MODES: dict[str, type[PlainAppend]] = {
    "no-fsync": NoFsync,
    "fsync-wrong-descriptor": FsyncsWrongDescriptor,
    "acks-before-fsync": AcksBeforeFsync,
    "no-directory-sync": NoDirectorySync,
}


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    if sys.argv[1] in P1_MODES:
        P1_MODES[sys.argv[1]]()
        sys.exit(serve(sys.stdin, sys.stdout))
    sys.exit(serve(sys.stdin, sys.stdout, harness=MODES[sys.argv[1]]()))
