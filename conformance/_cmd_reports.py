"""``resumekit merge``, ``diff``, ``report`` and ``doctor``: commands over reports already written, or a smoke
test. Every saved report is read through ``saved_reports``, which names the file and the JSON pointer of what
is wrong with it."""

from __future__ import annotations

import argparse
import json
from typing import IO

from resumekit.conformance import (
    badge,
    compare_html,
    diff,
    doctor,
    report,
    report_html,
    shards,
)
from resumekit.conformance._cmd_run import _exit_code, _prepare_outputs
from resumekit.conformance._report_files import append as _append
from resumekit.conformance._report_files import write as _write
from resumekit.conformance.cli import (
    EXIT_CERTIFIED,
    EXIT_INTERRUPTED,
    EXIT_NOT_CERTIFIED,
    EXIT_SUBSET,
    EXIT_USAGE,
)
from resumekit.conformance.results import Run
from resumekit.conformance.saved_reports import ReportError, read_document, read_run

_SINGLE_RUN_OUTPUTS = ("report_html", "junit", "summary_md", "badge")
_SEVERITY = (EXIT_NOT_CERTIFIED, EXIT_INTERRUPTED, EXIT_SUBSET, EXIT_CERTIFIED)  # the first one found wins


def cmd_diff(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    documents = []
    for path in (arguments.before, arguments.after):
        try:
            documents.append(read_document(path))
        except ReportError as error:
            stderr.write(f"resumekit: cannot read the report {error}\n")
            return EXIT_USAGE
    found = diff.compare(documents[0], documents[1])
    stdout.write(diff.format_diff(found, str(arguments.before), str(arguments.after)))
    return EXIT_NOT_CERTIFIED if found.regressed else EXIT_CERTIFIED


def cmd_merge(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if not _prepare_outputs(arguments, stderr):
        return EXIT_USAGE
    named = []
    for path in arguments.reports:
        try:
            named.append((str(path), read_document(path)))
        except ReportError as error:
            stderr.write(f"resumekit: cannot read the shard report {error}\n")
            return EXIT_USAGE
    try:
        merged = shards.merge(named)
    except shards.ShardError as error:
        stderr.write(f"resumekit: cannot merge: {error}\n")
        return EXIT_USAGE
    _write(arguments.output, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    finished = report.from_json(merged)
    _render(finished, arguments)
    stdout.write(report.format_summary(finished) + "\n")
    stdout.write(f"merged {len(named)} shard report(s) into {arguments.output}\n")
    return _exit_code(finished)


def cmd_doctor(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return doctor.diagnose(arguments.adapter, timeout=arguments.timeout, write=stdout.write)


def cmd_report(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    paths = arguments.reports
    single = [f"--{name.replace('_', '-')}" for name in _SINGLE_RUN_OUTPUTS if getattr(arguments, name)]
    if len(paths) > 1 and single:
        stderr.write(
            f"resumekit: {', '.join(single)} render(s) one report, and {len(paths)} were given; "
            "--compare-html sets several side by side\n"
        )
        return EXIT_USAGE
    if not _prepare_outputs(arguments, stderr):
        return EXIT_USAGE
    named: list[tuple[str, Run]] = []
    for path in paths:
        try:
            named.append((str(path), read_run(path)[1]))
        except ReportError as error:
            stderr.write(f"resumekit: cannot read the report {error}\n")
            return EXIT_USAGE
    try:
        if len(named) == 1:
            _render(named[0][1], arguments)
        if arguments.compare_html:
            _write(arguments.compare_html, compare_html.to_compare_html(named))
    except OSError as error:
        stderr.write(f"resumekit: cannot write {error.filename}: {error.strerror or error}\n")
        return EXIT_USAGE
    for label, run in named:
        stdout.write(f"{label}: {report.headline(run)}\n  {report.counts_text(run)}\n")
    codes = {_exit_code(run) for _, run in named}
    return next(code for code in _SEVERITY if code in codes)


def _render(finished: Run, arguments: argparse.Namespace) -> None:
    """Write each single-run output *arguments* names (HTML, JUnit, Markdown, badge) for *finished*."""
    if arguments.junit:
        _write(arguments.junit, report.to_junit(finished))
    if arguments.summary_md:
        _append(arguments.summary_md, report.to_markdown(finished))
    if arguments.report_html:
        _write(arguments.report_html, report_html.to_html(finished))
    if arguments.badge:
        _write(arguments.badge, json.dumps(badge.to_badge(finished), indent=2) + "\n")
