"""Golden fixtures as pytest items, so an implementer can certify a runtime inside their own pytest run.

Inert until asked: nothing is collected unless ``--resumekit`` (or ``--resumekit-adapter``) is given.
Each case becomes an item, ``golden/<path inside the golden set>::<case id>``, whose failure points at its
YAML line; the session ends with the verdict line `resumekit run` would print, and ``--resumekit-certify``
fails it unless that verdict is a certification. Under pytest-xdist every worker opens its own
implementation, all of them share the controller's seed, and the controller gives the verdict. This
entry module only declares the options: the machinery (the runner, the schemas, YAML) is imported when
a run asks for it, so the plugin costs every other pytest run next to nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the --resumekit options."""
    group = parser.getgroup("resumekit", "resumekit conformance")
    group.addoption("--resumekit", action="store_true", help="collect resumekit's golden fixtures as tests")
    group.addoption(
        "--resumekit-adapter",
        default=None,
        help="implementation to certify: 'reference', 'python:package.module:attribute' or a command line "
        "(default: the bundled reference, in-process)",
    )
    group.addoption(
        "--resumekit-profile", choices=["core", "strict"], default="strict", help="spec profile (default strict)"
    )
    group.addoption("--resumekit-timeout", type=float, default=10.0, help="seconds per adapter response")
    group.addoption(
        "--resumekit-seed", type=int, default=None, help="seed of the random crash schedule (default: random)"
    )
    group.addoption("--resumekit-kills", type=int, default=200, help="kills in the random crash schedule (default 200)")
    group.addoption(
        "--resumekit-kind",
        action="append",
        default=None,
        metavar="KIND",
        help="collect only these kinds (repeatable; makes a subset run); opt-in kinds such as the P1 campaigns "
        "only when named here",
    )
    group.addoption(
        "--resumekit-certify",
        action="store_true",
        help="fail the session unless the run certifies: a claimed case skipped or not run fails, and so does a "
        "session narrowed by -k, -m, node ids or --resumekit-kind",
    )
    group.addoption(
        "--resumekit-report-json",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the session's run as the JSON report of `resumekit run --report-json`",
    )


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("resumekit") or config.getoption("resumekit_adapter"))


def pytest_configure(config: pytest.Config) -> None:
    """Set the session up when asked for resumekit: the adapter, the seed, the golden folder to collect."""
    if _active(config):
        from resumekit.conformance import _pytest_golden, _pytest_verdict

        _pytest_golden.configure(config)
        # The hooks that gather the results and give the verdict, registered only for a resumekit session.
        config.pluginmanager.register(_pytest_verdict.VerdictPlugin(config), _pytest_verdict.NAME)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under pytest-xdist: every worker gets the controller's seed, so one run has one crash schedule."""
    if _active(node.config):
        from resumekit.conformance import _pytest_golden

        _pytest_golden.configure_node(node)


def pytest_report_header(config: pytest.Config) -> str | None:
    """The header line: adapter, profile and seed."""
    if not _active(config):
        return None
    from resumekit.conformance import _pytest_golden

    return _pytest_golden.report_header(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the adapter the session opened."""
    if _active(config):
        from resumekit.conformance import _pytest_golden

        _pytest_golden.unconfigure(config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    """Each fixture file of the golden folder as a collector of golden items."""
    if not _active(parent.config):
        return None
    from resumekit.conformance import _pytest_golden

    return _pytest_golden.collect_file(file_path, parent)
