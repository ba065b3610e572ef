"""Hostile workers of the kit's own writes: processes that keep writing in the case's folder while the kit
removes it, a workspace root or a state directory swapped for a link the moment the worker is killed, and a
link put where the kit makes the next worker's journal log. The kit must write nothing through a link, must
remove its folder without changing the mode of anything around it (TMPDIR's above all), and must still
judge the worker.

The argument is ``DECOY_FILE:PROBE``: a file of the campaign's decoy tree (whose folder the links point to;
the tree holds a ``task-decoy`` folder, where a kit that follows the swapped workspace root would write), and
a probe file each attack appends to once it has struck, the proof that it fired."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row
from tests.fuzz.p1_workers._base import argument

MARKER = "RESUMEKIT_CASE_TOKEN"  # the kit's mark of a case's processes (conformance._process.escaped)


def _paths() -> tuple[Path, Path]:
    decoy, _, probe = argument(0).partition(":")
    return Path(decoy), Path(probe)


def _proof(what: str, **facts: Any) -> None:
    with open(_paths()[1], "a", encoding="utf-8") as probe:
        probe.write(json.dumps({"struck": what, **facts}) + "\n")


# -- a folder that keeps being written ----------------------------------------------------------------

# Leaves the worker's session and writes a new file into FOLDER, again and again, until FOLDER is gone or
# the time is up: a daemon of a worker that is merely buggy does as much.
_WRITER = """# resumekit fuzz: keeps writing in the case's folder
import os, sys, time
folder, until = sys.argv[1], time.monotonic() + float(sys.argv[2])
if os.fork():
    os._exit(0)
os.setsid()
number = 0
while os.path.isdir(folder) and time.monotonic() < until:
    number += 1
    try:
        with open(os.path.join(folder, f"daemon-{os.getpid()}-{number}"), "w") as handle:
            handle.write("x")
    except OSError:
        pass
"""


class KeepsWritingInTheScratch(reference.Worker):
    """At its first startup leaves two daemons that keep creating files in the case's folder (the workspace
    root's parent) until it is gone: one keeps the case's marker in its environment (the kit finds it and
    fails WRK-5), the other's environment is rebuilt without it, so that it still writes while the kit
    removes the folder."""

    def _startup(self) -> None:
        folder = self.config.workspace_root.parent
        if not (folder / "daemons-started").exists():
            (folder / "daemons-started").write_text("1", encoding="utf-8")
            unmarked = {name: value for name, value in os.environ.items() if name != MARKER}
            for env in (dict(os.environ), unmarked):
                subprocess.run([sys.executable, "-c", _WRITER, str(folder), "300"], env=env,
                               stdin=subprocess.DEVNULL, check=False, timeout=10)
            _proof("daemons", folder=str(folder))
        super()._startup()


# -- a folder swapped for a link at the kill ----------------------------------------------------------

# Reads its pipe until the worker dies (EOF comes with the death itself, before any reaping); then, unless the
# worker swapped FOLDER already, swaps it for a link to TARGET; waits until the kit has made its change
# (WATCHED, below the folder moved away, changes) or a few seconds, and puts the folder back.
_SWAPPER = """# resumekit fuzz: swaps a folder for a link the moment the worker dies
import os, sys, time
read, folder, target, watched, swapped = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
moved = folder + "-moved-away"
def seen():
    try:
        return sorted((entry.name, entry.inode()) for entry in os.scandir(os.path.join(moved, watched)))
    except OSError:
        return None
before = seen() if swapped == "yes" else None
while os.read(read, 1):
    pass
if swapped != "yes":
    os.rename(folder, moved)
    os.symlink(target, folder)
    before = seen()
until = time.monotonic() + 3.0
while seen() == before and time.monotonic() < until:
    time.sleep(0.001)
try:
    os.unlink(folder)
    os.rename(moved, folder)
except OSError:
    pass  # the next worker put it back first
"""


class _SwapsAtTheKill(reference.Worker):
    """The armed worker (the one the kit kills) leaves a process outside its session that swaps one of its
    folders for a link to the campaign's decoy folder (or finds it swapped by the worker) when the worker
    dies, and puts it back once the kit has made its change: the change must land in the folder the kit
    made, never in the decoy. The next worker puts the folder back first thing, should the kit be late."""

    def folder(self) -> Path:
        raise NotImplementedError

    def _startup(self) -> None:
        folder = self.folder()
        moved = folder.with_name(folder.name + "-moved-away")
        if folder.is_symlink() and moved.is_dir():
            folder.unlink()
            os.rename(moved, folder)
        super()._startup()

    def arm(self, watched: str, *, swap_now: bool) -> None:
        if getattr(self.control, "_armed", None) is None or hasattr(self, "_death_pipe"):
            return
        folder, (decoy, _) = self.folder(), _paths()
        if swap_now:
            os.rename(folder, folder.with_name(folder.name + "-moved-away"))
            os.symlink(decoy.parent, folder)
        read, write = os.pipe()
        self._death_pipe = write  # held until the process dies: then the swapper reads EOF
        subprocess.Popen([sys.executable, "-c", _SWAPPER, str(read), str(folder), str(decoy.parent), watched,
                          "yes" if swap_now else "no"], pass_fds=(read,), stdin=subprocess.DEVNULL,
                         start_new_session=True)
        os.close(read)
        _proof(type(self).__name__, folder=str(folder), watched=watched)


class SwapsItsWorkspaceRootAtTheKill(_SwapsAtTheKill):
    """The workspace root, swapped just before the worker blocks at its after_verification_passed_row
    failpoint, where it is killed (the kit reads nothing of the root meanwhile): the kit's tampered file must
    go into the old workspace in the root it made (the decoy holds a ``task-decoy`` folder of its own)."""

    def folder(self) -> Path:
        return self.config.workspace_root

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        if phase == "verification_passed" and attempt.workspace is not None:  # the row and its failpoint follow
            self.arm(attempt.workspace, swap_now=True)
        return super()._record(attempt, phase, **columns)


class SwapsItsStateDirectoryAtTheKill(_SwapsAtTheKill):
    """The state directory, swapped the moment the worker dies before its submission (the kit reads the
    journal there until the kill): the kit's cache damage must go into ``tasks/`` of the state directory it
    made."""

    def folder(self) -> Path:
        return self.config.state_dir

    def _startup(self) -> None:
        super()._startup()
        self.arm("tasks", swap_now=False)


# -- a link at the name of the kit's next file --------------------------------------------------------


class LinksTheNextJournalLog(reference.Worker):
    """Puts, at the name of the journal log the kit makes for the next worker process (``journal-w2.jsonl``
    after its own ``journal-w1.jsonl``), a link to the campaign's decoy file: the kit must make its log in
    the link's place, never empty the decoy through it."""

    def _startup(self) -> None:
        path = getattr(self.settings, "path", None)
        found = re.fullmatch(r"journal-(\D+)(\d+)\.jsonl", Path(path).name) if isinstance(path, str) else None
        if found is not None:
            following = Path(path).with_name(f"journal-{found[1]}{int(found[2]) + 1}.jsonl")
            if not os.path.lexists(following):
                os.symlink(_paths()[0], following)
                _proof("journal-log", link=str(following))
        super()._startup()
