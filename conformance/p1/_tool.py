"""The kit's long-running tool (capability ``p1.tools``, p1.md WRK-5): a small process tree that keeps
writing into the workspace it was started in.

A worker armed with ``tool`` runs it with the workspace as its working directory::

    python -m resumekit.conformance.p1._tool --announce-file FILE --while-exists FLAG [--seconds S]

The tool starts a grandchild (this module again, ``--role grandchild``), waits until both have written
once, then announces itself with ``POST _kit/tool/started`` on the kit's control plane, whose kit-side
kill point ``tool_started`` kills the worker right there. The announce URL carries the control plane's
secret (CP-22), which the worker must not learn, and the worker sees this argv: so the kit writes the URL
into FILE, in its own scratch, and the tool reads it there (``--announce URL`` still works, for a caller
with no secret to keep). Each of the two then rewrites its own file in
the workspace every ``INTERVAL_S``, recreating the workspace directory if it is gone (as a build tool
recreates its output directory), so that a survivor is seen under the workspace root after the next
worker's startup cleanup. Nothing here runs for ever: each stops after S seconds, as soon as FLAG (a
file of the kit's, outside the workspace root) is gone, or when the workspace root itself is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MODULE = "resumekit.conformance.p1._tool"
INTERVAL_S = 0.02
DEFAULT_SECONDS = 30.0
FILES = {"tool": "resumekit-tool.txt", "grandchild": "resumekit-tool-grandchild.txt"}
_READY_S = 10.0  # how long the tool waits for its grandchild's first write
_ANNOUNCE_TIMEOUT_S = 5.0
_ANNOUNCE_FILE_MAX = 4096  # bytes: a URL, with room to spare


class _Writer:
    """Rewrites one file in the workspace; False once the kit's flag or the workspace root is gone."""

    def __init__(self, workspace: Path, role: str, flag: Path) -> None:
        self.path = workspace / FILES[role]
        self.workspace, self.role, self.flag = workspace, role, flag
        self.writes = 0

    def write(self) -> bool:
        if not self.flag.exists():
            return False
        try:
            self.workspace.mkdir(exist_ok=True)  # never the root: its parent must still be there
            # The worker can put a link or a FIFO at the name: the tool writes through neither, nor waits.
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            with open(os.open(self.path, flags, 0o666), "wb") as handle:
                handle.write(f"{self.role} pid {os.getpid()} write {self.writes + 1}\n".encode())
        except FileNotFoundError:
            return False  # the workspace root is gone: the kit's scenario is over
        except OSError:
            return True  # held open or being removed (Windows): try again next time
        self.writes += 1
        return True


def read_announce_file(path: Path) -> str:
    """The announce URL the kit wrote into *path*. Read defensively, since the file lies where others could
    replace it: a regular file (a FIFO would block the tool, a device never end), opened without following
    a link and without blocking, of at most ``_ANNOUNCE_FILE_MAX`` bytes, holding one http URL. Raises
    ``OSError`` or ``ValueError`` saying which of these it is not."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"the announce file {str(path)!r} is not a regular file")
        if info.st_size > _ANNOUNCE_FILE_MAX:
            raise ValueError(f"the announce file {str(path)!r} holds {info.st_size} bytes, over {_ANNOUNCE_FILE_MAX}")
        data = os.read(fd, _ANNOUNCE_FILE_MAX + 1)
    finally:
        os.close(fd)
    url = data[:_ANNOUNCE_FILE_MAX].decode("utf-8", "replace").strip()
    if len(data) > _ANNOUNCE_FILE_MAX or not url.startswith("http://") or any(c.isspace() for c in url):
        raise ValueError(f"the announce file {str(path)!r} does not hold one http URL")
    return url


def direct_opener() -> urllib.request.OpenerDirector:
    """An opener that goes straight to the kit's control plane on 127.0.0.1. ``urlopen`` would honour
    ``http_proxy``/``all_proxy`` and the Windows and macOS system proxies, which do not bypass 127.0.0.1
    unless told: the announcement would go to the proxy and the worker be blamed for a tool never seen."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _announce(url: str, writer: _Writer, grandchild: int | None) -> None:
    body = {"pid": os.getpid(), "grandchild": grandchild, "cwd": str(writer.workspace), "writes": writer.writes}
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with direct_opener().open(request, timeout=_ANNOUNCE_TIMEOUT_S) as answer:
            answer.read()
    except OSError as error:
        # Not the URL: it carries the control plane's secret, and the worker reads this stream.
        print(f"resumekit tool: the announcement failed: {error}", file=sys.stderr, flush=True)


def _keep_writing(writer: _Writer, until: float) -> None:
    while time.monotonic() < until and writer.write():
        time.sleep(INTERVAL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m resumekit.conformance.p1._tool")
    announce = parser.add_mutually_exclusive_group()
    announce.add_argument("--announce", help="the kit's _kit/tool/started URL (the tool only)")
    announce.add_argument("--announce-file", type=Path, help="a file of the kit's holding that URL (the tool only)")
    parser.add_argument("--while-exists", required=True, type=Path, help="stop once this file is gone")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="stop after this long at most")
    parser.add_argument("--role", choices=sorted(FILES), default="tool")
    arguments = parser.parse_args(argv)
    until = time.monotonic() + max(0.0, arguments.seconds)
    writer = _Writer(Path(os.getcwd()), arguments.role, arguments.while_exists)
    if arguments.role == "grandchild":
        _keep_writing(writer, until)
        return 0
    child = subprocess.Popen(
        [sys.executable, "-m", MODULE, "--while-exists", str(arguments.while_exists),
         "--seconds", str(arguments.seconds), "--role", "grandchild"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    writer.write()
    ready = time.monotonic() + _READY_S
    theirs = writer.workspace / FILES["grandchild"]
    while not theirs.exists() and child.poll() is None and time.monotonic() < ready:
        time.sleep(0.005)
    url = arguments.announce
    if arguments.announce_file is not None:
        try:
            url = read_announce_file(arguments.announce_file)
        except (OSError, ValueError) as error:
            print(f"resumekit tool: no announcement: {error}", file=sys.stderr, flush=True)
    if url:
        _announce(url, writer, child.pid if child.poll() is None else None)
    _keep_writing(writer, until)
    try:
        child.wait(timeout=max(1.0, until - time.monotonic() + 1.0))
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
