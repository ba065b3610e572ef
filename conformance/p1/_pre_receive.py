"""The origin's hooks: the origin itself, not the worker, enforces the governed-commit rule (CP-18).

Copied into each scenario's bare repository and run by git with the kit's interpreter, as
``resumekit_pre_receive.py pre-receive`` and ``... post-receive``. It imports nothing of resumekit (only
the standard library), so it runs wherever git runs it. Every attempt is logged, accepted or refused,
before git is told the verdict, so the kit can count recommit attempts as well as landed commits.

Policy (``resumekit-policy.json`` in the repository), one of:

- ``{"control_plane": {"check_url": URL, "updated_url": URL, "repository": NAME}}``: the pre-receive
  hook posts every update, with the facts it reads from git (the new object's type and parents), to the
  control plane's ``check_url``, which decides CP-18 (1) to (4) against its leases and logs the attempt;
  an unreachable control plane means refusal. The post-receive hook tells ``updated_url`` what landed,
  before the push returns (the ``origin_ref_updated`` kill point). The hook refuses a creation or a
  deletion itself as well.
- ``{"refs": {"refs/heads/NAME": "EXPECTED_OLD_OID"}}`` (no control plane): an update is accepted only
  if its ref is named, it is not a deletion, and the ref's current value is the expected one.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

TYPE_CHECKING = False  # git starts this hook twice a push: typing would be a sixth of its imports
if TYPE_CHECKING:
    from typing import Any

Update = tuple[str, str, str]  # old, new, ref, as git gives them (an alias: no future import here)

ZERO = "0" * 40
TIMEOUT_S = 40.0
GIT_TIMEOUT_S = 60.0
MAX_COMMIT = 64 << 10  # bytes of a pushed commit the hook reads: a governed commit is a few hundred
MEMORY = 128 << 20  # RLIMIT_DATA of the hook's git (POSIX; enforced on Linux): it needs a few MiB
MAX_INPUT = 1 << 20  # bytes of updates git hands the hook, and of the policy it reads
PUSHES = "resumekit-pushes.jsonl"


def _facts(git_dir: str, new: str) -> tuple[str | None, list[str]]:
    """The type of the new object and its parents (for a commit), read from git inside the push's quarantine.

    The pushed object is the worker's, and may be anything: a 1 MiB pack can hold a blob of a gigabyte of
    zeros. So its type and size are looked up first (``cat-file --batch-check``, which reads no content);
    only a commit of at most MAX_COMMIT bytes is read, and of it only the header's parent lines count. A
    larger commit is judged from its type and size alone: it is reported with no parents, so the control
    plane refuses it (no governed commit comes near that size)."""
    if new == ZERO:
        return None, []
    check = _git(git_dir, ["cat-file", "--batch-check"], (new + "\n").encode("ascii"), 512)
    fields = (check or b"").decode("utf-8", "replace").split()
    if len(fields) != 3 or fields[0] != new:  # "<oid> missing", or git failed
        return None, []
    kind, size = fields[1], fields[2]
    if kind != "commit" or not size.isdigit() or int(size) > MAX_COMMIT:
        return kind, []
    body = _git(git_dir, ["cat-file", "commit", new], None, MAX_COMMIT)
    if body is None:
        return kind, []
    header = body.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
    return kind, [line.split()[1] for line in header if line.startswith("parent ") and len(line.split()) == 2]


def _git(git_dir: str, args: list[str], stdin: bytes | None, limit: int) -> bytes | None:
    """git's stdout, at most *limit* bytes of it, or None when git failed, wrote more, or outlived its time.

    git runs under RLIMIT_DATA (POSIX) and is killed after GIT_TIMEOUT_S; only the system's and the user's
    configuration are switched off, since the push's quarantine is named in the environment git gave."""
    env = {**os.environ, "GIT_DIR": git_dir, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    argv = _limited(["git", *args])
    if sys.platform != "win32":
        try:  # no pipe or descriptor to be had: git failed, as when subprocess cannot start it
            return _git_by_spawn(argv, env, stdin, limit)
        except OSError:
            return None
    return _git_by_subprocess(argv, env, stdin, limit)


if sys.platform != "win32":  # posix_spawn and waitpid's statuses

    def _git_by_spawn(argv: list[str], env: dict[str, str], stdin: bytes | None, limit: int) -> bytes | None:
        """``_git`` with ``posix_spawn`` and ``select``: importing subprocess and threading cost a third of the
        hook's start, and it runs once per push."""
        import select

        out_read, out_write = os.pipe()
        in_read, in_write = os.pipe() if stdin is not None else (os.open(os.devnull, os.O_RDONLY), -1)
        null = os.open(os.devnull, os.O_WRONLY)
        dup2 = os.POSIX_SPAWN_DUP2
        try:
            actions = [(dup2, in_read, 0), (dup2, out_write, 1), (dup2, null, 2)]
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
        except OSError:
            pid = None
        finally:
            for fd in (in_read, out_write, null):
                os.close(fd)
        chunks: list[bytes] = []
        try:
            if in_write >= 0 and pid is not None:
                try:  # noqa: SIM105 - contextlib is an import this hook does without
                    os.write(in_write, stdin or b"")  # a line of an object id: far below a pipe's buffer
                except OSError:  # git ended early: its status says the rest
                    pass
            if in_write >= 0:
                os.close(in_write)
            if pid is None:
                return None
            deadline, got, ended = time.monotonic() + GIT_TIMEOUT_S, 0, False
            while got <= limit:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([out_read], [], [], left)[0]:
                    break
                chunk = os.read(out_read, limit + 1 - got)
                if not chunk:
                    ended = True  # git's output ends as it exits: waiting for it now takes no time
                    break
                chunks.append(chunk)
                got += len(chunk)
        finally:
            os.close(out_read)
        if not ended:  # it wrote more than *limit*, or outlived its time: nothing more is read
            try:  # noqa: SIM105 - as above
                os.kill(pid, 9)
            except OSError:  # it ended meanwhile
                pass
        status = os.waitpid(pid, 0)[1]
        out = b"".join(chunks)
        return out if os.waitstatus_to_exitcode(status) == 0 and len(out) <= limit else None


def _git_by_subprocess(argv: list[str], env: dict[str, str], stdin: bytes | None, limit: int) -> bytes | None:
    """``_git`` with subprocess, where there is no ``posix_spawn`` (Windows)."""
    import subprocess
    import threading

    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    except OSError:
        return None
    timer = threading.Timer(GIT_TIMEOUT_S, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        if process.stdin is not None:
            with process.stdin:
                process.stdin.write(stdin or b"")
        out = process.stdout.read(limit + 1)
    except OSError:
        out = b""
    finally:
        if process.poll() is None:
            process.kill()  # it wrote more than *limit*, or stopped writing: either way nothing more is read
        process.wait()
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
    return out if process.returncode == 0 and len(out) <= limit else None


def _limited(argv: list[str]) -> list[str]:
    """*argv* under RLIMIT_DATA on POSIX, set by the shell that execs it (as the kit's own git commands)."""
    if sys.platform == "win32":  # no such limit there
        return argv
    return ["/bin/sh", "-c", f'ulimit -d {MEMORY >> 10} 2>/dev/null; exec "$0" "$@"', *argv]


def _read_policy(git_dir: str) -> dict[str, Any]:
    """The kit's policy file: a regular file reached without following a link, of at most MAX_INPUT bytes.
    ValueError otherwise, which refuses every update."""
    fd = _open(os.path.join(git_dir, "resumekit-policy.json"), os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_INPUT + 1)
    policy = json.loads(data.decode("utf-8")) if len(data) <= MAX_INPUT else None
    if not isinstance(policy, dict):
        raise ValueError("the origin's policy is no JSON object of at most 1 MiB")
    return policy


def _append(git_dir: str, records: list[dict[str, Any]]) -> None:
    """Append *records* to the push log, never through a link a worker left at its name (the origin's folder is
    the worker's to write, and this hook is the kit's code): O_NOFOLLOW and O_APPEND on POSIX; on Windows,
    which has no O_NOFOLLOW, the name is looked at before and after the open and nothing is written unless
    both show the regular file opened. OSError when it cannot be written so."""
    data = "".join(json.dumps(record, sort_keys=True) + "\n" for record in records).encode("utf-8")
    fd = _open(os.path.join(git_dir, PUSHES), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        while data:
            data = data[os.write(fd, data) :]
        # No fsync: the origin is the kit's own, outside every fault model (a power cut covers only the
        # worker's state); the kit reads this file after the hook has exited.
    finally:
        os.close(fd)


def _open(path: str, flags: int) -> int:
    """A descriptor of the regular file at *path*, opened without following a link and without blocking on a
    FIFO; OSError for anything else."""
    import stat

    flags |= getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    before = _lstat(path) if sys.platform == "win32" else None
    if before is not None and (stat.S_ISLNK(before.st_mode) or getattr(before, "st_file_attributes", 0) & 0x400):
        raise OSError(f"{path} is a link")
    if sys.platform == "win32" and before is None:
        flags |= os.O_EXCL  # created here, never through a link that appeared at the name since
    fd = os.open(path, flags, 0o666)
    info = os.fstat(fd)
    after = _lstat(path) if sys.platform == "win32" else info
    if not stat.S_ISREG(info.st_mode) or after is None or (after.st_ino, after.st_dev) != (info.st_ino, info.st_dev):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    if sys.platform != "win32":
        os.set_blocking(fd, True)
    return fd


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _post(url: str, body: dict[str, Any]) -> Any:
    """POST *body* as JSON to the kit's control plane on loopback and return the JSON answer.

    HTTP/1.1 over a plain socket, not urllib: importing urllib's stack (http.client, email) cost more than
    the rest of the hook, and the hook runs twice per push. The server is the kit's own, so the answer is
    read whole (``Connection: close``), bounded by one deadline."""
    rest = url.split("://", 1)[1]
    address, _, path = rest.partition("/")
    host, _, port = address.rpartition(":")
    data = json.dumps(body, sort_keys=True).encode("utf-8")
    request = (
        f"POST /{path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode("ascii") + data
    deadline = time.monotonic() + TIMEOUT_S
    chunks: list[bytes] = []
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S) as connection:
        connection.sendall(request)
        while True:
            connection.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = connection.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    head, _, answer = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise ValueError(f"the control plane answered {head[:80]!r}")
    return json.loads(answer.decode("utf-8"))


def _ask(control_plane: dict[str, str], git_dir: str, updates: list[Update]) -> list[str]:
    body_updates: list[dict[str, Any]] = []
    for old, new, ref in updates:
        kind, parents = _facts(git_dir, new)
        body_updates.append({"ref": ref, "old": old, "new": new, "type": kind, "parents": parents})
    try:
        answer = _post(control_plane["check_url"], {"repository": control_plane["repository"], "updates": body_updates})
        verdicts = answer["updates"]
        if len(verdicts) != len(updates):
            raise ValueError("the control plane answered another number of updates")
        reasons = [("" if verdict["accepted"] else (verdict["reason"] or "refused")) for verdict in verdicts]
    except Exception as error:  # unreachable, 5xx, garbage: the origin refuses
        reasons = [f"the control plane could not be asked: {error}"] * len(updates)
    for index, (old, new, ref) in enumerate(updates):
        if not reasons[index] and old == ZERO:
            reasons[index] = f"creating {ref} is refused"
        elif not reasons[index] and new == ZERO:
            reasons[index] = f"deleting {ref} is refused"
    return reasons


def _static(policy: dict[str, str], updates: list[Update]) -> list[str]:
    reasons: list[str] = []
    for old, new, ref in updates:
        if ref not in policy:
            reasons.append(f"ref {ref} is not governed here")
        elif new == ZERO:
            reasons.append(f"deleting {ref} is refused")
        elif old != policy[ref]:
            reasons.append(f"{ref} is at {old}, not at the expected {policy[ref]}")
        else:
            reasons.append("")
    return reasons


def main(mode: str) -> int:
    git_dir = os.environ.get("GIT_DIR", ".")
    given = sys.stdin.buffer.read(MAX_INPUT + 1)
    lines = (line.split() for line in given[:MAX_INPUT].decode("utf-8", "replace").splitlines())
    updates: list[Update] = [(parts[0], parts[1], parts[2]) for parts in lines if len(parts) == 3]
    try:
        policy = _read_policy(git_dir)
        problem = "" if len(given) <= MAX_INPUT else f"a push of more than {MAX_INPUT} bytes of updates is refused"
    except (OSError, ValueError) as error:
        policy, problem = {}, f"the origin's policy cannot be read: {error}"
    control_plane = policy.get("control_plane")
    if mode == "post-receive":
        if control_plane and updates:
            body = {
                "repository": control_plane["repository"],
                "updates": [{"ref": ref, "old": old, "new": new} for old, new, ref in updates],
            }
            try:
                _post(control_plane["updated_url"], body)
            except Exception as error:  # the refs have moved; nothing to undo, only to say
                sys.stderr.write(f"resumekit origin: could not tell the control plane: {error}\n")
        return 0
    if problem:
        reasons = [problem] * len(updates)
    else:
        reasons = _ask(control_plane, git_dir, updates) if control_plane else _static(policy.get("refs", {}), updates)
    # A push is all or nothing: if any update is refused, none of its updates lands.
    refused = any(reasons) or bool(problem)
    records: list[dict[str, Any]] = []
    for (old, new, ref), reason in zip(updates, reasons, strict=True):
        if refused and not reason:
            reason = "another update of the same push was refused"
        record = {"ref": ref, "old": old, "new": new, "accepted": not reason, "reason": reason, "at": time.time()}
        records.append(record)
        if reason:
            sys.stderr.write(f"resumekit origin: refused: {reason}\n")
    try:
        _append(git_dir, records)
    except OSError as error:  # every attempt is logged (CP-18), or it does not land
        sys.stderr.write(f"resumekit origin: refused: the push log cannot be written: {error}\n")
        return 1
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "pre-receive"))
