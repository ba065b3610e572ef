"""What the kit reads itself after (or while) a worker runs: the caches, the origin, the workspaces, and what
the origin says a result must be.

Everything here is observed evidence (p1.md EVID-1). The journal is read by ``journal_reader``, from a copy;
its model (columns, phases, rows and snapshots) is the pure ``model``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import stat
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._text import decode, safe_value
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.control_plane.state import ZERO
from resumekit.conformance.p1.model import (
    Entry,
    capture_body,
    commit_text,
)
from resumekit.conformance.p1.origin import Origin, git

__all__ = [
    "content_hash",
    "expected_capture",
    "expected_commit",
    "expected_result",
    "fast_forwards",
    "governed_commits",
    "listing",
    "origin_evidence",
    "read_cache",
    "read_cache_file",
    "ref_updates",
    "tree_blobs",
    "tree_digest",
    "tree_entries",
    "tree_state",
]


MAX_CACHE = 4 * 1024 * 1024  # bytes: a cache holds one row, so a larger file is not a cache (CACHE-1)


def read_cache(state_dir: Path, task_id: str) -> tuple[str, Any]:
    """(``absent``, None), (``torn``, raw text), (``unreadable``, what the kit found instead) or (``ok``, the
    parsed object) for a task's cache."""
    return read_cache_file(state_dir, state_dir / "tasks" / f"{task_id}.json")


