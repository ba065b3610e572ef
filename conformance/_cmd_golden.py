"""The golden-set commands of ``resumekit``: ``list``, ``show`` and ``validate``."""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from resumekit.conformance import (
    contracts,
    report,
    schemas,
)
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.cases import Case
from resumekit.conformance.cli import (
    EXIT_CERTIFIED,
    EXIT_NOT_CERTIFIED,
    EXIT_USAGE,
)
from resumekit.conformance.fixtures import FixtureError, Suite, fixture_files, load_file, load_suite
from resumekit.conformance.results import Source


def _suite(arguments: argparse.Namespace, stderr: IO[str]) -> Suite | None:
    try:
        return load_suite(arguments.golden)
    except FixtureError as error:
        stderr.write(f"resumekit: invalid fixture: {error}\n")
    except FileNotFoundError as error:
        stderr.write(f"resumekit: {error}\n")
    return None


def _spec_clauses(kit_side: bool | None = None, kinds: Sequence[str] | None = None) -> list[str]:
    """Clause ids defined in the contracts' spec documents, in document order, if the spec is at hand.

    *kit_side* True gives only the documents that bind the kit's own side, False only the binding ones; *kinds*
    limits them to the contracts those kinds belong to.
    """
    try:
        if kinds is None:
            paths = contracts.spec_paths(kit_side=kit_side)
        else:
            owners = {c.name: c for c in map(contracts.contract_of, kinds) if c is not None}
            paths = tuple(path for owner in owners.values() for path in owner.spec_paths(kit_side=kit_side))
    except FileNotFoundError:
        return []
    clauses: list[str] = []
    for path in paths:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            clauses += re.findall(r"^\*\*([A-Z0-9]+-\d+)\*\* \(", text, flags=re.MULTILINE)
    return clauses


def _list_checks(kinds: Sequence[str], stdout: IO[str]) -> int:
    """Every check the mismatches of the contracts of *kinds* can name: name, clauses, and when it judges."""
    count = 0
    for contract in contracts.registered():
        if contract.checks is None or not any(kind.name in kinds for kind in contract.kinds):
            continue
        for name, clauses, when in contract.checks():
            cited = ", ".join("no clause" if clause is None else clause for clause in clauses) or "any clause"
            stdout.write(f"{name:<34} {cited}  ({when})\n")
            count += 1
    stdout.write(f"{count} check(s)\n")
    return EXIT_CERTIFIED


