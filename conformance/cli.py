"""The ``resumekit`` command: ``run``, ``list``, ``validate`` and ``doctor``."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

# Only what needs nothing else: `--version` answers before the parser is built, and the parser before any
# harness is loaded (each command imports its module when it runs).
from resumekit.conformance import __version__
from resumekit.conformance._defaults import DEFAULT_KILLS, DEFAULT_TIMEOUT

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
  {EXIT_SUBSET}    subset run passed: --only, --kind, --kills below {DEFAULT_KILLS}, --golden or --shard
       narrowed the run, so it is not a certification (`resumekit merge` gives the shards' verdict)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C): every process the kit started is killed and the reports
       are written, marked interrupted, with the cases that finished"""

# The options naming a file the run writes: checked, and their folders made, before the first case.
# The options that name a file to write, of `run`, `merge` and `report` (`output` is merge's report).
OUTPUT_OPTIONS = (
    "report_json", "junit", "summary_md", "report_html", "badge", "write_expectations", "output", "compare_html",
)  # fmt: skip


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


def _command(commands: Any, name: str, summary: str, examples: str, exit_codes: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"{exit_codes}\n\nexamples:\n{examples}",
        formatter_class=_HelpFormatter,
        allow_abbrev=False,  # `--adapt` is a mistake to point out, not a guess to make
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
    _run_selection(run)
    _run_execution(run)
    _run_outputs(run)
    _run_parallel(run)


def _run_selection(run: argparse.ArgumentParser) -> None:
    """`run`'s options that choose the implementation and the cases."""
    from resumekit.conformance import contracts

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
        choices=contracts.kind_names(),
        help="run only these kinds (repeatable; makes a subset run); "
        + ", ".join(contracts.opt_in_kinds())
        + " run only when named here",
    )


def _run_execution(run: argparse.ArgumentParser) -> None:
    """`run`'s options that say how the cases are run: timeouts, message checks, seed, kills, fault model."""
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


def _run_outputs(run: argparse.ArgumentParser) -> None:
    """`run`'s options that name the reports it writes, and known failures it reads."""
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
        "--keep-failed",
        type=Path,
        metavar="DIR",
        help="keep the world of each failing P1 scenario in a folder of DIR: its journal and caches, the control "
        "plane's log, the origins, a listing of the workspace root, its history, and the command that runs it "
        "again (README.txt); links are never followed, sizes are bounded; DIR must be new, empty, or an earlier "
        "--keep-failed's",
    )


