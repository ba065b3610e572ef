"""Installed, the kit lives under one import namespace and a user's own modules cannot shadow it.

That holds for both installs: the wheel, and the editable install of a checkout (hatch_build.py), whose
finder maps ``resumekit.conformance`` and ``resumekit.reference`` onto the checkout's folders and puts no
folder of the checkout on sys.path. From a checkout, the kit finds its data beside the package
(``conformance/_resources.py``); the wheel's own layout is checked by tests/test_wheel.py and ``nox -s build``.

The throwaway project below has a ``conformance`` package and a ``reference.py`` of its own, both of
which fail loudly when imported: the kit's pytest plugin, its CLI and the reference adapter's child
process must never import them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import resumekit.conformance
from resumekit.conformance import _resources
from tests.support import ROOT

GUARD = 300
FROM_CHECKOUT = Path(resumekit.conformance.__file__ or ".").resolve().parent == ROOT / "conformance"
# What a checkout has on its top level, none of which an install may make importable.
CHECKOUT_NAMES = ("conformance", "reference", "tests", "noxfile", "hatch_build", "schemas", "golden", "docs", "spec")

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


def _neutral_env() -> dict[str, str]:
    """The environment less PYTHONPATH and the kit's own variables: only the install decides."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("RESUMEKIT_")}


def test_nothing_generic_is_installed_at_the_top_level() -> None:
    import resumekit.reference

    for module in (resumekit.conformance, resumekit.reference):
        assert module.__file__ is not None
        folder = Path(module.__file__).resolve().parent
        if FROM_CHECKOUT:
            assert folder == ROOT / module.__name__.rpartition(".")[2], module.__file__
        else:
            assert folder.parent.name == "resumekit", module.__file__
    files = metadata.files("resumekit") or []
    assert files, "the resumekit distribution lists no installed files"
    for file in files:
        top = file.parts[0]
        if top == "..":  # the console script, in the environment's scripts folder
            continue
        if top == "__pycache__":  # the editable finder's bytecode
            top = file.parts[1]
        # The wheel's package and metadata, or the editable install's .pth files and finder.
        assert top.startswith(("resumekit", "_resumekit", "__editable__")), str(file)


# Prints where resumekit.conformance is, then each of the names it is given that is found in the checkout.
_FIND_IN_CHECKOUT = """
import importlib.util, os, sys, resumekit.conformance
root = os.path.realpath(sys.argv[1])
print(resumekit.conformance.__file__)
found = []
for name in sys.argv[2:]:
    spec = importlib.util.find_spec(name)
    places = [] if spec is None else [spec.origin or "", *(spec.submodule_search_locations or [])]
    if any(os.path.realpath(place).startswith(root + os.sep) for place in places if place):
        found.append(name)
print(*found)
"""


def test_no_folder_or_module_of_the_checkout_becomes_importable(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FIND_IN_CHECKOUT, str(ROOT), *CHECKOUT_NAMES],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_neutral_env(),
        timeout=GUARD,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kit, importable = done.stdout.splitlines()
    assert Path(kit).resolve() == Path(resumekit.conformance.__file__ or ".").resolve()
    assert importable == ""


def test_an_editable_install_runs_the_checkout_from_any_directory(tmp_path: Path) -> None:
    if not FROM_CHECKOUT:
        pytest.skip(f"resumekit is imported from {resumekit.conformance.__file__}, not from this checkout")
    code = (
        "import resumekit.conformance, resumekit.reference, resumekit.conformance._resources as r;"
        "print(resumekit.conformance.__file__, resumekit.reference.__file__, sep='\\n');"
        "print(r.schemas_dir(), r.golden_dir(), r.spec_dir(), sep='\\n')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=_neutral_env(), timeout=GUARD
    )
    assert done.returncode == 0, done.stderr[-2000:]
    expected = [
        ROOT / "conformance" / "__init__.py",
        ROOT / "reference" / "__init__.py",
        ROOT / "schemas",
        ROOT / "golden",
        ROOT / "docs" / "spec",
    ]
    assert [Path(line).resolve() for line in done.stdout.splitlines()] == expected


def _uncached(name: str) -> Path:
    """What ``<name>_dir()`` finds now, past the cache that keeps its first answer for the process."""
    found: Path = getattr(_resources, f"{name}_dir").__wrapped__()
    return found


@pytest.mark.parametrize("name", ["schemas", "golden", "spec"])
def test_the_data_come_from_the_checkout_or_else_the_wheel(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("RESUMEKIT_SCHEMAS", "RESUMEKIT_GOLDEN", "RESUMEKIT_SPEC"):
        monkeypatch.delenv(variable, raising=False)
    package = Path(resumekit.conformance.__file__ or ".").resolve().parent
    expected = ROOT / _resources.IN_CHECKOUT[name] if FROM_CHECKOUT else package / "_data" / name
    assert _uncached(name) == expected
    assert expected.is_dir()


@pytest.mark.parametrize(
    ("name", "variable"), [("schemas", "RESUMEKIT_SCHEMAS"), ("golden", "RESUMEKIT_GOLDEN"), ("spec", "RESUMEKIT_SPEC")]
)
def test_an_environment_variable_overrides_the_data_folder(
    name: str, variable: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(variable, str(tmp_path))
    assert _uncached(name) == tmp_path


def _fake_checkout(root: Path, *, name: str = "resumekit", folders: tuple[str, ...] = ()) -> Path:
    (root / "conformance").mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n', encoding="utf-8")
    for folder in folders or tuple(_resources.IN_CHECKOUT.values()):
        (root / folder).mkdir(parents=True, exist_ok=True)
    return root / "conformance"


def test_a_checkout_is_a_resumekit_project_with_its_three_data_folders(tmp_path: Path) -> None:
    assert _resources.checkout_root(ROOT / "conformance") == ROOT
    assert _resources.checkout_root(_fake_checkout(tmp_path / "ok")) == tmp_path / "ok"
    assert _resources.checkout_root(_fake_checkout(tmp_path / "other", name="someone-else")) is None
    assert _resources.checkout_root(_fake_checkout(tmp_path / "nospec", folders=("schemas", "golden"))) is None
    bare = tmp_path / "bare" / "conformance"
    bare.mkdir(parents=True)
    assert _resources.checkout_root(bare) is None
    # The wheel's layout: the package's parent is the `resumekit` namespace folder in site-packages.
    installed = tmp_path / "site" / "resumekit" / "conformance"
    (installed / "_data" / "golden").mkdir(parents=True)
    assert _resources.checkout_root(installed) is None


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
