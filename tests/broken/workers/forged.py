"""Broken workers whose story is false: each request and row looks like the reference's, but what landed on the
origin, or what the worker was told, is not what it says (TASK-4, COMMIT-3, COMMIT-4)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched, _Tracked, _write_origin


def _another_tree(path: Path, oid: str) -> str:
    """A commit with C's parent and message, whose tree also holds a file the payload never names."""
    blob = git.run(["hash-object", "-w", "--stdin"], cwd=path, stdin=b"not in the payload\n").decode("ascii").strip()
    git.run(["read-tree", f"{oid}^{{tree}}"], cwd=path)
    git.run(["update-index", "--add", "--cacheinfo", f"100644,{blob},extra.txt"], cwd=path)
    tree = git.run(["write-tree"], cwd=path).decode("ascii").strip()
    text = git.run(["cat-file", "commit", oid], cwd=path)
    forged = text.replace(text.split(b"\n", 1)[0], f"tree {tree}".encode("ascii"), 1)
    return git.run(["hash-object", "-t", "commit", "-w", "--stdin"], cwd=path, stdin=forged).decode("ascii").strip()


class LandsAnotherTree(_Tracked):
    """Pushes a commit of another tree on C's parent in place of C, records it as the commit it made (so that its
    receipt is confirmed and the lease's head is it), but records and submits the body of C: the stored result is
    the kit's expected body while the origin holds a commit no payload asked for (TASK-4)."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        other = _another_tree(path, oid)
        plain = git.push

        def push_other(where: Path, url: str, commit: str, branch: str) -> bool:
            return plain(where, url, other if commit == oid else commit, branch)

        def ls_remote_as_c(cwd: Path, url: str, branch: str) -> str | None:
            head = listed(cwd, url, branch)
            return oid if head == other else head  # the pushed commit read back as C: the body stays C's

        listed = git.ls_remote
        self.landed = other
        with _patched(git, "push", push_other), _patched(git, "ls_remote", ls_remote_as_c):
            super()._governed_commit(attempt, path, oid)

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        landed = getattr(self, "landed", None)
        if phase == "commit_done" and landed is not None:
            columns["commit_oid"] = landed  # the receipt names what landed; result_body and hash stay C's
        return super()._record(attempt, phase, **columns)


class ConvergesWithoutTheReceipt(_Tracked):
    """Takes the convergence check for passed without reporting the Job's receipt: commit_done, then at once
    result_pending, submitted as the reference does (COMMIT-4)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        if attempt.lost or attempt.last.commit_oid is None:
            raise reference.Reconcile("lease_not_converged")
        attempt.converged = True


def _policy(attempt: reference.Attempt) -> dict[str, Any]:
    """The origin's hook policy, read from the repository's folder (the worker can read it: it runs as the kit)."""
    origin = Path(url2pathname(urlparse(str(attempt.task["origin_url"])).path))
    return dict(json.loads((origin / "resumekit-policy.json").read_text(encoding="utf-8"))["control_plane"])


def _post(url: str, body: dict[str, Any]) -> None:
    """POST *body* to one of the kit's own paths, as the origin's hook does."""
    parsed = urlparse(url)
    data = json.dumps(body).encode("utf-8")
    head = (
        f"POST {parsed.path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 80), timeout=10) as connection:
        connection.sendall(head + data)
        while connection.recv(65536):
            pass


class ForgesTheRefReport(_Tracked):
    """Once its commit task is submitted, sets the origin's target branch back to the base behind the hook's back
    (as resets-the-branch-after-its-commit does) and tells the kit's own ``_kit/origin/updated`` path, with the
    secret it read in the origin's policy, that the branch moved so: a report no push the hook let land bears
    out (COMMIT-3)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        super()._finish(attempt)
        last = attempt.last
        if last.phase != "result_submitted" or last.commit_oid is None:
            return
        ref = f"refs/heads/{last.target_branch}"
        _write_origin(attempt, self.config.state_dir, "update-ref", ref, last.base_oid)
        policy = _policy(attempt)
        update = {"ref": ref, "old": last.commit_oid, "new": last.base_oid}
        _post(policy["updated_url"], {"repository": policy["repository"], "updates": [update]})


class ForgesTheToolReport(_Tracked):
    """Claims p1.tools but never runs the tool: it reads the announce URL from the file the kit names in the
    tool's argv and announces a tool itself, its own pid in the workspace (ADP-2). Without the kit's own look at
    the processes named, the announcement would pass for the tool's and WRK-5 would prove nothing."""

    def _run_tool(self, path: Path) -> None:
        argv = list(self.control.tool or ())
        if "--announce-file" not in argv:
            return
        url = Path(argv[argv.index("--announce-file") + 1]).read_text(encoding="utf-8").strip()
        _post(url, {"pid": os.getpid(), "grandchild": None, "cwd": str(path.resolve()), "writes": 1})
