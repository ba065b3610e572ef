"""``resumekit merge``, ``diff`` and ``doctor``: commands over reports already written, or a smoke test."""

from __future__ import annotations

import argparse
import json
from typing import IO

from resumekit.conformance import (
    badge,
    diff,
    doctor,
    report,
    report_html,
    schemas,
    shards,
)
from resumekit.conformance._cmd_run import _append, _exit_code, _prepare_outputs
from resumekit.conformance.cli import (
    EXIT_CERTIFIED,
    EXIT_NOT_CERTIFIED,
    EXIT_USAGE,
)


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


def cmd_doctor(arguments: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return doctor.diagnose(arguments.adapter, timeout=arguments.timeout, write=stdout.write)
