"""Plain helpers shared by the tests and the benchmark: no pytest imports here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def python_command(*args: str) -> str:
    """A command line that runs this interpreter, quoted for the adapter option on any OS."""
    exe = sys.executable
    quoted = f'"{exe}"' if " " in exe else exe
    return " ".join([quoted, *args])


NODE = shutil.which("node")


def node_adapter_command(node: str | None = NODE) -> str:
    """The adapter command of the Node.js example, *node* quoted where its path has a space."""
    return f'"{node}" tests/node_worker/adapter.mjs' if " " in str(node) else f"{node} tests/node_worker/adapter.mjs"

GUARD = 600  # seconds: far above any honest run, only there to turn a hang into a failure


def run_resumekit(report: Path, *args: str, guard: float = GUARD) -> tuple[int, dict[str, Any], str]:
    """``resumekit run -q`` in a subprocess from the repository root: exit code, JSON report, output.

    The timeout turns a runner that hangs on a misbehaving adapter into a failed test, not a hung suite.
    """
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "run", "-q", "--report-json", str(report), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=guard,
    )
    document = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return done.returncode, document, done.stdout + done.stderr


def minimal_event(**fields: Any) -> dict[str, Any]:
    """The smallest valid RuntimeEvent, with *fields* set on top."""
    event: dict[str, Any] = {
        "id": "e",
        "invocationId": "i",
        "runId": "r",
        "sessionId": "s",
        "turnId": "t",
        "ts": 1,
        "partial": False,
        "role": "user",
        "author": "user",
    }
    event.update(fields)
    return event


def gate_rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The P1 gate table of a JSON run report, each row by its gate's name (none when P1 was not selected)."""
    tables = [table for table in document.get("summaries", ()) if table["contract"] == "p1"]
    return {row["name"]: row for table in tables for row in table["rows"]}
