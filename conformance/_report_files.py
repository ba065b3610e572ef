"""Writing a report file whole or not at all.

A report is rendered to a string before its file is touched, and written to a temporary file beside it
that then replaces it, so a failure leaves the old file (or none), never one cut short or empty. A
character UTF-8 cannot encode (a lone surrogate no ``_text.safe`` caught) is written as its escape rather
than ending the run. The path is the user's: a link to a file is followed, and a path that is not a regular
file (``/dev/stdout``, a FIFO) is written in place, since it cannot be replaced.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def write(path: Path, text: str) -> None:
    """Write *text* to *path* as UTF-8, replacing the file in one step (OSError naming *path* if it cannot)."""
    try:
        _write(path, text)
    except OSError as error:
        if error.filename is None:  # a failed write (EFBIG, ENOSPC) names no file
            error.filename = str(path)
        raise


def _write(path: Path, text: str) -> None:
    target = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_in_place(path, text)
        return
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        # Created as a new file would be (the umask applies); the old file's mode is kept below.
        descriptor = os.open(temporary, _FLAGS, 0o666)
    except PermissionError:  # a folder the user may not add to, with a file they may write: in place
        _write_in_place(path, text)
        return
    try:
        with open(descriptor, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if info is not None and sys.platform != "win32":
            os.chmod(temporary, stat.S_IMODE(info.st_mode))
        try:
            os.replace(temporary, target)
        except PermissionError:
            if sys.platform != "win32":
                raise
            # Windows replaces no file another program holds open (a viewer, an uploader): written in place.
            os.unlink(temporary)
            _write_in_place(path, text)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def append(path: Path, text: str) -> None:
    """Append *text* to *path* (a Markdown summary: ``$GITHUB_STEP_SUMMARY`` collects every step's)."""
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as out:
        out.write(text)


def _write_in_place(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
        out.write(text)
