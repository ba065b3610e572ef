"""``resumekit run``: select, run, report, and exit with what the run supports, and no more."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from resumekit.conformance import (
    __version__,
    _descriptors,
    _process,
    badge,
    contracts,
    expectations,
    keep,
    report,
    report_html,
    shards,
)
from resumekit.conformance._cmd_golden import _suite
from resumekit.conformance._defaults import DEFAULT_TIMEOUT
from resumekit.conformance._report_files import append as _append
from resumekit.conformance._report_files import write as _write
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import (
    AdapterStartError,
    ProcessAdapter,
    open_adapter,
    process_factory,
)
from resumekit.conformance.cases import Case
from resumekit.conformance.cli import (
    EXIT_CERTIFIED,
    EXIT_INTERRUPTED,
    EXIT_NOT_CERTIFIED,
    EXIT_SUBSET,
    EXIT_USAGE,
    OUTPUT_OPTIONS,
)
from resumekit.conformance.fixtures import Suite
from resumekit.conformance.history import ReportBudget
from resumekit.conformance.progress import ProgressReporter
from resumekit.conformance.results import Implementation, Run, Selection, Shard
from resumekit.conformance.runner import run as run_cases


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


def _prepare_keep(arguments: argparse.Namespace, stderr: IO[str]) -> bool:
    """Make --keep-failed's DIR ready before the first case runs; False (said on stderr) when it cannot be."""
    if arguments.keep_failed is None:
        return True
    try:
        keep.prepare(arguments.keep_failed)
    except keep.KeepError as error:
        stderr.write(f"resumekit: --keep-failed {error}\n")
        return False
    return True


def _rerun(arguments: argparse.Namespace, seed: int) -> keep.Rerun:
    """What the command that runs one case of this run again says: the adapter, the seed, the shaping options."""
    options: list[str] = []
    if arguments.profile != "strict":
        options += ["--profile", arguments.profile]
    if arguments.fault_model != "process-crash":
        options += ["--fault-model", arguments.fault_model]
    if arguments.timeout != DEFAULT_TIMEOUT:
        options += ["--timeout", f"{arguments.timeout:g}"]
    if arguments.golden is not None:
        options += ["--golden", str(arguments.golden.resolve())]
    if not arguments.validate_messages:
        options.append("--no-validate-messages")
    return keep.Rerun(arguments.adapter, seed, tuple(options), os.getcwd())


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


def _selection(arguments: argparse.Namespace, seed: int, expected: expectations.Expectations | None) -> Selection:
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


def _progress(arguments: argparse.Namespace, stdout: IO[str], total: int) -> ProgressReporter | None:
    if arguments.quiet:
        return None
    isatty = getattr(stdout, "isatty", None)
    live = bool(isatty()) if isatty is not None else False

    def write(text: str) -> None:
        stdout.write(text)
        if live:
            stdout.flush()

    return ProgressReporter(write, total=total, live=live)


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
            lambda path: _write(path, json.dumps(report.to_json(finished), indent=2, ensure_ascii=False) + "\n"),
        ),
        (arguments.junit, "JUnit file", lambda path: _write(path, report.to_junit(finished))),
        (arguments.summary_md, "Markdown summary", lambda path: _append(path, report.to_markdown(finished))),
        (
            arguments.report_html,
            "HTML report",
            lambda path: _write(path, report_html.to_html(finished, cases)),
        ),
        (
            arguments.badge,
            "badge",
            lambda path: _write(path, json.dumps(badge.to_badge(finished), indent=2) + "\n"),
        ),
        (
            arguments.write_expectations,
            "expectations file",
            lambda path: _write(path, expectations.from_run(finished, expected.failures if expected else None)),
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
    progress: ProgressReporter | None,
) -> dict[str, Any]:
    """The runner of every kind the registered contracts can run with *adapter* and the run's options."""
    factory = None
    if isinstance(adapter, ProcessAdapter):
        factory = process_factory(
            arguments.adapter,
            timeout=arguments.timeout,
            validate_messages=arguments.validate_messages,
            budget=adapter.budget,  # one count of failed starts for every process of the run
        )
    power = None
    if arguments.fault_model == "power-loss":
        from resumekit.conformance.powerloss import PowerLoss

        power = PowerLoss()
    context = contracts.RunContext(
        adapter,
        profile,
        factory=factory,
        adapter_spec=arguments.adapter,
        seed=seed,
        requested_seed=arguments.seed,
        kills=arguments.kills,
        power=power,
        on_kill=progress.kill_progress if progress is not None else None,
        jobs=arguments.jobs,
        keeper=keep.Keeper(arguments.keep_failed, _rerun(arguments, seed)) if arguments.keep_failed else None,
        budget=ReportBudget(),
    )
    return contracts.runners(context)


