"""Certify runtimes inside this project's own pytest run, as an implementer's CI would.

``nox -s inprocess`` certifies the in-process runtime of ``my_runtime.py``; ``nox -s node_phase0`` and
``nox -s node_p1`` certify the kit's Node.js examples (the Phase 0 adapter and the P1 worker) through the
same plugin; ``nox -s broken`` passes only when the certification of ``broken_runtime.py`` fails. Each
pytest run gives the verdict `resumekit run` would, and ``--resumekit-certify`` fails it unless it certifies.
Arguments go to pytest: ``nox -s node_p1 -- -k p1-capture-completes`` (a subset run, which then fails).
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["inprocess", "node_phase0", "node_p1", "broken"]

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent  # the kit's tests/ folder, where its Node.js examples live
# What to install: the kit's own checkout by default, or whatever RESUMEKIT_KIT names ("resumekit==0.1.0").
KIT = os.environ.get("RESUMEKIT_KIT", str(HERE.parents[1]))
CERTIFY = ("python", "-m", "pytest", "--resumekit-certify")
NODE_PHASE0 = f'node "{EXAMPLES / "node_impl" / "adapter.mjs"}"'  # its projection (it claims no store)
NODE_P1 = f'node "{EXAMPLES / "node_worker" / "adapter.mjs"}"'
# The P1 worker is certified for core, as the kit's own tests certify it, two cases at a time (pytest-xdist).
SESSIONS = {
    "inprocess": (*CERTIFY, "--resumekit-adapter", "python:my_runtime:build_resume_plan"),
    "node_phase0": (*CERTIFY, "--resumekit-adapter", NODE_PHASE0),
    "node_p1": (*CERTIFY, "--resumekit-adapter", NODE_P1, "--resumekit-profile", "core", "-n", "2"),
    "broken": (*CERTIFY, "--resumekit-adapter", "python:broken_runtime:build_resume_plan"),
}


def _install(session: nox.Session, *extra: str) -> None:
    # Under `nox --no-venv` the session runs in the current environment, which then has resumekit already.
    if session.venv_backend != "none":
        session.install(KIT, "pytest", "pytest-xdist", *extra)


@nox.session
def inprocess(session: nox.Session) -> None:
    """Certify my_runtime in-process: its decisions are claimed, every other kind is not."""
    _install(session)
    session.run(*SESSIONS["inprocess"], *session.posargs)


@nox.session
def node_phase0(session: nox.Session) -> None:
    """Certify the Node.js Phase 0 adapter: the decisions it claims; the other kinds it does not claim."""
    _install(session)
    session.run(*SESSIONS["node_phase0"], *session.posargs)


@nox.session
def node_p1(session: nox.Session) -> None:
    """Certify the Node.js P1 worker (its one dependency installed with npm first)."""
    _install(session)
    if not (EXAMPLES / "node_worker" / "node_modules").is_dir():
        session.run("npm", "ci", "--prefix", str(EXAMPLES / "node_worker"), external=True)
    session.run(*SESSIONS["node_p1"], *session.posargs)


@nox.session
def broken(session: nox.Session) -> None:
    """Certify broken_runtime, which must fail: the session passes only when pytest exits 1."""
    _install(session)
    session.run(*SESSIONS["broken"], *session.posargs, success_codes=[1])
