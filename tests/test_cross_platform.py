"""What differs between Linux, macOS and Windows and can be shown here: proxies in the environment, the
POSIX-only modules missing, paths reached through another name, symbolic links refused. Each test makes
the other system's condition on this one (a dead proxy, a blocked import, an aliased scratch root, a
refused link); tests/test_platform_choices.py tests the choices made for one system."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance import _files, cli
from resumekit.conformance.adapters import process_factory
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1 import _tool, harness, links, scenario
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.control_plane.server import ControlPlane
from resumekit.conformance.results import Outcome
from tests.p1_stories import Told, judged
from tests.support import ROOT

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every proxy variable names a port of 127.0.0.1 that is bound and never listened on: a request that
    goes through the proxy is refused, one that goes straight to the control plane is not. Inherited by
    every process the test starts."""
    closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, url)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield url
    finally:
        closed.close()


def test_the_kits_tool_announces_itself_past_a_dead_proxy(dead_proxy: str, tmp_path: Path) -> None:
    plane = ControlPlane(log_path=tmp_path / "cp" / "log.jsonl")
    plane.start()
    try:
        workspace, announce = tmp_path / "ws", tmp_path / "tool-announce"
        workspace.mkdir()
        announce.write_text(plane.kit_url("_kit/tool/started") + "\n", encoding="utf-8")
        # No flag file: the tool writes once, announces, and ends, so the test waits for its exit alone.
        ran = subprocess.run(
            [sys.executable, "-m", _tool.MODULE, "--announce-file", str(announce),
             "--while-exists", str(tmp_path / "no-flag"), "--seconds", "5"],
            cwd=workspace, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )
        started = [entry for entry in plane.log() if entry["kind"] == "tool_started"]
    finally:
        plane.close()
    assert ran.returncode == 0 and b"announcement failed" not in ran.stderr, ran.stderr
    assert len(started) == 1, (started, ran.stderr)


def test_the_opener_of_the_kits_loopback_requests_has_no_proxy(dead_proxy: str) -> None:
    handlers = _tool.direct_opener().handlers
    assert not [h for h in handlers if getattr(h, "proxies", None)], [vars(h) for h in handlers]


@needs_git
def test_the_reference_runs_the_tool_scenario_to_a_pass_behind_a_dead_proxy(dead_proxy: str) -> None:
    (case,) = [c for c in load_suite().cases if c.id == "p1-tool-runs-to-its-end-and-changes-no-result"]
    assert isinstance(case, ScenarioCase)
    result = harness.run_scenario(case, process_factory("reference"), "core")
    assert result.outcome is Outcome.PASSED, (result.message, result.mismatches)


# -- without the POSIX-only modules (as on Windows) --------------------------------------------------------

POSIX_ONLY = ("resource", "fcntl", "termios", "pwd", "grp")
# Run first in a fresh interpreter: any import of a POSIX-only module fails as it does on Windows.
_WITHOUT_POSIX = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {POSIX_ONLY!r}
    class NotOnThisSystem(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    for name in BLOCKED:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, NotOnThisSystem())