def _seeded(case: Case) -> bool:
    kind = contracts.kind(case.kind)
    return kind is not None and kind.seeded


class _Usage(Exception):
    """A reason the run cannot start, already worded for stderr."""


def _sharded(arguments: argparse.Namespace, cases: list[Case]) -> tuple[list[Case], Shard | None]:
    """The cases of the shard --shard asks for, and the Shard; _Usage when the option is wrong."""
    if arguments.shard is None:
        return cases, None
    try:
        index, count = shards.parse(arguments.shard)
    except shards.ShardError as error:
        raise _Usage(str(error)) from None
    if arguments.seed is None:
        raise _Usage("--shard needs --seed, the same for every shard, so that they make one run")
    ids = [case.id for case in cases]
    return shards.take(cases, ids, index, count), Shard(index, count, tuple(ids), arguments.seed)


def cmd_run(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the selected cases, print the failures and the verdict, write the reports, and exit as the run allows."""
    suite = _suite(arguments, stderr)
    if suite is None:
        return EXIT_USAGE
    cases = suite.select(arguments.profile, arguments.only, arguments.kind)
    if not cases:
        stderr.write(f"resumekit: no case matches --only {arguments.only!r} in profile {arguments.profile!r}\n")
        return EXIT_USAGE
    try:
        cases, shard = _sharded(arguments, cases)
    except _Usage as error:
        stderr.write(f"resumekit: {error}\n")
        return EXIT_USAGE
    loaded, expected = _load_expectations(arguments, suite, stderr)
    if not loaded or not _prepare_outputs(arguments, stderr) or not _prepare_keep(arguments, stderr):
        return EXIT_USAGE
    arguments.jobs, lowered = _descriptors.fitted_jobs(arguments.jobs)
    if lowered is not None:
        stderr.write(f"resumekit: {lowered}\n")
    try:
        adapter = open_adapter(
            arguments.adapter, timeout=arguments.timeout, validate_messages=arguments.validate_messages
        )
    except AdapterStartError as error:
        stderr.write(f"resumekit: cannot start the implementation: {error}\n")
        return EXIT_USAGE
    try:
        finished = _run(arguments, suite, cases, shard, adapter, expected, stdout)
    finally:
        adapter.close()
    for result in finished.results:
        if result.outcome.value in ("failed", "errored") or result.unexpected_pass:
            stdout.write("\n" + report.format_result(result, finished.golden_root) + "\n")
    stdout.write(report.format_summary(finished) + "\n")
    stdout.flush()
    if not _write_reports(finished, arguments, expected, stderr, cases):
        return EXIT_INTERRUPTED if finished.interrupted else EXIT_USAGE
    if shard is not None and not finished.interrupted:
        # A shard certifies nothing alone (`merge` gives the verdict): it is a subset run, which fails only on a
        # case that did not pass.
        return EXIT_NOT_CERTIFIED if report.shard_failed(finished) else EXIT_SUBSET
    return _exit_code(finished)


def _run(
    arguments: argparse.Namespace,
    suite: Suite,
    cases: list[Case],
    shard: Shard | None,
    adapter: Any,
    expected: Any,
    stdout: IO[str],
) -> Run:
    """Print the header, run *cases* with progress, Ctrl-C ending the run with what finished."""
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(2**32)
    selection = _selection(arguments, seed, expected)
    profile = compared_profile(arguments.profile, adapter.implementation)
    header = report.format_header(
        adapter.implementation, selection, kit_version=__version__, golden_digest=suite.digest, selected=len(cases)
    )
    stdout.write(header)
    stdout.flush()
    progress = _progress(arguments, stdout, len(cases))
    with _interruptible():
        finished = run_cases(
            cases,
            adapter,
            profile=profile,
            reporter=progress,
            runners=_runners(arguments, adapter, profile, seed, progress),
            seed=seed if any(_seeded(case) for case in cases) else None,
            golden_digest=suite.digest,
            selection=selection,
            known_failures=expected.failures if expected else None,
            golden_root=str(suite.root.resolve()),
            jobs=arguments.jobs,
            shard=shard,
        )
    if progress is not None:
        progress.finish()
    return dataclasses.replace(finished, messages_validated=arguments.validate_messages)
