"""The ``resumekit`` command: ``run``, ``list``, ``validate`` and ``doctor``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from resumekit.conformance import __version__, doctor, report, schemas
from resumekit.conformance._resources import golden_dir, spec_dir
from resumekit.conformance.adapters import (
    DEFAULT_TIMEOUT,
    AdapterStartError,
    ProcessAdapter,
    open_adapter,
    process_factory,
)
from resumekit.conformance.fixtures import FixtureError, Suite, fixture_files, load_file, load_suite
from resumekit.conformance.p1 import harness
from resumekit.conformance.phase0 import crash
from resumekit.conformance.results import Source
from resumekit.conformance.runner import run as run_cases

EXIT_CERTIFIED, EXIT_NOT_CERTIFIED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resumekit", description="Certify a crash-safe agent runtime against resumekit's golden fixtures."
    )
    parser.add_argument("--version", action="version", version=f"resumekit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def golden(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--golden", type=Path, help="a golden directory other than the bundled one")

    run = commands.add_parser("run", help="run the selected cases against an implementation")
    golden(run)
    run.add_argument(
        "--adapter",
        default="reference",
        help="'reference' (the bundled runtime, over the protocol), 'python:package.module:attribute' "
        "(in-process), or a command line speaking the adapter protocol (default: reference)",
    )
    run.add_argument(
        "--profile", choices=["core", "strict"], default="strict", help="strict runs core and strict cases"
    )
    run.add_argument(
        "--only", action="append", default=[], metavar="GLOB", help="run only cases whose id matches (repeatable)"
    )
    run.add_argument(
        "--kind",
        action="append",
        choices=["decision", "crash", "ledger-fault", "schedule", "p1"],
        help="run only these kinds",
    )
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds to wait for each response")
    run.add_argument(
        "--validate-messages",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check every protocol message, both ways, against its schema (default: on; the report says when off)",
    )
    run.add_argument("--seed", type=int, help="seed of the random crash schedule (default: random, printed)")
    run.add_argument("--kills", type=int, default=200, help="kills in the random crash schedule (default 200)")
    run.add_argument("--report-json", type=Path, metavar="FILE", help="write the run as JSON")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write the run as JUnit XML")
    run.add_argument(
        "--summary-md", type=Path, metavar="FILE", help="append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress marks")

    listing = commands.add_parser("list", help="list the cases with their clauses and profile")
    golden(listing)
    listing.add_argument("--profile", choices=["core", "strict"], default="strict")
    listing.add_argument("--only", action="append", default=[], metavar="GLOB")
    listing.add_argument("--clauses", action="store_true", help="list each spec clause and the cases that cite it")

    validate = commands.add_parser("validate", help="check the schemas and every fixture file (for fixture authors)")
    golden(validate)
    validate.add_argument("files", nargs="*", type=Path, help="fixture files (default: the whole golden directory)")

    doctor = commands.add_parser("doctor", help="smoke-test an adapter before a full run")
    doctor.add_argument("--adapter", default="reference")
    doctor.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``resumekit`` console script."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    arguments = _parser().parse_args(argv)
    return COMMANDS[arguments.command](arguments, sys.stdout, sys.stderr)


def _suite(arguments: argparse.Namespace, stderr: IO[str]) -> Suite | None:
    try:
        return load_suite(arguments.golden)
    except FixtureError as error:
        stderr.write(f"resumekit: invalid fixture: {error}\n")
    except FileNotFoundError as error:
        stderr.write(f"resumekit: {error}\n")
    return None


SPEC_FILES = ("phase0.md", "p1.md", "p1-control-plane.md")
# The control plane's clauses bind the kit, not the implementation: the kit's own tests check them, and
# golden cases may cite them, but no case has to.
KIT_SPEC_FILES = ("p1-control-plane.md",)

# Clauses that bind an implementation but have no golden case yet, and why. `validate` reports them
# apart from uncited clauses, and a test keeps this list exact, so it can only shrink on purpose.
NOT_YET_COVERED = {
    "JNL-7": "disk faults (ENOSPC, EIO) need failpoints that fail a write; they come with the P1 attack matrix",
    "JNL-8": "an fsync error needs an injected disk fault; it comes with the P1 attack matrix",
    "KEY-3": "the reference's own key formula: other workers may use any key with the properties of KEY-1",
    "SCOPE-6": "needs one attempt served with two identities, which CP-5 forbids; a kit fault for it comes later",
    "SCOPE-7": "needs a superseded attempt delivered again; it comes with the P1 attack matrix",
    "SUB-6": "needs a scripted 4xx answer to a submission; it comes with the HTTP matrix of the P1 attack work",
    "WRK-5": "needs a tool process that outlives a killed worker; it comes with the process-tree work",
}


def _spec_clauses(files: tuple[str, ...] = SPEC_FILES) -> list[str]:
    """Clause ids defined in the spec documents, in document order, if the spec is at hand."""
    try:
        folder = spec_dir()
    except FileNotFoundError:
        return []
    clauses: list[str] = []
    for name in files:
        path = folder / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            clauses += re.findall(r"^\*\*([A-Z0-9]+-\d+)\*\* \(", text, flags=re.MULTILINE)
    return clauses


def cmd_list(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    if arguments.clauses:
        cited = suite.clauses
        kit_clauses = set(_spec_clauses(KIT_SPEC_FILES))
        for clause in _spec_clauses() or sorted(cited):
            cases = cited.get(clause, [])
            note = ""
            if not cases and clause in NOT_YET_COVERED:
                note = f"(not covered yet: {NOT_YET_COVERED[clause]})"
            elif not cases and clause in kit_clauses:
                note = "(binds the kit's control plane: checked by the kit's own tests)"
            stdout.write(
                f"{clause:<10} {len(cases):>3} case(s)  {', '.join(cases[:6])}{' ...' if len(cases) > 6 else ''}"
                f"{note}\n"
            )
        return EXIT_CERTIFIED
    selected = suite.select(arguments.profile, arguments.only)
    for case in selected:
        stdout.write(report.format_case_line(case) + "\n")
    stdout.write(f"{len(selected)} case(s)\n")
    return EXIT_CERTIFIED


def cmd_validate(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    problems = 0
    try:
        uris = sorted(str(uri) for uri in schemas.registry())
    except (ValueError, OSError, json.JSONDecodeError) as error:
        stderr.write(f"resumekit: cannot load the schemas: {error}\n")
        return EXIT_USAGE
    for uri in uris:
        try:
            Draft202012Validator.check_schema(schemas.registry().contents(uri))
        except SchemaError as error:
            problems += 1
            stderr.write(f"{uri}: not a valid JSON Schema: {error.message}\n")
    stdout.write(f"{len(uris)} schema(s) checked\n")
    root = arguments.golden
    if root is None:
        root = golden_dir()
    files = arguments.files or fixture_files(root)
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
        for case in cases:
            if case.id in seen:
                problems += 1
                stderr.write(f"{case.source}: case {case.id!r}: duplicate case id (first at {seen[case.id]})\n")
            seen[case.id] = case.source
            cited.update(case.clauses)
            for clause in case.clauses:
                if known and clause not in known:
                    problems += 1
                    stderr.write(
                        f"{case.source}: case {case.id!r}: cites clause {clause!r}, which no spec document "
                        f"({', '.join(SPEC_FILES)}) defines\n"
                    )
        total += len(cases)
    if not known:
        stderr.write("resumekit: warning: the spec is not at hand, so clause ids were not checked\n")
    binding = _spec_clauses(tuple(name for name in SPEC_FILES if name not in KIT_SPEC_FILES))
    uncited = [clause for clause in sorted(binding) if clause not in cited and clause not in NOT_YET_COVERED]
    for clause in uncited:
        stderr.write(f"resumekit: warning: no case cites clause {clause}\n")
    for clause, reason in NOT_YET_COVERED.items():
        if clause in cited:
            problems += 1
            stderr.write(f"resumekit: clause {clause} is cited now: take it off the not-yet-covered list\n")
        else:
            stderr.write(f"resumekit: note: clause {clause} has no golden case yet: {reason}\n")
    stdout.write(
        f"{len(files)} fixture file(s), {total} case(s), {problems} problem(s)"
        + (f", {len(uncited)} uncited clause(s)" if uncited else "")
        + "\n"
    )
    return EXIT_CERTIFIED if problems == 0 else EXIT_NOT_CERTIFIED


def cmd_run(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    cases = suite.select(arguments.profile, arguments.only, arguments.kind)
    if not cases:
        stderr.write(f"resumekit: no case matches --only {arguments.only!r} in profile {arguments.profile!r}\n")
        return EXIT_USAGE
    try:
        adapter = open_adapter(
            arguments.adapter, timeout=arguments.timeout, validate_messages=arguments.validate_messages
        )
    except AdapterStartError as error:
        stderr.write(f"resumekit: cannot start the implementation: {error}\n")
        return EXIT_USAGE
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(2**32)
    runners: dict[str, Any] = {}
    if isinstance(adapter, ProcessAdapter):
        factory = process_factory(
            arguments.adapter,
            timeout=arguments.timeout,
            validate_messages=arguments.validate_messages,
            budget=adapter.budget,  # one count of failed starts for every process of the run
        )
        runners = crash.runners(
            factory, profile=arguments.profile, seed=seed, kills=arguments.kills, adapter_spec=arguments.adapter
        )
        runners["p1"] = harness.runner(factory, profile=arguments.profile)
    progress = report.ProgressReporter(stdout.write) if not arguments.quiet else None
    try:
        scheduled = any(case.kind == "schedule" for case in cases)
        finished = run_cases(
            cases,
            adapter,
            profile=arguments.profile,
            reporter=progress,
            runners=runners,
            seed=seed if scheduled else None,
            golden_digest=suite.digest,
        )
    finally:
        adapter.close()
    finished = dataclasses.replace(finished, messages_validated=arguments.validate_messages)
    if progress is not None:
        progress.finish()
    for result in finished.results:
        if not result.ok and result.outcome.value in ("failed", "errored"):
            stdout.write("\n" + report.format_result(result) + "\n")
    stdout.write(report.format_summary(finished) + "\n")
    if arguments.report_json:
        arguments.report_json.write_text(
            json.dumps(report.to_json(finished), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    if arguments.junit:
        arguments.junit.write_text(report.to_junit(finished), encoding="utf-8")
    if arguments.summary_md:
        with arguments.summary_md.open("a", encoding="utf-8") as summary:
            summary.write(report.to_markdown(finished))
    return EXIT_CERTIFIED if finished.certified else EXIT_NOT_CERTIFIED


def cmd_doctor(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return doctor.diagnose(arguments.adapter, timeout=arguments.timeout, write=stdout.write)


COMMANDS = {"run": cmd_run, "list": cmd_list, "validate": cmd_validate, "doctor": cmd_doctor}
