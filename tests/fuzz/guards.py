"""What the campaign watches around every try: a decoy tree, a decoy process, orphans, scratch folders.

- The **decoy tree** is a folder of files outside every workspace; hostile adapters name its files. Its
  checksum (every path, mode, size and content) before and after a try tells a write outside.
- The **decoy process** is an unrelated ``sleep``; a hostile adapter names its pid. It must survive.
- **Orphans**: every process the campaign starts carries a tag in its environment, which its children
  inherit; a tagged process alive after its try ended is an orphan (read from ``/proc``, so Linux only;
  elsewhere the count is "not checked").
- **Scratch folders**: each try gets its own temporary folder (``TMPDIR``); what is left in it after the
  try is counted. The folder has the system's /tmp mode (1777: everyone's, sticky); a mode or sticky bit
  changed by the try is a change outside the scratch, counted as an outside write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

TAG = "RESUMEKIT_FUZZ_TAG"
TMPDIR_MODE = 0o1777  # /tmp's: everyone's, sticky


def tree_digest(root: Path) -> str:
    """A checksum of every entry below *root*: path, kind, mode, size and bytes (links by their target)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + str(info.st_mode).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(str(info.st_size).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def make_decoy_tree(root: Path) -> Path:
    """A small tree of files that nothing in the campaign may change."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "precious.jsonl").write_bytes(b'{"id": "mine"}\n' * 3)
    (root / "notes.txt").write_text("keep me\n", encoding="utf-8")
    (root / "sessions" / "s" / "runs" / "r").mkdir(parents=True, exist_ok=True)
    (root / "sessions" / "s" / "runs" / "r" / "runtime-events.jsonl").write_bytes(b"")
    # A folder named as a workspace: a kit that follows a workspace root swapped for a link to this tree
    # takes it for a workspace a worker left, and writes into it.
    (root / "task-decoy").mkdir(exist_ok=True)
    (root / "task-decoy" / "keep.txt").write_text("keep me too\n", encoding="utf-8")
    return root


class Decoy:
    """An unrelated process that must outlive every try; restarted (and counted) if one kills it."""

    def __init__(self) -> None:
        self.killed = 0
        self._start()

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != TAG}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(100000)"], env=env, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def check(self) -> bool:
        """True if the decoy is alive; if not, count it and start another."""
        if self.process.poll() is None:
            return True
        self.killed += 1
        self._start()
        return False

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def tagged_processes(tag: str) -> list[int]:
    """Pids of live processes whose environment carries *tag* (Linux); [] where /proc is not there."""
    found = []
    needle = f"{TAG}={tag}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":  # zombies are dead, only not yet reaped
                    found.append(int(entry.name))
    return found


ORPHANS_CHECKED = Path("/proc/self/environ").exists()


def reap_orphans(tag: str, grace: float = 2.0) -> list[int]:
    """The tagged processes still alive after *grace* seconds; each is then killed (they are ours)."""
    deadline = time.monotonic() + grace
    left = tagged_processes(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = tagged_processes(tag)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def tmpdir_changed(folder: Path) -> str | None:
    """How a try changed the mode of its TMPDIR (made with ``TMPDIR_MODE``), or None; the mode is then reset."""
    try:
        mode = stat.S_IMODE(folder.lstat().st_mode)
    except OSError as error:
        return f"TMPDIR {str(folder)!r} cannot be looked at: {error}"
    if mode == TMPDIR_MODE:
        return None
    os.chmod(folder, TMPDIR_MODE)
    sticky = "kept" if mode & stat.S_ISVTX else "dropped"
    return f"TMPDIR's mode changed: {TMPDIR_MODE:o} -> {mode:o} (sticky bit {sticky})"


def scratch_left(folder: Path) -> list[str]:
    """Names left in a try's temporary folder; the folder is then emptied for the next try."""
    names = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return names
