"""P1 workers that each break one rule: ``python -m tests.broken.workers BUG``.

Each serves the adapter protocol exactly as ``python -m resumekit.reference`` does, with one bug injected
into the reference worker by a small subclass. ``BUGS`` names them; tests/test_broken_workers.py runs
each through ``resumekit run --kind p1`` and requires the gate its bug breaks to fail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from resumekit.reference import adapter
from resumekit.reference.p1 import git, journal
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.cleanup import remove_stale_workspaces
from resumekit.reference.p1.client import quote
from resumekit.reference.p1.journal import BINDING_FIELDS, Row, attempts
from resumekit.reference.p1.results import idempotency_key


class _Tracked(reference.Worker):
    """The reference worker, remembering which rows this process wrote (to tell a resumed row apart)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mine: set[int] = set()

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        row = super()._record(attempt, phase, **columns)
        self.mine.add(row.seq)
        return row


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


class SubmitsBeforePending(_Tracked):
    """Sends the submission first and commits result_pending after it (SUB-1)."""

    def _pending(self, attempt: reference.Attempt) -> None:
        first, last = attempt.first, attempt.last
        key = idempotency_key(first.task_id, first.attempt, first.execution_digest)
        assert last.result_body is not None
        body = {
            "attempt": first.attempt,
            "execution_digest": first.execution_digest,
            "lease_id": attempt.lease_id,
            "result_hash": last.result_hash,
            "result": json.loads(last.result_body),
        }
        self._failpoint("before_result_submit")
        self._renew(attempt)
        answer = self._request("POST", f"v1/tasks/{quote(first.task_id)}/result", body, {"Idempotency-Key": key})
        super()._pending(attempt)
        if answer.status in (200, 201):
            self._submitted(attempt)


class NewKeyOnRestart(_Tracked):
    """Mints a new key for an attempt it resumes at result_pending after a restart (KEY-1, KEY-2)."""

    def _submit(self, attempt: reference.Attempt) -> None:
        pending = attempt.last
        if pending.seq not in self.mine:
            attempt.rows[-1] = dataclasses.replace(pending, idempotency_key=f"p1-result:{secrets.token_hex(32)}")
        super()._submit(attempt)


class NewKeyOnSecondRecovery(_Tracked):
    """Mints a new key when a recovery at result_pending was itself killed before it made progress
    (KEY-2): a single crash never shows it; the crash matrix's crash during recovery does."""

    def _submit(self, attempt: reference.Attempt) -> None:
        pending = attempt.last
        if pending.seq not in self.mine and self.journal.recoveries(pending.task_id, pending.attempt, pending.seq) >= 2:
            attempt.rows[-1] = dataclasses.replace(pending, idempotency_key=f"p1-result:{secrets.token_hex(32)}")
        super()._submit(attempt)


class AcceptsAny409(_Tracked):
    """Takes every 409 answer to a submission for an exact match (SUB-5)."""

    def _exact_match(self, attempt: reference.Attempt, body: dict[str, Any]) -> bool:
        return body.get("error") == "conflict" or super()._exact_match(attempt, body)


