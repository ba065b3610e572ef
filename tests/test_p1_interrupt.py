"""Ctrl-C in the middle of P1 cases removes the scratch folder of every running case, whatever ``--jobs``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resumekit.conformance.cli import EXIT_INTERRUPTED
from tests.support import ROOT

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(os.name == "nt", reason="SIGINT to a process is POSIX"),
]

# Two crash matrices: each runs worlds one after another for far longer than the test waits.
CASES = ("p1-matrix-capture", "p1-matrix-commit")
WAIT_S = 120.0


def _running_workers(tmpdir: Path) -> list[Path]:
    """The P1 scratch folders whose worker has started (the kit made its first journal log)."""
    return [path.parent for path in tmpdir.glob("resumekit-p1-*/journal-w1.jsonl")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_in_the_middle_of_p1_cases_leaves_no_scratch_folder(tmp_path: Path, jobs: int) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    only = [arg for case in CASES for arg in ("--only", case)]
    process = subprocess.Popen(
        [sys.executable, "-m", "resumekit.conformance", "run", "-q", "--adapter", "reference",
         "--kind", "p1-campaign", *only, "--jobs", str(jobs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True,
        env={**os.environ, "TMPDIR": str(tmpdir), "TEMP": str(tmpdir), "TMP": str(tmpdir)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_S
        # A case is in its middle once its worker runs: with two jobs, wait for both cases.
        while len(_running_workers(tmpdir)) < jobs and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_running_workers(tmpdir)) >= jobs, "no P1 case got as far as its worker"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == EXIT_INTERRUPTED, out + err
    assert "Traceback" not in err, err
    assert sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("resumekit-")) == []
