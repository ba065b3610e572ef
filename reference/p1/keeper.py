"""The keeper of the reference worker's tools and git commands (p1.md WRK-5): see ``tools.py``.

Run by the worker as ``python -I -S keeper.py keep LOCK -- [ARGV...]``, a script of the standard library
alone, so that starting it costs an interpreter start and little more. It takes its lock, then either starts
ARGV in its process group and reports its status on stdout, or, with no ARGV, says ``holding`` and holds the
group for the worker's git commands. Either way, when the worker's end of its stdin (the lifeline) closes,
or the tool ends, it kills its whole group, itself last.
"""

from __future__ import annotations

import os
import sys

# The keeper of a worker's git commands starts before the worker's first one and is waited for: only os and
# sys at the top, since the signal module (enum), subprocess and threading took half of its start here.
_SIGKILL = 9  # POSIX gives SIGKILL the number 9; the keeper runs on POSIX only


class KeeperError(Exception):
    """The keeper cannot run here."""


def _hold(lock: str) -> int | None:
    """The keeper's lock, held until it dies (never inherited by the tool); None if it cannot be had,
    which means a later worker has already taken it and the tool must not start."""
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.stat(lock).st_ino:  # taken, removed and made anew meanwhile
            return None
    except OSError:
        return None
    return fd


def _keep(lock: str, argv: list[str]) -> int:
    """The keeper's life: start the tool in this group, end the group when the tool or the worker ends.
    With no tool, hold the group for the worker's commands until the worker ends it or dies."""
    if sys.platform == "win32":
        raise KeeperError("the keeper is POSIX only: Windows uses a Job Object")
    if _hold(lock) is None:
        print(f"keeper: the lock {lock} is gone or taken: the worker is gone", file=sys.stderr, flush=True)
        return 125

    def end_group() -> None:
        os.killpg(os.getpgid(0), _SIGKILL)  # every member at once, this process last of all

    def watch_lifeline() -> None:
        while os.read(0, 4096):  # the worker never writes; only its end closing matters
            pass
        end_group()

    if not argv:
        os.write(1, b"holding\n")
        watch_lifeline()
        return 0  # not reached: the group kill ends this process
    import subprocess
    import threading

    threading.Thread(target=watch_lifeline, name="lifeline", daemon=True).start()
    try:
        tool = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno())
    except OSError as error:
        print(f"keeper: cannot start {argv[0]!r}: {error}", file=sys.stderr, flush=True)
        status = 127
    else:
        status = tool.wait()
    try:
        os.write(1, f"{status}\n".encode("ascii"))
    finally:
        end_group()
    return status  # not reached: the group kill ends this process


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "keep" and argv[2] == "--":
        return _keep(argv[1], argv[3:])
    print("usage: python -I -S keeper.py keep LOCK -- [ARGV...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
