"""Runs ``resumekit validate`` and a short ``resumekit run`` on mutated golden trees, in this process.

``python -m tests.fuzz.worker`` reads one job per line on stdin (a JSON object: the tree's folder and
the files to name) and answers one JSON line per job on stdout. The commands go through
``resumekit.conformance.cli.main`` exactly as the console script calls it; running them in a
long-lived process spares the interpreter start, which would otherwise be most of the cost of each of
the thousand trees. The campaign kills this process when a job outlives its timeout (a hang) and
starts a new one; an exception that escapes ``main`` is reported as a traceback.

The kit's own schemas are never mutated, so their meta-check (``check_schema``) is remembered across
jobs; everything that reads the golden tree runs afresh each time.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

ADAPTER = "python:resumekit.reference:build_resume_plan"
MEMORY_LIMIT = 2 << 30  # address space: a runaway loader fails here instead of swapping the machine


def _remember_schema_checks() -> None:
    from jsonschema import Draft202012Validator

    checked: set[int] = set()
    original = Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]

    def check_schema(cls: Any, schema: Any) -> None:
        key = id(schema)
        if key not in checked:
            original(cls, schema)
            checked.add(key)

    Draft202012Validator.check_schema = classmethod(check_schema)  # type: ignore[method-assign,assignment]


def command(argv: list[str]) -> dict[str, Any]:
    """Run one resumekit command; its exit code, output, and the traceback of an escaped exception."""
    from resumekit.conformance import cli

    out, err = io.StringIO(), io.StringIO()
    escaped = ""
    code: int | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 2
        except BaseException:  # any escape is what the campaign counts
            escaped = traceback.format_exc()
            code = None
    return {"code": code, "stdout": _clip(out.getvalue()), "stderr": _clip(err.getvalue()), "escaped": escaped}


def _clip(text: str) -> str:
    """The last 300 lines of *text*, each cut to 2,000 characters: a problem quoting a huge value stays one line."""
    return "\n".join(line[:2000] for line in text.splitlines()[-300:])


def job(request: dict[str, Any]) -> dict[str, Any]:
    """Validate the tree, then run its decision cases against the reference, in process."""
    tree = request["tree"]
    report = Path(request["report"])
    validate = command(["validate", "--golden", tree, *request.get("files", [])])
    run = command(
        ["run", "-q", "--golden", tree, "--adapter", ADAPTER, "--kind", "decision", "--timeout", "5",
         "--report-json", str(report)]
    )
    summary: dict[str, Any] = {}
    if report.is_file():
        with contextlib.suppress(ValueError, OSError):
            document = json.loads(report.read_text(encoding="utf-8"))
            summary = {
                "summary": document.get("summary"),
                "errored": [r.get("message", "")[:300] for r in document["results"] if r["outcome"] == "errored"][:5],
            }
    import resource  # POSIX only, imported here so that the tests collect on Windows

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"validate": validate, "run": run, "report": summary, "peakKb": peak}


def main() -> int:
    import resource  # POSIX only, imported here so that the tests collect on Windows

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    _remember_schema_checks()
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    for line in sys.stdin:
        try:
            result = job(json.loads(line))
        except BaseException:  # the campaign's own failure, told apart from the kit's
            result = {"harness": traceback.format_exc()}
        answer.write(json.dumps(result) + "\n")
        answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
