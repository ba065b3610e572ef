"""The ``resumekit`` command: ``run``, ``list``, ``validate`` and ``doctor``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import random
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from resumekit.conformance import (
    __version__,
    _process,
    badge,
    diff,
    doctor,
    expectations,
    report,
    report_html,
    schemas,
    shards,
)
from resumekit.conformance._resources import golden_dir, spec_dir
from resumekit.conformance.adapters import (
    DEFAULT_TIMEOUT,
    AdapterStartError,
    ProcessAdapter,
    open_adapter,
    process_factory,
)
from resumekit.conformance.fixtures import KIND_ORDER, Case, FixtureError, Suite, fixture_files, load_file, load_suite
from resumekit.conformance.phase0 import crash
from resumekit.conformance.results import DEFAULT_KILLS, Implementation, Run, Selection, Shard, Source
from resumekit.conformance.runner import run as run_cases

# The one exit-code rule of `resumekit run` (docs/certifying.md states it too, and so does --help).
EXIT_CERTIFIED = 0  # a certification: every claimed case passed (or is an expected failure), and some passed
EXIT_NOT_CERTIFIED = 1  # a claimed case failed, errored or was skipped, an expected failure passed, or none passed
EXIT_USAGE = 2  # bad arguments or files, an adapter that cannot start, a report that cannot be written
EXIT_SUBSET = 3  # every selected case passed, but the selection was narrower than a certification
EXIT_INTERRUPTED = 130  # Ctrl-C: processes killed, reports written with what finished
EXIT_BROKEN_PIPE = 141  # stdout closed under us (`resumekit list | head`), as a shell reports SIGPIPE

EXIT_CODES = f"""exit codes:
  {EXIT_CERTIFIED}    certified: a certification run in which every claimed case passed (expected
       failures listed with --expect aside) and at least one passed
  {EXIT_NOT_CERTIFIED}    not certified: a claimed case failed, errored or was skipped, a listed expected
       failure passed, or no claimed case passed (in a subset run too)
  {EXIT_USAGE}    usage error: bad arguments, a broken fixture or expectations file, an adapter that
       cannot start, an empty selection, a report file that cannot be written
  {EXIT_SUBSET}    subset run passed: --only, --kind, --kills below {DEFAULT_KILLS} or --golden narrowed
       the run, so it is not a certification
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C): every process the kit started is killed and the reports
       are written, marked interrupted, with the cases that finished"""

# The options naming a file the run writes: checked, and their folders made, before the first case.
# The options that name a file to write, of `run` and `merge` (`output` is merge's report).
OUTPUT_OPTIONS = ("report_json", "junit", "summary_md", "report_html", "badge", "write_expectations", "output")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (when it has a meaningful one) and keeps the epilog's layout."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "%(default)" in text or default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 or more")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive, finite number of seconds")
    return value


def _command(
    commands: Any, name: str, summary: str, examples: str, exit_codes: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"{exit_codes}\n\nexamples:\n{examples}",
        formatter_class=_HelpFormatter,
    )
    return parser


def _golden_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--golden", type=Path, metavar="DIR", help="a golden directory other than the bundled one (default: bundled)"
    )


def _run_parser(commands: Any) -> None:
    run = _command(
        commands,
        "run",
        "run the selected cases against an implementation and give a verdict",
        "  resumekit run --adapter reference\n"
        '  resumekit run --adapter "node my-adapter.mjs" --junit out/junit.xml --report-json out/report.json\n'
        "  resumekit run --adapter python:mypkg.plan:build --expect known-failures.yaml\n"
        "  resumekit run --adapter reference --report-html out/report.html --badge out/badge.json",
        EXIT_CODES,
    )
    _golden_option(run)
    run.add_argument(
        "--adapter",
        default="reference",
        help="'reference' (the bundled runtime, over the protocol), 'python:package.module:attribute' "
        "(in-process), or a command line speaking the adapter protocol",
    )
    run.add_argument(
        "--profile",
        choices=["core", "strict"],
        default="strict",
        help="strict runs core and strict cases; an implementation that claims only core is certified for core",
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="run only cases whose id matches (repeatable; makes a subset run)",
    )
    run.add_argument(
        "--kind",
        action="append",
        choices=["decision", "crash", "ledger-fault", "schedule", "p1", "p1-campaign"],
        help="run only these kinds (repeatable; makes a subset run); p1-campaign runs only when named here",
    )
    run.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help="wait for each response"
    )
    run.add_argument(
        "--validate-messages",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check every protocol message, both ways, against its schema (the report says when it is off)",
    )
    run.add_argument(
        "--seed", type=int, help="seed of the random crash schedule (default: random, printed in the header)"
    )
    run.add_argument(
        "--kills",
        type=_non_negative_int,
        default=DEFAULT_KILLS,
        metavar="N",
        help=f"kills in the random crash schedule; fewer than {DEFAULT_KILLS} make a subset run",
    )
    run.add_argument(
        "--fault-model",
        choices=["process-crash", "power-loss"],
        default="process-crash",
        help="how the crash and schedule cases crash the implementation: a process kill, or a kill followed by a "
        "simulated power cut that drops every write not synced (Linux, FUSE: root or the fuse group; elsewhere "
        "those cases are reported not run)",
    )
    run.add_argument(
        "--expect",
        type=Path,
        metavar="FILE",
        help="YAML file of known failures (schemas/expectations.json): listed cases that fail do not fail the run, "
        "listed cases that pass do",
    )
    run.add_argument(
        "--write-expectations", type=Path, metavar="FILE", help="write the run's failures as an expectations file"
    )
    run.add_argument("--report-json", type=Path, metavar="FILE", help="write the run as JSON")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write the run as JUnit XML")
    run.add_argument(
        "--summary-md", type=Path, metavar="FILE", help="append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    run.add_argument(
        "--report-html",
        type=Path,
        metavar="FILE",
        help="write the run as one self-contained HTML page (no script, nothing fetched): the verdict, a table "
        "per kind, clause coverage, and each failing case with its events and expected and actual values",
    )
    run.add_argument(
        "--badge",
        type=Path,
        metavar="FILE",
        help="write a shields.io endpoint badge (schemas/report/badge.json): 'resumekit | core 114/114', or "
        "'not certified', 'subset ... not certified'",
    )
    run.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="run N cases at once, each process case with its own workspace and processes (0 or 'auto': one per CPU)",
    )
    run.add_argument(
        "--shard",
        metavar="K/N",
        help="run only shard K of N of the selected cases (a deterministic 1/N); needs --seed; "
        "combine the shard reports with 'resumekit merge'",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output (the header and verdict stay)")


def _jobs(text: str) -> int:
    """--jobs: a count of cases at once; 0 or 'auto' is one per CPU."""
    if text.strip().lower() == "auto":
        return os.cpu_count() or 1
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {jobs}")
    return jobs or os.cpu_count() or 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resumekit",
        description="Certify a crash-safe agent runtime against resumekit's golden fixtures.",
        epilog=f"`resumekit COMMAND --help` shows each command's options, defaults and examples.\n\n{EXIT_CODES}",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"resumekit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_parser(commands)

    listing = _command(
        commands,
        "list",
        "list the cases with their kind, profile and clauses",
        "  resumekit list --only 'crash-*'\n  resumekit list --clauses",
        f"exit codes:\n  {EXIT_CERTIFIED}    listed\n  {EXIT_USAGE}    usage error or a broken fixture",
    )
    _golden_option(listing)
    listing.add_argument("--profile", choices=["core", "strict"], default="strict", help="list the cases of profile")
    listing.add_argument(
        "--only", action="append", default=[], metavar="GLOB", help="list only cases whose id matches (repeatable)"
    )
    listing.add_argument("--clauses", action="store_true", help="list each spec clause and the cases that cite it")

    show = _command(
        commands,
        "show",
        "print a case as written in its file, the text of each clause it cites, and where the file is",
        "  resumekit show crash-p3\n  resumekit show prefix-after-function-call",
        f"exit codes:\n  {EXIT_CERTIFIED}    shown\n  {EXIT_USAGE}    no such case, or a broken fixture",
    )
    _golden_option(show)
    show.add_argument("case_id", metavar="ID", help="a case id, as `resumekit list` prints it")

    validate = _command(
        commands,
        "validate",
        "check the schemas and every fixture file (for fixture authors)",
        "  resumekit validate\n  resumekit validate --golden my-golden my-golden/phase0/decisions/new.yaml",
        f"exit codes:\n  {EXIT_CERTIFIED}    no problem\n"
        f"  {EXIT_NOT_CERTIFIED}    problems found (each named on stderr)\n"
        f"  {EXIT_USAGE}    the schemas cannot be loaded, or the golden folder does not exist",
    )
    _golden_option(validate)
    validate.add_argument(
        "files", nargs="*", type=Path, help="fixture files (default: every file of the golden directory)"
    )

    compare = _command(
        commands,
        "diff",
        "compare two JSON run reports: cases that changed verdict, new and removed cases, a changed kit or golden set",
        "  resumekit diff yesterday.json today.json",
        f"exit codes:\n  {EXIT_CERTIFIED}    no regression\n"
        f"  {EXIT_NOT_CERTIFIED}    a regression: a case passed before and does not now, or a certification lost\n"
        f"  {EXIT_USAGE}    a report cannot be read or is not a run report",
    )
    compare.add_argument("before", type=Path, help="the earlier run's --report-json")
    compare.add_argument("after", type=Path, help="the later run's --report-json")

    merge = _command(
        commands,
        "merge",
        "combine the JSON reports of every shard of a run into one report and verdict",
        "  resumekit merge shard-1.json shard-2.json shard-3.json -o report.json --junit junit.xml",
        f"exit codes:\n  {EXIT_CERTIFIED}    the merged run is a certification\n"
        f"  {EXIT_NOT_CERTIFIED}    the merged run is not certified\n"
        f"  {EXIT_USAGE}    the shards cannot be read or do not make one run (each reason named)",
    )
    merge.add_argument("reports", nargs="+", type=Path, help="the shard reports (--report-json of each --shard run)")
    merge.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="write the merged report")
    merge.add_argument("--junit", type=Path, metavar="FILE", help="also write the merged run as JUnit XML")
    merge.add_argument("--summary-md", type=Path, metavar="FILE", help="also append a Markdown summary")
    merge.add_argument("--report-html", type=Path, metavar="FILE", help="also write the merged run as an HTML page")
    merge.add_argument("--badge", type=Path, metavar="FILE", help="also write a shields.io endpoint badge")

    doctor = _command(
        commands,
        "doctor",
        "smoke-test an adapter before a full run",
        '  resumekit doctor --adapter "node my-adapter.mjs"',
        f"exit codes:\n  {EXIT_CERTIFIED}    every check passed\n  {EXIT_NOT_CERTIFIED}    a check failed",
    )
    doctor.add_argument("--adapter", default="reference", help="the adapter to check, as for `run --adapter`")
    doctor.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help="wait for each response"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``resumekit`` console script."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        arguments = _parser().parse_args(argv)
        code = COMMANDS[arguments.command](arguments, sys.stdout, sys.stderr)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _process.kill_all()
        sys.stderr.write("\nresumekit: interrupted\n")
        return EXIT_INTERRUPTED


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at the null device, so the interpreter's last flush is silent too."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


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
    "KEY-3": "the reference's own key formula: other workers may use any key with the properties of KEY-1",
    "STORE-8": "needs two adapter processes on one run, which the protocol does not drive; the reference's tests "
    "run two writers on one run",
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
    # Listing shows the opt-in kinds too, so that a campaign can be found by its id.
    selected = suite.select(arguments.profile, arguments.only, KIND_ORDER)
    for case in selected:
        stdout.write(report.format_case_line(case) + "\n")
    stdout.write(f"{len(selected)} case(s)\n")
    return EXIT_CERTIFIED


def cmd_validate(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    from jsonschema import Draft202012Validator  # only validate checks the schemas themselves
    from jsonschema.exceptions import SchemaError

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
    try:
        if root is None:
            root = golden_dir()
        files = arguments.files or fixture_files(root)
    except FileNotFoundError as error:
        stderr.write(f"resumekit: {error}\n")
        return EXIT_USAGE
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


def _prepare_outputs(arguments: argparse.Namespace, stderr: IO[str]) -> bool:
    """Check every file the run will write, and make its folder, before the first case runs."""
    seen: dict[Path, str] = {}
    for option in OUTPUT_OPTIONS:
        path: Path | None = getattr(arguments, option, None)
        if path is None:
            continue
        flag = "--" + option.replace("_", "-")
        problem = _output_problem(path)
        resolved = path.resolve()
        if problem is None and resolved in seen:
            problem = f"the same file as {seen[resolved]}"
        if problem is not None:
            stderr.write(f"resumekit: {flag} {path}: {problem}\n")
            return False
        seen[resolved] = flag
    return True


def _output_problem(path: Path) -> str | None:
    """Why *path* cannot be written, after making its folder; None when it can."""
    if path.is_dir():
        return "is a directory"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot make its folder: {error.strerror or error}"
    if not os.access(path.parent, os.W_OK):
        return f"cannot write in {path.parent}"
    if path.exists() and not os.access(path, os.W_OK):
        return "is not writable"
    return None


def _load_expectations(
    arguments: argparse.Namespace, suite: Suite, stderr: IO[str]
) -> tuple[bool, expectations.Expectations | None]:
    if arguments.expect is None:
        return True, None
    try:
        return True, expectations.load(arguments.expect, (case.id for case in suite.cases))
    except expectations.ExpectationsError as error:
        stderr.write(f"resumekit: {error}\n")
        return False, None


def _selection(
    arguments: argparse.Namespace, seed: int, expected: expectations.Expectations | None
) -> Selection:
    golden = "bundled"
    if arguments.golden is not None and arguments.golden.resolve() != golden_dir().resolve():
        golden = str(arguments.golden)
    return Selection(
        profile=arguments.profile,
        only=tuple(arguments.only),
        kinds=tuple(arguments.kind or ()),
        kills=arguments.kills,
        timeout=arguments.timeout,
        seed=seed,
        golden=golden,
        expectations=str(arguments.expect) if arguments.expect is not None else None,
        expectations_digest=expected.digest if expected is not None else None,
        fault_model=arguments.fault_model,
    )


def compared_profile(requested: str, implementation: Implementation) -> str:
    """The profile answers are compared in: the one asked for, or core when the implementation does not claim it."""
    return requested if requested in implementation.profiles else "core"


def _progress(arguments: argparse.Namespace, stdout: IO[str], total: int) -> report.ProgressReporter | None:
    if arguments.quiet:
        return None
    isatty = getattr(stdout, "isatty", None)
    live = bool(isatty()) if isatty is not None else False

    def write(text: str) -> None:
        stdout.write(text)
        if live:
            stdout.flush()

    return report.ProgressReporter(write, total=total, live=live)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """While the run goes, Ctrl-C kills every process the kit started at once, then interrupts the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        _process.kill_all()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _write_report(path: Path, what: str, write: Callable[[Path], object], stderr: IO[str]) -> bool:
    try:
        write(path)
    except OSError as error:
        stderr.write(f"resumekit: cannot write the {what} {path}: {error.strerror or error}\n")
        return False
    return True


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(text)