def read_cache_file(state_dir: Path, path: Path) -> tuple[str, Any]:
    """``read_cache`` of one file of ``tasks/``: a cache, or a temporary the worker has not renamed yet.

    The worker made the file, so the kit reads it defensively: a regular file only, never through a link
    that leaves the state directory, and never more than ``MAX_CACHE`` bytes (a FIFO, a device or a
    directory would otherwise hang the kit or fill its memory)."""
    if not os.path.lexists(path):
        return "absent", None
    try:
        raw = _files.read_bytes(state_dir, path, limit=MAX_CACHE)
    except _files.Refused as refused:
        return "unreadable", str(refused)
    try:
        return "ok", safe_value(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "torn", decode(raw)


def tree_blobs(origin: Origin, oid: str) -> list[tuple[str, str, bytes]]:
    """Every blob of a commit's tree, recursively: (mode, path, bytes), sorted by the path's bytes.

    Two git commands whatever the tree's size: the listing, then every blob at once through
    ``cat-file --batch``, whose answer is each blob's header line and its bytes."""
    listing = origin.git(["ls-tree", "-r", "-z", "--full-tree", oid])
    entries = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob":
            entries.append((mode, path, blob))
    contents = _cat_blobs(origin, [blob for _, _, blob in entries])
    blobs = [(mode, path, contents[blob]) for mode, path, blob in entries]
    return sorted(blobs, key=lambda item: item[1].encode("utf-8"))


def _cat_blobs(origin: Origin, blobs: Sequence[str]) -> dict[str, bytes]:
    if not blobs:
        return {}
    out = origin.git_bytes(["cat-file", "--batch"], stdin="".join(f"{b}\n" for b in blobs).encode("ascii"))
    found: dict[str, bytes] = {}
    at = 0
    for blob in blobs:
        end = out.index(b"\n", at)
        fields = out[at:end].decode("ascii", "replace").split()
        if len(fields) != 3 or fields[:2] != [blob, "blob"] or not fields[2].isdigit():
            raise GitError(f"git cat-file --batch answered {out[at:end]!r} for the blob {blob}")
        size = int(fields[2])
        found[blob] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the bytes, then a newline
    return found


def expected_capture(origin: Origin, base_oid: str) -> dict[str, Any]:
    """The result body TASK-3 demands, computed by the kit from the origin."""
    return capture_body(base_oid, tree_blobs(origin, base_oid))


def expected_commit(origin: Origin, base_oid: str, payload: Mapping[str, Any]) -> str:
    """The governed commit's object name, computed by the kit in a scratch repository (TASK-4)."""
    with tempfile.TemporaryDirectory(prefix="resumekit-expect-") as scratch:
        work = Path(scratch)
        git(["init", "--quiet", "--bare", str(work / "r.git")], cwd=work)
        repo = work / "r.git"
        origin.fetch(repo, base_oid)
        env = {"GIT_INDEX_FILE": str(work / "index")}
        git(["read-tree", base_oid], cwd=repo, env=env)
        modes = {path: mode for mode, path, _ in tree_blobs(origin, base_oid)}
        for write in payload["writes"]:
            blob_file = work / "blob"
            blob_file.write_bytes(str(write["content"]).encode("utf-8"))
            blob = git(["hash-object", "-w", str(blob_file)], cwd=repo).strip()
            mode = modes.get(write["path"], "100644")
            git(["update-index", "--add", "--cacheinfo", f"{mode},{blob},{write['path']}"], cwd=repo, env=env)
        tree = git(["write-tree"], cwd=repo, env=env).strip()
        text = commit_text(tree, base_oid, payload["commit"])
        (work / "commit").write_bytes(text)
        return git(["hash-object", "-t", "commit", str(work / "commit")], cwd=repo).strip()


def expected_result(task: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    """The result body the kit expects for a task, from the task and the origin alone.

    A git object name names its content, so the expectation for a base commit and a payload is the same in
    every origin: each is computed once per process (the scenarios share a few bases).
    """
    fields = [task["kind"], task["base_oid"], task.get("payload"), task.get("target_branch")]
    key = json.dumps(fields, sort_keys=True, default=str)
    with _expected_lock:
        known = _expected.get(key)
    if known is None:
        known = _expected_body(task, origin)  # outside the lock: threads computing the same body agree
        with _expected_lock:
            _expected[key] = known
    return copy.deepcopy(known)


_expected: dict[str, dict[str, Any]] = {}
_expected_lock = threading.Lock()


def _expected_body(task: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    if task["kind"] == "source_capture":
        return expected_capture(origin, task["base_oid"])
    oid = expected_commit(origin, task["base_oid"], task["payload"])
    return {"commit_oid": oid, "kind": "commit", "target_branch": task["target_branch"]}


def origin_evidence(
    origins: Mapping[str, Origin], log: Sequence[Mapping[str, Any]], tasks: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The origins' side of the evidence once the last step is done, under the names of the Evidence fields it
    fills: every ref of every origin, read from git once (CP-17), the refs the kit made, every ref change the
    kit made or the origin's hook let land (from the control plane's *log*), which push attempts were
    fast-forwards (COMMIT-2), and the governed commit the kit computes for every commit attempt served (TASK-4).
    *tasks* are the control plane's tasks, each with every attempt as served."""
    governed = governed_commits(origins, tasks)
    return {
        "origin_refs": {repository: origin.refs() for repository, origin in origins.items()},
        "kit_refs": {repository: dict(origin.made) for repository, origin in origins.items()},
        "ref_updates": ref_updates(log),
        "fast_forward": fast_forwards(origins, log, governed),
        "governed": governed,
    }


def ref_updates(log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every change of an origin's ref in the control plane's log, in order: a branch the kit moved (CP-21) and
    an update that landed through the origin's hook (CP-18), which its post-receive half reports."""
    found = []
    for entry in log:
        if entry.get("kind") == "branch_moved" and entry.get("done"):
            ref = f"refs/heads/{entry.get('branch')}"
            found.append({"repository": entry.get("repository"), "ref": ref, "new": entry.get("new"), "by": "kit"})
        elif entry.get("kind") == "origin_ref_updated":
            found.append(
                {"repository": entry.get("repository"), "ref": entry.get("ref"), "new": entry.get("new"), "by": "push"}
            )
    return found


def fast_forwards(
    origins: Mapping[str, Origin], log: Sequence[Mapping[str, Any]], governed: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str, str], bool | None]:
    """For each push attempt the control plane logged, (repository, old, new) -> whether old is new or one of
    its ancestors, or None when the kit cannot place new. A refused push leaves no object on the origin; its
    new value is then placed only when it is one of the *governed* commits (``governed_commits``) of that
    repository, whose one parent is its attempt's base_oid (TASK-4). Creations and deletions are left out."""
    parents = {(str(g["repository"]), str(g["commit"])): str(g["base_oid"]) for g in governed}
    found: dict[tuple[str, str, str], bool | None] = {}
    for entry in log:
        if entry.get("kind") != "push":
            continue
        repository, old, new = str(entry.get("repository")), str(entry.get("old")), str(entry.get("new"))
        origin = origins.get(repository)
        if origin is None or ZERO in (old, new) or (repository, old, new) in found:
            continue
        known = origin.is_ancestor(old, new)
        if known is None:
            parent = parents.get((repository, new))
            known = None if parent is None else origin.is_ancestor(old, parent)
        found[(repository, old, new)] = known
    return found


def governed_commits(
    origins: Mapping[str, Origin], tasks: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The governed commit C the kit computes for every commit attempt served, of every task (TASK-4): its
    repository, target ref, task_id, attempt, base_oid (C's one parent) and C; each distinct C computed once.
    An attempt whose payload no commit can be made of (task_invalid) has none."""
    found: list[dict[str, Any]] = []
    known: dict[str, str | None] = {}
    for task_id, facts in tasks.items():
        for served in facts.get("attempts") or ():
            if not isinstance(served, Mapping) or served.get("kind") != "commit":
                continue
            repository, base = str(served.get("repository")), served.get("base_oid")
            if repository not in origins or not isinstance(base, str):
                continue
            key = json.dumps([repository, base, served.get("payload")], sort_keys=True, default=str)
            if key not in known:
                try:  # expected_result keeps each body it computed: the at-end reading computed most already
                    known[key] = str(expected_result(served, origins[repository])["commit_oid"])
                except (GitError, KeyError, TypeError, ValueError):
                    known[key] = None
            if known[key] is not None:
                found.append({"repository": repository, "ref": f"refs/heads/{served.get('target_branch')}",
                              "task_id": task_id, "attempt": served.get("attempt"), "base_oid": base,
                              "commit": known[key]})
    return found


def listing(root: Path) -> list[str]:
    """The names directly under a directory, sorted; a missing directory has none."""
    try:
        return sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []


def tree_state(root: Path, names: Sequence[str]) -> dict[str, Entry]:
    """The entries named *names* directly under *root* and everything below them, without following
    links: relative path -> kind, and for a file its size, mtime and content hash (WRK-5's watch).
    An entry that vanishes while it is read is left out, as if it had gone a moment earlier."""
    state: dict[str, Entry] = {}

    def add(path: Path, relative: str) -> None:
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                state[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                try:
                    names = sorted(os.listdir(path))
                except PermissionError:  # unreadable to the kit: its time still tells a change
                    state[relative] = ("dir", info.st_mtime_ns)
                    return
                state[relative] = ("dir",)
                for name in names:
                    add(path / name, f"{relative}/{name}")
            elif not stat.S_ISREG(info.st_mode):  # a FIFO, a device, a socket: never opened
                state[relative] = (_files.kind_of(info.st_mode), info.st_mtime_ns)
            else:  # a file unreadable to the kit still tells a change by its size and time
                state[relative] = ("file", info.st_size, info.st_mtime_ns, content_hash(path))
        except (FileNotFoundError, NotADirectoryError):
            state.pop(relative, None)

    for name in names:
        add(root / name, name)
    return state


def tree_digest(root: Path) -> str:
    """A checksum of a whole tree, names, kinds and bytes, without following links."""
    digest = hashlib.sha256()
    for current, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(current, d))]):
            path = Path(current, name)
            relative = path.relative_to(root).as_posix()
            digest.update(relative.encode("utf-8") + b"\0")
            if path.is_symlink():
                digest.update(b"link:" + os.readlink(path).encode("utf-8"))
            else:
                digest.update(content_hash(path).encode("ascii"))
        for name in dirs:
            digest.update(Path(current, name).relative_to(root).as_posix().encode("utf-8") + b"/\0")
    return digest.hexdigest()


def tree_entries(root: Path) -> dict[str, str]:
    """Every path of a tree, without following links: relative path -> ``dir``, ``link:<target>`` or
    ``file:<sha256>``; what ``tree_digest`` sums, entry by entry, so that a change can be named (CLEAN-2)."""
    entries: dict[str, str] = {}
    for current, dirs, files in os.walk(root, followlinks=False):
        for name in files + dirs:
            path = Path(current, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                entries[relative] = "link:" + os.readlink(path)
            elif name in dirs:
                entries[relative] = "dir"
            else:
                entries[relative] = "file:" + content_hash(path)
    return entries


HASH_LIMIT = 256 * 1024 * 1024  # bytes of one file the kit hashes; a larger one is told by its size


def content_hash(path: Path) -> str:
    """The sha256 of a regular file's bytes, read without following a link and never blocking; for a
    FIFO, a device or a socket its kind instead (opening one could hang the kit or never end), and for a
    file larger than ``HASH_LIMIT`` its size (a sparse file of a terabyte would take hours to read); a
    file the kit may not open is told by why. A file that is gone raises FileNotFoundError."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:  # no permission, or a link put in its place since it was listed
        return f"unreadable:{error.strerror}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _files.kind_of(info.st_mode).replace(" ", "-")
        if info.st_size > HASH_LIMIT:
            return f"larger-than-{HASH_LIMIT}:{info.st_size}"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)
