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
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._text import decode
from resumekit.conformance.p1 import _git, origin_guard
from resumekit.conformance.p1._git import GitError, GitLimit
from resumekit.conformance.p1.origin_guard import MAX_REFS, OriginUnreadable

__all__ = ["Origin", "create_origin", "git", "git_bytes", "read_refs"]

_HOOK = Path(__file__).with_name("_pre_receive.py")
_POLICY = "resumekit-policy.json"
_PUSHES = "resumekit-pushes.jsonl"
_PUSHES_MAX = 16 << 20  # bytes of the hook's push log the kit reads
_KIT_FILES = ("config", "HEAD")  # what the kit makes and nothing changes: checked byte for byte before each read
# The kit's commands on an origin run none of its hooks: a worker that planted one (reference-transaction,
# which update-ref runs) would otherwise run its code inside the kit's command.
_NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")

# Fixed identities and dates make every commit the kit writes reproducible, byte for byte, on every OS.
_KIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "resumekit",
    "GIT_AUTHOR_EMAIL": "kit@resumekit.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "resumekit",
    "GIT_COMMITTER_EMAIL": "kit@resumekit.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def git(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> str:
    """Run one git command and return its stdout as text (a byte that is not UTF-8, in a ref's name say, as its
    escape: two names never read the same); a failure names the command and git's words."""
    return decode(git_bytes(args, cwd=cwd, env=env, stdin=stdin))


