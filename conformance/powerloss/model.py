"""What survives a power cut: the durable view of a file tree, kept apart from the live one (pure).

The model follows POSIX at its weakest, the way a careful implementer must assume it:

- A file's data (every write and every change of size) is durable once that file is synced
  (``fsync`` or ``fdatasync`` on any descriptor of it).
- A name is durable once the directory holding it is synced: a new file, a new directory, a rename
  and an unlink all stay volatile until then. A file whose name became durable before its data
  holds what was synced of it, possibly nothing.
- Nothing else is durable: a write the implementation never synced is lost at a cut, or, in the
  modes that model a drive writing part of its queue, kept in part.

Nodes are the model's own ids for files, directories and symbolic links (the serving layer maps
inode numbers to them, so a reused inode number is a new node). Everything here is pure: no file is
read or written, so every rule can be tested without a mount.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["CUT_MODES", "PAGE", "Cut", "Durable", "Op", "apply_ops"]

PAGE = 4096  # the granularity of the page tear: a drive that writes whole 4 KiB sectors
# lose: every unsynced write is dropped. tear-byte / tear-page: the file of the last unsynced write
# keeps its durable bytes plus a prefix of that write, cut at a byte or at a 4 KiB boundary.
# subset: the file of the last unsynced write loses its unsynced writes; of the unsynced writes to
# other files a seeded half, chosen write by write, is kept.
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
        """The tree a power cut leaves in *mode*, chosen with *seed* where the mode chooses."""
        if mode not in CUT_MODES:
            raise ValueError(f"unknown cut mode {mode!r}; the modes are {', '.join(CUT_MODES)}")
        rng = random.Random(seed)
        files = dict(self.files)
        writes = [op for op in self.pending if op.data is not None]
        last = writes[-1] if writes else None
        kept = f"{len(self.pending)} unsynced change(s) dropped"
        if last is not None and mode in ("tear-byte", "tear-page"):
            assert last.data is not None
            size = len(last.data)
            if mode == "tear-byte":
                choices = list(range(1, size)) or [0, size]
            else:
                boundaries = range((last.offset // PAGE + 1) * PAGE, last.offset + size, PAGE)
                choices = [0, *(b - last.offset for b in boundaries), size]
            keep = rng.choice(choices)
            torn = Op(last.seq, last.node, last.offset, last.data[:keep])
            files[last.node] = apply_ops(files.get(last.node, b""), [torn] if keep else [])
            kept = (
                f"the last unsynced write ({size} byte(s) at offset {last.offset}) kept its first {keep} byte(s); "
                f"{len(self.pending) - 1} other unsynced change(s) dropped"
            )
        elif last is not None and mode == "subset":
            chosen = [op for op in self.pending if op.node != last.node and rng.random() < 0.5]
            for node in {op.node for op in chosen}:
                files[node] = apply_ops(files.get(node, b""), [op for op in chosen if op.node == node])
            kept = (
                f"{len(chosen)} of {len(self.pending)} unsynced change(s) kept, none of them to the file "
                "written last"
            )
        return Cut(files, {k: dict(v) for k, v in self.dirs.items()}, dict(self.links), self.root, kept)