class ReusesAcrossGenerations(_Tracked):
    """Reuses an earlier attempt's rows when only ``generation`` differs (SCOPE-4)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        loose = tuple(name for name in BINDING_FIELDS if name != "generation")
        first = attempt.first
        mine = tuple(getattr(first, name) for name in loose)
        earlier = [
            group
            for group in attempts(self.journal.rows())
            if group[0].task_id == first.task_id
            and group[0].attempt < first.attempt
            and tuple(getattr(group[0], name) for name in loose) == mine
            and group[0].generation != first.generation
        ]
        if not earlier:
            return super()._reuse(attempt)
        # Pretend the earlier attempts carry this attempt's generation, so the reference reuses them.
        real_rows = self.journal.rows

        def rows() -> list[Row]:
            return [
                dataclasses.replace(row, generation=first.generation) if row.task_id == first.task_id else row
                for row in real_rows()
            ]

        with _patched(self.journal, "rows", rows):
            return super()._reuse(attempt)


class RecommitsAfterCommitDone(_Tracked):
    """Resumed with commit_done durable, pushes a new commit on top of C before the convergence check
    (COMMIT-3)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        last = attempt.last
        if last.phase == "commit_done" and last.seq not in self.mine and last.commit_oid is not None:
            root = self.config.workspace_root
            name = git.prepare_workspace(root, attempt.task)
            path = root / name
            again = git.run(
                [
                    "-c",
                    "user.name=bug",
                    "-c",
                    "user.email=bug@resumekit.invalid",
                    "commit-tree",
                    f"{last.commit_oid}^{{tree}}",
                    "-p",
                    last.commit_oid,
                    "-m",
                    "again",
                ],
                cwd=path,
            )
            git.push(path, str(attempt.task["origin_url"]), again.decode("ascii").strip(), last.target_branch)
            shutil.rmtree(path, ignore_errors=True)
        super()._converge(attempt)


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


class AcceptsSameBodyInAnyState(_Tracked):
    """Takes a 409 holding this attempt's exact body for an exact match whatever the task's state (SUB-5)."""

    def _exact_match(self, attempt: reference.Attempt, body: dict[str, Any]) -> bool:
        if body.get("state") not in ("VERIFYING", "SUCCEEDED"):
            body = dict(body, state="VERIFYING")
        return super()._exact_match(attempt, body)


class NoRecoveryCap(_Tracked):
    """Resumes an attempt however often it was resumed without progress (RESUME-6, strict)."""

    def _resume(self, attempt: reference.Attempt, *, count_recovery: bool) -> None:
        super()._resume(attempt, count_recovery=False)


class PollsUntilVisible(_Tracked):
    """Polls a not_visible receipt again within the attempt instead of ending it (COMMIT-4)."""

    def _converge(self, attempt: reference.Attempt) -> None:
        for _ in range(10):
            try:
                super()._converge(attempt)
                return
            except reference.Reconcile as reason:
                if str(reason) != "receipt_not_visible":
                    raise
        super()._converge(attempt)


class _NormalJournal(journal.Journal):
    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        db.execute("PRAGMA synchronous=NORMAL")
        entry = self.settings[-1]
        entry["synchronous"] = int(db.execute("PRAGMA synchronous").fetchone()[0])  # reported truthfully: 1
        return db


class SynchronousNormal(_Tracked):
    """Writes the journal with ``synchronous=NORMAL`` and says so in p1.journal.settings (JNL-5)."""

    def _startup(self) -> None:
        with _patched(reference, "Journal", _NormalJournal):
            super()._startup()


class _ForgivingJournal(journal.Journal):
    def append(self, values: Any) -> Row:
        try:
            return super().append(values)
        except journal.JournalError:
            # Takes the failed commit for done: the row it would have had, or the one a synced-late
            # commit left behind.
            rows = self.rows()
            if rows and rows[-1].phase == values.get("phase") and rows[-1].task_id == values.get("task_id"):
                return rows[-1]
            return Row(rows[-1].seq + 1 if rows else 1, *(values.get(name) for name in journal._INSERTED))


def _forgiving_cache(*args: Any, **kwargs: Any) -> None:
    with contextlib.suppress(reference.CacheError):
        _write_cache(*args, **kwargs)


_write_cache = reference.write_cache


class IgnoresDiskErrors(_Tracked):
    """Takes a failed journal commit, cache write or fsync for a success and goes on (JNL-7, JNL-8)."""

    def run(self) -> int:
        with _patched(reference, "Journal", _ForgivingJournal), _patched(reference, "write_cache", _forgiving_cache):
            return super().run()


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


class IgnoresLostLease(_Tracked):
    """Takes every renewal for a success: goes on pushing and submitting with a lost lease (LEASE-4)."""

    def _renew(self, attempt: reference.Attempt) -> bool:
        super()._renew(attempt)
        attempt.lost = False
        return True


