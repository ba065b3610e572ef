"""Expected failures: a YAML file of case ids an implementation is known to fail, each with a reason.

``resumekit run --expect FILE`` reads one (schemas/expectations.json); ``--write-expectations FILE``
writes one from a run's failures. Strict in both directions: a listed case that fails does not fail
the run, a listed case that passes does, so the file cannot rot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from resumekit.conformance import _yaml, schemas
from resumekit.conformance._text import printable
from resumekit.conformance.results import Run

EXPECTATIONS = schemas.BASE + "expectations.json"


class ExpectationsError(Exception):
    """An expectations file that cannot be read, is not valid, or names a case the golden set lacks."""


@dataclass(frozen=True, slots=True)
class Expectations:
    """The known failures of one file, and the file's digest (recorded in every report)."""

    failures: Mapping[str, str]
    source: str
    digest: str


def load(path: Path, known_ids: Iterable[str]) -> Expectations:
    """Read and check *path*; every case id it lists must exist in the golden set (*known_ids*)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ExpectationsError(f"cannot read the expectations file {path}: {error.strerror or error}") from None
    try:
        document = _yaml.load(raw.decode("utf-8"))
    except (UnicodeDecodeError, _yaml.YamlError) as error:
        line = getattr(error, "line", None)
        where = f"{path}:{line}" if line else str(path)
        raise ExpectationsError(f"{where}: {getattr(error, 'message', error)}") from None
    violation = schemas.first_violation(EXPECTATIONS, document.data)
    if violation is not None:
        line = document.line_of(violation.pointer)
        where = f"{path}:{line}" if line else str(path)
        raise ExpectationsError(f"{where}: not an expectations file (schemas/expectations.json) {violation}")
    failures: dict[str, str] = dict(document.data["failures"])
    known = set(known_ids)
    unknown = [case_id for case_id in failures if case_id not in known]
    if unknown:
        lines = [f"{path}:{document.line_of('/failures/' + case_id) or '?'}: {case_id}" for case_id in unknown]
        raise ExpectationsError(
            "the expectations file lists case(s) the golden set does not have:\n  " + "\n  ".join(lines)
        )
    return Expectations(failures, str(path), hashlib.sha256(raw).hexdigest())


def from_run(run: Run, previous: Mapping[str, str] | None = None) -> str:
    """The YAML of an expectations file listing every claimed case of *run* that did not pass.

    A reason from *previous* (the file the run read) is kept; a new failure gets its first problem.
    """
    failures: dict[str, str] = {}
    for result in run.results:
        if result.outcome.value not in ("failed", "errored", "skipped"):
            continue
        reason = (previous or {}).get(result.case_id)
        if reason is None:
            first = printable(result.message).splitlines()[0] if result.message else ""
            if not first and result.mismatches:
                mismatch = result.mismatches[0]
                clause = f" [{mismatch.clause}]" if mismatch.clause else ""
                first = f"{mismatch.pointer or '(whole plan)'}{clause} differs"
            reason = f"{result.outcome.value}: {first or 'see the report'}"
        failures[result.case_id] = reason
    info = run.implementation
    head = (
        "# Cases this implementation is known to fail, each with a reason (schemas/expectations.json).\n"
        "# Use with: resumekit run --expect THIS_FILE. A listed case that passes fails the run: take it off then.\n"
    )
    body = yaml.safe_dump(
        {"implementation": f"{info.name} {info.version}".strip(), "failures": failures},
        sort_keys=False,
        allow_unicode=True,
        width=1000,
    )
    return head + body
