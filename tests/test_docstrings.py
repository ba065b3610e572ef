"""Every public module, class and function of the kit says what it is for.

Public means reachable by a name without a leading underscore: a function or class of a module whose own
name has none, and the methods of such a class (dunder methods aside, and methods that override a base
class's documented one, such as a pytest hook's or ``__str__``). A reader of ``resumekit.conformance``
should never meet a public name whose purpose it has to guess from the body.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

KIT = ROOT / "conformance"
# Methods that implement a protocol of the standard library or of pytest, whose meaning is the protocol's.
PROTOCOL_METHODS = frozenset(
    {
        "do_GET", "do_POST", "do_PUT", "do_DELETE", "log_message", "handle", "run", "emit", "collect",
        "runtest", "repr_failure", "reportinfo", "case_started", "case_finished", "default", "format_help",
    }
)  # fmt: skip


def _missing(source: str, name: str) -> list[str]:
    """The public names of the module *source* (called *name* in messages) that have no docstring."""
    tree = ast.parse(source)
    found = [] if ast.get_docstring(tree) else [f"{name}: the module"]

    def visit(body: list[ast.stmt], owner: str, in_class: bool) -> None:
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith("_") or (in_class and node.name in PROTOCOL_METHODS):
                continue
            decorators = {ast.unparse(d) for d in node.decorator_list}
            if any(d.endswith((".setter", ".deleter")) or d == "overload" for d in decorators):
                continue
            if not ast.get_docstring(node):
                found.append(f"{name}:{node.lineno}: {owner}{node.name}")
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{owner}{node.name}.", True)

    visit(tree.body, "", False)
    return found


def _public_modules() -> list[Path]:
    return sorted(
        path
        for path in KIT.rglob("*.py")
        if not any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(KIT).parts)
    )


def test_every_public_name_of_the_kit_has_a_docstring() -> None:
    missing = [
        problem
        for path in _public_modules()
        for problem in _missing(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert missing == [], f"{len(missing)} public name(s) without a docstring:\n" + "\n".join(missing)


def test_the_check_finds_a_missing_docstring() -> None:
    source = (
        '"""A module."""\n\n\ndef shown():\n    return 1\n\n\nclass Kept:\n    """A class."""\n\n'
        "    def method(self):\n        pass\n\n    def _hidden(self):\n        pass\n"
    )
    assert _missing(source, "probe.py") == ["probe.py:4: shown", "probe.py:11: Kept.method"]
    assert _missing("def f():\n    pass\n", "bare.py") == ["bare.py: the module", "bare.py:1: f"]
