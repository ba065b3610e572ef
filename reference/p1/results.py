"""Pure functions of P1 results: canonical JSON, result bodies and hashes, keys, the governed commit.

Nothing here touches a file, a process or the network, so every value is a function of its inputs
(TASK-2 to TASK-4, KEY-3).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing is not imported at run time: every start of the reference pays for each import
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "canonical_json",
    "commit_body",
    "commit_object",
    "git_object_id",
    "idempotency_key",
    "result_hash",
    "source_capture_body",
]


def _check(value: Any) -> None:
    if isinstance(value, float):
        raise TypeError("P1 bodies contain no floating-point numbers")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"canonical JSON object keys must be strings, not {key!r}")
            _check(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check(item)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of *value* (TASK-2).

    Python's encoder with sorted keys, no white space and ``ensure_ascii=False`` is exactly TASK-2's
    encoding: ``"`` and ``\\`` escaped, ``\\b \\t \\n \\f \\r`` short, other controls ``\\u00xx`` in
    lowercase hex, everything else (``/`` and non-ASCII included) as itself.
    """
    _check(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def result_hash(body: Mapping[str, Any]) -> str:
    """The lowercase hex SHA-256 of the body's canonical JSON (TASK-2)."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def idempotency_key(task_id: str, attempt: int, execution_digest: str) -> str:
    """The reference's key of one official attempt (KEY-3)."""
    ident = {"attempt": attempt, "execution_digest": execution_digest, "task_id": task_id}
    return "p1-result:" + hashlib.sha256(canonical_json(ident).encode("utf-8")).hexdigest()


def source_capture_body(base_oid: str, files: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The body of a ``source_capture`` task from ``(path, sha256)`` pairs (TASK-3)."""
    listed = sorted(files, key=lambda item: item[0].encode("utf-8"))
    paths = [path for path, _ in listed]
    if len(set(paths)) != len(paths):
        raise ValueError("a path is listed twice")
    return {
        "base_oid": base_oid,
        "files": [{"path": path, "sha256": digest} for path, digest in listed],
        "kind": "source_capture",
    }


def commit_body(commit_oid: str, target_branch: str) -> dict[str, Any]:
    """The body of a ``commit`` task (TASK-4)."""
    return {"commit_oid": commit_oid, "kind": "commit", "target_branch": target_branch}


def commit_object(tree: str, parent: str, commit: Mapping[str, Any]) -> bytes:
    """The exact bytes of the governed commit object (TASK-4), without git's object header."""
    name, email, timestamp, message = commit["name"], commit["email"], commit["timestamp"], commit["message"]
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise TypeError("the commit timestamp is an integer")
    person = f"{name} <{email}> {timestamp} +0000"
    text = f"tree {tree}\nparent {parent}\nauthor {person}\ncommitter {person}\n\n{message}"
    return text.encode("utf-8")


def git_object_id(kind: str, data: bytes) -> str:
    """The SHA-1 object name git gives *data* as an object of *kind* (``blob``, ``tree``, ``commit``)."""
    header = f"{kind} {len(data)}\0".encode("ascii")
    return hashlib.sha1(header + data).hexdigest()
