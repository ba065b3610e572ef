"""Shared fixtures for the kit's own tests."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT

pytest_plugins = ["pytester"]


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