def _run_git(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> _git.Done:
    """One git command under the kit's limits (``_git``): GitLimit when one of them stopped it."""
    return _git.run(args, cwd=cwd, env=env, stdin=stdin)


def git_bytes(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> bytes:
    """Run one git command and return its stdout unchanged."""
    return _checked(args, _run_git(args, cwd=cwd, env=env, stdin=stdin))


def _checked(args: Sequence[str], done: _git.Done) -> bytes:
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed with exit {done.returncode}: {_git.tail(done)}")
    return done.stdout


def read_refs(repository: Path, prefix: str = "") -> dict[str, str]:
    """Every ref of a repository (branches, tags and any other, as ``git for-each-ref`` lists them), or those
    under *prefix*, -> the object it names. At most MAX_REFS are read: a repository with more raises
    OriginUnreadable."""
    return _parse_refs(repository, git_bytes(_refs_command(prefix), cwd=repository))


def _refs_command(prefix: str) -> list[str]:
    # One more than the kit reads: a repository with more says so without listing them all.
    listing = ["for-each-ref", f"--count={MAX_REFS + 1}", "--format=%(refname) %(objectname)"]
    return [*listing, prefix] if prefix else listing


def _parse_refs(repository: Path, out: bytes) -> dict[str, str]:
    refs = {}
    for line in decode(out).splitlines():
        ref, _, oid = line.partition(" ")
        if ref:
            refs[ref] = oid
    if len(refs) > MAX_REFS:
        raise OriginUnreadable(repository, "refs", f"at most {MAX_REFS} refs", f"more than {MAX_REFS} refs")
    return refs


@dataclass(frozen=True, slots=True)
class Origin:
    """A scenario's bare repository and the commit its target branch started at.

    Every read of it goes through ``check`` first and runs git under the kit's limits: the worker can write
    its folder (``origin_guard``), so a file git would read blindly, or a git command stopped by a limit,
    raises OriginUnreadable."""

    path: Path
    branch: str
    base_oid: str
    later_oid: str | None = None  # a second commit above the base, on the branch "later", when asked for
    made: Mapping[str, str] = field(default_factory=dict)  # every ref the kit made -> the object it made it at
    kit_files: Mapping[str, bytes] = field(default_factory=dict)  # config and HEAD as the kit made them

    @property
    def url(self) -> str:
        """A file URL a worker can clone from and push to."""
        return self.path.resolve().as_uri()

    @property
    def ref(self) -> str:
        """The full name of the origin's target branch."""
        return f"refs/heads/{self.branch}"

    def check(self) -> None:
        """OriginUnreadable unless the files git reads blindly are as the kit can let git read them."""
        origin_guard.check(self.path, self.kit_files)

    def run(self, args: Sequence[str], *, cwd: Path | None = None, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> _git.Done:  # fmt: skip
        """One git command that reads this origin (run in it, or in *cwd* with the origin as its remote), after
        ``check``, with no hook of the origin's; a limit that stopped it raises OriginUnreadable."""
        self.check()
        try:
            return _git.run([*_NO_HOOKS, *args], cwd=cwd or self.path, env=env, stdin=stdin)
        except GitLimit as limit:
            expected = (
                f"git reads the origin within the kit's limits ({_git.MEMORY >> 20} MiB of memory, "
                f"{_git.TIMEOUT_S:.0f} s, {_git.OUTPUT >> 20} MiB of output)"
            )
            raise OriginUnreadable(self.path, f"git {' '.join(args)}", expected, limit.found) from None

    def git_bytes(self, args: Sequence[str], *, stdin: bytes | None = None) -> bytes:
        """``run`` in the origin; its stdout, or GitError when git failed."""
        return _checked(args, self.run(args, stdin=stdin))

    def git(self, args: Sequence[str]) -> str:
        """``git_bytes`` as text."""
        return decode(self.git_bytes(args))

    def fetch(self, into: Path, oid: str) -> None:
        """Fetch *oid* from this origin into the repository *into* (``upload-pack`` reads the origin)."""
        args = ["fetch", "--quiet", self.url, oid]
        _checked(args, self.run(args, cwd=into))

    def head(self, branch: str | None = None) -> str | None:
        """Where a branch points now, or None when it does not exist."""
        ref = f"refs/heads/{branch or self.branch}"
        done = self.run(["rev-parse", "--verify", "--quiet", ref])
        if done.returncode != 0:
            return None
        return done.stdout.decode("ascii", "replace").strip() or None

    def refs(self, prefix: str = "") -> dict[str, str]:
        """Every ref of the repository now (branches, tags and any other), or those under *prefix*, -> the
        object it names; OriginUnreadable past MAX_REFS."""
        return _parse_refs(self.path, self.git_bytes(_refs_command(prefix)))

    def is_ancestor(self, old: str, new: str) -> bool | None:
        """Whether commit *old* is *new* or an ancestor of it (an update from one to the other is a
        fast-forward); None when git cannot tell, for instance because the origin lacks one of them."""
        done = self.run(["merge-base", "--is-ancestor", old, new])
        return {0: True, 1: False}.get(done.returncode)

    def commits_since(self, oid: str, branch: str | None = None) -> list[str]:
        """The commits on a branch that are not reachable from *oid*, oldest first."""
        ref = f"refs/heads/{branch or self.branch}"
        return self.git(["rev-list", "--reverse", f"{oid}..{ref}"]).split()

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
        # A new file under a name of the kit's, renamed over the policy: never written through a link a worker
        # left at the policy's name (a rename replaces the link itself).
        data = json.dumps(policy, sort_keys=True).encode("utf-8")
        temporary = self.path / f".{_POLICY}.{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(temporary, flags, 0o644)
        try:
            with open(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, self.path / _POLICY)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def pushes(self) -> list[dict[str, Any]]:
        """Every push attempt the hook saw, accepted or refused, in order."""
        if origin_guard.lstat(self.path, _PUSHES) is None:
            return []
        text = origin_guard.read_small(self.path, _PUSHES, _PUSHES_MAX).decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _hook_script(python: str, mode: str) -> str:
    # git runs hooks through a POSIX shell on every OS (Git for Windows brings its own sh), which takes
    # forward slashes in a Windows path.
    exe = python.replace("\\", "/")
    # -I -S: the hook needs only the standard library, so neither site-packages nor PYTHON* variables.
    return f'#!/bin/sh\nexec "{exe}" -I -S "$GIT_DIR/hooks/resumekit_pre_receive.py" {mode}\n'


def hooks_problem(shell: str = "/bin/sh") -> str | None:
    """None when git runs an origin's hooks here; otherwise what happened. The origins' hooks are scripts for
    *shell* (``_hook_script``): Git for Windows runs them through the sh it brings, MinGit has none, and then
    every push of every P1 case would fail its hook. Found by a push to a throwaway origin whose pre-receive
    hook, of the same form, leaves a file."""
    root = _files.scratch("hooks")
    try:
        bare, seed = root / "origin.git", root / "seed"
        git(["init", "--quiet", "--bare", "--template=", str(bare)], cwd=root)
        git(["init", "--quiet", "--template=", str(seed)], cwd=root)
        (bare / "hooks").mkdir()
        hook = bare / "hooks" / "pre-receive"
        hook.write_text(f"#!{shell}\n: > hook-ran\n", encoding="utf-8", newline="\n")  # its cwd: the origin
        hook.chmod(0o755)
        git(["commit", "--quiet", "--allow-empty", "--no-gpg-sign", "-m", "probe"], cwd=seed, env=_KIT_IDENTITY)
        pushed = _run_git(["push", "--quiet", str(bare), "HEAD:refs/heads/probe"], cwd=seed)
        if (bare / "hook-ran").is_file():
            return None
        lines = decode(pushed.stderr).strip().splitlines()
        said = ([line for line in lines if "hook" in line] or lines or ["no word from git"])[0]
        why = f"the push {'failed' if pushed.returncode else 'went through without running it'}: {said}"
    except (GitError, OSError) as error:
        why = str(error)
    finally:
        _files.remove(root)
    return f"git cannot run the origins' hooks, scripts for {shell} (Git for Windows has one, MinGit not): {why}"


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
                # _files.remove, not rmtree: Git for Windows writes its objects read-only, which rmtree leaves
                atexit.register(_files.remove, _templates_home[0])
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
    # A scenario's origin takes a push or two: git's gc --auto after each would be a process that never works.
    git(["config", "receive.autogc", "false"], cwd=bare)
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
    _files.remove(seed)  # its read-only objects too (Windows)
    # One pack instead of a directory and a file per loose object: fewer files in every scenario's copy.
    git(["-c", "repack.writeBitmaps=false", "repack", "-a", "-d", "-q", "-n"], cwd=bare)
    hooks = bare / "hooks"
    hooks.mkdir(exist_ok=True)
    shutil.copyfile(_HOOK, hooks / "resumekit_pre_receive.py")
    for mode in ("pre-receive", "post-receive"):
        hook = hooks / mode
        hook.write_text(_hook_script(sys.executable, mode), encoding="utf-8", newline="\n")
        hook.chmod(0o755)
    kit_files = {name: (bare / name).read_bytes() for name in _KIT_FILES}
    return Origin(
        path=bare, branch=branch, base_oid=base, later_oid=later_oid, made=read_refs(bare), kit_files=kit_files
    )
