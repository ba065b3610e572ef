"""Shared fixtures for the kit's own tests, and the check that they test this checkout's resumekit.

A session stops before it collects anything when the ``resumekit.conformance`` it imports is not this
checkout's own ``conformance/`` folder (a wheel installed before the last edit, another checkout's editable
install, nothing at all): it would pass or fail on code that is not the code being changed. The fix is an
editable install of this checkout, ``python -m pip install -e '.[test]'`` (CONTRIBUTING.md). To test an
installed wheel on purpose, set ``RESUMEKIT_TEST_INSTALLED=1``; the session header then says so.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT

pytest_plugins = ["pytester"]
# A project of its own, run by tests/test_sample_project.py through its noxfile, not collected here.
collect_ignore = ["sample_project"]
_CACHE = pytest.StashKey[str]()
TEST_INSTALLED = "RESUMEKIT_TEST_INSTALLED"
_FIX = "python -m pip install -e '.[test]'"


def _kit_under_test() -> Path | None:
    """The folder ``resumekit.conformance`` is imported from, or None when no resumekit is installed.

    Found without running the package, so that code broken by an edit fails in the tests that import it.
    """
    try:
        spec = importlib.util.find_spec("resumekit.conformance")
    except ImportError:
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    kit, own = _kit_under_test(), ROOT / "conformance"
    if kit == own or (kit is not None and os.environ.get(TEST_INSTALLED) == "1"):
        return
    if kit is None:
        found, otherwise = "no resumekit is installed", ""
    else:
        found = f"the resumekit this interpreter imports is the one in {kit}, not this checkout's {own}"
        otherwise = f" (or, to test that installed resumekit on purpose, set {TEST_INSTALLED}=1)"
    pytest.exit(
        f"{found}, so the tests would not test this checkout. Install it editable, from {ROOT}: {_FIX}{otherwise}",
        returncode=pytest.ExitCode.USAGE_ERROR,
    )


def pytest_report_header(config: pytest.Config) -> str:
    kit = _kit_under_test()
    if kit == ROOT / "conformance":
        return f"resumekit: this checkout's, {kit}"
    return f"resumekit: the installed one in {kit}, tested on purpose ({TEST_INSTALLED}=1), not this checkout's"


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
