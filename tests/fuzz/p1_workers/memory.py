"""Hostile workers of the memory and time the kit spends on what it reads through git: the origin, which a
worker changes only by pushing (p1-control-plane.md CP-17) but can write, and the pushes its hook reads.

Each strikes at the origin its task names (``origin_url``, a file URL): a push of a blob of a gigabyte of
zeros that packs into a few MiB, ``objects/info/alternates`` linked to ``/dev/zero``, a ``config`` that is a
FIFO, 100,000 refs and a few hundred, a branch moved to a commit of 200 MB, and a link where the hook writes
its push log. The kit must fail the case naming COMMIT-3 (or COMMIT-2 for the push), within its memory."""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from pathlib import Path
from urllib.parse import unquote, urlsplit

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from tests.fuzz.p1_workers._base import AtTheEnd, argument

GIGABYTE = 1 << 30


def origin_of(attempt: reference.Attempt) -> Path:
    """The bare repository behind the task's ``origin_url`` (``file:///...``)."""
    return Path(unquote(urlsplit(str(attempt.task["origin_url"])).path))


def write_loose(repository: Path, kind: str, size: int, chunk: bytes) -> str:
    """Write a loose object of *kind* and *size* bytes, made of *chunk* repeated, straight into
    *repository*'s objects (no git command reads it whole on the way): its object name."""
    head = f"{kind} {size}\0".encode("ascii")
    digest, packer = hashlib.sha1(head), zlib.compressobj(9)
    parts = [packer.compress(head)]
    for _ in range(size // len(chunk)):
        digest.update(chunk)
        parts.append(packer.compress(chunk))
    parts.append(packer.flush())
    name = digest.hexdigest()
    folder = repository / "objects" / name[:2]
    folder.mkdir(exist_ok=True)
    (folder / name[2:]).write_bytes(b"".join(parts))
    return name


class PushesAHugeSparseBlob(reference.Worker):
    """Before its governed push, pushes a blob of a gigabyte of zeros (a few MiB once packed) to the target
    branch, forced: a hook that reads the pushed object whole holds a gigabyte, twice. The hook refuses it, and
    a forced push of another object than the governed commit fails COMMIT-2; then the worker goes on as the
    reference."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        blob = write_loose(path / ".git", "blob", GIGABYTE, bytes(1 << 20))
        target = f"{blob}:refs/heads/{attempt.first.target_branch}"
        # Forced: git sends no update to a non-commit otherwise. The hook refuses it (a blob is no commit).
        with contextlib.suppress(git.GitError):
            git.run(["push", "--quiet", "--force", str(attempt.task["origin_url"]), target], cwd=path)
        super()._governed_commit(attempt, path, oid)


class AlternatesToDevZero(AtTheEnd):
    """With its task done, links the origin's ``objects/info/alternates`` to ``/dev/zero``: git reads that file
    whole, for ever (7 GB of a kit's git command before its time ran out)."""

    def strike(self, attempt: reference.Attempt) -> None:
        info = origin_of(attempt) / "objects" / "info"
        info.mkdir(exist_ok=True)
        os.symlink(os.devnull.replace("null", "zero"), info / "alternates")


class ConfigIsAFifo(AtTheEnd):
    """With its task done, replaces the origin's ``config`` with a FIFO: git opens it and waits for a writer."""

    def strike(self, attempt: reference.Attempt) -> None:
        config = origin_of(attempt) / "config"
        config.unlink()
        os.mkfifo(config)


def _many_refs(attempt: reference.Attempt, count: int) -> None:
    """Write *count* refs into the origin's ``packed-refs``, each at the task's base commit, beside the refs the
    kit made (those stay loose and win)."""
    base = str(attempt.task["base_oid"])
    lines = "".join(f"{base} refs/tags/extra-{n:06d}\n" for n in range(count))
    (origin_of(attempt) / "packed-refs").write_text("# pack-refs with: peeled fully-peeled sorted \n" + lines)


class HundredThousandRefs(AtTheEnd):
    """With its task done, writes 100,000 refs into the origin: 100,000 mismatches of COMMIT-3, each in the
    report and on the terminal, unless the kit bounds what it reads and what it lists."""

    def strike(self, attempt: reference.Attempt) -> None:
        _many_refs(attempt, 100_000)


class FiveHundredRefs(AtTheEnd):
    """With its task done, writes 500 refs into the origin: fewer than the kit reads, so each is a mismatch
    of COMMIT-3, of which the report lists 20 and counts the rest."""

    def strike(self, attempt: reference.Attempt) -> None:
        _many_refs(attempt, 500)


class BranchToAHugeCommit(AtTheEnd):
    """With its task done, writes a commit of 200 MB (its message) into the origin's objects, a few hundred KB
    on disk, and moves the task's branch to it behind the hook's back: git reads a commit whole, so the kit's
    next look at the branch's history needs 200 MB, past its git's memory limit."""

    def strike(self, attempt: reference.Attempt) -> None:
        origin = origin_of(attempt)
        base = str(attempt.task["base_oid"])
        tree = git.run(["rev-parse", f"{base}^{{tree}}"], cwd=origin).decode("ascii").strip()
        header = (
            f"tree {tree}\nparent {base}\nauthor a <a@a> 0 +0000\ncommitter a <a@a> 0 +0000\n\n"
        ).encode("ascii")
        message = b"m" * (200 << 20)
        commit = _write_commit(origin, header + message)
        branch = str(attempt.task.get("target_branch") or "main")
        (origin / "refs" / "heads" / branch).write_text(commit + "\n")


def _write_commit(repository: Path, body: bytes) -> str:
    head = f"commit {len(body)}\0".encode("ascii")
    name = hashlib.sha1(head + body).hexdigest()
    folder = repository / "objects" / name[:2]
    folder.mkdir(exist_ok=True)
    (folder / name[2:]).write_bytes(zlib.compress(head + body, 9))
    return name


class PushLogLinksOutside(reference.Worker):
    """Before its governed push, puts at the origin's push log (``resumekit-pushes.jsonl``) a link to a file
    outside (the campaign's decoy): the hook, the kit's code, must not append through it."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        log = origin_of(attempt) / "resumekit-pushes.jsonl"
        if log.exists() or log.is_symlink():
            log.unlink()
        os.symlink(argument(0), log)
        super()._governed_commit(attempt, path, oid)
