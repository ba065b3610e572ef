"""tests/sample_project: a project of its own whose noxfile certifies runtimes through the pytest plugin.

Each test runs one of its nox sessions with ``nox --no-venv``, in this interpreter's environment (which
has this checkout's resumekit), so what is run is exactly what the noxfile says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import NODE, ROOT

SAMPLE = ROOT / "tests" / "sample_project"
VERDICTS = ("CERTIFIED", "NOT CERTIFIED", "SUBSET", "INTERRUPTED")

pytest.importorskip("nox")


def _nox(session: str, *posargs: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # `python` in the noxfile is this interpreter; nothing is written into the checkout.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTEST_XDIST_WORKER", None)
    argv = [sys.executable, "-m", "nox", "--no-venv", "--envdir", str(tmp_path / "nox"), "-s", session]
    argv += ["--", "-p", "no:cacheprovider", *posargs]
    return subprocess.run(argv, cwd=SAMPLE, capture_output=True, text=True, timeout=900, env=env, check=False)


def _verdict(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stdout.splitlines() if line.startswith(VERDICTS)]
    assert len(lines) == 1, done.stdout[-4000:] + done.stderr[-4000:]
    return lines[0]


def test_the_in_process_runtime_is_certified_through_pytest(tmp_path: Path) -> None:
    done = _nox("inprocess", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert _verdict(done).startswith("CERTIFIED: "), _verdict(done)
    assert " 0 failed, 0 errored, 0 skipped" in _verdict(done)
    assert "tests/test_runtime.py ." in done.stdout  # the project's own tests ran beside the golden cases
    assert "site-packages" not in done.stdout


def test_a_broken_runtime_fails_the_session_under_certify(tmp_path: Path) -> None:
    done = _nox("broken", tmp_path=tmp_path)
    # The session passes only when pytest exits 1, which it must.
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert _verdict(done).startswith("NOT CERTIFIED: "), _verdict(done)
    assert "--resumekit-certify: the session fails, as the run is not a certification" in done.stdout
    assert "FAILED golden/phase0/decisions/" in done.stdout


def test_a_narrowed_session_is_no_certification(tmp_path: Path) -> None:
    done = _nox("inprocess", "-k", "prefix", tmp_path=tmp_path)
    assert done.returncode != 0, "a subset run certifies nothing, so --resumekit-certify fails it"
    assert _verdict(done).startswith("SUBSET: selected cases passed (not a certification)"), _verdict(done)


needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")


@needs_node
def test_the_node_phase0_example_through_pytest(tmp_path: Path) -> None:
    done = _nox(
        "node_phase0",
        "-k",
        "offset-above-with-name-mismatch or prefix-after-function-call or crash-p4",
        tmp_path=tmp_path,
    )
    assert "2 passed" in _verdict(done) and "1 not claimed" in _verdict(done), _verdict(done)
    assert done.returncode != 0  # a subset, which --resumekit-certify refuses


@needs_node
@pytest.mark.skipif(
    not (ROOT / "tests" / "node_worker" / "node_modules").is_dir(),
    reason="the Node worker's dependencies are not installed (run `npm ci --prefix tests/node_worker`)",
)
def test_the_node_p1_worker_through_pytest(tmp_path: Path) -> None:
    # One process here (-n 1): the session itself runs two at a time.
    done = _nox("node_p1", "-n", "1", "-k", "p1-capture-completes or p1-commit-completes", tmp_path=tmp_path)
    verdict = _verdict(done)
    assert verdict.startswith("SUBSET: selected cases passed (not a certification)"), verdict
    assert "): 2 passed, 0 failed" in verdict, verdict  # the two P1 scenarios, through pytest-xdist
    assert done.returncode != 0
