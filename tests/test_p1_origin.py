"""The scenario origin is real git, and its own hook decides whether a governed commit lands."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from resumekit.conformance.p1.origin import _KIT_IDENTITY, GitError, create_origin, git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _clone(origin_url: str, where: Path) -> Path:
    git(["clone", "--quiet", origin_url, str(where)], cwd=where.parent)
    return where


def test_a_base_commit_is_reproducible(tmp_path: Path) -> None:
    one = create_origin(tmp_path / "a", {"README.md": "hello\n", "src/x.txt": "x\n"})
    two = create_origin(tmp_path / "b", {"README.md": "hello\n", "src/x.txt": "x\n"})
    assert one.base_oid == two.base_oid
    assert one.head() == one.base_oid
    assert one.commits_since(one.base_oid) == []


def test_the_hook_lets_one_governed_commit_land_and_refuses_the_next(tmp_path: Path) -> None:
    origin = create_origin(tmp_path / "o", {"README.md": "hello\n"})
    origin.govern({"main": origin.base_oid})
    work = _clone(origin.url, tmp_path / "w")
    git(["commit", "--allow-empty", "--quiet", "-m", "governed"], cwd=work, env=_KIT_IDENTITY)
    git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)
    landed = origin.commits_since(origin.base_oid)
    assert len(landed) == 1
    git(["commit", "--allow-empty", "--quiet", "-m", "again"], cwd=work, env=_KIT_IDENTITY)
    with pytest.raises(GitError, match="not at the expected"):
        git(["push", "--quiet", "--force", "origin", "HEAD:refs/heads/main"], cwd=work)
    assert origin.commits_since(origin.base_oid) == landed
    assert [push["accepted"] for push in origin.pushes()] == [True, False]


def test_refs_the_policy_does_not_name_are_refused(tmp_path: Path) -> None:
    origin = create_origin(tmp_path / "o", {"README.md": "hello\n"})
    work = _clone(origin.url, tmp_path / "w")
    git(["commit", "--allow-empty", "--quiet", "-m", "stray"], cwd=work, env=_KIT_IDENTITY)
    with pytest.raises(GitError, match="not governed"):
        git(["push", "--quiet", "origin", "HEAD:refs/heads/other"], cwd=work)
    assert origin.head("other") is None
    assert origin.pushes()[0]["accepted"] is False
