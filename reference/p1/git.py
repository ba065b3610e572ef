"""Git for the worker: workspaces (WRK-4), verification (PHASE-1), capture (TASK-3), the governed commit
(TASK-4) and its push (COMMIT-1, COMMIT-2).

Every git runs with no system or global configuration, ``core.autocrlf=false``, no attributes and no
hooks, with its input closed (the adapter's stdin is the protocol) and, where the worker has set
``PROCESS_GROUP`` in its context, in the process group a keeper leads for it, so that a git still running
when the worker dies ends with it (WRK-5, ``tools.CommandGroup``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path

from resumekit.reference.p1.results import commit_object, git_object_id
from resumekit.reference.p1.tools import ToolError

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "GitError",
    "TaskInvalid",
    "build_commit",
    "capture_files",
    "ls_remote",
    "prepare_workspace",
    "push",
    "verify_workspace",
]

# The process group the git commands of the worker running in this context join (None: a plain child).
# A context variable, so that each worker (each in its own thread) gives its own.
PROCESS_GROUP: ContextVar[Callable[[], int | None] | None] = ContextVar("PROCESS_GROUP", default=None)

_TIMEOUT_S = 60.0
_WRITE_PATH = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_CONFIG = (
    "-c", "core.autocrlf=false",
    "-c", "core.eol=lf",
    "-c", "core.safecrlf=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", f"core.attributesFile={os.devnull}",
    "-c", "core.fsmonitor=false",
    "-c", "commit.gpgsign=false",
    "-c", "protocol.file.allow=always",
)


class GitError(Exception):
    """A git command failed or git is missing."""


class TaskInvalid(Exception):
    """The task cannot be executed as given (OUT-1, reason ``task_invalid``)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("GIT_"):
            del env[name]
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"})
    return env


def run(args: Sequence[str], *, cwd: Path, stdin: bytes | None = None, check: bool = True) -> bytes:
    """One git command; its stdout. It joins the worker's command group where there is one (WRK-5)."""
    exe = shutil.which("git")
    if exe is None:
        raise GitError("git is not on PATH")
    group = PROCESS_GROUP.get()
    try:
        pgid = group() if group is not None else None
    except ToolError as error:
        raise GitError(str(error)) from None
    joins: dict[str, Any] = {"process_group": pgid} if pgid is not None and sys.version_info >= (3, 11) else {}
    try:
        done: subprocess.CompletedProcess[bytes] = subprocess.run(
            [exe, *_CONFIG, *args],
            cwd=cwd,
            env=_env(),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
            **joins,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} took longer than {_TIMEOUT_S:.0f} s") from None
    except OSError as error:
        raise GitError(f"cannot run git: {error}") from error
    if check and done.returncode != 0:
        words = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise GitError(f"git {' '.join(args)} failed with exit {done.returncode}: {words}")
    return done.stdout


def prepare_workspace(root: Path, task: Mapping[str, Any]) -> str:
    """Create a new workspace under *root*, detached at ``base_oid``; return its directory name (WRK-4)."""
    while True:
        name = f"task-{task['task_id']}-{task['attempt']}-{os.urandom(4).hex()}"
        try:
            (root / name).mkdir()  # fails rather than reuse an existing entry
            break
        except FileExistsError:
            continue
    path = root / name
    run(["clone", "--quiet", "--no-checkout", "--template=", "--config", "core.autocrlf=false",
         clone_source(str(task["origin_url"])), str(path)], cwd=root)
    run(["checkout", "--quiet", "--detach", str(task["base_oid"])], cwd=path)
    return name