def _run_parallel(run: argparse.ArgumentParser) -> None:
    """`run`'s options for cases at once and shards, and its quiet switch."""
    run.add_argument(
        "--jobs",
        type=_jobs,
        default="auto",
        metavar="N",
        help="run N cases at once, each process case with its own workspace and processes (0 or 'auto': one per "
        "CPU and two more; 1: one at a time)",
    )
    run.add_argument(
        "--shard",
        metavar="K/N",
        help="run only shard K of N of the selected cases (a deterministic 1/N); needs --seed; "
        "combine the shard reports with 'resumekit merge'",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output (the header and verdict stay)")


def _jobs(text: str) -> int:
    """--jobs: a count of cases at once; 0 or 'auto' is ``auto_jobs()``."""
    if text.strip().lower() == "auto":
        return auto_jobs()
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {jobs}")
    return jobs or auto_jobs()


def auto_jobs() -> int:
    """One case per CPU and two more: a case spends part of its time waiting (on a worker's real timeouts, a
    retry's backoff, a kill's random moment, the disk), and the two more take up the CPU time it leaves (on
    two cores the main job keeps both busy to its last seconds at four jobs, not at three)."""
    return (os.cpu_count() or 1) + 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resumekit",
        description="Certify a crash-safe agent runtime against resumekit's golden fixtures.",
        epilog=f"`resumekit COMMAND --help` shows each command's options, defaults and examples.\n\n{EXIT_CODES}",
        formatter_class=_HelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"resumekit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_parser(commands)

    _list_parser(commands)
    _show_parser(commands)
    _validate_parser(commands)
    _diff_parser(commands)
    _merge_parser(commands)
    _report_parser(commands)
    _doctor_parser(commands)
    return parser


def _list_parser(commands: Any) -> None:
    """`list`: the cases, or the clauses and the cases citing each."""
    from resumekit.conformance import contracts

    listing = _command(
        commands,
        "list",
        "list the cases with their kind, profile and clauses",
        "  resumekit list --only 'crash-*'\n  resumekit list --kind p1\n  resumekit list --clauses --kind p1\n"
        "  resumekit list --checks",
        f"exit codes:\n  {EXIT_CERTIFIED}    listed\n  {EXIT_USAGE}    usage error or a broken fixture",
    )
    _golden_option(listing)
    listing.add_argument("--profile", choices=["core", "strict"], default="strict", help="list the cases of profile")
    listing.add_argument(
        "--only", action="append", default=[], metavar="GLOB", help="list only cases whose id matches (repeatable)"
    )
    listing.add_argument(
        "--kind",
        action="append",
        choices=contracts.kind_names(),
        help="list only cases of these kinds (repeatable; every kind, the opt-in ones included, when not given)",
    )
    listing.add_argument("--clauses", action="store_true", help="list each spec clause and the cases that cite it")
    listing.add_argument(
        "--checks",
        action="store_true",
        help="list the checks a mismatch can name (its `check`): each with its clauses and when it judges",
    )


def _show_parser(commands: Any) -> None:
    """`show`: one case as written, with the text of its clauses."""
    show = _command(
        commands,
        "show",
        "print a case as written in its file, the text of each clause it cites, and where the file is",
        "  resumekit show crash-p3\n  resumekit show prefix-after-function-call",
        f"exit codes:\n  {EXIT_CERTIFIED}    shown\n  {EXIT_USAGE}    no such case, or a broken fixture",
    )
    _golden_option(show)
    show.add_argument("case_id", metavar="ID", help="a case id, as `resumekit list` prints it")


def _validate_parser(commands: Any) -> None:
    """`validate`: the schemas and fixture files, for fixture authors."""
    validate = _command(
        commands,
        "validate",
        "check the schemas and every fixture file (for fixture authors)",
        "  resumekit validate\n  resumekit validate --golden my-golden my-golden/phase0/decisions/new.yaml",
        f"exit codes:\n  {EXIT_CERTIFIED}    no problem\n"
        f"  {EXIT_NOT_CERTIFIED}    problems found (each named on stderr)\n"
        f"  {EXIT_USAGE}    the schemas cannot be loaded, or the golden folder does not exist or holds no fixture file",
    )
    _golden_option(validate)
    validate.add_argument(
        "files", nargs="*", type=Path, help="fixture files (default: every file of the golden directory)"
    )


def _diff_parser(commands: Any) -> None:
    """`diff`: two run reports compared."""
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


def _merge_parser(commands: Any) -> None:
    """`merge`: shard reports into one run."""
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


def _report_parser(commands: Any) -> None:
    """`report`: saved JSON reports rendered again, or set side by side."""
    rendered = _command(
        commands,
        "report",
        "render saved JSON run reports: one as HTML, JUnit, Markdown or a badge; several side by side on one page",
        "  resumekit report report.json --report-html report.html --junit junit.xml --badge badge.json\n"
        "  resumekit report reference.json node.json mine.json --compare-html side-by-side.html",
        f"exit codes:\n  {EXIT_CERTIFIED}    rendered; every report is a certification\n"
        f"  {EXIT_NOT_CERTIFIED}    rendered; a report is not certified\n"
        f"  {EXIT_USAGE}    a report cannot be read or is not a run report (the file and JSON pointer named),\n"
        "       or an output cannot be written\n"
        f"  {EXIT_SUBSET}    rendered; a report is a subset run (a shard, say), and none is not certified\n"
        f"  {EXIT_INTERRUPTED}  rendered; a report is of an interrupted run",
    )
    rendered.add_argument("reports", nargs="+", type=Path, help="saved reports (--report-json of `run` or `merge`)")
    rendered.add_argument("--report-html", type=Path, metavar="FILE", help="write the report as an HTML page")
    rendered.add_argument("--junit", type=Path, metavar="FILE", help="write the report as JUnit XML")
    rendered.add_argument("--summary-md", type=Path, metavar="FILE", help="append a Markdown summary")
    rendered.add_argument("--badge", type=Path, metavar="FILE", help="write a shields.io endpoint badge")
    rendered.add_argument(
        "--compare-html",
        type=Path,
        metavar="FILE",
        help="write one HTML page setting every report side by side, per run, gate, clause and case",
    )


def _doctor_parser(commands: Any) -> None:
    """`doctor`: a smoke test of an adapter."""
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``resumekit`` console script."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:  # answered before anything else is imported or built
        sys.stdout.write(f"resumekit {__version__}\n")
        return EXIT_CERTIFIED
    try:
        arguments = parse(args)
        code = COMMANDS[arguments.command](arguments, sys.stdout, sys.stderr)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        from resumekit.conformance import _files, _process

        _process.kill_all()
        _files.interrupt()  # every scratch folder still there, once its processes are killed
        sys.stderr.write("\nresumekit: interrupted\n")
        return EXIT_INTERRUPTED


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line parsed; a usage error exits 2 with the usage of the command it belongs to.

    argparse leaves an option the command does not know to the top-level parser, whose usage says nothing
    of the command's options; the command's own parser reports it instead.
    """
    parser = _parser()
    arguments, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[arguments.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return arguments


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at the null device, so the interpreter's last flush is silent too."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


Command = Callable[[argparse.Namespace, IO[str], IO[str]], int]


def _lazy(module: str, name: str) -> Command:
    """The command *name* of *module*, imported when it runs: ``--help`` and ``--version`` load none of them."""

    def command(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
        found: Command = getattr(importlib.import_module(f"resumekit.conformance.{module}"), name)
        return found(arguments, stdout, stderr)

    command.__name__ = command.__qualname__ = name
    return command


COMMANDS: dict[str, Command] = {
    "run": _lazy("_cmd_run", "cmd_run"),
    "list": _lazy("_cmd_golden", "cmd_list"),
    "show": _lazy("_cmd_golden", "cmd_show"),
    "validate": _lazy("_cmd_golden", "cmd_validate"),
    "doctor": _lazy("_cmd_reports", "cmd_doctor"),
    "merge": _lazy("_cmd_reports", "cmd_merge"),
    "diff": _lazy("_cmd_reports", "cmd_diff"),
    "report": _lazy("_cmd_reports", "cmd_report"),
}
