"""A real bare git origin per scenario, whose own hook decides whether a governed commit lands.

The kit makes the origin, seeds it with a base commit, tells its hook which ref may move from which
commit, and afterwards reads what happened from git itself (refs, commits) and from the hook's log of
every push attempt. Nothing here trusts what a worker says about its pushes.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance._text import decode

_HOOK = Path(__file__).with_name("_pre_receive.py")
_POLICY = "resumekit-policy.json"
_PUSHES = "resumekit-pushes.jsonl"
_GIT_TIMEOUT = 60.0

# Fixed identities and dates make every commit the kit writes reproducible, byte for byte, on every OS.
_KIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "resumekit",
    "GIT_AUTHOR_EMAIL": "kit@resumekit.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "resumekit",
    "GIT_COMMITTER_EMAIL": "kit@resumekit.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


class GitError(Exception):
    """git is missing or a git command the kit needed failed."""


def git(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> str:
    """Run one git command and return its stdout as text (a byte that is not UTF-8, in a ref's name say, as its
    escape: two names never read the same); a failure names the command and git's words."""
    return decode(git_bytes(args, cwd=cwd, env=env, stdin=stdin))


def _run_git(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("git")
    if exe is None:
        raise GitError("git is not on PATH; the P1 scenarios need a real git")
    full_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    full_env.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
    try:
        return subprocess.run(
            [exe, *args], cwd=cwd, env=full_env, input=stdin, capture_output=True, timeout=_GIT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} took longer than {_GIT_TIMEOUT:.0f} s") from None


def git_bytes(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> bytes:
    """Run one git command and return its stdout unchanged."""
    done = _run_git(args, cwd=cwd, env=env, stdin=stdin)
    if done.returncode != 0:
        words = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise GitError(f"git {' '.join(args)} failed with exit {done.returncode}: {words}")
    return done.stdout


def read_refs(repository: Path) -> dict[str, str]:
    """Every ref of a repository (branches, tags and any other, as ``git for-each-ref`` lists them) -> the
    object it names."""
    out = git(["for-each-ref", "--format=%(refname) %(objectname)"], cwd=repository)
    refs = {}
    for line in out.splitlines():
        ref, _, oid = line.partition(" ")
        if ref:
            refs[ref] = oid
    return refs


@dataclass(frozen=True, slots=True)
class Origin:
    """A scenario's bare repository and the commit its target branch started at."""

    path: Path
    branch: str
    base_oid: str
    later_oid: str | None = None  # a second commit above the base, on the branch "later", when asked for
    made: Mapping[str, str] = field(default_factory=dict)  # every ref the kit made -> the object it made it at

    @property
    def url(self) -> str:
        """A file URL a worker can clone from and push to."""
        return self.path.resolve().as_uri()

    @property
    def ref(self) -> str:
        """The full name of the origin's target branch."""
        return f"refs/heads/{self.branch}"

    def head(self, branch: str | None = None) -> str | None:
        """Where a branch points now, or None when it does not exist."""
        ref = f"refs/heads/{branch or self.branch}"
        try:
            return git(["rev-parse", "--verify", "--quiet", ref], cwd=self.path).strip() or None
        except GitError:
            return None

    def refs(self) -> dict[str, str]:
        """Every ref of the repository now (branches, tags and any other) -> the object it names."""
        return read_refs(self.path)

    def is_ancestor(self, old: str, new: str) -> bool | None:
        """Whether commit *old* is *new* or an ancestor of it (an update from one to the other is a
        fast-forward); None when git cannot tell, for instance because the origin lacks one of them."""
        done = _run_git(["merge-base", "--is-ancestor", old, new], cwd=self.path)
        return {0: True, 1: False}.get(done.returncode)

    def commits_since(self, oid: str, branch: str | None = None) -> list[str]:
        """The commits on a branch that are not reachable from *oid*, oldest first."""
        ref = f"refs/heads/{branch or self.branch}"
        out = git(["rev-list", "--reverse", f"{oid}..{ref}"], cwd=self.path)
        return out.split()

    def govern(self, expected: Mapping[str, str]) -> None:
        """Without a control plane: tell the hook which refs may move, each only from the given commit."""
        refs = {(ref if ref.startswith("refs/") else f"refs/heads/{ref}"): oid for ref, oid in expected.items()}
        self._write_policy({"refs": refs})

    def connect(self, *, check_url: str, updated_url: str, repository: str) -> None:
        """Have the hook ask a control plane about every update (CP-18) and tell it of every landed one."""
        self._write_policy(
            {"control_plane": {"check_url": check_url, "updated_url": updated_url, "repository": repository}}
        )

    def _write_policy(self, policy: Mapping[str, Any]) -> None:
        (self.path / _POLICY).write_text(json.dumps(policy, sort_keys=True), encoding="utf-8")

    def pushes(self) -> list[dict[str, Any]]:
        """Every push attempt the hook saw, accepted or refused, in order."""
        log = self.path / _PUSHES
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _hook_script(python: str, mode: str) -> str:
    # git runs hooks through a POSIX shell on every OS (Git for Windows brings its own sh), which takes
    # forward slashes in a Windows path.
    exe = python.replace("\\", "/")
    # -I -S: the hook needs only the standard library, so neither site-packages nor PYTHON* variables.
    return f'#!/bin/sh\nexec "{exe}" -I -S "$GIT_DIR/hooks/resumekit_pre_receive.py" {mode}\n'


def create_origin(
    root: Path,
    files: Mapping[str, str],
    *,
    branch: str = "main",
    message: str = "base",
    branches: Sequence[str] = (),
    later: Mapping[str, str] | None = None,
) -> Origin:
    """A bare repository under *root* with one base commit holding *files* on *branch*, its hook installed.

    *branches* are further branches at the base commit; *later* the files a second commit, above the
    base on the branch ``later``, writes: other source states a scenario can issue an attempt against.
    The kit's commits are reproducible byte for byte, so each distinct origin is built once per process
    and copied: the copy is the same repository, object for object, as a fresh build.
    """
    template = _template(files, branch, message, tuple(branches), later)
    bare = root / "origin.git"
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template.path, bare)
    origin = dataclasses.replace(template, path=bare)
    origin.govern({})
    return origin


_templates: dict[str, Origin] = {}
_templates_lock = threading.Lock()
_templates_home: list[Path] = []  # the process's folder of built origins, made on first use


def _template(
    files: Mapping[str, str], branch: str, message: str, branches: tuple[str, ...], later: Mapping[str, str] | None
) -> Origin:
    key = json.dumps([dict(files), branch, message, branches, dict(later) if later is not None else None])
    with _templates_lock:
        if key not in _templates:
            if not _templates_home:
                _templates_home.append(Path(tempfile.mkdtemp(prefix="resumekit-origins-")))
                atexit.register(shutil.rmtree, _templates_home[0], ignore_errors=True)
            root = _templates_home[0] / str(len(_templates))
            _templates[key] = _build_origin(root, files, branch, message, branches, later)
        return _templates[key]


def _build_origin(
    root: Path,
    files: Mapping[str, str],
    branch: str,
    message: str,
    branches: Sequence[str],
    later: Mapping[str, str] | None,
) -> Origin:
    bare = root / "origin.git"
    seed = root / "origin-seed"
    bare.mkdir(parents=True)
    seed.mkdir(parents=True)
    # No template: git's sample hooks and description are a dozen files each scenario would copy and remove.
    git(["init", "--quiet", "--bare", "--template=", f"--initial-branch={branch}", str(bare)], cwd=root)
    git(["init", "--quiet", "--template=", f"--initial-branch={branch}", str(seed)], cwd=root)
    for name, text in files.items():
        target = seed / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    git(["add", "--all"], cwd=seed)
    git(["commit", "--quiet", "--no-gpg-sign", "-m", message], cwd=seed, env=_KIT_IDENTITY)
    git(["push", "--quiet", str(bare), f"HEAD:refs/heads/{branch}"], cwd=seed)
    base = git(["rev-parse", "HEAD"], cwd=seed).strip()
    for name in branches:
        git(["push", "--quiet", str(bare), f"HEAD:refs/heads/{name}"], cwd=seed)
    later_oid = None
    if later is not None:
        for name, text in later.items():
            target = seed / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
        git(["add", "--all"], cwd=seed)
        git(["commit", "--quiet", "--no-gpg-sign", "-m", "later"], cwd=seed, env=_KIT_IDENTITY)
        git(["push", "--quiet", str(bare), "HEAD:refs/heads/later"], cwd=seed)
        later_oid = git(["rev-parse", "HEAD"], cwd=seed).strip()
    shutil.rmtree(seed, ignore_errors=True)
    # One pack instead of a directory and a file per loose object: fewer files in every scenario's copy.
    git(["-c", "repack.writeBitmaps=false", "repack", "-a", "-d", "-q", "-n"], cwd=bare)
    hooks = bare / "hooks"
    hooks.mkdir(exist_ok=True)
    shutil.copyfile(_HOOK, hooks / "resumekit_pre_receive.py")
    for mode in ("pre-receive", "post-receive"):
        hook = hooks / mode
        hook.write_text(_hook_script(sys.executable, mode), encoding="utf-8", newline="\n")
        hook.chmod(0o755)
    return Origin(path=bare, branch=branch, base_oid=base, later_oid=later_oid, made=read_refs(bare))
