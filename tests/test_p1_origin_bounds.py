"""What the kit reads through git is bounded in memory and time (issue 36): the origin's hook looks a pushed
object's type and size up before it reads anything of it and never appends through a link; the kit's own git
commands run under a memory limit, a time limit and a bound on their output, with no configuration but the
repository's; an origin file git would read blindly that is not the regular, bounded file the kit made, or
a git command stopped by a limit, fails COMMIT-3 naming what was found (that the mismatches of one clause
are capped, with one more that counts the rest, is tested in test_p1_rules)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance.p1 import _git, _pre_receive, origin_guard
from resumekit.conformance.p1._git import GitError
from resumekit.conformance.p1.origin import _KIT_IDENTITY, Origin, create_origin, git, read_refs
from resumekit.conformance.p1.origin_guard import OriginUnreadable

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, /dev/zero and RLIMIT_DATA are POSIX")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces RLIMIT_DATA")


def _origin(tmp_path: Path) -> Origin:
    return create_origin(tmp_path / "o", {"README.md": "hello\n"})


def _loose(repository: Path, kind: str, body: bytes, repeat: int = 1) -> str:
    """Write a loose object of *body* repeated *repeat* times straight into *repository*'s objects."""
    head = f"{kind} {len(body) * repeat}\0".encode("ascii")
    digest, packer = hashlib.sha1(head), zlib.compressobj(9)
    parts = [packer.compress(head)]
    for _ in range(repeat):
        digest.update(body)
        parts.append(packer.compress(body))
    parts.append(packer.flush())
    name = digest.hexdigest()
    (repository / "objects" / name[:2]).mkdir(exist_ok=True)
    (repository / "objects" / name[:2] / name[2:]).write_bytes(b"".join(parts))
    return name


def _commit_body(origin: Origin, message: bytes) -> bytes:
    tree = git(["rev-parse", f"{origin.base_oid}^{{tree}}"], cwd=origin.path).strip()
    header = f"tree {tree}\nparent {origin.base_oid}\nauthor a <a@a> 0 +0000\ncommitter a <a@a> 0 +0000\n\n"
    return header.encode("ascii") + message


# -- the origin's hook ---------------------------------------------------------------------------------


