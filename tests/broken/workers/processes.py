"""Broken workers of processes and pacing: tools left running, daemons, hurried claims, skipped failpoints,
stops honoured late (WRK, FPT, RESUME-5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from resumekit.reference.p1 import worker as reference
from tests.broken.workers._base import _patched, _Tracked


class _PlainTool(_Tracked):
    """Runs the tool as a plain child and waits for it: nothing ends it if this process is killed."""

    new_session = False

    def _run_tool(self, path: Path) -> None:
        if self.control.tool is not None:
            subprocess.run(
                self.control.tool, cwd=path, stdin=subprocess.DEVNULL, check=False, start_new_session=self.new_session
            )


class DetachesTheTool(_PlainTool):
    """Starts the tool in a session of its own and keeps no keeper, record or job for it (WRK-5)."""

    new_session = True


class LeavesTheToolInItsGroup(_PlainTool):
    """Keeps the tool in the worker's process group, which nothing kills when only the worker's pid dies (WRK-5)."""


class IgnoresTheTool(_Tracked):
    """Claims p1.tools but never runs the tool (ADP-2): without the tool's own check, WRK-5 would pass."""

    def _run_tool(self, path: Path) -> None:
        return


class IgnoresTheAnyFailpoint(_Tracked):
    """Claims p1.failpoint-any but never blocks where the name ``*`` is armed: a failpoint armed by name still
    stops it, so every named crash scenario passes, and only a crash matrix, which arms ``*``, finds it (FPT-5)."""

    def _failpoint(self, name: str) -> None:
        armed = getattr(self.control, "_armed", None)  # the reference Control's armed (name, hit), if any
        if armed is not None and armed[0] == "*":
            return
        super()._failpoint(name)


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
        subprocess.run(
            [sys.executable, "-c", _DAEMON, str(self.config.workspace_root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=10,
        )
        super()._startup()


class ClaimsInAHurry(_Tracked):
    """Claims again at once after a claim answered without a task, whatever retry_after_ms says (WRK-3): with
    no wait at all, a loaded machine still leaves some gap under the 15 ms the check allows."""

    def _claim_loop(self) -> None:
        with _patched(self.control, "sleep", lambda seconds: type(self.control).sleep(self.control, 0.0)):
            super()._claim_loop()


class StopsOnlyBeforeRows(_Tracked):
    """Honours p1.worker.stop only at the boundary before a row, never at the renewal before a governed side
    effect: stopped while blocked at ``before_push``, it pushes first (RESUME-5)."""

    def _renew(self, attempt: reference.Attempt) -> bool:
        with _patched(self.control, "check_stop", lambda: None):
            return super()._renew(attempt)
