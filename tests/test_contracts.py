"""The registry of contracts: a third contract, registered by a test, goes through every command and report.

The toy contract (``tests/toy``) has one kind, one fixture file kind and one summary table of its own.
Nothing outside ``tests/`` knows it: if the kit named its contracts anywhere, this is where it would show.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance import contracts, schemas
from resumekit.conformance.cli import COMMANDS, EXIT_NOT_CERTIFIED, EXIT_SUBSET, _parser
from resumekit.conformance.contracts import Contract, ContractError, Kind
from tests.support import ROOT
from tests.toy.contract import CONTRACT, GOLDEN

ADAPTER = "python:resumekit.reference:build_resume_plan"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Contract]:
    """The toy contract, registered for one test."""
    monkeypatch.delenv("RESUMEKIT_TOY_IMPL", raising=False)
    contracts.register(CONTRACT)
    try:
        yield CONTRACT
    finally:
        contracts.unregister(CONTRACT.name)


def _cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_the_built_in_contracts_are_registered_in_order() -> None:
    names = [contract.name for contract in contracts.registered()]
    assert names[:2] == ["phase0", "p1"]
    assert contracts.kind_names()[:6] == ("decision", "crash", "ledger-fault", "schedule", "p1", "p1-campaign")
    assert contracts.opt_in_kinds() == ("p1-campaign",)


def test_a_clash_of_names_kinds_or_file_kinds_is_refused(toy: Contract) -> None:
    with pytest.raises(ContractError, match="'toy' is registered already"):
        contracts.register(toy)
    again = Contract(
        name="toy2", title="Toy 2", kinds=(Kind("decision", ()),), files=(), case_types=(), spec_files=(),
        runners=lambda context: {},
    )  # fmt: skip
    with pytest.raises(ContractError, match=r"reuses \['decision'\] of contract 'phase0'"):
        contracts.register(again)


def test_list_show_and_validate_know_the_toy(toy: Contract) -> None:
    code, out, err = _cli("list", "--golden", str(GOLDEN))
    assert code == 0, err
    assert re.search(r"^toy-three-numbers\s+toy-sum\s+core\s+TOY-1$", out, re.MULTILINE), out
    assert out.rstrip().endswith("3 case(s)")
    code, out, _ = _cli("list", "--golden", str(GOLDEN), "--clauses")
    assert re.search(r"^TOY-2\s+1 case\(s\)\s+toy-nothing$", out, re.MULTILINE), out
    code, out, err = _cli("show", "toy-nothing", "--golden", str(GOLDEN))
    assert code == 0, err
    assert "The sum of no numbers is zero." in out and "sums.yaml" in out
    code, out, err = _cli("validate", "--golden", str(GOLDEN))
    assert code == 0, err
    assert "1 fixture file(s), 3 case(s), 0 problem(s)" in out


def test_validate_names_the_line_of_a_broken_toy_file(toy: Contract, tmp_path: Path) -> None:
    broken = tmp_path / "golden" / "toy" / "sums.yaml"
    broken.parent.mkdir(parents=True)
    text = (GOLDEN / "toy" / "sums.yaml").read_text(encoding="utf-8").replace("sum: 0", "sum: zero")
    broken.write_text(text, encoding="utf-8")
    code, _, err = _cli("validate", "--golden", str(tmp_path / "golden"))
    assert code == EXIT_NOT_CERTIFIED
    assert "toy/sums.yaml:" in err and "case 'toy-nothing'" in err and "/cases/1/sum" in err, err


def _reports(folder: Path) -> list[str]:
    names = ("--report-json", "--junit", "--summary-md", "--report-html", "--badge")
    files = ("r.json", "junit.xml", "summary.md", "report.html", "badge.json")
    return [arg for name, file in zip(names, files, strict=True) for arg in (name, str(folder / file))]


def test_run_and_every_report_carry_the_toy_and_its_table(toy: Contract, tmp_path: Path) -> None:
    code, out, err = _cli("run", "--golden", str(GOLDEN), "--adapter", ADAPTER, *_reports(tmp_path))
    assert code == EXIT_SUBSET, out + err  # another golden folder: a subset run, never a certification
    assert "toy-sum" in out and "Toy groups" not in out  # the text table is headed by its row label
    assert re.search(r"^toy group\s+verdict", out, re.MULTILINE), out
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["summary"]["passed"] == 3
    (table,) = document["summaries"]
    assert (table["contract"], table["key"], table["title"]) == ("toy", "groups", "Toy groups")
    assert {row["name"]: row["verdict"] for row in table["rows"]} == {"small": "passed", "large": "passed"}
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert len(junit.findall(".//testsuite[@name='resumekit.toy-sum']/testcase")) == 3
    assert len(junit.findall(".//testsuite[@name='resumekit.toy-groups']/testcase")) == 2
    assert "| toy group | verdict |" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="toy-groups">Toy groups</h2>' in html and 'id="groups"' in html
    badge = json.loads((tmp_path / "badge.json").read_text(encoding="utf-8"))
    assert badge["message"] == "subset 3/3 passed, not certified"


def test_a_failing_toy_fails_its_row_and_the_run(
    toy: Contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESUMEKIT_TOY_IMPL", "wrong")
    report = tmp_path / "r.json"
    code, out, _ = _cli("run", "--golden", str(GOLDEN), "--adapter", ADAPTER, "--report-json", str(report))
    assert code == EXIT_NOT_CERTIFIED, out
    assert "[TOY-1]" in out
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    rows = {row["name"]: row for row in document["summaries"][0]["rows"]}
    assert rows["small"]["verdict"] == "failed" and rows["small"]["failed"] == ["toy-three-numbers"]
    assert rows["large"]["verdict"] == "failed"


def test_shards_of_a_toy_run_merge_into_one_with_its_table(toy: Contract, tmp_path: Path) -> None:
    paths = []
    for index in (1, 2):
        path = tmp_path / f"shard{index}.json"
        argv = ("run", "--golden", str(GOLDEN), "--adapter", ADAPTER, "--shard", f"{index}/2", "--seed", "7")
        code, out, err = _cli(*argv, "--report-json", str(path))
        assert code == EXIT_SUBSET, out + err
        paths.append(path)
    merged = tmp_path / "merged.json"
    code, out, err = _cli("merge", *map(str, paths), "-o", str(merged))
    assert code == EXIT_SUBSET, out + err
    document = json.loads(merged.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["summary"]["passed"] == 3
    assert [table["contract"] for table in document["summaries"]] == ["toy"]


def test_the_pytest_plugin_collects_and_runs_the_toy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session under test registers the toy from its conftest, as a third party's plugin would.
    pytester.makeconftest(
        "from resumekit.conformance import contracts\n"
        "from tests.toy.contract import CONTRACT\n"
        "contracts.register(CONTRACT)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # A copy outside tests/: pytest would otherwise load the kit's own conftest above the golden folder.
    golden = pytester.path / "golden"
    shutil.copytree(GOLDEN, golden)
    monkeypatch.setenv("RESUMEKIT_GOLDEN", str(golden))
    monkeypatch.delenv("RESUMEKIT_TOY_IMPL", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--resumekit-adapter", ADAPTER, timeout=120)
    result.assert_outcomes(passed=3)
    monkeypatch.setenv("RESUMEKIT_TOY_IMPL", "wrong")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--resumekit-adapter", ADAPTER, timeout=120)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*sums.yaml:*golden case 'toy-three-numbers'*", "*TOY-1*"])


GENERIC = (
    "fixtures.py", "runner.py", "cli.py", "_cmd_golden.py", "_cmd_run.py", "_cmd_reports.py", "shards.py",
    "report.py", "report_html.py", "_html_parts.py", "badge.py", "diff.py", "expectations.py",
    "_pytest_golden.py", "_pytest_verdict.py", "pytest_plugin.py", "contracts.py", "cases.py", "results.py",
)  # fmt: skip
NAMED = re.compile(r"(decision|crash|ledger-fault|schedule|p1|p1-campaign|phase0)(/[a-z-]+)?")
CONTRACT_NAMES = {"gates", "gate_table", "DecisionCase", "ScenarioCase", "MatrixCase", "SoakCase", "run_decision"}


def _named_contracts(source: str) -> list[tuple[int, str]]:
    """Where *source* names a built-in contract, a kind of one, or a name of its own, docstrings aside."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if NAMED.fullmatch(node.value):
                found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.ImportFrom) and re.match(r"resumekit\.conformance\.(phase0|p1)\b", node.module or ""):
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Name) and node.id in CONTRACT_NAMES:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in CONTRACT_NAMES:
            found.append((node.lineno, node.attr))
    return found


def test_the_kit_names_no_contract_or_kind_outside_the_contract_packages() -> None:
    """The loader, runner, CLI, shards, reports and plugin iterate over the registry and name no contract.

    The one list of built-in contracts, ``contracts.BUILT_IN``, is a list of module paths in strings; the
    check reads names and strings that are a whole name, so it does not see them, as it should not.
    """
    found = [
        f"{name}:{line}: {what}"
        for name in GENERIC
        for line, what in _named_contracts((ROOT / "conformance" / name).read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_naming_check_sees_a_kind_an_import_and_a_name() -> None:
    source = 'import x\nfrom resumekit.conformance.p1 import gates\nif kind == "schedule":\n    gate_table()\n'
    expected = [(2, "from resumekit.conformance.p1 import ..."), (3, "'schedule'"), (4, "gate_table")]
    assert _named_contracts(source) == expected


def test_the_contract_packages_do_not_import_each_other() -> None:
    found = []
    for own, other in (("phase0", "p1"), ("p1", "phase0")):
        for path in sorted((ROOT / "conformance" / own).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                if any(re.match(rf"resumekit\.conformance\.{other}\b", name) for name in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