def cmd_list(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if arguments.checks:
        return _list_checks(tuple(arguments.kind) if arguments.kind else contracts.kind_names(), stdout)
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    kinds = tuple(arguments.kind) if arguments.kind else contracts.kind_names()
    if arguments.clauses:
        cited: dict[str, list[str]] = {}
        for case in suite.cases:
            if case.kind in kinds:
                for clause in case.clauses:
                    cited.setdefault(clause, []).append(case.id)
        kit_clauses = set(_spec_clauses(kit_side=True)) | contracts.kit_clauses()
        not_yet_covered = contracts.not_yet_covered()
        for clause in _spec_clauses(kinds=arguments.kind) or sorted(cited):
            cases = cited.get(clause, [])
            note = ""
            if not cases and clause in not_yet_covered:
                note = f"(not covered yet: {not_yet_covered[clause]})"
            elif not cases and clause in kit_clauses:
                note = "(binds the kit: checked by the kit's own tests)"
            stdout.write(
                f"{clause:<10} {len(cases):>3} case(s)  {', '.join(cases[:6])}{' ...' if len(cases) > 6 else ''}"
                f"{note}\n"
            )
        return EXIT_CERTIFIED
    # Listing shows the opt-in kinds too, unless --kind narrows it, so that a campaign can be found by its id.
    selected = suite.select(arguments.profile, arguments.only, kinds)
    for case in selected:
        stdout.write(report.format_case_line(case) + "\n")
    stdout.write(f"{len(selected)} case(s)\n")
    return EXIT_CERTIFIED


def _schema_problems(stdout: IO[str], stderr: IO[str]) -> int | None:
    """How many of the registered schemas are not valid JSON Schemas (each named), or None if they cannot load."""
    from jsonschema import Draft202012Validator  # only validate checks the schemas themselves
    from jsonschema.exceptions import SchemaError

    try:
        uris = sorted(str(uri) for uri in schemas.registry())
    except (ValueError, OSError, json.JSONDecodeError) as error:
        stderr.write(f"resumekit: cannot load the schemas: {error}\n")
        return None
    problems = 0
    for uri in uris:
        try:
            Draft202012Validator.check_schema(schemas.registry().contents(uri))
        except SchemaError as error:
            problems += 1
            stderr.write(f"{uri}: not a valid JSON Schema: {error.message}\n")
    stdout.write(f"{len(uris)} schema(s) checked\n")
    return problems


def _file_problems(cases: Sequence[Case], seen: dict[str, Source], known: set[str], stderr: IO[str]) -> int:
    """How many of *cases* reuse an id (*seen* so far) or cite a clause no spec defines, each named."""
    problems = 0
    for case in cases:
        if case.id in seen:
            problems += 1
            stderr.write(f"{case.source}: case {case.id!r}: duplicate case id (first at {seen[case.id]})\n")
        seen[case.id] = case.source
        for clause in case.clauses:
            if known and clause not in known:
                problems += 1
                stderr.write(
                    f"{case.source}: case {case.id!r}: cites clause {clause!r}, which no spec document "
                    f"({', '.join(path.name for path in contracts.spec_paths())}) defines\n"
                )
    return problems


def _coverage_problems(cited: set[str], stderr: IO[str]) -> tuple[int, list[str]]:
    """Problems with the not-yet-covered lists, and the binding clauses no case cites (each warned of)."""
    binding = _spec_clauses(kit_side=False)
    not_yet_covered = contracts.not_yet_covered()
    exempt = contracts.kit_clauses() | set(not_yet_covered)
    uncited = [clause for clause in sorted(binding) if clause not in cited and clause not in exempt]
    for clause in uncited:
        stderr.write(f"resumekit: warning: no case cites clause {clause}\n")
    problems = 0
    for clause, reason in not_yet_covered.items():
        if clause in cited:
            problems += 1
            stderr.write(f"resumekit: clause {clause} is cited now: take it off the not-yet-covered list\n")
        else:
            stderr.write(f"resumekit: note: clause {clause} has no golden case yet: {reason}\n")
    return problems, uncited


def _files_to_validate(arguments: argparse.Namespace, stderr: IO[str]) -> tuple[Path, list[Path]] | None:
    """The golden folder and the files to check, or None (the reason on stderr) if there are none.

    A golden folder without a single fixture file is refused rather than passed: "0 problems" over
    nothing would certify a mistyped or half-copied folder as a valid golden set.
    """
    root = arguments.golden
    try:
        if root is None:
            root = golden_dir()
        files = arguments.files or fixture_files(root)
    except FileNotFoundError as error:
        stderr.write(f"resumekit: {error}\n")
        return None
    if not files:
        stderr.write(f"resumekit: the golden folder {str(root)!r} holds no fixture file (*.yaml or *.yml)\n")
        return None
    return root, files


def cmd_validate(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Check the schemas, every fixture file and the clauses they cite; name every problem on stderr."""
    problems = _schema_problems(stdout, stderr)
    if problems is None:
        return EXIT_USAGE
    chosen = _files_to_validate(arguments, stderr)
    if chosen is None:
        return EXIT_USAGE
    root, files = chosen
    known = set(_spec_clauses())
    total = 0
    seen: dict[str, Source] = {}
    cited: set[str] = set()
    for path in files:
        found: list[FixtureError] = []
        cases = load_file(path, root, found)
        for problem in found:
            problems += 1
            stderr.write(f"{problem}\n")
        problems += _file_problems(cases, seen, known, stderr)
        cited.update(clause for case in cases for clause in case.clauses)
        total += len(cases)
    if not known:
        stderr.write("resumekit: warning: the spec is not at hand, so clause ids were not checked\n")
    more, uncited = _coverage_problems(cited, stderr)
    problems += more
    stdout.write(
        f"{len(files)} fixture file(s), {total} case(s), {problems} problem(s)"
        + (f", {len(uncited)} uncited clause(s)" if uncited else "")
        + "\n"
    )
    return EXIT_CERTIFIED if problems == 0 else EXIT_NOT_CERTIFIED


def _case_block(lines: list[str], start: int) -> list[str]:
    """The lines of the YAML item that begins at index *start*: up to the next line indented no deeper."""
    first = lines[start]
    indent = len(first) - len(first.lstrip())
    block = [first]
    for line in lines[start + 1 :]:
        stripped = line.strip()
        if stripped and len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    while block and not block[-1].strip():
        block.pop()
    return block


def clause_texts(clauses: Sequence[str]) -> dict[str, tuple[Path, int, list[str]]]:
    """Each clause's text in the spec: its file, its first line, and its lines up to the next clause or heading."""
    try:
        paths = contracts.spec_paths()
    except FileNotFoundError:
        return {}
    wanted, found = set(clauses), {}
    boundary = re.compile(r"^(\*\*[A-Z0-9]+-\d+\*\* \(|#|<a id=)")
    for path in paths:
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            match = re.match(r"^\*\*([A-Z0-9]+-\d+)\*\* \(", line)
            if match and match.group(1) in wanted and match.group(1) not in found:
                text = [line]
                for following in lines[index + 1 :]:
                    if boundary.match(following):
                        break
                    text.append(following)
                while text and not text[-1].strip():
                    text.pop()
                found[match.group(1)] = (path.resolve(), index + 1, text)
    return found


def cmd_show(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    case = next((c for c in suite.cases if c.id == arguments.case_id), None)
    if case is None:
        ids = [c.id for c in suite.cases]
        close = difflib.get_close_matches(arguments.case_id, ids, n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `resumekit list` lists every case"
        stderr.write(f"resumekit: no case {arguments.case_id!r}{hint}\n")
        return EXIT_USAGE
    path = (suite.root / case.source.file).resolve()
    stdout.write(f"case {case.id}: {case.kind}, profile {case.profile}\n")
    stdout.write(f"file: {path}:{case.source.line or 1}\n")
    if case.description:
        stdout.write(f"description: {case.description}\n")
    lines = path.read_text(encoding="utf-8").splitlines()
    start = (case.source.line or 1) - 1
    block = _case_block(lines, start) if 0 <= start < len(lines) else []
    if block and case.id not in "\n".join(block):
        stdout.write("(the kit generates this case from the entry below)\n")
    stdout.write("\n")
    width = len(str(start + len(block)))
    for number, line in enumerate(block, start=start + 1):
        stdout.write(f"{number:>{width}} | {line}\n")
    texts = clause_texts(case.clauses)
    for clause in case.clauses:
        if clause not in texts:
            stdout.write(f"\n{clause}: (not found in the spec documents)\n")
            continue
        spec_path, spec_line, text = texts[clause]
        stdout.write(f"\n{clause} ({spec_path}:{spec_line}):\n")
        stdout.writelines(f"  {row}\n" if row else "\n" for row in text)
    return EXIT_CERTIFIED
