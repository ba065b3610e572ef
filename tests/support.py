"""Plain helpers shared by the tests and the benchmark: no pytest imports here."""

from __future__ import annotations

import shutil
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
