"""The table of P1 rules (``conformance/p1/checks``): only the checks make mismatches, every rule lives in the
module of its section under its own name and is tested on written histories, and a rule's findings carry the
clauses its row lists."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance.p1.checks import campaigns, rules
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch
from tests.p1_stories import Told, judged

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "conformance"
P1 = KIT / "p1"
CHECKS = P1 / "checks"
# What the harness may ask of the checks: the table's loops, and the campaigns' checks, which judge the counts
# a crash matrix or a soak kept (each stamps its findings with its own name).
DOORS = {"resumekit.conformance.p1.checks.rules", "resumekit.conformance.p1.checks.campaigns"}


def _module(path: Path) -> str:
    return "resumekit." + ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _sources(folder: Path) -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(folder.rglob("*.py")):
        yield _module(path), path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _returns_mismatches(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether *node* is annotated to return a Mismatch, or a container or union of them."""
    return node.returns is not None and re.search(r"\bMismatch\b", ast.unparse(node.returns)) is not None


def _mismatch_functions() -> dict[tuple[str, str], Path]:
    """(module, name) -> file of every function of the kit annotated to return mismatches (methods included)."""
    found = {}
    for module, path, tree in _sources(KIT):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _returns_mismatches(node):
                found[(module, node.name)] = path
    return found


def _imported(tree: ast.Module, module: str) -> dict[str, str]:
    """Local name -> the dotted name it stands for, for every import of *tree* (relative ones resolved)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # ``import a.b`` binds ``a``
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _calls(tree: ast.Module, module: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every call in *tree* whose callee an import names: ``f()`` and ``m.f()``."""
    imported = _imported(tree, module)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        if isinstance(callee, ast.Name) and callee.id in imported:
            yield node.lineno, imported[callee.id]
        elif isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id in imported:
            yield node.lineno, f"{imported[callee.value.id]}.{callee.attr}"


def test_only_the_checks_package_defines_a_function_that_returns_a_mismatch() -> None:
    defined = _mismatch_functions()
    assert ("resumekit.conformance.p1.checks.rules", "judge") in defined  # the walk sees the table
    outside = sorted(f"{path.relative_to(ROOT)}: {name}" for (module, name), path in defined.items()
                     if path.is_relative_to(P1) and not path.is_relative_to(CHECKS))
    assert outside == [], "P1 modules outside checks/ that make mismatches"


def test_no_p1_module_outside_the_checks_makes_a_mismatch_or_calls_what_makes_one() -> None:
    makers = {f"{module}.{name}" for module, name in _mismatch_functions()}
    found = []
    for module, path, tree in _sources(P1):
        if path.is_relative_to(CHECKS):
            continue
        for line, callee in _calls(tree, module):
            if callee == "resumekit.conformance.results.Mismatch":
                found.append(f"{path.relative_to(ROOT)}:{line}: builds a Mismatch")
            elif callee in makers and callee.rpartition(".")[0] not in DOORS:
                found.append(f"{path.relative_to(ROOT)}:{line}: calls {callee}, which makes mismatches")
    assert found == []


def test_the_guard_sees_a_mismatch_made_outside_the_checks() -> None:
    # The two ways a harness module could judge: build one, or call a check directly instead of the table.
    tree = ast.parse(
        "from resumekit.conformance.results import Mismatch\n"
        "from resumekit.conformance.p1.checks import journal\n"
        "Mismatch('/x', 1, 2, 'JNL-1')\n"
        "journal.readable(None, None)\n"
    )
    assert list(_calls(tree, "resumekit.conformance.p1.world")) == [
        (3, "resumekit.conformance.results.Mismatch"),
        (4, "resumekit.conformance.p1.checks.journal.readable"),
    ]
    assert "resumekit.conformance.p1.checks.journal.readable" in {f"{m}.{n}" for m, n in _mismatch_functions()}


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda rule: rule.name)
def test_every_rule_is_named_for_its_section_and_check(rule: rules.Rule) -> None:
    section, _, name = rule.name.partition(".")
    assert (rule.check.__module__, rule.check.__name__) == (f"resumekit.conformance.p1.checks.{section}", name)
    assert rule.clauses and len(set(rule.clauses)) == len(rule.clauses)


