"""The control plane is one package whose modules meet only at public names (conformance/p1/control_plane/).

Read by ``ast``, nothing run: no module of the package takes a ``_private`` name from another module, by
``from m import _name`` or by ``m._name``; its ``__init__`` is a docstring and nothing else, so that each
name is imported from the module that defines it; each module imports only those above it in the order
its ``__init__`` maps them; the modules the package replaced are gone; and no module of the kit but the
faults' own asks which fault it holds (``isinstance``): a fault's behaviour is its class's, so that a new
fault is one class (shown with one the kit does not know, run through the core).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import resumekit.conformance
import resumekit.conformance.p1.control_plane as control_plane
from resumekit.conformance.p1.control_plane.kit import FAULT_TYPES, kit_script
from resumekit.conformance.p1.control_plane.requests import handle, prepare
from resumekit.conformance.p1.control_plane.state import Fault, Log, Outcome, Request, State, error_answer

PACKAGE = Path(control_plane.__file__ or ".").resolve().parent
P1 = PACKAGE.parent
KIT = Path(resumekit.conformance.__file__ or ".").resolve().parent
FAULT_MODULES = ("faults.py", "claim_faults.py")
# The package's modules, each importing only those before it (its __init__ maps them in this order).
ORDER = (
    "state", "lifecycle", "faults", "claim_faults", "worker_endpoints", "kit_endpoints", "kit", "requests", "server",
)  # fmt: skip


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str) -> Iterator[tuple[int, str]]:
    """Each private name *source* takes from another module: ``from m import _x``, or ``m._x`` where ``m``
    was bound by an import."""
    tree = ast.parse(source)
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _is_private(alias.name):
                    yield node.lineno, f"from {'.' * node.level}{node.module or ''} import {alias.name}"
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_private(node.attr)
        ):
            yield node.lineno, f"{node.value.id}.{node.attr}"


def _modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


def test_the_package_holds_the_control_plane() -> None:
    names = {path.stem for path in _modules()}
    assert {"__init__", "state", "lifecycle", "faults", "kit", "requests", "server"} <= names
    assert sorted(path.name for path in P1.glob("cp_*.py")) == []
    assert not (P1 / "control_plane.py").exists()


def test_no_module_of_the_package_imports_a_private_name() -> None:
    found = [
        f"{path.name}:{line}: {what}"
        for path in _modules()
        for line, what in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_packages_init_is_its_map_and_nothing_else() -> None:
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree)
    assert docstring is not None and "server.py" in docstring and "state.py" in docstring
    assert len(tree.body) == 1, "the package's __init__ holds its docstring only: import names where they live"
    assert not [name for name in vars(control_plane) if not name.startswith("__") and name not in _submodules()]


def _submodules() -> set[str]:
    # Importing a submodule binds its name on the package: those are not re-exports.
    return {path.stem for path in _modules()}


def package_imports(source: str) -> set[str]:
    """The modules of the package that *source* imports, ``if TYPE_CHECKING:`` included."""
    prefix = control_plane.__name__ + "."
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name[len(prefix):] for name in found if name.startswith(prefix) and name[len(prefix):] in ORDER}


def test_each_module_imports_only_those_above_it() -> None:
    assert sorted(ORDER) == sorted(path.stem for path in _modules() if path.stem != "__init__")
    found = {
        name: sorted(package_imports((PACKAGE / f"{name}.py").read_text(encoding="utf-8")) - set(ORDER[:at]))
        for at, name in enumerate(ORDER)
    }
    assert {name: below for name, below in found.items() if below} == {}


def test_the_check_finds_private_imports_both_ways() -> None:
    source = (
        "from resumekit.conformance.p1.control_plane.state import Log, _take\n"
        "from . import faults as F\n"
        "import resumekit.conformance.p1.control_plane.lifecycle as life\n"
        "def f(self):\n"
        "    self._lock\n"
        "    F._nth(1)\n"
        "    F.__name__\n"
        "    return life._grant\n"
    )
    assert sorted(private_imports(source)) == [
        (1, "from resumekit.conformance.p1.control_plane.state import _take"),
        (6, "F._nth"),
        (8, "life._grant"),
    ]


def fault_type_tests(source: str, names: set[str]) -> Iterator[tuple[int, str]]:
    """Each ``isinstance`` call of *source* whose classes name one of *names* (``F.Answer`` or ``Answer``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            for part in ast.walk(node.args[1]) if len(node.args) == 2 else ():
                name = part.attr if isinstance(part, ast.Attribute) else getattr(part, "id", None)
                if name in names:
                    yield node.lineno, name


def test_no_module_but_the_faults_asks_which_fault_it_holds() -> None:
    assert len(FAULT_TYPES) == 14
    found = [
        f"{path.relative_to(KIT)}:{line}: isinstance(..., {name})"
        for path in sorted(KIT.rglob("*.py"))
        if not (path.parent == PACKAGE and path.name in FAULT_MODULES)
        for line, name in fault_type_tests(path.read_text(encoding="utf-8"), set(FAULT_TYPES))
    ]
    assert found == []


def test_the_check_finds_a_fault_asked_for_by_type() -> None:
    source = (
        "if isinstance(fault, (F.ReplayAttempt, F.ConflictingIdentity)):\n"
        "    pass\n"
        "ok = isinstance(value, bool) or isinstance(fault, MoveClock)\n"
    )
    assert list(fault_type_tests(source, set(FAULT_TYPES))) == [
        (1, "ReplayAttempt"),
        (1, "ConflictingIdentity"),
        (3, "MoveClock"),
    ]


@dataclass(frozen=True, slots=True)
class Teapot(Fault):
    """A fault the kit does not know: it answers the nth request to the clock 418."""

    nth: int = 1

    def shapes_answer(self, endpoint: str, subject: str | None) -> bool:
        return endpoint == "clock"

    def shape(self, state: State, done: Outcome | None) -> Outcome:
        return Outcome(*error_answer(state, 418, "teapot", "short and stout"), [])


def test_a_new_fault_is_one_class_and_the_core_runs_it() -> None:
    state = State(now_ms=1_000, ttl_ms=30_000, retry_after_ms=20, validate=lambda uri, instance: None)
    log = Log(state, None)
    assert kit_script(state, log, Teapot(nth=2), {}) is None
    assert [entry["fault"] for entry in log.entries] == [{"fault": "Teapot", "nth": 2}]
    answers = []
    for _ in range(3):
        request = Request("GET", "v1/clock", "", {}, b"", "w1")
        outcome = handle(state, request, prepare(state, request), {}, [])
        logged = [entry.get("fault") for entry in outcome.entries if entry["kind"] == "request"]
        answers.append((outcome.status, logged))
    assert answers == [(200, [None]), (418, [{"fault": "Teapot", "nth": 2}]), (200, [None])]
    assert state.faults == []
