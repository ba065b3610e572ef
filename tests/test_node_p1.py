"""A second P1 worker, in JavaScript, written from the documents alone, is certified for core."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import NODE, ROOT, gate_rows, node_adapter_command

WORKER = ROOT / "tests" / "node_worker"

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed on this machine"),
    pytest.mark.skipif(
        not (WORKER / "node_modules").is_dir(),
        reason="the Node worker's dependencies are not installed (run `npm ci --prefix tests/node_worker`)",
    ),
]

# The whole core run takes about four minutes; the guard only stops a hung run.
TIMEOUT_S = 1200


def test_the_node_p1_worker_is_certified_for_core(tmp_path: Path) -> None:
    report = tmp_path / "node-p1.json"
    adapter = node_adapter_command()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumekit.conformance",
            "run",
            "-q",
            "--adapter",
            adapter,
            "--kind",
            "p1",
            "--profile",
            "core",
            "--jobs",
            "4",
            "--report-json",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=TIMEOUT_S,
    )
    # --kind p1 narrows the run to P1, so a pass is a subset run's (exit 3), not a certification.
    assert done.returncode == 3, done.stdout[-20000:] + done.stderr[-20000:]
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["implementation"]["language"] == "javascript"
    assert "p1.worker" in document["implementation"]["capabilities"]
    summary = document["summary"]
    assert summary["passed"] >= 90
    assert summary["failed"] == 0 and summary["errored"] == 0 and summary["skipped"] == 0, summary
    gates = gate_rows(document)
    assert gates, "the report has no gate table"
    not_passed = {name: row["verdict"] for name, row in gates.items() if row["verdict"] != "passed"}
    assert not not_passed, not_passed


def test_the_node_p1_worker_fences_superseded_attempts_and_identity_conflicts(tmp_path: Path) -> None:
    """The Node worker claims strict: the faulty deliveries of SCOPE-6 and SCOPE-7 run against it too."""
    report = tmp_path / "node-p1-strict.json"
    adapter = node_adapter_command()
    selection = ("p1-strict-superseded-*", "p1-strict-*-identity-conflict")
    done = subprocess.run(
        [
            sys.executable, "-m", "resumekit.conformance", "run", "-q", "--adapter", adapter, "--kind", "p1",
            "--profile", "strict", *(arg for glob in selection for arg in ("--only", glob)), "--jobs", "2",
            "--report-json", str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 3, done.stdout[-20000:] + done.stderr[-20000:]
    results = json.loads(report.read_text(encoding="utf-8"))["results"]
    assert len(results) == 6 and all(result["outcome"] == "passed" for result in results), results
