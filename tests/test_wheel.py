"""A built wheel carries the schemas, the fixtures and the spec, and finds them when installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [built] = out.glob("resumekit-*.whl")
    return built


def test_the_wheel_holds_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("schemas", "golden"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert f"resumekit/conformance/_data/{path.relative_to(ROOT).as_posix()}" in names
    assert "resumekit/conformance/_data/spec/phase0.md" in names


def test_the_installed_wheel_finds_its_data_away_from_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {key: value for key, value in os.environ.items() if not key.startswith("RESUMEKIT_")}
    env["PYTHONPATH"] = str(site)
    code = (
        "import resumekit.conformance._resources as r, resumekit.conformance as c, sys;"
        "assert c.__file__.startswith(sys.argv[1]), c.__file__;"
        "print(r.golden_dir()); print(r.schemas_dir()); print(r.spec_dir())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(site)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert Path(line).is_relative_to(site / "resumekit" / "conformance" / "_data")
    listing = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "list", "--clauses"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    assert "DEC-1" in listing.stdout


def test_the_wheel_declares_its_licence_and_carries_the_text(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    [metadata] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
    text = archive.read(metadata).decode("utf-8")
    assert "License-Expression: MIT" in text
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in archive.namelist())
    assert all(name.startswith(("resumekit/", "resumekit-")) for name in archive.namelist())
