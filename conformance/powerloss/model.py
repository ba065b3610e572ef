"""What survives a power cut: the durable view of a file tree, kept apart from the live one (pure).

The model follows POSIX at its weakest, the way a careful implementer must assume it:

- A file's data (every write and every change of size) is durable once that file is synced
  (``fsync`` or ``fdatasync`` on any descriptor of it).
- A name is durable once the directory holding it is synced: a new file, a new directory, a rename
  and an unlink all stay volatile until then. A file whose name became durable before its data
  holds what was synced of it, possibly nothing.
- Nothing else is durable: a write the implementation never synced is lost at a cut, or, in the
  modes that model a drive writing part of its queue, kept in part.
- What a cut keeps of a file's unsynced changes (its writes and truncates since its last sync) is a
  prefix of them in write order: the first few whole, perhaps part of the next, never a later one
  without the earlier ones. Files are independent: each keeps its own prefix.

Not simulated: a drive that writes a later sector of a file before an earlier one. A store could tell
such a hole from damage only with a checksum per page, which neither contract asks for, so a cut
never leaves one. The kernel may hand one ``write`` to the layer in pieces (at a 4 KiB page, say);
the pieces are consecutive changes of the file's stream, so a prefix of the stream is a prefix of the
write.

Nodes are the model's own ids for files, directories and symbolic links (the serving layer maps
inode numbers to them, so a reused inode number is a new node). Everything here is pure: no file is
read or written, so every rule can be tested without a mount.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CUT_MODES", "PAGE", "Cut", "Durable", "Op", "apply_ops", "page_cuts", "stream_prefix", "stream_size"]

PAGE = 4096  # the granularity of the page tear: a drive that writes whole 4 KiB sectors
# lose: every unsynced change is dropped. tear-byte / tear-page: the file of the last unsynced write
# keeps its durable bytes plus a prefix, in write order, of the stream of its unsynced changes, cut at a
# seeded byte strictly inside it, or where the next byte's file offset is a multiple of PAGE (or at
# none or all of it); every other file's unsynced changes are dropped. subset: the file of the last
# unsynced write loses its unsynced changes; every other file keeps a seeded prefix of its own, whole
# changes only.
CUT_MODES = ("lose", "tear-byte", "tear-page", "subset")


@dataclass(frozen=True, slots=True)
class Op:
    """One unsynced change of a file's data: a write at an offset, or a new size."""

    seq: int
    node: int
    offset: int  # for a truncate, the new size
    data: bytes | None  # None for a truncate


def apply_ops(content: bytes, ops: list[Op]) -> bytes:
    """*content* after *ops* in order; a write past the end leaves a hole of zero bytes."""
    buffer = bytearray(content)
    for op in ops:
        if op.data is None:
            del buffer[op.offset :]
            buffer.extend(bytes(max(0, op.offset - len(buffer))))
        else:
            if op.offset > len(buffer):
                buffer.extend(bytes(op.offset - len(buffer)))
            buffer[op.offset : op.offset + len(op.data)] = op.data
    return bytes(buffer)


def stream_size(ops: Sequence[Op]) -> int:
    """How many bytes the stream of *ops* holds: the data of its writes, one after another."""
    return sum(len(op.data) for op in ops if op.data is not None)


def stream_prefix(ops: Sequence[Op], keep: int) -> list[Op]:
    """What of *ops*, one file's unsynced changes in write order, a cut *keep* bytes into their stream leaves.

    Every change that starts before the cut is kept, the write it falls in cut to its bytes before it;
    a truncate holds no byte and starts where the bytes after it do. A cut at the stream's end keeps
    every change (a truncate after the last byte too); a cut at 0 keeps none.
    """
    if keep > 0 and keep >= stream_size(ops):
        return list(ops)
    kept: list[Op] = []
    start = 0
    for op in ops:
        if start >= keep:
            break
        if op.data is None:
            kept.append(op)
            continue
        kept.append(op if start + len(op.data) <= keep else Op(op.seq, op.node, op.offset, op.data[: keep - start]))
        start += len(op.data)
    return kept


