"""Startup cleanup of stale ``task-*`` workspaces that never leaves the workspace root.

The boundary is checked on resolved paths, component by component (never a string prefix), and a
link is never followed: a ``task-*`` entry that is a symlink or a Windows junction is removed as a
link, and a link met while emptying a workspace is unlinked, its target untouched.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["CleanupRefused", "is_link", "remove_stale_workspaces", "remove_tree"]

WORKSPACE_GLOB = "task-*"
RETRY_FOR_S = 2.0
_IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003


class CleanupRefused(Exception):
    """A path that cleanup would have had to leave the root to delete."""


def is_link(path: Path, status: os.stat_result | None = None) -> bool:
    """A symlink, or on Windows a junction: something whose target cleanup must never enter."""
    status = status if status is not None else os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        return True
    return sys.platform == "win32" and getattr(status, "st_reparse_tag", 0) == _IO_REPARSE_TAG_MOUNT_POINT


def _unlink_link(path: Path) -> None:
    # A junction is a directory to the system: rmdir removes the junction, never what it points at.
    if sys.platform == "win32" and stat.S_ISDIR(os.lstat(path).st_mode):
        os.rmdir(path)
    else:
        os.unlink(path)


def _inside(root: Path, path: Path) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if sys.platform == "win32":
        real_root, real = os.path.normcase(real_root), os.path.normcase(real)
    try:
        return os.path.commonpath([real_root, real]) == real_root
    except ValueError:  # different drives
        return False


def _remove_file(path: Path) -> None:
    try:
        os.unlink(path)
    except PermissionError:
        os.chmod(path, stat.S_IWRITE)  # a read-only file on Windows
        os.unlink(path)


def _walk_remove(path: Path) -> None:
    for entry in os.scandir(path):
        child = Path(entry.path)
        status = os.lstat(child)
        if is_link(child, status):
            _unlink_link(child)
        elif stat.S_ISDIR(status.st_mode):
            _walk_remove(child)
        else:
            _remove_file(child)
    try:
        os.rmdir(path)
    except PermissionError:
        os.chmod(path, stat.S_IWRITE)
        os.rmdir(path)


def remove_tree(root: Path, path: Path) -> None:
    """Delete the workspace *path*, a real directory directly under *root*, without following links."""
    if not _inside(root, path) or Path(os.path.realpath(path)).parent != Path(os.path.realpath(root)):
        raise CleanupRefused(f"{path} does not resolve to a directory directly under {root}")
    if getattr(shutil.rmtree, "avoids_symlink_attacks", False):
        # The fd-based rmtree checks every directory it enters is the one it listed, so a directory
        # swapped for a link during the walk is caught.
        shutil.rmtree(path)
    else:
        _walk_remove(path)


def _clear_read_only(path: Path) -> None:
    """Give every real directory and file under *path* (never through a link) its owner's write bit."""
    for current, dirnames, filenames in os.walk(path, followlinks=False):
        for name in [*dirnames, *filenames]:
            child = os.path.join(current, name)
            try:
                status = os.lstat(child)
                if not is_link(Path(child), status):
                    os.chmod(child, stat.S_IMODE(status.st_mode) | stat.S_IWRITE | (stat.S_IEXEC | stat.S_IREAD
                             if stat.S_ISDIR(status.st_mode) else 0))
            except OSError:
                pass
    try:
        status = os.lstat(path)
        if stat.S_ISDIR(status.st_mode) and not is_link(path, status):
            os.chmod(path, stat.S_IMODE(status.st_mode) | stat.S_IWRITE | stat.S_IEXEC | stat.S_IREAD)
    except OSError:
        pass


def _remove_candidate(root: Path, path: Path) -> bool:
    """Remove one checked candidate (a link, a directory, or any other entry such as a file or a FIFO, which
    is unlinked and never opened: CLEAN-1 names every ``task-`` entry); True once it is gone."""
    status = os.lstat(path)
    if is_link(path, status):
        _unlink_link(path)
    elif stat.S_ISDIR(status.st_mode):
        remove_tree(root, path)
    else:
        _remove_file(path)
    return True


def remove_stale_workspaces(
    root: Path,
    keep: Callable[[str], bool] = lambda name: False,
    before_remove: Callable[[str], None] = lambda name: None,
    retry_for: float = RETRY_FOR_S,
) -> Iterable[str]:
    """Remove every ``task-*`` entry directly under *root* that *keep* does not protect; yield each name.

    *before_remove* runs once per candidate after its check, before its removal (the
    ``cleanup_before_remove`` failpoint). An entry that cannot be removed (read-only contents, a file
    held open on Windows) has its read-only bits cleared and is retried with backoff for *retry_for*
    seconds, then left in place and reported on stderr (CLEAN-5).
    """
    if not root.is_dir():
        return
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not fnmatch.fnmatchcase(entry.name, WORKSPACE_GLOB) or keep(entry.name):
            continue
        path = root / entry.name
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            continue
        if not is_link(path, status) and not _inside(root, path):
            continue  # CLEAN-3: a candidate that fails the check is left alone
        before_remove(entry.name)
        deadline = time.monotonic() + retry_for
        delay = 0.02
        while True:
            try:
                removed = _remove_candidate(root, path)
                break
            except FileNotFoundError:
                removed = True
                break
            except CleanupRefused as error:
                print(f"cleanup: left {entry.name} alone: {error}", file=sys.stderr)
                removed = False
                break
            except OSError as error:
                if time.monotonic() >= deadline:
                    print(f"cleanup: cannot remove {entry.name}, left in place: {error}", file=sys.stderr)
                    removed = False
                    break
                _clear_read_only(path)
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        if removed:
            yield entry.name