def clone_source(url: str, *, windows: bool = os.name == "nt") -> str:
    """What to clone *url* from: a file URL of this machine as the path it names, so that git clones locally
    (copying or linking the origin's few files) instead of running upload-pack, pack-objects and index-pack
    for the same objects; any other URL as it is."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        return url
    path = urllib.parse.unquote(parts.path)
    if windows and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]  # file:///C:/x names C:/x
    return path or url


def verify_workspace(path: Path, base_oid: str) -> bool:
    """HEAD detached at *base_oid* and ``git status --porcelain --ignored --untracked-files=all`` empty.

    The status in its second porcelain format names HEAD's commit in its ``# branch.oid`` header, so
    one command reads both the commit and the status."""
    try:
        symbolic = run(["symbolic-ref", "-q", "HEAD"], cwd=path, check=False)
        status = run(["status", "--porcelain=v2", "--branch", "--ignored", "--untracked-files=all"], cwd=path)
    except GitError:
        return False
    lines = status.decode("utf-8", "replace").splitlines()
    entries = [line for line in lines if not line.startswith("# ")]
    return not symbolic.strip() and f"# branch.oid {base_oid}" in lines and not entries


def _tree_entries(path: Path, oid: str) -> dict[str, tuple[str, str, str]]:
    out = run(["ls-tree", "-r", "-z", "--full-tree", oid], cwd=path)
    entries: dict[str, tuple[str, str, str]] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, name = record.split(b"\t", 1)
        mode, kind, object_id = meta.decode("ascii").split()
        entries[name.decode("utf-8")] = (mode, kind, object_id)
    return entries


def capture_files(path: Path, base_oid: str) -> list[tuple[str, str]]:
    """``(path, sha256)`` of every blob of *base_oid*'s tree (TASK-3)."""
    blobs = [(name, oid) for name, (_, kind, oid) in _tree_entries(path, base_oid).items() if kind == "blob"]
    if not blobs:
        return []
    out = run(["cat-file", "--batch"], cwd=path, stdin="".join(f"{oid}\n" for _, oid in blobs).encode("ascii"))
    files = []
    offset = 0
    for name, oid in blobs:
        end = out.index(b"\n", offset)
        header = out[offset:end].decode("ascii").split()
        if header[0] != oid or header[1] != "blob":
            raise GitError(f"cat-file answered {header} for {oid}")
        size = int(header[2])
        data = out[end + 1:end + 1 + size]
        offset = end + 1 + size + 1
        files.append((name, hashlib.sha256(data).hexdigest()))
    return files


def _check_write_path(name: str) -> None:
    parts = name.split("/")
    if not _WRITE_PATH.match(name) or any(part in (".", "..") for part in parts) or parts[0].lower() == ".git":
        raise TaskInvalid(f"the write path {name!r} is not allowed")


def build_commit(path: Path, base_oid: str, payload: Mapping[str, Any]) -> str:
    """Write the payload's files and create the governed commit C; return its object name (TASK-4)."""
    writes = payload["writes"]
    entries = _tree_entries(path, base_oid)
    for write in writes:
        name = write["path"]
        _check_write_path(name)
        target = path.joinpath(*name.split("/"))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(str(write["content"]).encode("utf-8"))
        except OSError as error:
            raise TaskInvalid(f"cannot write {name!r} in the workspace: {error}") from error
    run(["read-tree", base_oid], cwd=path)
    for write in writes:
        name = write["path"]
        blob = run(["hash-object", "-w", "--stdin"], cwd=path, stdin=str(write["content"]).encode("utf-8"))
        mode = entries[name][0] if name in entries and entries[name][1] == "blob" else "100644"
        try:
            run(["update-index", "--add", "--cacheinfo", f"{mode},{blob.decode('ascii').strip()},{name}"], cwd=path)
        except GitError as error:
            raise TaskInvalid(f"the tree cannot hold {name!r}: {error}") from error
    tree = run(["write-tree"], cwd=path).decode("ascii").strip()
    text = commit_object(tree, base_oid, payload["commit"])
    oid = run(["hash-object", "-t", "commit", "-w", "--stdin"], cwd=path, stdin=text).decode("ascii").strip()
    if oid != git_object_id("commit", text):
        raise GitError(f"git wrote the governed commit as {oid}, not {git_object_id('commit', text)}")
    return oid


def ls_remote(cwd: Path, url: str, branch: str) -> str | None:
    """Where the origin's branch points, or None when it does not exist (the pre-push read)."""
    ref = f"refs/heads/{branch}"
    out = run(["ls-remote", url, ref], cwd=cwd).decode("utf-8", "replace")
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return None


def push(path: Path, url: str, oid: str, branch: str) -> bool:
    """One plain push of *oid* to ``refs/heads/<branch>``; True when git reports success (COMMIT-2)."""
    try:
        run(["push", "--quiet", "--no-verify", url, f"{oid}:refs/heads/{branch}"], cwd=path)
    except GitError:
        return False
    return True
