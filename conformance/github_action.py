"""The steps of the GitHub action and of the reusable workflow, as the commands of this module.

The YAML of ``action.yml`` and ``.github/workflows/certify.yml`` stays thin: each step sets environment
variables and calls one of these commands, so what a step decides (the arguments of the run, whether a shard
passed, the verdict it outputs) is Python that the kit's tests run offline, not shell that only GitHub runs.

- ``plan``: the shard matrix and the seed that every shard shares (outputs ``shards`` and ``seed``).
- ``certify``: one ``resumekit run`` (a whole certification, or one shard), its reports in one folder, the
  Markdown summary appended to the step summary; outputs ``verdict``, ``certified``, ``exit-code``,
  ``report`` and ``artifact``; exits 0 when the run passed for its scope (a certification certified, a shard
  with no failure), else 1.
- ``merge``: the shards' reports merged into one run (one whole run's report re-rendered), with the same
  outputs and exit status as ``certify``.

The action runs the command its input ``command`` names; the reusable workflow runs the action in each of its
three jobs (plan, the shards, merge).

Inputs come from the environment (``RESUMEKIT_*``), never from text pasted into a shell command, so an input
cannot inject a command. Outputs go to the file named by ``GITHUB_OUTPUT``, the summary to
``GITHUB_STEP_SUMMARY``; without them (a run on one's own machine) both are skipped.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

MAX_SHARDS = 64
_SHARD = re.compile(r"(\d+)/(\d+)")


class InputError(Exception):
    """An input of the action that cannot be used, said with its value."""


def plan(env: Mapping[str, str]) -> dict[str, str]:
    """The outputs of ``plan``: the shard indices as a JSON list, and one seed for every shard of the run."""
    text = env.get("RESUMEKIT_SHARDS", "").strip() or "1"
    if not text.isdigit() or not 1 <= int(text) <= MAX_SHARDS:
        raise InputError(f"shards must be a whole number from 1 to {MAX_SHARDS}, not {text!r}")
    seed = env.get("RESUMEKIT_SEED", "").strip() or env.get("GITHUB_RUN_ID", "").strip()
    if not seed.isdigit():
        seed = str(random.SystemRandom().randrange(2**32))
    return {"shards": "[" + ",".join(str(k) for k in range(1, int(text) + 1)) + "]", "seed": seed}


def run_arguments(env: Mapping[str, str], out: Path) -> list[str]:
    """The arguments of ``resumekit run`` that the inputs in *env* ask for, the reports written into *out*."""
    adapter = env.get("RESUMEKIT_ADAPTER", "").strip()
    if not adapter:
        raise InputError("the input 'adapter' is empty: give the command that starts your adapter, or 'reference'")
    args = ["run", "--adapter", adapter, "--profile", env.get("RESUMEKIT_PROFILE", "").strip() or "strict"]
    shard = _shard(env)
    if shard is not None:
        seed = env.get("RESUMEKIT_SEED", "").strip()
        if not seed.isdigit():
            raise InputError(f"a shard needs the seed every shard shares, a whole number, not {seed!r}")
        args += ["--shard", f"{shard[0]}/{shard[1]}", "--seed", seed]
    args += ["--report-json", str(out / "report.json"), "--junit", str(out / "junit.xml")]
    args += ["--report-html", str(out / "report.html"), "--badge", str(out / "badge.json")]
    summary = env.get("GITHUB_STEP_SUMMARY", "")
    if summary:
        args += ["--summary-md", summary]
    try:
        extra = split_args(env.get("RESUMEKIT_ARGS", ""))
    except ValueError as error:
        raise InputError(f"the input 'args' cannot be split: {error}") from None
    return args + extra


def split_args(text: str, *, windows: bool = os.name == "nt") -> list[str]:
    """The words of the input 'args', split as a POSIX shell splits them (quotes group words, ``#`` is no
    comment), except that on Windows a backslash is part of the word it is in: ``--golden C:\\fixtures`` keeps
    its path, which POSIX splitting would make ``C:fixtures``. Raises ValueError for an unclosed quote."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    if windows:
        lexer.escape = ""
    return list(lexer)


def _shard(env: Mapping[str, str]) -> tuple[int, int] | None:
    shard = _shard_input(env)
    return None if shard is None or shard[1] == 1 else shard  # one shard of one is the whole run


def _shard_input(env: Mapping[str, str]) -> tuple[int, int] | None:
    text = env.get("RESUMEKIT_SHARD", "").strip()
    if not text:
        return None
    found = _SHARD.fullmatch(text)
    if found is None or not 1 <= int(found[1]) <= int(found[2]) <= MAX_SHARDS:
        raise InputError(f"shard must be K/N with 1 <= K <= N <= {MAX_SHARDS}, not {text!r}")
    return int(found[1]), int(found[2])


