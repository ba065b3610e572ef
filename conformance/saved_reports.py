"""Saved JSON run reports read back, defensively: ``resumekit report``, ``diff`` and ``merge`` take files a
foreign run, another machine or a CI artifact wrote, and a wrong one becomes a sentence naming the file and
the JSON pointer, never a traceback.

Only a regular file is read (a FIFO or a device would block or never end), at most ``MAX_REPORT`` bytes, as
UTF-8 JSON that the run report's schema accepts, its strings made safe (``_text.safe_value``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from resumekit.conformance import report, schemas
from resumekit.conformance._files import NotRegular, open_regular
from resumekit.conformance._text import safe_value
from resumekit.conformance.results import Run

MAX_REPORT = 64 * 1024 * 1024  # bytes: a strict run of every case writes about 2 MB


class ReportError(Exception):
    """A saved report that cannot be read, or is not a run report; the message names the file."""


def read_document(path: Path) -> dict[str, Any]:
    """The JSON document of the run report at *path*, checked against its schema."""
    text = _read_text(path)
    try:
        document = safe_value(json.loads(text))  # a lone surrogate (an escape in JSON) as its escape's text
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    except RecursionError:
        raise ReportError(f"{path}: not JSON a reader can hold: nested too deeply") from None
    violation = schemas.first_violation(schemas.RUN_REPORT, document)
    if violation is not None:
        raise ReportError(f"{path}: not a run report: it breaks its schema {violation}")
    assert isinstance(document, dict)
    return document


def read_run(path: Path) -> tuple[dict[str, Any], Run]:
    """The document at *path* and the Run it holds."""
    document = read_document(path)
    try:
        return document, report.from_json(document)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        # The schema admits it, yet its values do not make a run (an unknown outcome, say).
        raise ReportError(f"{path}: a run report whose values do not make a run: {error!r}") from None


def _read_text(path: Path) -> str:
    try:
        fd = open_regular(path, os.O_RDONLY)
    except NotRegular:
        raise ReportError(f"{path}: not a regular file") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot be opened: {error.strerror or error}") from None
    with open(fd, "rb") as handle:
        data = handle.read(MAX_REPORT + 1)
    if len(data) > MAX_REPORT:
        raise ReportError(f"{path}: holds more than {MAX_REPORT} bytes, more than any run report")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ReportError(f"{path}: not UTF-8: byte {error.start} cannot be decoded") from None