class SkipsTheCacheRebuild(_Tracked):
    """Writes a cache only with a new row: a damaged cache of a finished task stays damaged (CACHE-4)."""

    def _startup(self) -> None:
        with _patched(reference, "rebuild", lambda *_args, **_kwargs: []):
            super()._startup()


class ReusesTheOldKey(_Tracked):
    """Reuses an earlier attempt's result_pending row with that attempt's key instead of its own (SCOPE-3, KEY-2)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        earlier = [
            row
            for group in attempts(self.journal.rows())
            if group[0].task_id == first.task_id
            and group[0].attempt < first.attempt
            and group[0].binding == first.binding
            for row in group
            if row.phase == "result_pending"
        ]
        if not earlier:
            return super()._reuse(attempt)
        old_key = max(earlier, key=lambda row: row.seq).idempotency_key
        with _patched(reference, "idempotency_key", lambda *_args: old_key):
            return super()._reuse(attempt)


class _PlainTool(_Tracked):
    """Runs the tool as a plain child and waits for it: nothing ends it if this process is killed."""

    new_session = False

    def _run_tool(self, path: Path) -> None:
        if self.control.tool is not None:
            subprocess.run(self.control.tool, cwd=path, stdin=subprocess.DEVNULL, check=False,
                           start_new_session=self.new_session)


class DetachesTheTool(_PlainTool):
    """Starts the tool in a session of its own and keeps no keeper, record or job for it (WRK-5)."""

    new_session = True


class LeavesTheToolInItsGroup(_PlainTool):
    """Keeps the tool in the worker's process group, which nothing kills when only the worker's pid dies (WRK-5)."""


class IgnoresTheTool(_Tracked):
    """Claims p1.tools but never runs the tool (ADP-2): without the tool's own check, WRK-5 would pass."""

    def _run_tool(self, path: Path) -> None:
        return


class IgnoresSupersededAttempts(_Tracked):
    """Takes a superseded attempt served again for an attempt of its own: resumes or starts it although
    the journal holds rows of a later attempt of the task (SCOPE-7)."""

    def _superseded(self, attempt: reference.Attempt) -> bool:
        return False

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        real_rows = self.journal.rows

        def rows() -> list[Row]:  # the later attempts of the served task, out of sight
            return [r for r in real_rows() if r.task_id != task.get("task_id") or r.attempt <= task.get("attempt", 0)]

        with _patched(self.journal, "rows", rows):
            super()._served(task, lease)


class IgnoresIdentityConflicts(_Tracked):
    """Takes an attempt served with another identity than its rows for a new attempt and runs it (SCOPE-6)."""

    def _served(self, task: dict[str, Any], lease: dict[str, Any]) -> None:
        real_rows = self.journal.rows
        served = tuple(task.get(name) for name in journal.IDENTITY_FIELDS)

        def rows() -> list[Row]:  # the other identity's rows of the same attempt, out of sight
            return [r for r in real_rows() if r.identity[:2] != served[:2] or r.identity == served]

        with _patched(self.journal, "rows", rows):
            super()._served(task, lease)


class ReusesCommitDoneAcrossBindings(_Tracked):
    """Reuses an earlier attempt's commit_done, whatever its binding, instead of its own convergence from
    claimed: a governed commit's row carried into another Job (SCOPE-3, SCOPE-4)."""

    def _reuse(self, attempt: reference.Attempt) -> bool:
        first = attempt.first
        done = [
            row
            for row in self.journal.rows()
            if row.task_id == first.task_id and row.attempt < first.attempt and row.phase == "commit_done"
        ]
        if self._kind(attempt) != "commit" or not done:
            return super()._reuse(attempt)
        source = done[-1]
        self._record(attempt, "commit_done", result_hash=source.result_hash, result_body=source.result_body,
                     commit_oid=source.commit_oid, reused_from=source.seq)
        return True


