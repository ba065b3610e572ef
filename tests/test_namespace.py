"""Installed, the kit lives under one import namespace and a user's own modules cannot shadow it.

The throwaway project below has a ``conformance`` package and a ``reference.py`` of its own, both of
which fail loudly when imported: the kit's pytest plugin, its CLI and the reference adapter's child
process must never import them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GUARD = 300

SHADOW = "raise SystemExit(\"the user's own {name} was imported instead of the kit's\")\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "conformance").mkdir(parents=True)
    (root / "conformance" / "__init__.py").write_text(SHADOW.format(name="conformance"), encoding="utf-8")
    (root / "reference.py").write_text(SHADOW.format(name="reference"), encoding="utf-8")
    (root / "test_own.py").write_text("def test_own() -> None:\n    assert 1 + 1 == 2\n", encoding="utf-8")
    (root / "myplan.py").write_text(
        textwrap.dedent(
            """
            from resumekit.reference import build_resume_plan

            def plan(events, *, expected_high_water=None, profile="strict"):
                return build_resume_plan(events, expected_high_water=expected_high_water, profile=profile)
            """
        ),
        encoding="utf-8",
    )
    return root


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=GUARD)


def test_nothing_generic_is_installed_at_the_top_level() -> None:
    import resumekit.conformance
    import resumekit.reference

    for module in (resumekit.conformance, resumekit.reference):
        assert module.__file__ is not None
        assert Path(module.__file__).parent.parent.name == "resumekit", module.__file__


def test_a_user_conformance_package_does_not_break_pytest(project: Path) -> None:
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_own.py"], project)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_a_user_reference_module_does_not_break_the_reference_adapter(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = _run(
        [
            sys.executable,
            "-m",
            "resumekit.conformance",
            "run",
            "-q",
            "--only",
            "prefix-*",
            "--report-json",
            str(report),
        ],
        project,
    )
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(report.read_text(encoding="utf-8"))["results"]
    assert len(results) == 4
    assert {result["outcome"] for result in results} == {"passed"}


@pytest.mark.parametrize("entry", ["console script", "python -m"])
def test_python_adapters_resolve_modules_from_the_working_directory(project: Path, entry: str) -> None:
    if entry == "console script":
        script = shutil.which("resumekit", path=str(Path(sys.executable).parent))
        if script is None:
            pytest.fail("the resumekit console script is not installed beside this interpreter")
        argv = [script]
    else:
        argv = [sys.executable, "-m", "resumekit.conformance"]
    done = _run([*argv, "run", "-q", "--adapter", "python:myplan:plan", "--kind", "decision"], project)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
