"""Shared helpers for the kit's own tests."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def write_fixture(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a YAML fixture file below a scratch golden root and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / "golden" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def golden_copy(tmp_path: Path) -> Path:
    """A scratch copy of the bundled golden directory, for tests that break a file."""
    target = tmp_path / "golden-copy"
    shutil.copytree(ROOT / "golden", target)
    return target


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
