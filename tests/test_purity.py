"""The kit's rules stay pure: the modules below import nothing that reads or writes files, starts or signals
processes, opens sockets or reads a clock, directly or through any of the kit's own modules they import.

The rules live in these modules and the I/O in thin shells around them (``journal_reader`` and ``evidence``
around ``model``, the control plane's ``server`` around the rest of its package, the harnesses around the
checks), so every rule can be tested on plain values. The walk is static: ``ast`` over each module's source
and, transitively, over the source of every ``resumekit`` module it imports, and of every package ``__init__``
an import runs. The walk imports none of them, so a module that would do I/O at import time is caught
without doing it.

What is judged, and how:

- the standard library by the name a module takes from it (its own internals are not walked: ``json``
  imports ``codecs``, but ``json.loads`` reads no file); ``FORBIDDEN`` below names the modules refused, with
  the reason, and ``pathlib`` and ``random`` have a rule of their own (``PURE_PATHS``, ``SEEDED_RANDOM``);
- anything outside the standard library and the kit is refused: the walk cannot see into it;
- an import counts wherever it is written, inside a function too (a lazy import runs all the same), except
  under ``if TYPE_CHECKING:``, which never runs; ``__future__`` and ``typing`` are fine;
- calling ``open``, ``print``, ``input``, ``breakpoint``, ``exec``, ``eval`` or ``__import__`` is refused
  (``FORBIDDEN_CALLS``): I/O, or code the walk cannot follow;
- a package ``__init__`` counts like any import, except where ``EXEMPT_PACKAGES`` names it as the shell
  around the pure module inside it, with the reason (and a test that the exemption is still needed).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

# The modules that hold the kit's rules and must do no I/O.
PURE_MODULES = (
    "resumekit.conformance.canonical",
    "resumekit.conformance.results",
    "resumekit.conformance.phase0.ledger_damage",
    "resumekit.conformance.phase0.plan_checks",
    "resumekit.conformance.phase0.grades",
    "resumekit.conformance.p1.canonical",
    "resumekit.conformance.p1.gates",
    "resumekit.conformance.p1.model",
    "resumekit.conformance.powerloss.model",
    "resumekit.conformance.events",
    "resumekit.conformance.p1.views",
    # every module of the P1 rules, whatever is added there: the package is pure by its design
    *sorted(
        f"resumekit.conformance.p1.checks.{path.stem}"
        for path in (Path(__file__).resolve().parents[1] / "conformance" / "p1" / "checks").glob("*.py")
        if path.stem != "__init__"
    ),
    "resumekit.conformance.p1.checks",
    # every module of the control plane but its HTTP shell, whatever is added there: its core is pure by design
    *sorted(
        f"resumekit.conformance.p1.control_plane.{path.stem}"
        for path in (Path(__file__).resolve().parents[1] / "conformance" / "p1" / "control_plane").glob("*.py")
        if path.stem not in ("__init__", "server")
    ),
    "resumekit.conformance.p1.control_plane",
)

# Standard-library modules a pure module must not import, each with what it does (a dotted name refuses its
# submodules too): read as "imports 'sqlite3', which reads or writes files (a database)".
_FILES = "reads or writes files"
_PROCESSES = "starts, signals or waits on processes or threads"
_DYNAMIC = "imports what this walk cannot follow"
_NETWORK = "opens sockets"
_CLOCK = "reads a clock"
_ENTROPY = "draws entropy from the operating system"
_HOST = "reads the host's users or settings"
FORBIDDEN: Mapping[str, str] = {
    "os": _FILES + ", the environment and processes",
    "io": _FILES + " (open, streams)",
    "shutil": _FILES,
    "tempfile": _FILES,
    "glob": _FILES,
    "fileinput": _FILES,
    "filecmp": _FILES,
    "mmap": _FILES,
    "fcntl": _FILES,
    "msvcrt": _FILES,
    "sqlite3": _FILES + " (a database)",
    "dbm": _FILES + " (a database)",
    "shelve": _FILES + " (a database)",
    "zipfile": _FILES + " (archives)",
    "tarfile": _FILES + " (archives)",
    "gzip": _FILES + " (gzip.open)",
    "bz2": _FILES + " (bz2.open)",
    "lzma": _FILES + " (lzma.open)",
    "sys": "holds the interpreter's streams, arguments and exit",
    "subprocess": _PROCESSES,
    "multiprocessing": _PROCESSES,
    "concurrent": _PROCESSES,
    "threading": _PROCESSES,
    "_thread": _PROCESSES,
    "signal": _PROCESSES,
    "atexit": _PROCESSES + " (at exit)",
    "pty": _PROCESSES,
    "resource": _PROCESSES + " (their limits)",
    "ctypes": "calls foreign code",
    "importlib": _DYNAMIC,
    "runpy": _DYNAMIC,
    "pkgutil": _DYNAMIC,
    "socket": _NETWORK,
    "socketserver": _NETWORK,
    "ssl": _NETWORK,
    "select": "waits on sockets and files",
    "selectors": "waits on sockets and files",
    "asyncio": _NETWORK + " and runs an event loop",
    "http": _NETWORK,
    "urllib.request": _NETWORK,
    "urllib.robotparser": _NETWORK,
    "ftplib": _NETWORK,
    "smtplib": _NETWORK,
    "poplib": _NETWORK,
    "imaplib": _NETWORK,
    "xmlrpc": _NETWORK,
    "webbrowser": "starts a browser",
    "time": _CLOCK,
    "datetime": _CLOCK + " (datetime.now, date.today)",
    "sched": _CLOCK,
    "zoneinfo": _FILES + " (the time zone database)",
    "secrets": _ENTROPY,
    "uuid": _ENTROPY + " (uuid4) or " + _CLOCK + " (uuid1)",
    "platform": _HOST,
    "getpass": _HOST,
    "pwd": _HOST,
    "grp": _HOST,
    "locale": _HOST,
    "logging": "writes logs to files and streams",
}
# pathlib: only its pure paths, which compute with names and never touch the file system, may be taken,
# by name (``from pathlib import PurePath``); ``Path`` and the module itself are refused.
PURE_PATHS = frozenset({"PurePath", "PurePosixPath", "PureWindowsPath"})
# random: only a generator seeded by the caller, ``random.Random(seed)`` (or ``Random(seed)`` taken by name);
# the module's own functions draw from a generator seeded from the operating system at import.
SEEDED_RANDOM = "Random"
# Builtins that do I/O or run code the walk cannot see, refused when called.
_UNSEEN = "runs code this walk cannot follow"
FORBIDDEN_CALLS: Mapping[str, str] = {
    "open": _FILES,
    "print": "writes to a stream",
    "input": "reads a stream",
    "breakpoint": "stops for a debugger",
    "exec": _UNSEEN,
    "eval": _UNSEEN,
    "__import__": _DYNAMIC,
}
_FINE = frozenset({"__future__", "typing"})

# A package whose ``__init__`` is the shell of the pure module inside it: importing the module runs it, but
# the module's own source and imports are still walked. Not exempt when reached from any other module.
EXEMPT_PACKAGES: Mapping[str, tuple[str, str]] = {
    "resumekit.conformance.powerloss.model": (
        "resumekit.conformance.powerloss",
        "the package's __init__ re-exports the FUSE layer's shell (layer.py) from a module __getattr__, so "
        "importing the model runs none of it; the walk counts the lazy import all the same",
    ),
}

KIT = "resumekit"


@dataclass(frozen=True, slots=True)
class Source:
    """A kit module's source text, and whether it is a package's ``__init__``."""

    text: str
    is_package: bool


SourceOf = Callable[[str], Source | None]


@dataclass(frozen=True, slots=True)
class Finding:
    """One impurity: the import chain from the pure module to the module at fault, and what it does."""

    chain: tuple[str, ...]
    line: int
    what: str

    def __str__(self) -> str:
        return f"{' -> '.join(self.chain)} (line {self.line}): {self.what}"


@dataclass(frozen=True, slots=True)
class Walk:
    """What a walk found, and every kit module it read on the way."""

    findings: tuple[Finding, ...]
    reached: frozenset[str]


# ---------------------------------------------------------------- the checker


def _forbidden(name: str) -> str | None:
    """Why the standard-library module *name* is refused, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        reason = FORBIDDEN.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that can run: the bodies of ``if TYPE_CHECKING:`` are left out (their ``else`` is not).

    Annotations are left out too: naming a class in one calls nothing, and under ``from __future__ import
    annotations`` it is not even evaluated.
    """
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        annotations = _annotations_of(node)
        stack.extend(child for child in ast.iter_child_nodes(node) if not any(child is a for a in annotations))


def _annotations_of(node: ast.AST) -> tuple[ast.AST, ...]:
    """The annotation subtrees directly under *node*: of an argument, a return, an annotated assignment."""
    if isinstance(node, ast.arg):
        return (node.annotation,) if node.annotation is not None else ()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return (node.returns,) if node.returns is not None else ()
    if isinstance(node, ast.AnnAssign):
        return (node.annotation,)
    return ()


def _absolute(module: str | None, level: int, name: str, is_package: bool) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in module *name*."""
    if level == 0:
        return module or ""
    parts = name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _judge_std(name: str) -> str | None:
    """Why importing the standard-library module *name* (as ``import name``) is refused, or None."""
    top = name.split(".")[0]
    if top in _FINE:
        return None
    if top not in sys.stdlib_module_names:
        return f"imports {name!r}, which is neither the standard library nor the kit: the walk cannot see into it"
    if top == "pathlib":
        return f"imports {name!r}; take only its pure paths by name ({', '.join(sorted(PURE_PATHS))})"
    reason = _forbidden(name)
    return None if reason is None else f"imports {name!r}, which {reason}"


