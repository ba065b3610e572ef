"""The scenario origin is real git, and its own hook decides whether a governed commit lands."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from resumekit.conformance.p1.origin import _KIT_IDENTITY, GitError, _build_origin, create_origin, git, read_refs

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _clone(origin_url: str, where: Path) -> Path:
    git(["clone", "--quiet", origin_url, str(where)], cwd=where.parent)
    return where


def test_a_base_commit_is_reproducible(tmp_path: Path) -> None:
    files = {"README.md": "hello\n", "src/x.txt": "x\n"}
    one = create_origin(tmp_path / "a", files)
    # The origins a run copies are the repository a fresh build makes, refs, commits and hooks alike.
    fresh = _build_origin(tmp_path / "fresh", files, "main", "base", (), {"later.txt": "later\n"})
    copied = create_origin(tmp_path / "c", files, later={"later.txt": "later\n"})
    assert (copied.base_oid, copied.later_oid) == (fresh.base_oid, fresh.later_oid) and one.base_oid == fresh.base_oid
    assert read_refs(copied.path) == read_refs(fresh.path) == dict(copied.made)
    assert sorted(p.name for p in (copied.path / "hooks").iterdir()) == sorted(
        p.name for p in (fresh.path / "hooks").iterdir()
    )
    assert one.head() == one.base_oid
    assert one.commits_since(one.base_oid) == []


def test_each_copied_origin_is_a_repository_of_its_own(tmp_path: Path) -> None:
    one = create_origin(tmp_path / "a", {"README.md": "hello\n"})
    two = create_origin(tmp_path / "b", {"README.md": "hello\n"})
    assert one.path != two.path and one.base_oid == two.base_oid
    one.govern({"main": one.base_oid})
    work = _clone(one.url, tmp_path / "w")
    git(["commit", "--allow-empty", "--quiet", "-m", "only in one"], cwd=work, env=_KIT_IDENTITY)
    git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)
    assert len(one.commits_since(one.base_oid)) == 1
    assert two.commits_since(two.base_oid) == [] and two.pushes() == []
    assert create_origin(tmp_path / "c", {"README.md": "hello\n"}).head() == one.base_oid


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