def artifact_name(env: Mapping[str, str]) -> str:
    """The name of the reports' artifact: the input ``report-name``, with the shard where one was given (1/1
    too, so that a sharded workflow's merged artifact never takes a shard's name)."""
    name = env.get("RESUMEKIT_REPORT_NAME", "").strip() or "resumekit-report"
    shard = _shard_input(env)
    return name if shard is None else f"{name}-shard-{shard[0]}-of-{shard[1]}"


def outcome(report: Path, code: int, *, shard: bool) -> dict[str, str]:
    """The outputs for a run that exited *code* and wrote *report*; ``ok`` says whether it passed for its scope."""
    from resumekit.conformance import report as reports
    from resumekit.conformance.saved_reports import ReportError, read_run

    try:
        _, run = read_run(report)
    except ReportError as error:
        return {"verdict": f"no verdict: {error}", "certified": "false", "exit-code": str(code), "ok": "false"}
    # A shard is a subset run: its pass is exit 3, and only the merged run is a certification.
    passed = code == 0 or (shard and code == 3 and not reports.shard_failed(run))
    return {
        "verdict": f"{reports.headline(run)}: {reports.counts_text(run)}",
        "certified": "true" if run.verdict.certified else "false",
        "exit-code": str(code),
        "ok": "true" if passed else "false",
    }


def certify(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """Run the certification the inputs ask for; its outputs and the step's exit status."""
    out = Path(env.get("RESUMEKIT_OUT", "").strip() or "resumekit-reports")
    out.mkdir(parents=True, exist_ok=True)
    args = run_arguments(env, out)
    print("resumekit " + " ".join(shlex.quote(arg) for arg in args), flush=True)
    code = _kit(args)
    found = outcome(out / "report.json", code, shard=_shard(env) is not None)
    found |= {"report": str(out / "report.json"), "artifact": artifact_name(env)}
    return found, 0 if found["ok"] == "true" else 1


def merge(env: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """Merge the shard reports found under ``RESUMEKIT_REPORTS``; its outputs and the step's exit status."""
    found = sorted(Path(env.get("RESUMEKIT_REPORTS", "").strip() or "shards").rglob("report.json"))
    if not found:
        raise InputError("no shard reports (report.json) were found to merge")
    out = Path(env.get("RESUMEKIT_OUT", "").strip() or "resumekit-reports")
    out.mkdir(parents=True, exist_ok=True)
    merged = out / "report.json"
    outputs = ["--junit", str(out / "junit.xml"), "--report-html", str(out / "report.html")]
    outputs += ["--badge", str(out / "badge.json")]
    if env.get("GITHUB_STEP_SUMMARY"):
        outputs += ["--summary-md", env["GITHUB_STEP_SUMMARY"]]
    paths = [str(path) for path in found]
    if len(found) == 1 and _is_whole(found[0]):
        # One job ran the whole certification: nothing to merge, only its outputs to write again.
        merged.write_bytes(found[0].read_bytes())
        code = _kit(["report", str(merged), *outputs])
    else:
        code = _kit(["merge", *paths, "-o", str(merged), *outputs])
    name = env.get("RESUMEKIT_REPORT_NAME", "").strip() or "resumekit-report"
    result = outcome(merged, code, shard=False) | {"report": str(merged), "artifact": name}
    return result, 0 if result["ok"] == "true" else 1


def _is_whole(path: Path) -> bool:
    from resumekit.conformance.saved_reports import ReportError, read_run

    try:
        return read_run(path)[1].shard is None
    except ReportError:
        return False


def _kit(args: Sequence[str]) -> int:
    # A child process, so that the run's output streams to the log as it goes and its exit code is its own.
    return subprocess.run([sys.executable, "-m", "resumekit.conformance", *args], check=False).returncode


def write_outputs(outputs: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Append *outputs* to the ``GITHUB_OUTPUT`` file, and print them for the log."""
    for key, value in outputs.items():
        print(f"{key}: {value}")
    target = env.get("GITHUB_OUTPUT")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as handle:
        for key, value in outputs.items():
            handle.write(f"{key}={' '.join(value.splitlines())}\n")


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """The command line: ``plan``, ``certify`` or ``merge``; exit 2 for an input that cannot be used."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    commands = {"plan": lambda e: (plan(e), 0), "certify": certify, "merge": merge}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python -m resumekit.conformance.github_action {{{','.join(commands)}}}", file=sys.stderr)
        return 2
    try:
        outputs, status = commands[argv[0]](env)
    except InputError as error:
        print(f"resumekit: {error}", file=sys.stderr)
        return 2
    write_outputs(outputs, env)
    return status


if __name__ == "__main__":
    sys.exit(main())
