"""Shared fixtures for the kit's own tests."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT

pytest_plugins = ["pytester"]
_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # The kit caches the validated golden set; its own tests, and the kits they start, keep that cache in a
    # folder of their own rather than the user's.
    if "RESUMEKIT_CACHE_DIR" not in os.environ:
        os.environ["RESUMEKIT_CACHE_DIR"] = config.stash[_CACHE] = tempfile.mkdtemp(prefix="rk-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(_CACHE, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop("RESUMEKIT_CACHE_DIR", None)


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
