"""How the kit runs git: bounded in memory, time and output, and blind to every configuration but the
repository's own.

A git command of the kit runs with the environment's ``GIT_*`` variables dropped, git's system and global
configuration switched off (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL`` at the null device), one thread
for packing, in a process group of its own, and under three limits:

- memory: on POSIX, ``RLIMIT_DATA`` (``MEMORY``), set by ``ulimit -d`` in the shell that execs git and
  inherited by what git starts (``upload-pack``, ``pack-objects``, a hook). Linux enforces it for every
  private writable mapping, so an allocation past it fails and git dies; git's own needs for the kit's
  commands on a scenario's origin were measured under 16 MiB. macOS accepts the limit and does not enforce
  it for the memory malloc maps; Windows has no such limit, and the kit sets none there;
- time: ``TIMEOUT_S``, after which the whole group is killed;
- output: at most ``OUTPUT`` bytes of stdout are read (past them the group is killed) and the last
  ``STDERR_TAIL`` bytes of stderr kept.

A command stopped by one of them raises ``GitLimit``; ``origin`` turns that into a failure of the worker's
origin when the command read one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MEMORY = 128 << 20  # bytes of data memory a git command of the kit may map (POSIX; enforced on Linux)
TIMEOUT_S = 60.0
OUTPUT = 16 << 20  # bytes of stdout read from one command
STDERR_TAIL = 64 << 10  # bytes of stderr kept, the last ones
_CHUNK = 1 << 16


class GitError(Exception):
    """git is missing or a git command the kit needed failed."""


class GitLimit(GitError):
    """A git command of the kit was stopped by one of its limits: memory, time or output."""

    def __init__(self, command: str, found: str) -> None:
        super().__init__(f"git {command} {found}")
        self.command = command
        self.found = found


@dataclass(frozen=True, slots=True)
class Done:
    """A finished git command: its exit status, stdout (whole, at most ``OUTPUT`` bytes) and stderr's tail."""

    returncode: int
    stdout: bytes
    stderr: bytes


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the kit's git commands: the kit's own without any ``GIT_*`` variable (a ``GIT_DIR``
    or ``GIT_CONFIG_PARAMETERS`` of the caller's would redirect git), no configuration but the
    repository's, no prompt; then *extra*."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"})
    env.update(extra or {})
    return env


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    output: int = OUTPUT,
    timeout: float = TIMEOUT_S,
) -> Done:
    """Run one git command under the kit's limits; GitLimit when one stopped it."""
    exe = shutil.which("git")
    if exe is None:
        raise GitError("git is not on PATH; the P1 scenarios need a real git")
    command = " ".join(args)
    # One packing thread: pack-objects and index-pack otherwise start one per CPU, each with a stack that
    # counts against the memory limit.
    argv = limited([exe, "-c", "pack.threads=1", *args])
    try:
        process = subprocess.Popen(
            argv, cwd=cwd, env=environment(env), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **_isolation(),
        )  # fmt: skip
    except OSError as error:
        raise GitError(f"git {command} could not start: {error}") from None
    stopped: list[str] = []
    timer = threading.Timer(timeout, _stop, (process, stopped, f"ran longer than {timeout:.0f} s"))
    timer.daemon = True
    timer.start()
    try:
        done, whole = _collect(process, stdin, output, timeout)
    finally:
        timer.cancel()
    if not whole:
        raise GitLimit(command, f"wrote more than {output} bytes")
    if stopped and done.returncode != 0:  # a command that ended as the timer fired is not held against it
        raise GitLimit(command, stopped[0])
    if killed_by_memory(done):
        raise GitLimit(command, f"ran out of its {MEMORY >> 20} MiB of memory: {tail(done)}")
    return done


def killed_by_memory(done: Done) -> bool:
    """Whether git died of the memory limit: killed by a signal (an allocation failed where git could not say
    so), or exited saying that memory ran out."""
    said = done.stderr.lower()
    return done.returncode < 0 or (
        done.returncode != 0 and (b"out of memory" in said or b"cannot allocate memory" in said)
    )


def tail(done: Done) -> str:
    """The end of git's stderr, as text."""
    return done.stderr.decode("utf-8", "replace").strip()[-2000:]


def _collect(process: subprocess.Popen[bytes], stdin: bytes | None, output: int, timeout: float) -> tuple[Done, bool]:
    """Feed *stdin*, read stdout up to *output* bytes and stderr's tail, and reap the process; and whether
    stdout was read whole (False: git was killed past *output* bytes). The time limit's timer kills a group
    that holds a pipe open; a process that left the group and holds one is waited for *timeout* at most."""
    assert process.stdout is not None and process.stderr is not None
    errors: list[bytes] = []
    helpers = [threading.Thread(target=_tail_of, args=(process.stderr, errors), daemon=True)]
    if stdin is not None:
        assert process.stdin is not None
        helpers.append(threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True))
    for helper in helpers:
        helper.start()
    chunks: list[bytes] = []
    size, whole = 0, True
    while chunk := os.read(process.stdout.fileno(), _CHUNK):
        size += len(chunk)
        if size > output:
            whole = False
            _kill(process)
            break
        chunks.append(chunk)
    process.stdout.close()
    process.wait()
    for helper in helpers:
        helper.join(timeout)
    return Done(process.returncode, b"".join(chunks), b"".join(errors)), whole


def _tail_of(stream: IO[bytes], into: list[bytes]) -> None:
    kept = b""
    with stream:
        while chunk := os.read(stream.fileno(), _CHUNK):
            kept = (kept + chunk)[-STDERR_TAIL:]
    into.append(kept)


def _feed(stream: IO[bytes], data: bytes) -> None:
    try:
        with stream:
            stream.write(data)
    except OSError:  # git exited, or was stopped, before it read everything: its status says which
        pass


def _stop(process: subprocess.Popen[bytes], stopped: list[str], why: str) -> None:
    """The time limit: kill git, unless it is reaped already, and say why."""
    if process.returncode is None:
        stopped.append(why)
        _kill(process)


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill git and whatever it started (its own process group on POSIX)."""
    try:
        if sys.platform != "win32":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:  # gone already
        pass


def _isolation() -> dict[str, Any]:
    """Popen's arguments that put git in a process group of its own (POSIX)."""
    if sys.platform == "win32":
        return {}
    # process_group (3.11) keeps the fast vfork path that start_new_session leaves.
    return {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}


def limited(argv: Sequence[str]) -> list[str]:
    """*argv* run under the memory limit: on POSIX through ``/bin/sh``, whose ``ulimit -d`` sets RLIMIT_DATA
    and which then execs it (a preexec function would cost a fork of the whole kit and a run of Python in
    the child: 3 ms a command here, against 0.5 ms for the shell). A hard limit already lower stays."""
    if sys.platform == "win32":
        return list(argv)
    return ["/bin/sh", "-c", f'ulimit -d {MEMORY >> 10} 2>/dev/null; exec "$0" "$@"', *argv]
