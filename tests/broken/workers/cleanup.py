"""Broken workers of startup cleanup, resumption and workspaces: links followed, boundaries misread, old
workspaces kept (CLEAN, RESUME), workspaces misnamed (WRK-4) or given up on with their lease held (OUT-2)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git, journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.cleanup import remove_stale_workspaces
from tests.broken.workers._base import _patched, _Tracked


def _remove_through_links(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that empties the target of a ``task-*`` link before unlinking it (CLEAN-4)."""
    for entry in os.scandir(root):
        if entry.name.startswith("task-") and entry.is_symlink():
            target = Path(os.path.realpath(entry.path))
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    return remove_stale_workspaces(root, **kwargs)


class FollowsLinksInCleanup(_Tracked):
    """Cleanup deletes through a ``task-*`` link: the target's contents go (CLEAN-4)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_through_links):
            super()._startup()


def _remove_by_prefix(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that resolves each ``task-*`` entry and deletes what it resolves to when that path
    starts with the root's as a string (CLEAN-3): ``<root>-evil`` passes such a check."""
    real_root = os.path.realpath(root)
    before_remove: Callable[[str], None] = kwargs.get("before_remove", lambda name: None)
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.startswith("task-"):
            continue
        real = os.path.realpath(entry.path)
        if not real.startswith(real_root):
            continue
        before_remove(entry.name)
        shutil.rmtree(real, ignore_errors=True)
        if os.path.islink(entry.path):
            os.unlink(entry.path)
        yield entry.name


def _remove_as_checked(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that trusts the type it saw before the cleanup failpoint: an entry that was a
    directory then is emptied by a walk that follows links, even if it is a link now (CLEAN-4)."""
    before_remove: Callable[[str], None] = kwargs.get("before_remove", lambda name: None)
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.startswith("task-"):
            continue
        was_directory = entry.is_dir(follow_symlinks=False)
        before_remove(entry.name)
        if was_directory:
            for current, _, files in os.walk(entry.path, topdown=False, followlinks=True):
                for name in files:
                    os.unlink(os.path.join(current, name))
        if os.path.islink(entry.path) or not os.path.isdir(entry.path):
            os.unlink(entry.path)
        else:
            shutil.rmtree(entry.path)
        yield entry.name


class TrustsTheCheckedType(_Tracked):
    """Cleanup empties a checked directory that was swapped for a link meanwhile, through the link
    (CLEAN-4)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_as_checked):
            super()._startup()


class ChecksBoundaryByPrefix(_Tracked):
    """Cleanup takes a path that starts with the root's string for one inside it, and deletes through a
    link to such a sibling (CLEAN-3, CLEAN-4)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_by_prefix):
            super()._startup()


def _remove_under_the_given_root(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that compares each candidate's resolved parent with the root as it was given, never
    resolved (CLEAN-3): told the root through a link, it finds no candidate inside and leaves them all."""
    inside = {
        name for name in os.listdir(root)
        if name.startswith("task-") and os.path.realpath(os.path.join(root, name, os.pardir)) == str(root)
    }
    return remove_stale_workspaces(root, keep=lambda name: name not in inside, **kwargs)


class ComparesWithTheGivenRoot(_Tracked):
    """Cleanup checks the boundary against the workspace root as given, not resolved once (CLEAN-3)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_under_the_given_root):
            super()._startup()


def _remove_directories_only(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that takes only links and directories for workspaces: a ``task-`` file or FIFO stays
    (CLEAN-1 names every ``task-`` entry)."""
    def keep(name: str) -> bool:
        path = os.path.join(root, name)
        return not os.path.islink(path) and not os.path.isdir(path)

    return remove_stale_workspaces(root, keep=keep, **kwargs)


