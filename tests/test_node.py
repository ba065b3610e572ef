"""A second implementation in another language, written from the documents alone, is certified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import NODE, ROOT

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")


@pytest.mark.parametrize("profile", ["core", "strict"])
def test_the_node_implementation_is_certified_for_what_it_claims(profile: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    adapter = f'"{NODE}" tests/node_impl/adapter.mjs' if " " in str(NODE) else f"{NODE} tests/node_impl/adapter.mjs"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumekit.conformance",
            "run",
            "-q",
            "--adapter",
            adapter,
            "--profile",
            profile,
            "--validate-messages",
            "--report-json",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["implementation"]["language"] == "javascript"
    assert document["implementation"]["capabilities"] == ["phase0.projection"]
    decisions = [r for r in document["results"] if r["kind"] == "decision"]
    assert len(decisions) >= 60 and all(r["outcome"] == "passed" for r in decisions)
    others = [r for r in document["results"] if r["kind"] != "decision"]
    assert others and all(r["outcome"] == "not_claimed" for r in others)
