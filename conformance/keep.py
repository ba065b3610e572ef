"""``resumekit run --keep-failed DIR``: each failing case's world copied into DIR for a person to read, with its
history and the one command that runs the case again.

What is copied is the implementation's: its journal, its caches, the origins it pushed to, a workspace root
it filled. So the copy is hostile-safe. It follows no link: a link is listed with its target, never read
through. It reads regular files only: a FIFO, a socket or a device is listed and never opened, and a file
is opened without following a link and without blocking, then checked to be the regular file that was
listed. Each file, each case and the whole run are bounded in bytes, and each case in files and in depth;
what is left out is listed in the case's note. It writes nowhere but inside DIR: DIR must be absent, an
empty directory, or one the kit made before (it holds ``MARK``); each case gets a folder of its own, made
there anew, and everything in it is created exclusively inside folders the kit holds (``_files.Folder``),
never through a link.

On Windows, which has no ``dir_fd``, the source is walked by path, each entry looked at (no link or junction
followed) before it is opened and checked after: a process that swaps an entry between the two can still
have one other regular file read, never a link followed or a FIFO opened.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._folders import is_link
from resumekit.conformance._keep_copy import MAX_CASE, MAX_FILE, MAX_FILES, Budget, Tally, copy, listing
from resumekit.conformance._text import printable

MARK = ".resumekit-kept"  # in a DIR the kit made: a later run may keep its cases there too
MAX_RUN = 1024 * 1024 * 1024  # bytes copied for every case of a run together


class KeepError(Exception):
    """DIR cannot take kept worlds; the message says why."""


@dataclass(frozen=True, slots=True)
class Rerun:
    """What the command that runs one case again needs: the run's adapter, seed and the options that shaped it."""

    adapter: str
    seed: int | None
    options: tuple[str, ...] = ()  # --profile core, --fault-model power-loss, --golden DIR, ...
    cwd: str = ""  # where the run was started: an adapter command may name files relative to it

    def command(self, case_id: str, kind: str | None = None) -> str:
        """The one command line that runs the case *case_id* (of *kind*) again, quoted for this system's shell."""
        words = ["resumekit", "run", "--adapter", self.adapter, "--only", _glob_escape(case_id)]
        if kind is not None:
            words += ["--kind", kind]  # an opt-in kind runs only when named
        if self.seed is not None:
            words += ["--seed", str(self.seed)]
        words += self.options
        if sys.platform == "win32":
            import subprocess

            return subprocess.list2cmdline(words)
        import shlex

        return shlex.join(words)


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def prepare(root: Path) -> None:
    """Make DIR *root* ready for kept worlds: made if absent, marked as the kit's; KeepError unless it is an
    empty directory or one the kit made before (a link to a directory is not taken either)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        info = os.lstat(root)
        names = os.listdir(root)
    except OSError as error:
        raise KeepError(f"{str(root)!r} cannot be made or read: {error.strerror or error}") from None
    if is_link(info) or not stat.S_ISDIR(info.st_mode):
        raise KeepError(f"{str(root)!r} is not a directory (a link to one is not taken either)")
    if names and not (MARK in names and stat.S_ISREG(os.lstat(root / MARK).st_mode)):
        raise KeepError(f"{str(root)!r} holds files the kit did not put there: give an empty or a new directory")
    if not names:
        with _files.Folder.open(root) as folder:
            folder.create(MARK, b"resumekit run --keep-failed keeps failing cases here\n")


class Keeper:
    """Keeps the world of each failing case of one run in its own folder of DIR (``prepare`` made it ready);
    thread-safe."""

    def __init__(self, root: Path, rerun: Rerun, total: int = MAX_RUN) -> None:
        self.root, self.rerun = root, rerun
        self._budget = Budget(total)

    def keep(
        self,
        case_id: str,
        *,
        kind: str | None = None,
        copies: Mapping[str, Path],
        listings: Mapping[str, Path],
        history: Iterable[Mapping[str, Any]],
        result: Mapping[str, Any],
        about: Mapping[str, str] | None = None,
    ) -> Path:
        """Copy the case's world into a new folder of DIR: each of *copies* (label -> a folder or a file) under
        its label, a listing of each of *listings*, the full *history* as JSON lines, the *result* as the report
        keeps it, and a note (``README.txt``, and ``rerun.txt`` with the command alone); the folder's path.
        *about* says in words what each label holds."""
        with _files.Folder.open(self.root) as top, _new_folder(top, _folder_name(case_id)) as case:
            tally = Tally()
            for label, source in copies.items():
                copy(source, case, _plain(label), tally, self._budget)
            for label, source in listings.items():
                _put(case, f"{_plain(label)}.listing.txt", listing(source))
            _put(case, "history.jsonl", "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in history))
            _put(case, "result.json", json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
            command = self.rerun.command(case_id, kind)
            _put(case, "rerun.txt", command + "\n")
            labels = {**dict.fromkeys(map(_plain, copies), ""), **{_plain(k): v for k, v in (about or {}).items()}}
            _put(case, "README.txt", _note(case_id, command, self.rerun.cwd, result, labels, tally))
            return case.path


def _put(folder: _files.Folder, name: str, text: str) -> None:
    folder.create(name, text.encode("utf-8", "backslashreplace"))


def _folder_name(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", case_id)[:100].lstrip(".") or "case"


def _plain(label: str) -> str:
    """A label as a name in DIR: one plain path part."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", label).lstrip(".") or "_"


