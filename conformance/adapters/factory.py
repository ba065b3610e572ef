"""Making adapters from what a user names: ``reference``, a command line, or ``python:module:attribute``."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from resumekit.conformance._defaults import DEFAULT_TIMEOUT
from resumekit.conformance._process import MARKER
from resumekit.conformance.adapters.budget import StartBudget
from resumekit.conformance.adapters.interface import Adapter, AdapterStartError
from resumekit.conformance.adapters.process_adapter import ProcessAdapter
from resumekit.conformance.adapters.python_adapter import load_python

# ``python -m`` and ``-c`` put the working directory first on sys.path, where a user's own module could
# shadow the kit's; the child replaces that entry with the folder the kit itself was imported from
# before it imports anything of ours. The reference needs the standard library alone, so the child
# skips ``site`` (-S): processing the environment's .pth files was nearly half of an interpreter's
# start, and the crash schedule starts the reference once per kill. An editable install's packages
# are found by a finder that a .pth file imports (hatch_build.py); without site, the child imports it.
_REFERENCE_BOOT = (
    "import sys; sys.path[0] = {root!r}; {finder}from resumekit.reference.__main__ import main; sys.exit(main())"
)
_EDITABLE_FINDER = "__editable___resumekit_finder"


def reference_argv() -> list[str]:
    """The command that runs the bundled reference as a protocol server, never importing from the cwd."""
    import resumekit.reference

    package = Path(resumekit.reference.__file__).resolve().parent
    editable = sys.modules.get(_EDITABLE_FINDER)
    if package.parent.name != "resumekit" and editable is not None and editable.__file__ is not None:
        root, finder = Path(editable.__file__).parent, f"import {_EDITABLE_FINDER}; "
    else:
        root, finder = package.parent.parent, ""
    return [sys.executable, "-S", "-c", _REFERENCE_BOOT.format(root=str(root), finder=finder)]


def _package_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def split_command(command: str, *, windows: bool = os.name == "nt") -> list[str]:
    """Split an adapter command line the way the platform's shell would.

    Windows paths hold backslashes, which POSIX splitting would eat, so there the command is split
    in non-POSIX mode, which keeps the quotes around a quoted word: they are taken off here.
    """
    if not windows:
        return shlex.split(command)
    words = shlex.split(command, posix=False)
    return [w[1:-1] if len(w) >= 2 and w[0] == w[-1] == '"' else w for w in words]


def find_program(
    argv: list[str], *, windows: bool = os.name == "nt", which: Callable[[str], str | None] = shutil.which
) -> list[str]:
    """*argv* with its program found as the Windows shell finds it. CreateProcess tries only ``NAME.exe``, so
    the ``.cmd`` shims npm installs (``npx``, ``pnpm``, ``yarn``, ``tsx``) would not be found: a program named
    without an extension is looked up along PATH and PATHEXT (``shutil.which``). Elsewhere, and for a name
    with an extension or one not found (the start then says so), *argv* is unchanged."""
    if not windows or not argv or os.path.splitext(argv[0])[1]:
        return argv
    found = which(argv[0])
    return [found, *argv[1:]] if found else argv


AdapterFactory = Callable[[], "ProcessAdapter"]


def process_factory(
    spec: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    validate_messages: bool = True,
    budget: StartBudget | None = None,
) -> AdapterFactory:
    """A maker of fresh, unstarted process adapters for *spec* (``reference`` or a command line).

    Every adapter it makes shares one StartBudget (*budget*, or a new one): pass the budget of the
    adapter that runs the decision cases so that all processes of one run count their failures together.
    """
    if spec == "reference":
        argv, env, label = reference_argv(), _package_env(), "reference"
    else:
        argv = find_program(split_command(spec))
        if not argv:
            raise AdapterStartError("the adapter command is empty")
        env, label = None, spec
    shared = budget if budget is not None else StartBudget()

    def make() -> ProcessAdapter:
        return ProcessAdapter(
            argv, label=label, timeout=timeout, validate_messages=validate_messages, env=env, budget=shared
        )

    return make


def with_marker(factory: AdapterFactory, token: str) -> AdapterFactory:
    """A maker like *factory* whose adapters start with ``RESUMEKIT_CASE_TOKEN=token`` in their environment,
    and, on Linux, below a subreaper registered under *token*.

    The kit marks the adapter processes of one P1 case so that it can find, once the case is over, every
    process they started that outlived them (``_process.escaped``). The entry goes first, where a capped
    read of a process's environment sees it, and replaces any marker the kit's own environment carries.
    The subreaper (``_process.reapers``) finds what the marker cannot: a process whose environment was
    rebuilt or written over. Nothing of the adapter protocol changes: the adapter is asked nothing about it.
    """

    def make() -> ProcessAdapter:
        adapter = factory()
        inherited = adapter.env if adapter.env is not None else dict(os.environ)
        # Windows compares the names without case
        kept = {k: v for k, v in inherited.items() if (k.upper() if os.name == "nt" else k) != MARKER}
        adapter.env = {MARKER: token, **kept}
        adapter.case_token = token
        return adapter

    return make


def open_adapter(spec: str, *, timeout: float = DEFAULT_TIMEOUT, validate_messages: bool = True) -> Adapter:
    """Connect to the implementation named by *spec* and complete the handshake."""
    if spec.startswith("python:"):
        return load_python(spec[len("python:") :])
    adapter = process_factory(spec, timeout=timeout, validate_messages=validate_messages)()
    adapter.start()
    return adapter