def test_the_rules_names_are_unique_and_every_public_check_of_a_section_has_a_row() -> None:
    assert len(rules.BY_NAME) == len(rules.RULES)
    for path in sorted(CHECKS.glob("*.py")):
        if path.stem.startswith("_") or path.stem in ("rules", "story", "campaigns"):
            continue
        section = importlib.import_module(_module(path))
        for name, value in vars(section).items():
            if callable(value) and getattr(value, "__module__", None) == section.__name__ and not name.startswith("_"):
                hints = str(getattr(value, "__annotations__", {}).get("return"))
                if "Mismatch" in hints:
                    assert f"{path.stem}.{name}" in rules.BY_NAME, f"{path.stem}.{name} has no row in RULES"


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda rule: rule.name)
def test_every_rule_is_tested_on_a_written_history_in_its_sections_tests(rule: rules.Rule) -> None:
    section = rule.name.partition(".")[0]
    text = (ROOT / "tests" / f"test_p1_checks_{section}.py").read_text(encoding="utf-8")
    assert f'"{rule.name}"' in text, f"tests/test_p1_checks_{section}.py never judges {rule.name}"


def test_judged_holds_every_finding_to_its_rules_clauses(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every rule test runs its rule through ``judged``, which fails a finding of a clause the row does not list:
    # so every mismatch a test makes a rule find carries one of the rule's clauses.
    def strays(history: Story, scenario: Scenario) -> list[Mismatch]:
        return [Mismatch("/journal", "readable", "no", "JNL-2", "a finding of another clause")]

    row = dataclasses.replace(rules.BY_NAME["journal.readable"], check=strays)
    monkeypatch.setattr(rules, "BY_NAME", {**rules.BY_NAME, "journal.readable": row})
    with pytest.raises(AssertionError, match="JNL-2"):
        judged("journal.readable", Told())


def test_every_check_name_a_report_can_carry_is_listed() -> None:
    listed = [name for name, _, _ in rules.listing()]
    assert len(listed) == len(set(listed))
    assert {rule.name for rule in rules.RULES} | {name for name, _, _ in campaigns.CHECKS} <= set(listed)
    assert {"rules.capped", "rules.halt"} <= set(listed)
    # Each campaign check stamps its findings with its own listed name.
    found = [campaigns.matrix_visited_nothing("'*'", 0), campaigns.matrix_never_ends(3),
             campaigns.first_never_reached("before_push"), *campaigns.soak_vacuous(3, 0, 2, 0, 4)]
    for mismatch in found:
        listed = {name: clauses for name, clauses, _ in campaigns.CHECKS}
        assert mismatch.check in listed and mismatch.clause in listed[mismatch.check]


def test_an_empty_history_never_passes() -> None:
    # Nothing read is no evidence: without the journal's settings and the origins' refs a case cannot pass.
    found = rules.judge(Told().story(), Scenario({}, {}))
    assert [(m.check, m.clause) for m in found] == [("commit.origin_refs", "COMMIT-3"), ("journal.settings", "ADP-1")]
    assert [(m.check, m.clause) for m in rules.judge(Told().story("core"), Scenario({}, {}, "core"))] == [
        ("commit.origin_refs", "COMMIT-3"), ("journal.settings", "ADP-1")
    ]


def test_the_mismatches_of_one_clause_are_capped_with_one_that_counts_the_rest() -> None:
    # An origin holding 25 refs of the worker's own, and a journal the kit could not read once.
    made = {"refs/heads/main": "b" * 40}
    refs = {**made, **{f"refs/tags/t{n:02}": "c" * 40 for n in range(25)}}
    told = Told().by("journal", "unreadable", worker="w1", error="not a database")
    told.origins(origin_refs={"acme/w": refs}, kit_refs={"acme/w": made})
    found = [m for m in rules.judge(told.story(), Scenario({}, {})) if m.clause in ("COMMIT-3", "JNL-1")]
    assert len(found) == 26
    kept = rules.capped(found, limit=20)
    assert [m.pointer for m in kept if m.clause == "COMMIT-3"][:20] == [f"/origin/acme/w/refs/tags/t{n:02}"
                                                                        for n in range(20)]
    assert [m.clause for m in kept].count("JNL-1") == 1 and len(kept) == 22
    more = kept[-1]
    assert (more.clause, more.actual, more.check) == ("COMMIT-3", 5, "rules.capped")
    assert "5 more" in (more.note or "")
    assert rules.capped(found[:5]) == found[:5]