def _random_uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every use of ``random`` but a call of ``Random`` with a seed: the OS-seeded generator."""
    nodes = list(_run_time_nodes(tree))
    modules: set[str] = set()
    classes: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "random")
        elif isinstance(node, ast.ImportFrom) and node.module == "random" and node.level == 0:
            classes.update(alias.asname or alias.name for alias in node.names if alias.name == SEEDED_RANDOM)
    if not modules and not classes:
        return

    def is_generator(func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute):
            return isinstance(func.value, ast.Name) and func.value.id in modules and func.attr == SEEDED_RANDOM
        return isinstance(func, ast.Name) and func.id in classes

    seeded: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Call) and is_generator(node.func):
            seed = node.args[0] if node.args else (node.keywords[0].value if node.keywords else None)
            if seed is not None and not (isinstance(seed, ast.Constant) and seed.value is None):
                seeded.add(id(node.func))
    for node in nodes:
        if id(node) in seeded:
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            what = (
                "random.Random without a seed is seeded from the OS"
                if node.attr == SEEDED_RANDOM
                else f"random.{node.attr} draws from the generator seeded from the OS"
            )
            yield node.lineno, what
        elif isinstance(node, ast.Name) and node.id in classes and isinstance(node.ctx, ast.Load):
            yield node.lineno, f"{node.id} without a seed is seeded from the OS"


@functools.cache
def _parse(text: str, name: str) -> ast.Module:
    # Every pure module's walk reads the same kit modules: each is parsed once (the trees are only read).
    return ast.parse(text, filename=name)


def _module_findings(name: str, source: Source, source_of: SourceOf) -> tuple[list[tuple[int, str]], list[str]]:
    """What is wrong in one module's own source, and the kit modules (with packages) its imports run."""
    try:
        tree = _parse(source.text, name)
    except SyntaxError as error:
        return [(error.lineno or 0, f"cannot be parsed: {error.msg}")], []
    found: list[tuple[int, str]] = []
    kit: list[str] = []

    def take(module: str, line: int) -> None:
        if module == KIT or module.startswith(KIT + "."):
            if source_of(module) is None:
                found.append((line, f"imports {module!r}, a kit module the walk cannot find"))
            else:
                kit.append(module)
            return
        problem = _judge_std(module)
        if problem is not None:
            found.append((line, problem))

    for node in _run_time_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name != "random":  # judged by its uses
                    take(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node.module, node.level, name, source.is_package)
            names = [alias.name for alias in node.names]
            if module == "pathlib":
                found.extend(
                    (node.lineno, f"takes pathlib.{taken}; only its pure paths do no I/O")
                    for taken in names
                    if taken not in PURE_PATHS
                )
            elif module == "random":
                found.extend(
                    (node.lineno, f"takes random.{taken}, which draws from the generator seeded from the OS")
                    for taken in names
                    if taken != SEEDED_RANDOM
                )
            elif module.startswith(KIT + ".") or module == KIT:
                take(module, node.lineno)
                kit.extend(f"{module}.{taken}" for taken in names if source_of(f"{module}.{taken}") is not None)
            else:
                take(module, node.lineno)
                for taken in names:
                    reason = _forbidden(f"{module}.{taken}") if module.split(".")[0] not in _FINE else None
                    if reason is not None and _forbidden(module) is None:
                        found.append((node.lineno, f"imports '{module}.{taken}', which {reason}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append((node.lineno, f"calls {node.func.id}(), which {FORBIDDEN_CALLS[node.func.id]}"))
    found.extend(_random_uses(tree))
    return sorted(found), kit


def _packages(module: str) -> list[str]:
    """The packages importing *module* runs first, outermost first (``a``, ``a.b`` for ``a.b.c``)."""
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def walk(root: str, source_of: SourceOf, exempt: Mapping[str, tuple[str, str]] = EXEMPT_PACKAGES) -> Walk:
    """Walk *root*'s imports through the kit, breadth first, so each finding names a shortest chain."""
    skipped = {exempt[root][0]} if root in exempt else set()
    chains: dict[str, tuple[str, ...]] = {root: (root,)}
    queue = deque([root])
    findings: list[Finding] = []
    while queue:
        name = queue.popleft()
        source = source_of(name)
        if source is None:
            findings.append(Finding(chains[name], 0, "is not a kit module the walk can find"))
            continue
        problems, imported = _module_findings(name, source, source_of)
        findings.extend(Finding(chains[name], line, what) for line, what in problems)
        for module in [*_packages(name), *imported]:
            if module not in chains and module not in skipped:
                chains[module] = (*chains[name], module)
                queue.append(module)
    return Walk(tuple(findings), frozenset(chains))


@functools.cache
def _installed(name: str) -> Source | None:
    """The source of the kit module *name* as this interpreter would import it, read from its file."""
    parts = name.split(".")
    if parts[0] != KIT:
        return None
    if len(parts) == 1:
        return Source("", True)  # the namespace package: no code of its own
    # The folder of resumekit.conformance or resumekit.reference, in a wheel or in a checkout installed
    # editable (whose `resumekit` has no folder); finding the spec runs none of the package's code.
    top = importlib.util.find_spec(".".join(parts[:2]))
    for base in (top.submodule_search_locations or []) if top is not None else []:
        path = Path(base, *parts[2:])
        if (path / "__init__.py").is_file():
            return Source((path / "__init__.py").read_text(encoding="utf-8"), True)
        if path.with_suffix(".py").is_file():
            return Source(path.with_suffix(".py").read_text(encoding="utf-8"), False)
    return None


def _synthetic(modules: Mapping[str, str]) -> SourceOf:
    """A source lookup over made-up modules; a name that prefixes others is a package, empty if not given."""

    def source_of(name: str) -> Source | None:
        is_package = any(other.startswith(name + ".") for other in modules)
        if name in modules:
            return Source(modules[name], is_package)
        return Source("", True) if is_package else None

    return source_of


def _report(found: Walk) -> str:
    return "\n".join(str(finding) for finding in found.findings)


# ---------------------------------------------------------------- the kit's pure modules


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_imports_nothing_that_does_io(module: str) -> None:
    found = walk(module, _installed)
    assert not found.findings, f"{module} is not pure:\n{_report(found)}"


def test_the_walk_follows_the_kits_own_imports() -> None:
    reached = walk("resumekit.conformance.p1.checks.rules", _installed).reached
    for module in (
        "resumekit.conformance.p1.model",
        "resumekit.conformance.p1.control_plane.state",
        "resumekit.conformance.p1.control_plane",
        "resumekit.conformance.p1.canonical",
        "resumekit.conformance.results",
        "resumekit.conformance.p1",
        "resumekit.conformance",
    ):
        assert module in reached
    control_plane = "resumekit.conformance.p1.control_plane"
    rules = walk(control_plane + ".requests", _installed).reached
    assert {f"{control_plane}.{name}" for name in ("worker_endpoints", "kit_endpoints", "faults", "state")} <= rules
    assert control_plane + ".lifecycle" in PURE_MODULES and control_plane + ".server" not in PURE_MODULES


def test_every_exemption_is_still_needed() -> None:
    for module, (package, _) in EXEMPT_PACKAGES.items():
        assert module in PURE_MODULES
        assert walk(package, _installed, exempt={}).findings, f"{package} is pure now: drop its exemption"


# ---------------------------------------------------------------- the checker itself


def test_the_checker_names_a_direct_import_of_io() -> None:
    source = "import os\nimport time as clock\nfrom datetime import datetime\n"
    found = walk("resumekit.fake.rules", _synthetic({"resumekit.fake.rules": source}))
    assert [(f.chain, f.line) for f in found.findings] == [(("resumekit.fake.rules",), n) for n in (1, 2, 3)]
    assert ["'os'" in found.findings[0].what, "'time'" in found.findings[1].what] == [True, True]
    assert "'datetime'" in found.findings[2].what


def test_the_checker_follows_a_kit_import_to_sqlite3() -> None:
    modules = {
        "resumekit.fake.rules": "from __future__ import annotations\nfrom resumekit.fake import model\n",
        "resumekit.fake.model": "from resumekit.fake.store import Row\n",
        "resumekit.fake.store": '"""A store."""\n\nimport sqlite3\n\nRow = dict\n',
    }
    found = walk("resumekit.fake.rules", _synthetic(modules))
    assert [str(f) for f in found.findings] == [
        "resumekit.fake.rules -> resumekit.fake.model -> resumekit.fake.store (line 3): imports 'sqlite3', which "
        "reads or writes files (a database)"
    ]


def test_the_checker_counts_package_inits_relative_and_lazy_imports() -> None:
    modules = {
        "resumekit.fake.pkg": "import subprocess\n",
        "resumekit.fake.pkg.rules": "from . import helpers\n\ndef later() -> None:\n    import socket\n",
        "resumekit.fake.pkg.helpers": "from .deep.clock import now\n",
        "resumekit.fake.pkg.deep.clock": "from time import monotonic as now\n",
    }
    found = walk("resumekit.fake.pkg.rules", _synthetic(modules))
    assert {(f.chain, f.line) for f in found.findings} == {
        (("resumekit.fake.pkg.rules", "resumekit.fake.pkg"), 1),
        (("resumekit.fake.pkg.rules", "resumekit.fake.pkg.helpers", "resumekit.fake.pkg.deep.clock"), 1),
        (("resumekit.fake.pkg.rules",), 4),
    }
    # An exempt package is skipped only as the pure module's own package; the rest is still walked.
    exempt = {"resumekit.fake.pkg.rules": ("resumekit.fake.pkg", "its shell")}
    assert len(walk("resumekit.fake.pkg.rules", _synthetic(modules), exempt).findings) == 2
    assert len(walk("resumekit.fake.pkg.helpers", _synthetic(modules), exempt).findings) == 2


def test_the_checker_allows_what_never_runs_or_reads() -> None:
    source = (
        "from __future__ import annotations\n"
        "import hashlib\n"
        "import json\n"
        "from pathlib import PurePath, PurePosixPath\n"
        "from typing import TYPE_CHECKING\n"
        "from urllib.parse import unquote\n"
        "if TYPE_CHECKING:\n"
        "    import os\n"
        "    from pathlib import Path\n"
        "import random\n"
        "def draw(seed: int) -> float:\n"
        "    return pick(random.Random(seed))\n"
        "def pick(rng: random.Random) -> random.Random:\n"
        "    kept: random.Random = rng\n"
        "    return kept\n"
    )
    assert walk("resumekit.fake.rules", _synthetic({"resumekit.fake.rules": source})).findings == ()


def test_the_checker_refuses_the_os_seeded_random_paths_calls_and_other_packages() -> None:
    source = (
        "import random\n"
        "from random import Random, choice\n"
        "from pathlib import Path, PurePath\n"
        "import pathlib\n"
        "from urllib import request\n"
        "import jsonschema\n"
        "import resumekit.fake.missing\n"
        "x = random.random()\n"
        "y = random.Random()\n"
        "z = Random(None)\n"
        "open('journal')\n"
        "print(x)\n"
    )
    found = walk("resumekit.fake.rules", _synthetic({"resumekit.fake.rules": source}))
    lines = sorted(f.line for f in found.findings)
    assert lines == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], _report(found)


# ---------------------------------------------------------------- each name is taken from where it is made


READERS = {
    "evidence": ("read_cache", "expected_result", "listing", "tree_state", "tree_digest"),
    "journal_reader": ("JournalUnreadable", "read_journal", "journal_header", "read_journal_log"),
}


def _reexports(source: str) -> list[str]:
    """The names a module's ``__all__`` lists that it imports rather than defines."""
    tree = ast.parse(source)
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    listed = [
        element.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.List | ast.Tuple)
        for element in node.value.elts
        if isinstance(element, ast.Constant) and isinstance(element.value, str)
    ]
    return [name for name in listed if name in imported]