class IgnoresTheAnyFailpoint(_Tracked):
    """Claims p1.failpoint-any but never blocks where the name ``*`` is armed: a failpoint armed by name still
    stops it, so every named crash scenario passes, and only a crash matrix, which arms ``*``, finds it (FPT-5)."""

    def _failpoint(self, name: str) -> None:
        armed = getattr(self.control, "_armed", None)  # the reference Control's armed (name, hit), if any
        if armed is not None and armed[0] == "*":
            return
        super()._failpoint(name)


# bug -> (worker class, what it does wrong)
BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "submits-before-pending": (SubmitsBeforePending, "sends the submission, then commits result_pending (SUB-1)"),
    "new-key-on-restart": (NewKeyOnRestart, "mints a new key when resuming at result_pending (KEY-1, KEY-2)"),
    "accepts-any-409": (AcceptsAny409, "writes result_submitted on any 409 (SUB-5)"),
    "reuses-across-generations": (ReusesAcrossGenerations, "reuses rows of another generation (SCOPE-4)"),
    "recommits-after-commit-done": (RecommitsAfterCommitDone, "pushes again after a restart at commit_done (COMMIT-3)"),
    "follows-links-in-cleanup": (FollowsLinksInCleanup, "cleanup deletes through a task-* link (CLEAN-4)"),
    "synchronous-normal": (SynchronousNormal, "journal connection with synchronous=NORMAL (JNL-5)"),
    "resumes-in-old-workspace": (ResumesInOldWorkspace, "replays in the old workspace, kept at startup (RESUME-3)"),
    "ignores-lost-lease": (IgnoresLostLease, "pushes and submits after its lease is lost (LEASE-4)"),
}


# Bugs that only the attack campaigns and scenarios find; tests/test_attack.py runs each on the few cases
# that catch it, instead of the whole selection of tests/test_broken_workers.py.
ATTACK_BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "new-key-on-second-recovery": (
        NewKeyOnSecondRecovery,
        "mints a new key when a recovery at result_pending was killed and recovered again (KEY-2)",
    ),
    "checks-boundary-by-prefix": (
        ChecksBoundaryByPrefix,
        "cleanup deletes through a link to <root>-evil, a sibling that passes a string-prefix check (CLEAN-3)",
    ),
    "polls-until-visible": (PollsUntilVisible, "polls a not_visible receipt again instead of reconciling (COMMIT-4)"),
    "no-recovery-cap": (NoRecoveryCap, "resumes an attempt without end when no resumption progresses (RESUME-6)"),
    "trusts-the-checked-type": (
        TrustsTheCheckedType,
        "cleanup empties a directory swapped for a link after its check, through the link (CLEAN-4)",
    ),
    "ignores-disk-errors": (IgnoresDiskErrors, "takes a failed journal commit or fsync for a success (JNL-7, JNL-8)"),
    "skips-the-cache-rebuild": (
        SkipsTheCacheRebuild,
        "leaves a damaged cache of a finished task as it is, never rebuilding it at startup (CACHE-4)",
    ),
    "reuses-the-old-key": (
        ReusesTheOldKey,
        "reuses an earlier attempt's result_pending with that attempt's key, not its own (SCOPE-3, KEY-2)",
    ),
    "accepts-same-body-in-any-state": (
        AcceptsSameBodyInAnyState,
        "takes a 409 with this attempt's body for an exact match in any task state (SUB-5)",
    ),
    "detaches-the-tool": (
        DetachesTheTool,
        "starts the tool in a new session with no keeper, record or job: it outlives the worker (WRK-5)",
    ),
    "leaves-the-tool-in-its-group": (
        LeavesTheToolInItsGroup,
        "runs the tool as a plain child in the worker's group, which nothing ends when only its pid is killed (WRK-5)",
    ),
    "ignores-the-tool": (
        IgnoresTheTool,
        "claims p1.tools but never runs the tool, so no kill could prove WRK-5 (ADP-2)",
    ),
    "ignores-superseded-attempts": (
        IgnoresSupersededAttempts,
        "resumes or starts a superseded attempt served again, writing rows and submitting for it (SCOPE-7)",
    ),
    "ignores-identity-conflicts": (
        IgnoresIdentityConflicts,
        "runs an attempt served with another identity than its rows as a new one (SCOPE-6)",
    ),
    "reuses-commit-done-across-bindings": (
        ReusesCommitDoneAcrossBindings,
        "reuses an earlier attempt's commit_done under another binding (SCOPE-3, SCOPE-4)",
    ),
}


