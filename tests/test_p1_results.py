"""The pure parts of P1 results: canonical JSON, hashes, keys and the governed commit object."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from resumekit.reference.p1.results import (
    canonical_json,
    commit_body,
    commit_object,
    git_object_id,
    idempotency_key,
    result_hash,
    source_capture_body,
)


def test_canonical_json_is_exactly_task_2() -> None:
    value = {"b": 1, "a": ["/", "é", "\u2028"], "c": "\"\\\b\t\n\f\r\x00\x1f\x7f"}
    assert canonical_json(value) == '{"a":["/","é","\u2028"],"b":1,"c":"\\"\\\\\\b\\t\\n\\f\\r\\u0000\\u001f\x7f"}'


def test_canonical_json_refuses_floats() -> None:
    with pytest.raises(TypeError):
        canonical_json({"x": 1.0})


def test_key_3_example() -> None:
    expected = hashlib.sha256(b'{"attempt":1,"execution_digest":"d-1","task_id":"t-1"}').hexdigest()
    assert idempotency_key("t-1", 1, "d-1") == f"p1-result:{expected}"
    assert idempotency_key("t-1", 2, "d-1") != idempotency_key("t-1", 1, "d-1")
    assert idempotency_key("t-1", 1, "d-2") != idempotency_key("t-1", 1, "d-1")
    assert idempotency_key("t-2", 1, "d-1") != idempotency_key("t-1", 1, "d-1")


def test_result_hash_is_the_sha256_of_the_canonical_body() -> None:
    body = commit_body("a" * 40, "main")
    text = '{"commit_oid":"' + "a" * 40 + '","kind":"commit","target_branch":"main"}'
    assert result_hash(body) == hashlib.sha256(text.encode()).hexdigest()


def test_source_capture_files_are_sorted_by_utf8_bytes() -> None:
    body = source_capture_body("b" * 40, [("z.txt", "1" * 64), ("README.md", "2" * 64), ("é.txt", "3" * 64),
                                          ("src/a.txt", "4" * 64)])
    assert [entry["path"] for entry in body["files"]] == ["README.md", "src/a.txt", "z.txt", "é.txt"]
    assert list(body) == ["base_oid", "files", "kind"]
    with pytest.raises(ValueError, match="twice"):
        source_capture_body("b" * 40, [("a", "1" * 64), ("a", "1" * 64)])


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_commit_object_name_is_the_one_git_gives_the_task_4_text(tmp_path: Path) -> None:
    tree, parent = "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "1" * 40
    commit = {"email": "p1@resumekit.invalid", "message": "p1: governed commit of t-2\n", "name": "resumekit",
              "timestamp": 1767225600}
    # The object text of TASK-4, written out by hand.
    text = (f"tree {tree}\nparent {parent}\nauthor resumekit <p1@resumekit.invalid> 1767225600 +0000\n"
            "committer resumekit <p1@resumekit.invalid> 1767225600 +0000\n\np1: governed commit of t-2\n").encode()
    assert commit_object(tree, parent, commit) == text
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    by_git = subprocess.run(["git", "hash-object", "-t", "commit", "--stdin"], input=text, cwd=tmp_path,
                            capture_output=True, check=True).stdout.decode().strip()
    assert git_object_id("commit", text) == by_git