def _write_reports(
    finished: Run,
    arguments: argparse.Namespace,
    expected: expectations.Expectations | None,
    stderr: IO[str],
    cases: Sequence[Case] = (),
) -> bool:
    """Write every report asked for; one that cannot be written does not stop the others."""
    writers: list[tuple[Path | None, str, Callable[[Path], object]]] = [
        (
            arguments.report_json,
            "JSON report",
            lambda path: path.write_text(
                json.dumps(report.to_json(finished), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            ),
        ),
        (arguments.junit, "JUnit file", lambda path: path.write_text(report.to_junit(finished), encoding="utf-8")),
        (arguments.summary_md, "Markdown summary", lambda path: _append(path, report.to_markdown(finished))),
        (
            arguments.report_html,
            "HTML report",
            lambda path: path.write_text(report_html.to_html(finished, cases), encoding="utf-8"),
        ),
        (
            arguments.badge,
            "badge",
            lambda path: path.write_text(json.dumps(badge.to_badge(finished), indent=2) + "\n", encoding="utf-8"),
        ),
        (
            arguments.write_expectations,
            "expectations file",
            lambda path: path.write_text(
                expectations.from_run(finished, expected.failures if expected else None), encoding="utf-8"
            ),
        ),
    ]
    written = [_write_report(path, what, write, stderr) for path, what, write in writers if path is not None]
    return all(written)


def _exit_code(finished: Run) -> int:
    verdict = finished.verdict
    if verdict.scope == "interrupted":
        return EXIT_INTERRUPTED
    if not verdict.passed:
        return EXIT_NOT_CERTIFIED
    return EXIT_SUBSET if verdict.scope == "subset" else EXIT_CERTIFIED


def _runners(
    arguments: argparse.Namespace,
    adapter: Any,
    profile: str,
    seed: int,
    progress: report.ProgressReporter | None,
) -> dict[str, Any]:
    """The runners of the kinds that need fresh processes (none for an in-process adapter)."""
    if not isinstance(adapter, ProcessAdapter):
        return {}
    factory = process_factory(
        arguments.adapter,
        timeout=arguments.timeout,
        validate_messages=arguments.validate_messages,
        budget=adapter.budget,  # one count of failed starts for every process of the run
    )
    on_kill = progress.kill_progress if progress is not None else None
    power = crash.PowerLoss() if arguments.fault_model == "power-loss" else None
    runners: dict[str, Any] = crash.runners(
        factory,
        profile=profile,
        seed=seed,
        kills=arguments.kills,
        adapter_spec=arguments.adapter,
        on_kill=on_kill,
        power=power,
        jobs=arguments.jobs,
    )
    # The P1 harness brings the control plane, an HTTP server and SQLite: only `run` loads it.
    from resumekit.conformance.p1 import harness

    runners["p1"] = harness.runner(factory, profile=profile, power=power)
    runners["p1-campaign"] = harness.campaign_runner(
        factory, profile=profile, seed=arguments.seed, adapter_spec=arguments.adapter
    )
    return runners


def cmd_run(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    cases = suite.select(arguments.profile, arguments.only, arguments.kind)
    if not cases:
        stderr.write(f"resumekit: no case matches --only {arguments.only!r} in profile {arguments.profile!r}\n")
        return EXIT_USAGE
    shard = None
    if arguments.shard is not None:
        try:
            index, count = shards.parse(arguments.shard)
        except shards.ShardError as error:
            stderr.write(f"resumekit: {error}\n")
            return EXIT_USAGE
        if arguments.seed is None:
            stderr.write("resumekit: --shard needs --seed, the same for every shard, so that they make one run\n")
            return EXIT_USAGE
        ids = [case.id for case in cases]
        shard = Shard(index, count, tuple(ids), arguments.seed)
        cases = shards.take(cases, ids, index, count)
    loaded, expected = _load_expectations(arguments, suite, stderr)
    if not loaded or not _prepare_outputs(arguments, stderr):
        return EXIT_USAGE
    try:
        adapter = open_adapter(
            arguments.adapter, timeout=arguments.timeout, validate_messages=arguments.validate_messages
        )
    except AdapterStartError as error:
        stderr.write(f"resumekit: cannot start the implementation: {error}\n")
        return EXIT_USAGE
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(2**32)
    selection = _selection(arguments, seed, expected)
    profile = compared_profile(arguments.profile, adapter.implementation)
    stdout.write(
        report.format_header(
            adapter.implementation,
            selection,
            kit_version=__version__,
            golden_digest=suite.digest,
            selected=len(cases),
        )
    )
    stdout.flush()
    progress = _progress(arguments, stdout, len(cases))
    try:
        with _interruptible():
            finished = run_cases(
                cases,
                adapter,
                profile=profile,
                reporter=progress,
                runners=_runners(arguments, adapter, profile, seed, progress),
                seed=seed if any(case.kind == "schedule" for case in cases) else None,
                golden_digest=suite.digest,
                selection=selection,
                known_failures=expected.failures if expected else None,
                golden_root=str(suite.root.resolve()),
                jobs=arguments.jobs,
                shard=shard,
            )
    finally:
        adapter.close()
    finished = dataclasses.replace(finished, messages_validated=arguments.validate_messages)
    if progress is not None:
        progress.finish()
    for result in finished.results:
        if result.outcome.value in ("failed", "errored") or result.unexpected_pass:
            stdout.write("\n" + report.format_result(result, finished.golden_root) + "\n")
    stdout.write(report.format_summary(finished) + "\n")
    stdout.flush()
    if not _write_reports(finished, arguments, expected, stderr, cases):
        return EXIT_INTERRUPTED if finished.interrupted else EXIT_USAGE
    if shard is not None and not finished.interrupted:
        # A shard certifies nothing alone (`merge` gives the verdict): it fails only on a case that did not pass.
        return EXIT_NOT_CERTIFIED if report.shard_failed(finished) else EXIT_CERTIFIED
    return _exit_code(finished)


def cmd_diff(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    documents = []
    for path in (arguments.before, arguments.after):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            stderr.write(f"resumekit: cannot read the report {path}: {error}\n")
            return EXIT_USAGE
        violation = schemas.first_violation(schemas.RUN_REPORT, document)
        if violation is not None:
            stderr.write(f"resumekit: {path} is not a run report: it breaks its schema {violation}\n")
            return EXIT_USAGE
        documents.append(document)
    found = diff.compare(documents[0], documents[1])
    stdout.write(diff.format_diff(found, str(arguments.before), str(arguments.after)))
    return EXIT_NOT_CERTIFIED if found.regressed else EXIT_CERTIFIED


def cmd_merge(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if not _prepare_outputs(arguments, stderr):
        return EXIT_USAGE
    named = []
    for path in arguments.reports:
        try:
            named.append((str(path), json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            stderr.write(f"resumekit: cannot read the shard report {path}: {error}\n")
            return EXIT_USAGE
    try:
        merged = shards.merge(named)
    except shards.ShardError as error:
        stderr.write(f"resumekit: cannot merge: {error}\n")
        return EXIT_USAGE
    arguments.output.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    finished = report.from_json(merged)
    if arguments.junit:
        arguments.junit.write_text(report.to_junit(finished), encoding="utf-8")
    if arguments.summary_md:
        _append(arguments.summary_md, report.to_markdown(finished))
    if arguments.report_html:
        arguments.report_html.write_text(report_html.to_html(finished), encoding="utf-8")
    if arguments.badge:
        arguments.badge.write_text(json.dumps(badge.to_badge(finished), indent=2) + "\n", encoding="utf-8")
    stdout.write(report.format_summary(finished) + "\n")
    stdout.write(f"merged {len(named)} shard report(s) into {arguments.output}\n")
    return _exit_code(finished)


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
        folder = spec_dir()
    except FileNotFoundError:
        return {}
    wanted, found = set(clauses), {}
    boundary = re.compile(r"^(\*\*[A-Z0-9]+-\d+\*\* \(|#|<a id=)")
    for name in SPEC_FILES:
        path = folder / name
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


def cmd_doctor(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return doctor.diagnose(arguments.adapter, timeout=arguments.timeout, write=stdout.write)


COMMANDS = {
    "run": cmd_run,
    "list": cmd_list,
    "show": cmd_show,
    "validate": cmd_validate,
    "doctor": cmd_doctor,
    "merge": cmd_merge,
    "diff": cmd_diff,
}
