"""Hostile workers whose story is false: what landed on the origin, the order of the convergence check, or the
hook's and the tool's reports on the kit's own paths (with the secret the worker reads in the origin's policy or
the tool's announce file) are not what the rows and requests say. Each must fail its case under TASK-4, COMMIT-4,
COMMIT-3 or ADP-2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.broken.workers._base import _patched, _write_origin
from tests.broken.workers.forged import _policy, _post


def _edited(path: Path, oid: str) -> str:
    """C with the content of the first file its payload wrote changed: same parent, same message, another tree."""
    changed = git.run(["diff-tree", "--no-commit-id", "--name-only", "-r", f"{oid}^", oid], cwd=path)
    name = changed.decode("utf-8").split("\n", 1)[0]
    blob = git.run(["hash-object", "-w", "--stdin"], cwd=path, stdin=b"edited after the payload\n")
    git.run(["read-tree", f"{oid}^{{tree}}"], cwd=path)
    git.run(["update-index", "--cacheinfo", f"100644,{blob.decode('ascii').strip()},{name}"], cwd=path)
    tree = git.run(["write-tree"], cwd=path).decode("ascii").strip()
    text = git.run(["cat-file", "commit", oid], cwd=path)
    forged = text.replace(text.split(b"\n", 1)[0], f"tree {tree}".encode("ascii"), 1)
    return git.run(["hash-object", "-t", "commit", "-w", "--stdin"], cwd=path, stdin=forged).decode("ascii").strip()


class AnotherTreeOnTheParent(reference.Worker):
    """Pushes C with one payload file's content changed (C's parent and message, another tree), reports the
    receipt of what landed, and records and submits C's body (TASK-4)."""

    landed: str | None = None

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        other = _edited(path, oid)
        plain, listed = git.push, git.ls_remote

        def push_other(where: Path, url: str, commit: str, branch: str) -> bool:
            return plain(where, url, other if commit == oid else commit, branch)

        def read_as_c(cwd: Path, url: str, branch: str) -> str | None:
            head = listed(cwd, url, branch)
            return oid if head == other else head

        self.landed = other
        with _patched(git, "push", push_other), _patched(git, "ls_remote", read_as_c):
            super()._governed_commit(attempt, path, oid)

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        if phase == "commit_done" and self.landed is not None:
            columns["commit_oid"] = self.landed
        return super()._record(attempt, phase, **columns)


class ReceiptAfterPending(reference.Worker):
    """Writes result_pending right after commit_done, and only then reports the Job's receipt and reads the
    leases, as the convergence check does: each answer is what it should be, but too late (COMMIT-4)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        if attempt.last.phase != "commit_done":
            super()._converge(attempt)
            return
        attempt.converged = True  # deferred: _pending runs the check once the row is written

    def _pending(self, attempt: reference.Attempt) -> None:
        super()._pending(attempt)
        if attempt.converged and attempt.last.reused_from is None and self._kind(attempt) == "commit":
            super()._converge(attempt)


class WritesTheRefThenReports(reference.Worker):
    """Never pushes: writes C into the origin itself (a fetch into the repository and an update of the branch,
    which run no hook), then tells the kit's own paths, with the secret read in the origin's policy, what the
    hook would have: the update asked about (accepted, since a lease and C's parent bear it out) and landed.
    The branch had moved before the kit was asked (COMMIT-3)."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        def write_and_report(where: Path, url: str, commit: str, branch: str) -> bool:
            ref, old = f"refs/heads/{branch}", str(attempt.first.expected_branch_oid)
            _write_origin(attempt, where, "fetch", "--quiet", str(where), commit)
            _write_origin(attempt, where, "update-ref", ref, commit, old)
            policy = _policy(attempt)
            update = {"ref": ref, "old": old, "new": commit}
            check = {**update, "type": "commit", "parents": [old]}
            _post(policy["check_url"], {"repository": policy["repository"], "updates": [check]})
            _post(policy["updated_url"], {"repository": policy["repository"], "updates": [update]})
            return True

        with _patched(git, "push", write_and_report):
            super()._governed_commit(attempt, path, oid)


class DeletesTheBranchAndReports(reference.Worker):
    """With its capture submitted, deletes the branch it captured from the origin, behind the hook's back, and
    reports the deletion on the kit's own path as if the hook had let it land (COMMIT-3)."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        first = attempt.first
        ref = f"refs/heads/{first.target_branch}"
        _write_origin(attempt, self.config.state_dir, "update-ref", "-d", ref)
        policy = _policy(attempt)
        update = {"ref": ref, "old": str(first.expected_branch_oid), "new": "0" * 40}
        _post(policy["updated_url"], {"repository": policy["repository"], "updates": [update]})


class AnnouncesASleeperAsTheTool(reference.Worker):
    """Runs no tool: starts a process of its own that sleeps in the workspace and announces it as the tool on the
    kit's own path, with the URL it reads in the announce file the tool's argv names (ADP-2)."""

    def _run_tool(self, path: Path) -> None:
        argv = list(self.control.tool or ())
        if "--announce-file" not in argv:
            return
        url = Path(argv[argv.index("--announce-file") + 1]).read_text(encoding="utf-8").strip()
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"], cwd=path,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _post(url, {"pid": sleeper.pid, "grandchild": None, "cwd": str(path.resolve()), "writes": 1})
        finally:
            sleeper.kill()
            sleeper.wait()