def page_cuts(ops: Sequence[Op]) -> list[int]:
    """The points strictly inside the stream of *ops* where the next byte's file offset is a multiple of PAGE.

    A drive that writes whole sectors in order stops at one of these: the pages before it written, the
    rest not.
    """
    total, start = stream_size(ops), 0
    cuts: list[int] = []
    for op in ops:
        if op.data is None:
            continue
        first = -(-op.offset // PAGE) * PAGE  # the first page boundary at or after the write's start
        cuts.extend(start + boundary - op.offset for boundary in range(first, op.offset + len(op.data), PAGE))
        start += len(op.data)
    return sorted({cut for cut in cuts if 0 < cut < total})


@dataclass(frozen=True, slots=True)
class Cut:
    """What one power cut leaves: the tree to restore and a sentence saying what was kept."""

    files: Mapping[int, bytes]
    dirs: Mapping[int, Mapping[str, int]]
    links: Mapping[int, str]
    root: int
    kept: str

    def walk(self) -> Iterator[tuple[tuple[str, ...], str, bytes | str | None]]:
        """(path parts, kind, content) of every entry reachable from the root, parents first."""
        stack: list[tuple[tuple[str, ...], int]] = [((), self.root)]
        seen = {self.root}
        while stack:
            parts, node = stack.pop()
            for name, child in sorted(self.dirs.get(node, {}).items()):
                where = (*parts, name)
                if child in self.dirs:
                    if child in seen:  # a directory cannot appear twice; the model keeps the first
                        continue
                    seen.add(child)
                    yield where, "dir", None
                    stack.append((where, child))
                elif child in self.links:
                    yield where, "link", self.links[child]
                else:
                    yield where, "file", self.files.get(child, b"")


class Durable:
    """The durable view of one tree, and the unsynced writes that may yet reach it."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.files: dict[int, bytes] = {}
        self.dirs: dict[int, dict[str, int]] = {root: {}}
        self.links: dict[int, str] = {}
        self.pending: list[Op] = []
        self._seq = 0

    # -- what the implementation does ---------------------------------------------------------------

    def write(self, node: int, offset: int, data: bytes) -> None:
        """A write of *data* at *offset* of a file: volatile until the file is synced."""
        self._seq += 1
        self.pending.append(Op(self._seq, node, offset, bytes(data)))

    def truncate(self, node: int, size: int) -> None:
        """A change of a file's size: volatile until the file is synced."""
        self._seq += 1
        self.pending.append(Op(self._seq, node, size, None))

    def sync_file(self, node: int) -> None:
        """An fsync of a file: all its writes so far become durable data (its name does not)."""
        mine = [op for op in self.pending if op.node == node]
        if mine or node not in self.files:
            self.files[node] = apply_ops(self.files.get(node, b""), mine)
        self.pending = [op for op in self.pending if op.node != node]

    def sync_dir(self, node: int, entries: Mapping[str, tuple[int, str, str | None]]) -> None:
        """An fsync of a directory: its current entries (name to node, kind, link target) become durable.

        A child seen for the first time exists after a cut, empty: a file whose data was never synced
        has none, a directory whose own entries were never synced has none.
        """
        self.dirs[node] = {name: child for name, (child, _, _) in entries.items()}
        for child, kind, target in entries.values():
            if kind == "dir":
                self.dirs.setdefault(child, {})
            elif kind == "link":
                self.links[child] = target or ""
            else:
                self.files.setdefault(child, b"")

    # -- what the kit asks ---------------------------------------------------------------------------

    def resolve(self, parts: tuple[str, ...]) -> bytes | None:
        """The durable content of the file at *parts* below the root, or None if no such file survives."""
        node = self.root
        for name in parts:
            entries = self.dirs.get(node)
            if entries is None or name not in entries:
                return None
            node = entries[name]
        if node in self.dirs or node in self.links:
            return None
        return self.files.get(node, b"")

    def unsynced(self) -> int:
        """How many writes are not yet durable."""
        return len(self.pending)

    def cut(self, mode: str, seed: int) -> Cut:
        """The tree a power cut leaves in *mode*, chosen with *seed* where the mode chooses.

        Whatever the mode, each file holds its durable bytes plus a prefix, in write order, of its
        unsynced changes (see ``CUT_MODES`` for how long a prefix).
        """
        if mode not in CUT_MODES:
            raise ValueError(f"unknown cut mode {mode!r}; the modes are {', '.join(CUT_MODES)}")
        rng = random.Random(seed)
        files = dict(self.files)
        writes = [op for op in self.pending if op.data is not None]
        kept = f"{len(self.pending)} unsynced change(s) dropped"
        if writes and mode in ("tear-byte", "tear-page"):
            kept = self._tear(files, writes[-1].node, mode, rng)
        elif writes and mode == "subset":
            kept = self._subset(files, writes[-1].node, rng)
        return Cut(files, {k: dict(v) for k, v in self.dirs.items()}, dict(self.links), self.root, kept)

    def _pending_of(self, node: int) -> list[Op]:
        return [op for op in self.pending if op.node == node]

    def _tear(self, files: dict[int, bytes], last: int, mode: str, rng: random.Random) -> str:
        """Keep in *files* a torn prefix of the unsynced changes of *last*; say what was kept."""
        mine = self._pending_of(last)
        total = stream_size(mine)
        if mode == "tear-byte":
            choices: Sequence[int] = range(1, total) if total > 1 else [0, total]
        else:
            choices = [0, *page_cuts(mine), total]
        keep = rng.choice(choices)
        torn = stream_prefix(mine, keep)
        files[last] = apply_ops(files.get(last, b""), torn)
        return (
            f"the last file's {_changes(mine)}, {total} byte(s) from offset {_first_offset(mine)}, kept "
            f"{_kept(torn, keep)} in write order; {len(self.pending) - len(mine)} unsynced change(s) "
            "of other files dropped"
        )

    def _subset(self, files: dict[int, bytes], last: int, rng: random.Random) -> str:
        """Drop the unsynced changes of *last*; keep a seeded whole-change prefix of every other file's."""
        others = list(dict.fromkeys(op.node for op in self.pending if op.node != last))  # in write order
        kept = 0
        for node in others:
            mine = self._pending_of(node)
            count = rng.randint(0, len(mine))
            files[node] = apply_ops(files.get(node, b""), mine[:count])
            kept += count
        dropped = len(self._pending_of(last))
        return (
            f"the last file's {dropped} unsynced change(s) dropped; of the {len(self.pending) - dropped} "
            f"unsynced change(s) of {len(others)} other file(s), {kept} kept, a prefix of each file's in write order"
        )


def _changes(ops: Sequence[Op]) -> str:
    writes = sum(op.data is not None for op in ops)
    truncates = len(ops) - writes
    return f"{writes} unsynced write(s)" + (f" and {truncates} truncate(s)" if truncates else "")


def _first_offset(ops: Sequence[Op]) -> int:
    return next(op.offset for op in ops if op.data is not None)


def _kept(torn: Sequence[Op], keep: int) -> str:
    truncates = sum(op.data is None for op in torn)
    return f"their first {keep} byte(s)" + (f" and {truncates} truncate(s)" if truncates else "")
