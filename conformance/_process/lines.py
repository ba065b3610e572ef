"""Reading a process's pipes in bounded pieces: stdout as protocol lines, stderr as a tail.

A protocol line longer than ``MAX_LINE`` bytes is refused, the deadline of a read holds however many bytes
keep arriving, and only the last ``STDERR_TAIL_BYTES`` of stderr are kept. POSIX pipes can be waited on
with select; Windows pipes cannot, so there a reader thread hands chunks over through a bounded queue. No
thread that reads a pipe ever has that pipe closed under it: a reader closes its own end when it sees the
end of the stream. The tail is text made safe (``_text.decode``): a byte that is not UTF-8 is written as its
escape.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
import time
from typing import IO

from resumekit.conformance._process.errors import LineTooLong, ReadTimeout
from resumekit.conformance._text import decode

MAX_LINE = 64 * 1024 * 1024  # bytes in one protocol line, its newline not counted (docs/adapter-protocol.md)
STDERR_TAIL_BYTES = 64 * 1024  # the most of an adapter's stderr the kit keeps
STDERR_TAIL_LINES = 40  # of which the report shows the last lines
_CHUNK = 1 << 16


class _Lines:
    """Lines out of chunks: linear in the line's length, capped at *limit*, deadline held per call."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._ready: collections.deque[bytes] = collections.deque()
        self._ended = False
        self._broken: LineTooLong | None = None

    def _chunk(self, timeout: float) -> bytes | None:
        """Up to one chunk: b"" at the end of the stream, None if nothing came within *timeout*."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop reading; the source is not read again."""

    def _add(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            self._parts.append(chunk[start : end + 1])
            self._size += end + 1 - start
            self._check(self._size - 1)
            self._ready.append(b"".join(self._parts))
            self._parts, self._size = [], 0
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
            self._size += len(chunk) - start
            self._check(self._size)

    def _check(self, size: int) -> None:
        if size > self._limit:
            self._parts, self._size = [], 0
            self._broken = LineTooLong(
                f"a line on stdout is longer than {self._limit} bytes (the protocol's limit); refused"
            )
            self.close()
            raise self._broken

    def next(self, timeout: float) -> bytes | None:
        """The next line; None at the end of the stream; ReadTimeout past *timeout* whatever arrives."""
        if self._broken is not None:
            raise self._broken
        deadline = time.monotonic() + timeout
        tried = False
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._ended:
                if self._parts:
                    line = b"".join(self._parts)
                    self._parts, self._size = [], 0
                    return line
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0 and tried:
                break
            tried = True
            chunk = self._chunk(max(0.0, remaining))
            if chunk is None:
                break
            if chunk:
                self._add(chunk)
            else:
                self._ended = True
        partial = f" ({self._size} bytes of an unfinished line)" if self._size else ""
        raise ReadTimeout(f"no line on stdout within {timeout:g} s{partial}")


class _ThreadedLines(_Lines):
    """stdout through a reader thread: works on every OS, Windows pipes included.

    The queue is bounded, so a process that writes faster than the kit reads is held back by the
    pipe, not buffered without end in the kit.
    """

    def __init__(self, stream: IO[bytes], limit: int = MAX_LINE) -> None:
        super().__init__(limit)
        self._chunks: queue.Queue[bytes] = queue.Queue(maxsize=16)
        self._closed = threading.Event()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        fd = stream.fileno()
        try:
            while not self._closed.is_set():
                try:
                    data = os.read(fd, _CHUNK)
                except OSError:
                    data = b""
                while not self._closed.is_set():
                    try:
                        self._chunks.put(data, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if not data:
                    return
        finally:
            with contextlib.suppress(OSError):
                stream.close()  # the reader's own end, closed by the reader

    def _chunk(self, timeout: float) -> bytes | None:
        try:
            data = self._chunks.get(timeout=timeout) if timeout > 0 else self._chunks.get_nowait()
        except queue.Empty:
            return None
        return data

    def close(self) -> None:
        self._closed.set()


class _SelectedLines(_Lines):
    """stdout read in the caller's thread with select: POSIX only, and a third faster per request.

    A reader thread costs a thread hand-off on every response; on a two-core machine that was about
    0.15 ms of a 0.45 ms round trip.
    """

    def __init__(self, stream: IO[bytes], limit: int = MAX_LINE) -> None:
        super().__init__(limit)
        self._stream = stream
        self._fd = stream.fileno()

    def _chunk(self, timeout: float) -> bytes | None:
        import select

        if self._stream.closed:
            return b""
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return None
        try:
            return os.read(self._fd, _CHUNK)
        except OSError:
            return b""

    def close(self) -> None:
        # Only the caller's thread reads this pipe, so closing it cannot block on a reader.
        with contextlib.suppress(OSError):
            self._stream.close()


class _Tail:
    """The last *size* bytes of a stream, read by a thread of its own in bounded chunks."""

    def __init__(self, stream: IO[bytes], size: int = STDERR_TAIL_BYTES) -> None:
        self._size = size
        self._data = bytearray()
        self._lock = threading.Lock()
        self.dropped = 0
        self.ended = threading.Event()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        fd = stream.fileno()
        try:
            while True:
                try:
                    data = os.read(fd, _CHUNK)
                except OSError:
                    return
                if not data:
                    return
                with self._lock:
                    self._data += data
                    if len(self._data) > 2 * self._size:  # trim in bulk: linear overall
                        excess = len(self._data) - self._size
                        del self._data[:excess]
                        self.dropped += excess
        finally:
            self.ended.set()
            with contextlib.suppress(OSError):
                stream.close()

    def text(self, lines: int = STDERR_TAIL_LINES) -> str:
        with self._lock:
            data = bytes(self._data[-self._size :])
            dropped = self.dropped + max(0, len(self._data) - self._size)
        kept = decode(data).splitlines()[-lines:]  # bytes that are not UTF-8 as escapes (\xff), never a surrogate
        if dropped and kept:
            kept[0] = f"[{dropped} earlier bytes of stderr not kept] {kept[0]}"
        return "\n".join(kept)