class RemovesOnlyDirectories(_Tracked):
    """Cleanup leaves a ``task-`` entry that is a regular file or a FIFO (CLEAN-1)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_directories_only):
            super()._startup()


def _remove_task_names_anywhere(root: Path, **kwargs: Any) -> Iterable[str]:
    """Startup cleanup that also removes ``task-`` directories one level down, inside entries without the
    prefix (CLEAN-2: a ``task-`` name deeper in the tree is not a candidate of its own)."""
    for entry in os.scandir(root):
        if not entry.name.startswith("task-") and entry.is_dir(follow_symlinks=False):
            for inner in os.scandir(entry.path):
                if inner.name.startswith("task-") and inner.is_dir(follow_symlinks=False):
                    shutil.rmtree(inner.path)
    return remove_stale_workspaces(root, **kwargs)


class RemovesTaskNamesAnywhere(_Tracked):
    """Cleanup removes ``task-`` directories nested in entries without the prefix (CLEAN-2)."""

    def _startup(self) -> None:
        with _patched(reference, "remove_stale_workspaces", _remove_task_names_anywhere):
            super()._startup()


class NoRecoveryCap(_Tracked):
    """Resumes an attempt however often it was resumed without progress (RESUME-6, strict)."""

    def _resume(self, attempt: reference.Attempt, *, count_recovery: bool) -> None:
        super()._resume(attempt, count_recovery=False)


class ResumesInOldWorkspace(_Tracked):
    """Before the governed commit, resumes in the attempt's old workspace, which startup cleanup kept
    (RESUME-3, CLEAN-1)."""

    def _old_workspaces(self) -> dict[tuple[str, int], str]:
        path = self.config.state_dir / journal.JOURNAL_NAME
        if not path.exists():
            return {}
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = db.execute("SELECT task_id, attempt, phase, workspace FROM checkpoints ORDER BY seq").fetchall()
        finally:
            db.close()
        last: dict[tuple[str, int], str] = {}
        named: dict[tuple[str, int], str] = {}
        for task_id, number, phase, workspace in found:
            last[(task_id, number)] = phase
            if workspace:
                named[(task_id, number)] = workspace
        return {
            ident: name for ident, name in named.items() if last[ident] in ("workspace_prepared", "verification_passed")
        }

    def _startup(self) -> None:
        self.old = self._old_workspaces()
        keep = set(self.old.values())

        def cleanup(root: Path, before_remove: Callable[[str], None]) -> Iterable[str]:
            return remove_stale_workspaces(root, keep=keep.__contains__, before_remove=before_remove)

        with _patched(reference, "remove_stale_workspaces", cleanup):
            super()._startup()

    def _replay(self, attempt: reference.Attempt) -> None:
        old = self.old.pop((attempt.first.task_id, attempt.first.attempt), None)
        if old is None or not (self.config.workspace_root / old).is_dir():
            super()._replay(attempt)
            return
        with _patched(git, "prepare_workspace", lambda root, task: old):
            super()._replay(attempt)


class KeepsLiveWorkspaces(ResumesInOldWorkspace):
    """Startup cleanup keeps the workspace of an attempt its journal holds open, whose lease may still be
    ACTIVE, though it resumes that attempt in a new workspace (CLEAN-5)."""

    def _replay(self, attempt: reference.Attempt) -> None:
        super(ResumesInOldWorkspace, self)._replay(attempt)


class ClaimsBeforeResuming(_Tracked):
    """At startup claims once before resuming the open attempts of its journal (RESUME-1); a task that claim
    serves is run once they are done, so every row and side effect stays the reference's."""

    def _startup(self) -> None:
        self._early: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._claimed_early = False
        super()._startup()
        if self._early is not None:
            self._served(*self._early)

    def _resume(self, attempt: reference.Attempt, *, count_recovery: bool) -> None:
        if count_recovery and not self._claimed_early:
            self._claimed_early = True
            answer = self._request("POST", "v1/claims", {})
            body = answer.body if answer.status == 200 and isinstance(answer.body, dict) else {}
            task, lease = body.get("task"), body.get("lease")
            if isinstance(task, dict) and isinstance(lease, dict):
                self._early = (task, lease)
        super()._resume(attempt, count_recovery=count_recovery)


def _prepare_without_prefix(root: Path, task: Any) -> str:
    """A workspace named after its task alone, ``ws-<task_id>-<attempt>``: no ``task-`` name (WRK-4)."""
    name = f"ws-{task['task_id']}-{task['attempt']}-{os.urandom(4).hex()}"
    (root / name).mkdir()
    git.run(["clone", "--quiet", "--no-checkout", "--template=", "--config", "core.autocrlf=false",
             str(task["origin_url"]), str(root / name)], cwd=root)
    git.run(["checkout", "--quiet", "--detach", str(task["base_oid"])], cwd=root / name)
    return name


class NamesWorkspacesFreely(reference.Worker):
    """Names each workspace ``ws-...`` instead of ``task-...`` (WRK-4)."""

    def run(self) -> int:
        with _patched(git, "prepare_workspace", _prepare_without_prefix):
            return super().run()


def _capture_fails(path: Path, base: str) -> Any:
    raise git.GitError(f"git ls-tree in {path.name} failed (made to fail)")


class GivesUpHoldingItsLease(reference.Worker):
    """When the capture's git command fails, drops the attempt and goes idle without a row, a report or a
    release: the attempt is neither terminal nor abandoned, and its lease stays ACTIVE (OUT-2)."""

    def run(self) -> int:
        with _patched(git, "capture_files", _capture_fails):
            return super().run()