def test_no_module_of_p1_passes_on_a_name_it_imports() -> None:
    # A caller imports a name from the module that makes it: no front module stands between them (issue 35).
    package = Path(__file__).resolve().parent.parent / "conformance" / "p1"
    found = {
        path.relative_to(package).as_posix(): names
        for path in sorted(package.rglob("*.py"))
        if (names := _reexports(path.read_text(encoding="utf-8")))
    }
    assert found == {}
    assert _reexports("from a import b, c\nimport d\n__all__ = ['b', 'd', 'e']\n") == ["b", "d"]  # it can see one


def test_the_control_plane_names_the_schemas_as_they_are() -> None:
    from resumekit.conformance import schemas
    from resumekit.conformance.p1.control_plane import state

    # The control plane's state spells the schemas' base itself rather than import the module that reads them.
    assert state.TASK_SCHEMA == schemas.P1_TASK
    assert state.SUBMISSION_SCHEMA == schemas.BASE + "p1/result-submission.json"
    assert state._SCHEMA_BASE == schemas.BASE


@pytest.mark.parametrize("name", sorted(READERS))
def test_the_readers_keep_every_name_others_take_from_them(name: str) -> None:
    module = importlib.import_module(f"resumekit.conformance.p1.{name}")
    assert [reader for reader in READERS[name] if not callable(getattr(module, reader, None))] == []
    assert set(module.__all__) <= set(dir(module))