# Bugs that leave every scenario passing and only make a campaign vacuous; tests/test_broken_workers.py runs
# each through the smallest crash matrix and the soak, which must fail instead of passing with nothing visited.
CAMPAIGN_BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "ignores-the-any-failpoint": (
        IgnoresTheAnyFailpoint,
        "claims p1.failpoint-any but never blocks at a failpoint armed as '*', so no matrix crash happens (FPT-5)",
    ),
}


def _write_origin(attempt: reference.Attempt, cwd: Path, *args: str) -> None:
    """Run git straight on the attempt's origin repository, behind its hook's back (CP-17 forbids it)."""
    origin = Path(url2pathname(urlparse(str(attempt.task["origin_url"])).path))
    git.run(["--git-dir", str(origin), *args], cwd=cwd)


class ResetsTheBranchAfterItsCommit(_Tracked):
    """Once its commit task is submitted and released, sets the origin's target branch back to the base,
    writing the repository directly (COMMIT-3, CP-17): every request and row is the reference's."""

    def _finish(self, attempt: reference.Attempt) -> None:
        super()._finish(attempt)
        last = attempt.last
        if last.phase == "result_submitted" and last.commit_oid is not None:
            _write_origin(attempt, self.config.state_dir, "update-ref", f"refs/heads/{last.target_branch}",
                          last.base_oid)


class CreatesARefOnTheOrigin(_Tracked):
    """Once its commit task is submitted, pushes a tag of the governed commit, and when the origin refuses
    it, writes the tag into the repository itself (COMMIT-2 and COMMIT-3, CP-17)."""

    def _finish(self, attempt: reference.Attempt) -> None:
        super()._finish(attempt)
        last = attempt.last
        if last.phase != "result_submitted" or last.commit_oid is None:
            return
        tag, url = f"refs/tags/{last.task_id}-done", str(attempt.task["origin_url"])
        root = self.config.workspace_root
        name = git.prepare_workspace(root, attempt.task)  # a clone: it holds C, which the branch holds now
        try:
            with contextlib.suppress(git.GitError):  # the origin's hook refuses a creation
                git.run(["push", "--quiet", "--no-verify", url, f"{last.commit_oid}:{tag}"], cwd=root / name)
        finally:
            shutil.rmtree(root / name, ignore_errors=True)
        _write_origin(attempt, self.config.state_dir, "update-ref", tag, last.commit_oid)


class ForcesAfterARefusedPush(_Tracked):
    """When the plain push of its governed commit is refused, pushes it again with ``--force`` (COMMIT-2)."""

    def _governed_commit(self, attempt: reference.Attempt, path: Path, oid: str) -> None:
        plain = git.push

        def push_then_force(where: Path, url: str, commit: str, branch: str) -> bool:
            if plain(where, url, commit, branch):
                return True
            try:
                git.run(["push", "--quiet", "--force", "--no-verify", url, f"{commit}:refs/heads/{branch}"], cwd=where)
            except git.GitError:
                return False
            return True

        with _patched(git, "push", push_then_force):
            super()._governed_commit(attempt, path, oid)