@posix_only
def test_the_hook_looks_a_pushed_blob_up_by_its_size_and_never_reads_it(tmp_path: Path) -> None:
    # 256 MiB of zeros, a few hundred KiB on disk: the hook and its git stay small however large it is.
    origin = _origin(tmp_path)
    blob = _loose(origin.path, "blob", bytes(1 << 20), repeat=256)
    probe = (
        "import json, resource, sys\n"
        "from resumekit.conformance.p1 import _pre_receive\n"
        "facts = _pre_receive._facts(sys.argv[1], sys.argv[2])\n"
        "usage = [resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]\n"
        # Linux starts a child's ru_maxrss at its parent's peak (the test process's): the probe's own is VmHWM.
        "if sys.platform == 'linux':\n"
        "    usage[0] = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "print(json.dumps([facts, usage]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(origin.path), blob], capture_output=True, check=True)
    facts, (own_kb, git_kb) = json.loads(done.stdout)
    assert facts == ["blob", []]
    assert own_kb < 100 * 1024 and git_kb < 100 * 1024, (own_kb, git_kb)


def test_a_commit_larger_than_a_header_is_judged_by_its_type_and_size_alone(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    small = _loose(origin.path, "commit", _commit_body(origin, b"small\n"))
    large = _loose(origin.path, "commit", _commit_body(origin, b"m" * (_pre_receive.MAX_COMMIT + 1)))
    assert _pre_receive._facts(str(origin.path), small) == ("commit", [origin.base_oid])
    assert _pre_receive._facts(str(origin.path), large) == ("commit", [])  # no parents: the control plane refuses


@posix_only
@pytest.mark.parametrize("way", ["_git_by_spawn", "_git_by_subprocess"])
def test_the_hooks_git_is_read_to_its_bound_and_its_time_by_either_way_of_starting_it(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = getattr(_pre_receive, way)
    origin = _origin(tmp_path)
    env = {**os.environ, "GIT_DIR": str(origin.path)}
    check = _pre_receive._limited(["git", "cat-file", "--batch-check"])
    line = started(check, env, f"{origin.base_oid}\n".encode("ascii"), 512)
    assert line is not None and line.split()[:2] == [origin.base_oid.encode("ascii"), b"commit"]
    body = _pre_receive._limited(["git", "cat-file", "commit", origin.base_oid])
    assert started(body, env, None, 10) is None  # more than its bound: nothing of it
    assert started(_pre_receive._limited(["git", "cat-file", "commit", "0" * 40]), env, None, 512) is None  # failed
    assert started(["/nonexistent/program"], env, None, 512) is None
    monkeypatch.setattr(_pre_receive, "GIT_TIMEOUT_S", 0.3)
    assert started(["/bin/sh", "-c", "exec sleep 30"], env, None, 512) is None  # killed at its time


@posix_only
def test_the_hooks_git_that_cannot_get_a_pipe_is_a_failed_read_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = _origin(tmp_path)

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_pipe)
    assert _pre_receive._facts(str(origin.path), origin.base_oid) == (None, [])


@posix_only
def test_the_hook_never_appends_through_a_link_at_its_push_log(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    origin.govern({"main": origin.base_oid})
    outside = tmp_path / "outside.jsonl"
    outside.write_text("precious\n")
    (origin.path / "resumekit-pushes.jsonl").symlink_to(outside)
    work = tmp_path / "w"
    git(["clone", "--quiet", origin.url, str(work)], cwd=tmp_path)
    git(["commit", "--allow-empty", "--quiet", "-m", "governed"], cwd=work, env=_KIT_IDENTITY)
    with pytest.raises(GitError, match="the push log cannot be written"):
        git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)
    assert outside.read_text() == "precious\n"
    assert git(["rev-parse", "main"], cwd=origin.path).strip() == origin.base_oid  # refused: nothing landed


@posix_only
def test_a_policy_that_is_a_fifo_refuses_the_push_at_once(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    policy = origin.path / "resumekit-policy.json"
    policy.unlink()
    os.mkfifo(policy)
    work = tmp_path / "w"
    git(["clone", "--quiet", origin.url, str(work)], cwd=tmp_path)
    git(["commit", "--allow-empty", "--quiet", "-m", "x"], cwd=work, env=_KIT_IDENTITY)
    with pytest.raises(GitError, match="policy cannot be read"):
        git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)


# -- the kit's git commands ----------------------------------------------------------------------------


def test_the_callers_git_configuration_and_variables_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "global.gitconfig"
    config.write_text("[user]\n\tname = from-the-callers-config\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repository"))
    origin = _origin(tmp_path)
    done = _git.run(["config", "user.name"], cwd=origin.path)
    assert done.returncode == 1 and done.stdout == b""  # no name: only the repository's own config counts
    assert origin.head() == origin.base_oid  # GIT_DIR dropped: git reads the repository it runs in


@posix_only
def test_a_git_command_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    repository = tmp_path / "r.git"
    git(["init", "--quiet", "--bare", str(repository)], cwd=tmp_path)
    (repository / "config").unlink()
    os.mkfifo(repository / "config")  # git opens it and waits for a writer
    with pytest.raises(_git.GitLimit, match="ran longer than"):
        _git.run(["for-each-ref"], cwd=repository, timeout=0.5)


def test_a_git_command_is_stopped_past_its_output_bound(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    blob = _loose(origin.path, "blob", b"x" * 4096)
    with pytest.raises(_git.GitLimit, match="wrote more than 1000 bytes"):
        _git.run(["cat-file", "blob", blob], cwd=origin.path, output=1000)


@linux_only
def test_a_git_command_of_the_kit_that_runs_out_of_memory_on_an_origin_fails_commit_3(tmp_path: Path) -> None:
    # A commit of 200 MB written straight into the origin's objects (a regular file, 200 KB on disk) and the
    # branch moved to it: git reads a commit whole, past its 128 MiB.
    origin = _origin(tmp_path)
    huge = _loose(origin.path, "commit", _commit_body(origin, b"m" * (200 << 20)))
    (origin.path / "refs" / "heads" / "main").write_text(huge + "\n")
    with pytest.raises(OriginUnreadable) as caught:
        origin.commits_since(origin.base_oid)
    assert caught.value.where.startswith("git rev-list") and "memory" in caught.value.found


# -- the files of an origin ----------------------------------------------------------------------------


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _link(target: str) -> object:
    def plant(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    return plant


PLANTED = {
    "alternates-to-dev-zero": ("objects/info/alternates", _link("/dev/zero"), "a symbolic link"),
    "config-fifo": ("config", _fifo, "a FIFO"),
    "config-changed": ("config", lambda p: p.write_text("[include]\n\tpath = /dev/zero\n"), "[include]"),
    "head-link": ("HEAD", _link("config"), "a symbolic link"),
    "commondir": ("commondir", lambda p: p.write_text("/elsewhere\n"), "a regular file of 11 bytes"),
    "packed-refs-fifo": ("packed-refs", _fifo, "a FIFO"),
    "loose-ref-fifo": ("refs/heads/extra", _fifo, "a FIFO"),
    "loose-ref-huge": ("refs/heads/main", lambda p: os.truncate(p, 1 << 20), "1048576 bytes"),
    "pack-link": ("objects/pack/pack-x.pack", _link("/dev/zero"), "a symbolic link"),
    "loose-object-fifo": ("objects/ab/" + "c" * 38, _fifo, "a FIFO"),
    "commit-graph-huge": ("objects/info/commit-graph", lambda p: os.truncate(p, 1 << 30), "1073741824 bytes"),
    "push-log-link": ("resumekit-pushes.jsonl", _link("/dev/null"), "a symbolic link"),
}


@posix_only
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_an_origin_file_git_reads_blindly_fails_commit_3_naming_what_was_found(tmp_path: Path, name: str) -> None:
    origin = _origin(tmp_path)
    where, plant, found = PLANTED[name]
    target = origin.path / where
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() and not target.is_symlink():
        target.write_bytes(b"")
    plant(target)  # type: ignore[operator]
    for read in (origin.refs, origin.head, lambda: origin.commits_since(origin.base_oid)):
        with pytest.raises(OriginUnreadable) as caught:
            read()
        assert caught.value.where == where
        assert found in caught.value.found


def test_an_origin_as_made_and_pushed_to_is_read(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    origin.govern({"main": origin.base_oid})
    work = tmp_path / "w"
    git(["clone", "--quiet", origin.url, str(work)], cwd=tmp_path)
    git(["commit", "--allow-empty", "--quiet", "-m", "governed"], cwd=work, env=_KIT_IDENTITY)
    git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=work)
    origin.check()
    assert len(origin.commits_since(origin.base_oid)) == 1 and set(origin.refs()) == {"refs/heads/main"}
    assert [push["accepted"] for push in origin.pushes()] == [True]


# -- refs and mismatches -------------------------------------------------------------------------------


def _packed_refs(origin: Origin, count: int) -> None:
    lines = "".join(f"{origin.base_oid} refs/tags/extra-{n:06d}\n" for n in range(count))
    (origin.path / "packed-refs").write_text("# pack-refs with: peeled fully-peeled sorted \n" + lines)


def test_more_refs_than_the_kit_reads_fail_commit_3_and_fewer_are_read(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    _packed_refs(origin, origin_guard.MAX_REFS - 1)
    assert len(origin.refs()) == origin_guard.MAX_REFS and len(read_refs(origin.path)) == origin_guard.MAX_REFS
    _packed_refs(origin, origin_guard.MAX_REFS)
    with pytest.raises(OriginUnreadable, match="more than 1000 refs"):
        origin.refs()
    with pytest.raises(OriginUnreadable, match="more than 1000 refs"):
        read_refs(origin.path)


def test_a_hundred_thousand_refs_are_refused_before_git_reads_them(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    _packed_refs(origin, 100_000)
    with pytest.raises(OriginUnreadable) as caught:
        origin.refs()
    assert caught.value.where == "packed-refs" and caught.value.found.endswith("bytes")
    (origin.path / "packed-refs").unlink()
    for n in range(origin_guard.MAX_REFS + 1):
        (origin.path / "refs" / "tags" / f"t{n}").write_text(origin.base_oid + "\n")
    with pytest.raises(OriginUnreadable, match="more than 1000 loose refs"):
        origin.refs()


@pytest.fixture
def cp_env(tmp_path: Path) -> Iterator[object]:
    from tests.test_p1_control_plane import Env

    made = Env(tmp_path)
    try:
        yield made
    finally:
        made.cp.close()


@posix_only
def test_a_request_that_finds_the_origin_unreadable_fails_the_scenario_never_errors_it(cp_env: object) -> None:
    from tests.test_p1_control_plane import Env

    assert isinstance(cp_env, Env)
    cp_env.cp.issue(cp_env.task())
    _fifo(cp_env.origin.path / "config")
    with pytest.raises(OSError, match=r"closed|reset|Remote end"):  # the request that needed the heads is dropped
        cp_env.call("POST", "v1/claims", {})
    assert [error.where for error in cp_env.cp.unreadable_origins()] == ["config"]
    assert cp_env.cp.check_errors() == ()


# -- the campaign's attacks and its measure of the kit's memory -------------------------------------------


@linux_only
@pytest.mark.parametrize(
    "name", ["alternates-to-dev-zero", "origin-config-fifo", "hundred-thousand-refs", "five-hundred-refs",
             "push-log-links-outside"],
)  # fmt: skip
def test_a_worker_that_changes_its_origin_fails_commit_3_within_the_kits_memory(name: str, tmp_path: Path) -> None:
    from tests.fuzz import guards, p1
    from tests.fuzz.parts import Context

    context = Context(tmp_path / "work")
    try:
        attack = {attack.name: attack for attack in p1.ATTACKS}[name]
        outcome = p1.run_attack(context, attack, context.work / "p1", guard=120)
        assert outcome["category"] == "clear error", outcome["reason"]
        assert "COMMIT-3" in outcome["named"]
        # The kit's processes, not the adapter's; the terminal shows at most 20 mismatches of a clause.
        assert 0 < outcome["peakKb"] < 500 * 1024 and outcome["outputBytes"] < 64 * 1024, outcome
        assert context.outside_writes() == 0
        assert guards.reap_orphans(context.tag) == []
    finally:
        context.decoy.close()


def test_the_kits_memory_counts_its_git_hooks_and_tool_never_the_adapters_tree() -> None:
    from tests.fuzz.kit_memory import KitMemory

    python = "/usr/bin/python3"
    table = {
        10: (1, [python, "-m", "resumekit.conformance", "run", "--adapter", f"{python} -m tests.fuzz.p1_workers x"]),
        11: (10, ["git", "for-each-ref"]),
        12: (10, [python, "-m", "tests.fuzz.p1_workers", "x"]),
        13: (12, [python, "-c", "a worker"]),
        14: (13, ["git", "push"]),
        15: (14, ["git", "receive-pack"]),
        16: (15, [python, "-I", "-S", "/o/hooks/resumekit_pre_receive.py", "pre-receive"]),
        17: (16, ["git", "cat-file", "--batch-check"]),
        18: (13, [python, "-m", "resumekit.conformance.p1._tool", "--announce-file", "f"]),
        19: (18, [python, "-m", "resumekit.conformance.p1._tool", "--role", "grandchild"]),
        20: (1, ["bash"]),
    }
    assert sorted(KitMemory(10, "tests.fuzz.p1_workers").kit_processes(table)) == [10, 11, 16, 17, 18, 19]
