"""Hostile workers of the places around the files: workspaces that are not git or not ``task-*``, a state
directory made read-only or full, a process left behind, and traps in the paths the kit itself writes or
walks (the old workspace it tampers with, the decoy beside the root, the entries its WRK-5 watch reads)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import JOURNAL_NAME, Row
from tests.broken.workers._base import _patched
from tests.fuzz.p1_workers._base import AtTheEnd, argument

# -- workspaces -------------------------------------------------------------------------------------


class GitIsAFile(reference.Worker):
    """Once its workspace is verified and recorded, replaces the workspace's ``.git`` with a file of garbage."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        row = super()._record(attempt, phase, **columns)
        if phase == "verification_passed" and attempt.workspace is not None:
            dot_git = self.config.workspace_root / attempt.workspace / ".git"
            shutil.rmtree(dot_git)
            dot_git.write_bytes(b"gitdir: \x00\xff not a repository\n" + os.urandom(512))
        return row


# A name that is no ``task-`` name: a leading dash (an option to many tools), spaces, a non-ASCII
# character, and length (215 bytes, under the 255 most file systems allow).
ODD_NAME = "- odd \u2603 name " + "l" * 200


def _prepare_odd(root: Path, task: Any) -> str:
    path = root / ODD_NAME
    path.mkdir()
    git.run(["clone", "--quiet", "--no-checkout", "--template=", "--config", "core.autocrlf=false",
             str(task["origin_url"]), str(path)], cwd=root)
    git.run(["checkout", "--quiet", "--detach", str(task["base_oid"])], cwd=path)
    return ODD_NAME


class OddWorkspaceName(reference.Worker):
    """Names its workspace ``ODD_NAME`` instead of ``task-...`` (WRK-4, JNL-2)."""

    def run(self) -> int:
        with _patched(git, "prepare_workspace", _prepare_odd):
            return super().run()


# -- the state directory ----------------------------------------------------------------------------


class MakesItsStateReadOnly(AtTheEnd):
    """With its task done, makes ``tasks/`` and the state directory read-only: mode 0555, and where it runs as
    root (which mode bits do not stop) immutable too (``chattr +i``, Linux; the campaign clears it after)."""

    def strike(self, attempt: reference.Attempt) -> None:
        for path in (self.config.state_dir / "tasks", self.config.state_dir):
            os.chmod(path, 0o555)
            if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("chattr"):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False, timeout=10)


class FillsItsDisk(reference.Worker):
    """Takes the scenario's injected disk fault (p1.disk-faults) for real: where the reference would raise the
    injected error, it lowers its file size limit (RLIMIT_FSIZE) to what the file holds now, so that the
    write itself fails with EFBIG, as on a full disk; a new worker instance lifts the limit again. The
    campaign's chosen stand-in for a full disk: portable to POSIX, no loop device, no mount, no root. What the
    worker logged as fatal goes to the probe file the campaign names (argument 1): the proof the write failed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import resource  # POSIX only, imported here so that the tests collect on Windows

        super().__init__(*args, **kwargs)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        fault = getattr(self.control, "_disk_fault", None)
        self._fault = None if fault is None else (fault.file, fault.op, fault.hit)
        self._hits: dict[tuple[str, str], int] = {}
        self.control.disk = self._disk  # type: ignore[method-assign]

    def run(self) -> int:
        log = reference._log

        def logged(message: str) -> None:
            if message.startswith("fatal"):
                with open(argument(0), "a", encoding="utf-8") as probe:
                    probe.write(json.dumps({"fatal": message[:500]}) + "\n")
            log(message)

        with _patched(reference, "_log", logged):
            return super().run()

    def _disk(self, file: str, op: str) -> None:
        hit = self._hits[(file, op)] = self._hits.get((file, op), 0) + 1
        if self._fault != (file, op, hit):
            return
        state = self.config.state_dir
        sizes = [p.stat().st_size for p in (state / JOURNAL_NAME, state / f"{JOURNAL_NAME}-wal") if p.exists()]
        limit = max(sizes) if file == "journal" else 0
        import resource  # POSIX only, imported here so that the tests collect on Windows

        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


# -- processes --------------------------------------------------------------------------------------

# Forks, leaves the session, forks again (nobody's child, in no group of the worker's), keeps the adapter's
# stdout and stderr open and sleeps: a bounded life of its own, so that nothing is left if all else fails.
_ORPHAN = """# resumekit fuzz: a process the worker leaves behind
import os, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
time.sleep(600)
"""


class LeavesAnOrphan(reference.Worker):
    """At startup leaves a double-forked process that holds the adapter's stdout and stderr (WRK-5)."""

    def _startup(self) -> None:
        subprocess.run([sys.executable, "-c", _ORPHAN], stdin=subprocess.DEVNULL, check=False, timeout=10)
        super()._startup()


# -- traps in the kit's own paths -------------------------------------------------------------------

TAMPERED = "tampered-by-the-kit.txt"  # the name the kit writes into a killed worker's old workspace


class _BeforeVerifiedRow(reference.Worker):
    """Lays its trap in the workspace just before the verification_passed row: verification is done, and a
    kill at that row's failpoint leaves the trap for the kit."""

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        if phase == "verification_passed" and attempt.workspace is not None:
            self.trap(self.config.workspace_root / attempt.workspace / TAMPERED)
        return super()._record(attempt, phase, **columns)

    def trap(self, path: Path) -> None:
        raise NotImplementedError


class TamperedFileLinksOutside(_BeforeVerifiedRow):
    """Puts, where the kit will write its tampered file, a link to a file outside (the campaign's decoy)."""

    def trap(self, path: Path) -> None:
        os.symlink(argument(0), path)


class TamperedFileIsAFifo(_BeforeVerifiedRow):
    """Puts a FIFO where the kit will write its tampered file: an open for writing waits for a reader."""

    def trap(self, path: Path) -> None:
        os.mkfifo(path)


class TamperedFileIsADirectory(_BeforeVerifiedRow):
    """Puts a directory where the kit will write its tampered file."""

    def trap(self, path: Path) -> None:
        path.mkdir()


class FifoInTheSiblingDecoy(AtTheEnd):
    """With its task done, adds a FIFO to ``<root>-evil``, the kit's decoy beside the root (CLEAN-2)."""

    def strike(self, attempt: reference.Attempt) -> None:
        sibling = self.config.workspace_root.with_name(self.config.workspace_root.name + "-evil")
        if sibling.is_dir():
            os.mkfifo(sibling / "a-fifo")


class FifoWhereTheWatchLooks(reference.Worker):
    """A restarted worker that, once its startup is done (the kit's WRK-5 watch runs from its first request),
    makes again an old workspace's directory and puts a FIFO in it: a watched path created, whose reading
    must not wait for a writer."""

    def _startup(self) -> None:
        root = self.config.workspace_root
        old = sorted(name for name in os.listdir(root) if name.startswith("task-"))
        super()._startup()
        if old:
            (root / old[0]).mkdir(exist_ok=True)
            os.mkfifo(root / old[0] / "a-fifo")
