"""The scenario origin is real git, and its own hook decides whether a governed commit lands."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.origin import _KIT_IDENTITY, _build_origin, create_origin, git, read_refs

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


def test_the_hook_reads_the_type_and_parents_of_what_is_pushed_in_one_git_command(tmp_path: Path) -> None:
    from resumekit.conformance.p1 import _pre_receive

    origin = create_origin(tmp_path / "o", {"README.md": "hello\n"})
    work = _clone(origin.url, tmp_path / "w")
    git(["commit", "--allow-empty", "--quiet", "-m", "one"], cwd=work, env=_KIT_IDENTITY)
    one = git(["rev-parse", "HEAD"], cwd=work).strip()
    git(["checkout", "--quiet", "-b", "side", origin.base_oid], cwd=work)
    git(["commit", "--allow-empty", "--quiet", "-m", "side"], cwd=work, env=_KIT_IDENTITY)
    side = git(["rev-parse", "HEAD"], cwd=work).strip()
    git(["merge", "--quiet", "--no-edit", "--no-ff", one], cwd=work, env=_KIT_IDENTITY)
    merge = git(["rev-parse", "HEAD"], cwd=work).strip()
    git(["tag", "-a", "-m", "a tag", "t", one], cwd=work, env=_KIT_IDENTITY)
    tag = git(["rev-parse", "t"], cwd=work).strip()
    blob = git(["rev-parse", "HEAD:README.md"], cwd=work).strip()
    git_dir = str(work / ".git")
    assert _pre_receive._facts(git_dir, one) == ("commit", [origin.base_oid])
    assert _pre_receive._facts(git_dir, merge) == ("commit", [side, one])
    assert _pre_receive._facts(git_dir, origin.base_oid) == ("commit", [])  # a root commit
    assert _pre_receive._facts(git_dir, tag) == ("tag", [])
    assert _pre_receive._facts(git_dir, blob) == ("blob", [])
    assert _pre_receive._facts(git_dir, "1" * 40) == (None, [])  # missing
    assert _pre_receive._facts(git_dir, _pre_receive.ZERO) == (None, [])  # a deletion


def test_the_hook_refuses_a_push_when_the_control_plane_answers_no_200(tmp_path: Path) -> None:
    import http.server
    import threading

    from resumekit.conformance.p1 import _pre_receive

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(500)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/_kit/x/origin/check"
        with pytest.raises(ValueError, match="500"):
            _pre_receive._post(url, {"updates": []})
        plane = {"check_url": url, "updated_url": url, "repository": "r"}
        reasons = _pre_receive._ask(plane, str(tmp_path), [(_pre_receive.ZERO, "1" * 40, "refs/heads/main")])
        assert reasons[0].startswith("the control plane could not be asked")
    finally:
        server.shutdown()
        server.server_close()


def test_tree_blobs_reads_every_blob_of_a_tree_at_once_bytes_unchanged(tmp_path: Path) -> None:
    from resumekit.conformance.p1.evidence import tree_blobs

    files = {"a.txt": "same\n", "b/c.txt": "same\n", "b/d.bin": "\n\n0 blob 3\n\x00\n", "e": ""}
    origin = create_origin(tmp_path / "o", files)
    blobs = tree_blobs(origin, origin.base_oid)
    assert [(path, data) for _, path, data in blobs] == sorted((p, t.encode("utf-8")) for p, t in files.items())
    assert {mode for mode, _, _ in blobs} == {"100644"}