""")
_IMPORT_EVERY_MODULE = textwrap.dedent("""
    import importlib, json, pkgutil
    import resumekit.conformance, resumekit.reference
    blocked = []
    for name in BLOCKED:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            blocked.append(name)
    failed, imported = {}, []
    packages = (resumekit.conformance, resumekit.reference)
    modules = [m for p in packages for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
    for module in modules:
        if module.name == "resumekit.conformance.__main__":
            continue  # runs the command; it imports the cli alone
        try:
            importlib.import_module(module.name)
            imported.append(module.name)
        except Exception as error:
            failed[module.name] = repr(error)
    print(json.dumps({"blocked": blocked, "failed": failed, "imported": imported}))
""")
# Linux-only optional dependencies, absent elsewhere by design (pyproject.toml), of a module only ever started
# as a process of its own by the Linux-only power layer.
_LINUX_ONLY = {"resumekit.conformance.powerloss._server": "mfusepy"}


def _without_posix(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_POSIX + script], cwd=ROOT, capture_output=True, text=True,
        encoding="utf-8", timeout=300,
    )


def test_every_kit_module_imports_without_the_posix_only_modules() -> None:
    ran = _without_posix(_IMPORT_EVERY_MODULE)
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout.splitlines()[-1])
    assert found["blocked"] == list(POSIX_ONLY)
    failed = {name: error for name, error in found["failed"].items() if _LINUX_ONLY.get(name, "\0") not in error}
    assert failed == {}
    assert {"resumekit.conformance.cli", "resumekit.reference.p1.tools"} <= set(found["imported"])


def test_every_test_is_collected_without_the_posix_only_modules() -> None:
    ran = _without_posix(
        "import pytest; sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:xdist', '-p', 'no:cacheprovider',"
        " 'tests']))"
    )
    last = ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else ""
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "tests collected" in last and "error" not in last and "skipped" not in last, last


# -- one folder, two names (Windows 8.3 short names, macOS's /private, links) --------------------------------


def _alias(tmp_path: Path, target: Path) -> Path:
    """Another name of the folder *target*: a link to it, where this machine lets one be made."""
    alias = tmp_path / "alias"
    try:
        alias.symlink_to(target, target_is_directory=True)
    except OSError as error:  # Windows without the symbolic-link privilege
        pytest.skip(f"cannot make a symbolic link here: {error}")
    return alias


def test_same_place_compares_folders_by_identity_not_by_spelling(tmp_path: Path) -> None:
    real, other = tmp_path / "real", tmp_path / "other"
    real.mkdir()
    other.mkdir()
    alias = _alias(tmp_path, real)
    assert str(alias) != str(real) and _files.same_place(alias, real) and _files.same_place(str(real), alias)
    assert not _files.same_place(other, real)
    assert not _files.same_place(tmp_path / "gone", real)  # cannot be looked at: not the same
    assert not _files.same_place("no\0where", real)


def test_the_tool_is_placed_in_the_root_by_identity(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "workspaces", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    alias = _alias(tmp_path, root)
    log = [{"kind": "tool_started", "cwd": str(alias / "task-t-1-1-ab")},
           {"kind": "tool_started", "cwd": str(elsewhere / "task-t-1-1-ab")},
           {"kind": "tool_started", "cwd": 7}, {"kind": "request", "cwd": str(root / "task-x")}]
    assert scenario.tool_places(root, log) == {str(alias / "task-t-1-1-ab"): True,
                                              str(elsewhere / "task-t-1-1-ab"): False}
    assert len(scenario.tool_places(root, [{"kind": "tool_started", "cwd": f"/{n}"} for n in range(100)])) == 64


def _announced(root: str, cwd: str, places: dict[str, bool] | None) -> Told:
    told = Told().kit("world", workspaceRoot=root).by("w1", "started", tool=True).logged("tool_started", cwd=cwd)
    return told if places is None else told.kit("tool-places", places=places)


def test_the_tool_check_takes_the_kits_identity_reading_over_the_spelling() -> None:
    # The workspace root spelled as the kit resolved it; the tool's getcwd() as Windows keeps a short name.
    root, short = "C:/Users/runneradmin/AppData/Local/Temp/rk/workspaces", "C:/Users/RUNNER~1/AppData/Local/Temp/rk"
    cwd = f"{short}/workspaces/task-t-1-1-ab"
    assert judged("processes.tool", _announced(root, cwd, {cwd: True})) == []
    (found,) = judged("processes.tool", _announced(root, cwd, None))  # not looked at: the spelling decides
    assert found.clause == "ADP-2"
    same = f"{root}/task-t-1-1-ab"  # spelled as the root, but the kit found another folder there
    assert [m.clause for m in judged("processes.tool", _announced(root, same, {same: False}))] == ["ADP-2"]
    assert judged("processes.tool", _announced(root, same, {})) == []


@needs_git
def test_the_reference_passes_the_tool_scenario_in_a_scratch_reached_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "temp"
    real.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(_alias(tmp_path, real)))  # as macOS's /tmp is /private/tmp
    (case,) = [c for c in load_suite().cases if c.id == "p1-tool-runs-to-its-end-and-changes-no-result"]
    assert isinstance(case, ScenarioCase)
    result = harness.run_scenario(case, process_factory("reference"), "core")
    assert result.outcome is Outcome.PASSED, (result.message, result.mismatches)
    # The case's scratch was made there, through the link, and removed (origin templates last the run).
    assert [p.name for p in real.iterdir() if p.name.startswith("resumekit-p1-")] == []


# -- a set-up the machine refuses (symbolic links without the privilege) ----------------------------------


@pytest.fixture
def links_refused(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process refuses symbolic links as Windows does without the privilege (ERROR_PRIVILEGE_NOT_HELD)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(1, "A required privilege is not held by the client")

    monkeypatch.setattr("os.symlink", refuse)
    links.refused.cache_clear()
    yield
    links.refused.cache_clear()


def test_the_scenarios_that_plant_links_are_known_from_their_steps() -> None:
    cases = [c for c in load_suite().cases if isinstance(c, ScenarioCase)]
    assert sorted(c.id for c in cases if links.needs_links(c.steps)) == [
        "p1-cleanup-directory-swapped-for-a-link-is-not-followed",
        "p1-cleanup-nested-links-are-unlinked-not-followed",
        "p1-cleanup-never-descends-a-link-inside",
        "p1-cleanup-never-enters-a-sibling-named-like-the-root",
        "p1-cleanup-never-follows-a-task-link",
        "p1-cleanup-removes-the-workspace-of-an-active-lease",
        "p1-cleanup-through-a-root-given-as-a-link",
    ]
    links.refused.cache_clear()
    assert links.refused() is None  # this machine makes them


def test_a_scenario_that_plants_a_fifo_is_not_run_where_the_system_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [c for c in load_suite().cases if isinstance(c, ScenarioCase)]
    if hasattr(os, "mkfifo"):
        assert [c.id for c in cases if links.fifo_refused(c.steps)] == []
        monkeypatch.delattr(os, "mkfifo")
    refused = {c.id: links.fifo_refused(c.steps) for c in cases if links.fifo_refused(c.steps)}
    assert list(refused) == ["p1-cleanup-removes-task-files-and-fifos"]
    assert "no FIFOs" in str(refused["p1-cleanup-removes-task-files-and-fifos"])


@needs_git
def test_a_scenario_whose_links_are_refused_is_not_run_and_the_verdict_says_so(
    links_refused: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    code = cli.main(["run", "--only", "p1-cleanup-never-follows-a-task-link", "--only", "p1-capture-completes",
                     "--report-json", str(report), "--jobs", "1"])
    out = capsys.readouterr().out
    document = json.loads(report.read_text(encoding="utf-8"))
    outcomes = {r["id"]: (r["outcome"], r.get("message") or "") for r in document["results"]}
    assert outcomes["p1-capture-completes"][0] == "passed"
    outcome, message = outcomes["p1-cleanup-never-follows-a-task-link"]
    assert outcome == "not_run" and "refuses the symbolic links" in message and "Developer Mode" in message
    assert code != 0 and "1 case(s) not run on this machine: this machine refuses the symbolic links" in out
    # The gate of the case that did not run counts it as not run, not as passed.
    cleanup = [line for line in out.splitlines() if line.startswith("WORKSPACE_CLEANUP_RECOVERY")]
    assert cleanup and "not run" in cleanup[0], out
