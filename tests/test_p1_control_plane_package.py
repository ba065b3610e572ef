"""The control plane is one package whose modules meet only at public names (conformance/p1/control_plane/).

Read by ``ast``, nothing run: no module of the package takes a ``_private`` name from another module, by
``from m import _name`` or by ``m._name``; its ``__init__`` is a docstring and nothing else, so that each
name is imported from the module that defines it; and the modules the package replaced are gone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import resumekit.conformance.p1.control_plane as control_plane

PACKAGE = Path(control_plane.__file__ or ".").resolve().parent
P1 = PACKAGE.parent


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