def _new_folder(top: _files.Folder, name: str) -> _files.Folder:
    """A folder made now in *top* under *name*, or *name*-2, -3, ... if taken (a case kept by an earlier run)."""
    for number in range(1, 10_000):
        candidate = name if number == 1 else f"{name}-{number}"
        try:
            if sys.platform != "win32":
                os.mkdir(candidate, dir_fd=top.fd)
            else:
                os.mkdir(top.path / candidate)
        except FileExistsError:
            continue
        except OSError as error:
            raise KeepError(f"cannot make {str(top.path / candidate)!r}: {error.strerror or error}") from None
        made = top.child(candidate)
        if made is None:  # something took its place between the two calls
            raise KeepError(f"{str(top.path / candidate)!r} was replaced as the kit made it")
        return made
    raise KeepError(f"{str(top.path)!r} holds too many copies of {name!r}")


# --------------------------------------------------------------------------------------------- note


def _note(
    case_id: str, command: str, cwd: str, result: Mapping[str, Any], about: Mapping[str, str], tally: Tally
) -> str:
    message = str(result.get("message") or "").splitlines()
    lines = [
        f"resumekit kept the world of the failing case {case_id}.",
        "",
        f"outcome: {result.get('outcome')}{': ' + message[0] if message else ''}",
        f"clauses: {', '.join(map(str, result.get('clauses') or ())) or 'none'}",
        "",
        "Run the case again with this command (also alone in rerun.txt)" + (f", from {cwd}:" if cwd else ":"),
        "",
        f"  {command}",
        "",
        "What is here:",
    ]
    lines += [f"  {label:<22} {words}".rstrip() for label, words in about.items()]
    lines += [
        f"  {'*.listing.txt':<22} the listed folders, entry by entry, never followed",
        f"  {'history.jsonl':<22} the case's history, an event a line (schemas/report/history.json)",
        f"  {'result.json':<22} the case's result as the JSON report keeps it",
        "",
        f"Copied: {tally.files} file(s), {tally.bytes} bytes. No link is followed and only regular files are read;",
        f"a file of more than {MAX_FILE} bytes, and what passes {MAX_FILES} files or {MAX_CASE} bytes for a case,",
        "is left out.",
    ]
    if tally.left_out:
        lines += ["", "Left out:", *(f"  {entry}" for entry in tally.left_out)]
        if tally.uncounted:
            lines.append(f"  ... and {tally.uncounted} more")
    else:
        lines += ["", "Nothing was left out."]
    return printable("\n".join(lines)) + "\n"