# Bugs of the origin that one golden scenario catches each; tests/test_attack.py runs them with ATTACK_BUGS.
ATTACK_BUGS.update({
    "resets-the-branch-after-its-commit": (
        ResetsTheBranchAfterItsCommit,
        "sets the target branch back to the base after its governed commit, behind the origin's hook (COMMIT-3)",
    ),
    "creates-a-ref-on-the-origin": (
        CreatesARefOnTheOrigin,
        "pushes a tag of its commit and, refused, writes the tag into the origin itself (COMMIT-2, COMMIT-3)",
    ),
    "forces-after-a-refused-push": (
        ForcesAfterARefusedPush,
        "pushes its governed commit again with --force after the origin refused the plain push (COMMIT-2)",
    ),
})


# A daemon as a careless worker starts one: it forks, leaves the session, forks again (so that it is nobody's
# child and in no group the kit ends) and appends to a file in the workspace root every 50 ms, for 30 s at
# most and only while the root is there, so that it ends by itself even if nothing kills it.
DAEMON_FILE = "left-by-a-daemon.txt"
_DAEMON = f"""# resumekit broken worker: a daemon that outlives it
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
root, until = sys.argv[1], time.monotonic() + 30
while time.monotonic() < until and os.path.isdir(root):
    with open(os.path.join(root, {DAEMON_FILE!r}), "a", encoding="utf-8") as out:
        out.write(f"daemon pid {{os.getpid()}}\\n")
    time.sleep(0.05)
"""


class LeavesADaemon(_Tracked):
    """Starts a daemon at every startup that double-forks, calls setsid and keeps writing into the workspace
    root: no keeper, group or job of the worker holds it, so it outlives the worker (WRK-5). POSIX only."""

    def _startup(self) -> None:
        subprocess.run([sys.executable, "-c", _DAEMON, str(self.config.workspace_root)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=10)
        super()._startup()


class ForgetsItsClaim(_Tracked):
    """Once its result is submitted, deletes the attempt's claimed row, dropping the journal's guard first:
    the final journal no longer shows it, and only a snapshot taken before the first wait can (JNL-4)."""

    def _submitted(self, attempt: reference.Attempt) -> None:
        super()._submitted(attempt)
        first = attempt.first
        with contextlib.closing(sqlite3.connect(self.journal.path)) as db:
            db.execute("DROP TRIGGER IF EXISTS checkpoints_no_delete")
            db.execute(
                "DELETE FROM checkpoints WHERE task_id = ? AND attempt = ? AND phase = 'claimed'",
                (first.task_id, first.attempt),
            )
            db.commit()


ATTACK_BUGS["forgets-its-claim"] = (
    ForgetsItsClaim,
    "deletes an attempt's claimed row once its result is submitted, before the kit's first wait (JNL-4)",
)


class ClaimsInAHurry(_Tracked):
    """Claims again 2 ms after a claim answered without a task, whatever retry_after_ms says (WRK-3)."""

    def _claim_loop(self) -> None:
        with _patched(self.control, "sleep", lambda seconds: type(self.control).sleep(self.control, 0.002)):
            super()._claim_loop()


ATTACK_BUGS["claims-in-a-hurry"] = (ClaimsInAHurry, "ignores retry_after_ms after an empty claim (WRK-3)")


if sys.platform == "linux":  # where the kit can look for it (conformance/_process/escaped.py)
    BUGS["leaves-a-daemon"] = (
        LeavesADaemon,
        "starts a daemon that double-forks, leaves the session and keeps writing into the workspace root (WRK-5)",
    )


def main(argv: list[str]) -> int:
    every = {**BUGS, **ATTACK_BUGS, **CAMPAIGN_BUGS}
    if len(argv) != 2 or argv[1] not in every:
        print(f"usage: python -m tests.broken.workers {{{','.join(every)}}}", file=sys.stderr)
        return 2
    worker_class, _ = every[argv[1]]
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    # The adapter imports the worker class when it starts a worker, from the worker module: replace it there.
    setattr(reference, "Worker", worker_class)  # noqa: B010
    return adapter.serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
