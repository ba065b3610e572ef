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


def _facts(git_dir: str, new: str) -> tuple[str | None, list[str]]:
    """The type of the new object and its parents (for a commit), read from git inside the push's quarantine,
    in one git command: ``cat-file --batch`` gives the type and the commit's header, whose parent lines
    are its parents."""
    if new == ZERO:
        return None, []
    # Imported here, not at the top: the post-receive half never runs git, and subprocess is a fifth of its start.
    import subprocess

    done = subprocess.run(
        ["git", "cat-file", "--batch"], input=(new + "\n").encode("ascii"), capture_output=True,
        env={**os.environ, "GIT_DIR": git_dir}, timeout=60, check=False,
    )  # fmt: skip
    head, _, body = done.stdout.partition(b"\n")
    fields = head.decode("utf-8", "replace").split()
    if done.returncode != 0 or len(fields) != 3:  # "<oid> missing", or git failed
        return None, []
    kind = fields[1]
    if kind != "commit":
        return kind, []
    header = body.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
    return kind, [line.split()[1] for line in header if line.startswith("parent ") and len(line.split()) == 2]


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
    with open(os.path.join(git_dir, "resumekit-policy.json"), encoding="utf-8") as handle:
        policy = json.load(handle)
    lines = (line.split() for line in sys.stdin.read().splitlines())
    updates: list[Update] = [(parts[0], parts[1], parts[2]) for parts in lines if len(parts) == 3]
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
    reasons = _ask(control_plane, git_dir, updates) if control_plane else _static(policy.get("refs", {}), updates)
    # A push is all or nothing: if any update is refused, none of its updates lands.
    refused = any(reasons)
    records: list[dict[str, Any]] = []
    for (old, new, ref), reason in zip(updates, reasons, strict=True):
        if refused and not reason:
            reason = "another update of the same push was refused"
        record = {"ref": ref, "old": old, "new": new, "accepted": not reason, "reason": reason, "at": time.time()}
        records.append(record)
        if reason:
            sys.stderr.write(f"resumekit origin: refused: {reason}\n")
    with open(os.path.join(git_dir, "resumekit-pushes.jsonl"), "a", encoding="utf-8") as log:
        for record in records:
            log.write(json.dumps(record, sort_keys=True) + "\n")
        # No fsync: the origin is the kit's own, outside every fault model (a power cut covers only the
        # worker's state); the kit reads this file after the hook has exited.
        log.flush()
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "pre-receive"))
