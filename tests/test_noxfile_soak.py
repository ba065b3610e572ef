"""The `conformance` session runs the P1 soak whatever its arguments (issue 21, item 7): the soak takes the
run's own options, chooses its own cases, and writes its reports beside the run's, never over them."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support import ROOT


@pytest.fixture(scope="module")
def noxfile() -> ModuleType:
    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("resumekit_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, ["nox"]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


def test_the_soak_takes_the_runs_options_and_writes_its_reports_beside_the_runs(noxfile: ModuleType) -> None:
    ci = ["--junit", "out/conformance-junit.xml", "--report-json=r.json", "--summary-md", "S.md", "-q", "--jobs", "2"]
    assert noxfile.soak_args(ci) == [
        "--junit", "out/soak-conformance-junit.xml", "--report-json", "soak-r.json", "--summary-md", "S.md",
        "-q", "--jobs", "2",
    ]  # fmt: skip


def test_the_soak_chooses_its_own_cases(noxfile: ModuleType) -> None:
    narrowing = ["--only", "p1-*", "--kind=p1", "--shard", "1/2", "--seed", "7", "--kills", "5"]
    narrowing.append("--no-validate-messages")
    assert noxfile.soak_args(narrowing) == ["--no-validate-messages"]
    assert noxfile.soak_args([]) == []
