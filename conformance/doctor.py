"""``resumekit doctor``: a short smoke test of an adapter, so a full run fails only for real reasons."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from resumekit.conformance import _doctor_p1, _files
from resumekit.conformance._text import printable
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, load_python, process_factory
from resumekit.conformance.adapters.messages import preview
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1 import origin
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.phase0.crash import MARKER_NEVER_WRITTEN, orderly_exit_problem
from resumekit.conformance.phase0.decisions import run_decision
from resumekit.conformance.results import CaseResult, Outcome

Write = Callable[[str], Any]


class _Checks:
    def __init__(self, write: Write) -> None:
        self.write, self.failures = write, 0

    def report(self, ok: bool, text: str) -> bool:
        self.write(f"[{'ok' if ok else 'FAIL'}] {printable(text)}\n")
        self.failures += not ok
        return ok


def _why(result: CaseResult) -> str:
    """The reason a decision check did not pass, as one line: the message, or the first differences."""
    if result.outcome is Outcome.PASSED:
        return ""
    if result.message:
        return result.message.splitlines()[0]
    shown = [f"{m.pointer or '/'}: expected {m.expected!r}, got {m.actual!r}" for m in result.mismatches[:2]]
    return "; ".join(shown) or "no reason given"


_STRAY_WAIT = 0.2  # seconds to let late output arrive before looking for it


def _shown(stray: list[bytes]) -> str:
    """The first two stray lines, each cut to its preview: a line may be 64 MiB."""
    return repr([preview(line) for line in stray[:2]])


def _no_stray_output(checks: _Checks, process: ProcessAdapter, after: str) -> None:
    """Look for output on stdout that no request asked for, after *after*."""
    time.sleep(_STRAY_WAIT)
    stray = process.process.pending() if process.process else []
    checks.report(
        not stray,
        f"no stray stdout after {after}" if not stray else f"stray stdout after {after}: {_shown(stray)}",
    )


def _origin_hooks(checks: _Checks) -> None:
    """P1: git runs the origins' hooks on this machine (they need an sh, which MinGit lacks)."""
    problem = origin.hooks_problem()
    checks.report(problem is None, problem or "git runs the P1 origins' hooks (an sh is there)")


def _trivial_case() -> DecisionCase:
    for case in load_suite().cases:
        if isinstance(case, DecisionCase) and case.id == "prefix-before-function-call":
            return case
    raise LookupError("the golden suite lacks the case 'prefix-before-function-call'")


def diagnose(spec: str, *, timeout: float, write: Write) -> int:
    """Run the smoke checks against *spec*; 0 when all pass, 1 otherwise."""
    checks = _Checks(write)
    case = _trivial_case()
    if spec.startswith("python:"):
        try:
            adapter = load_python(spec[len("python:") :])
        except AdapterStartError as error:
            checks.report(False, f"import: {error}")
            return 1
        result = run_decision(case, adapter, "core")
        checks.report(
            result.outcome is Outcome.PASSED,
            f"in-process plan for {case.id!r}: {result.outcome.value} {_why(result)}".rstrip(),
        )
        return 1 if checks.failures else 0

    process = process_factory(spec, timeout=timeout)()
    began = time.perf_counter()
    try:
        info = process.start()
    except AdapterStartError as error:
        checks.report(False, f"start and hello: {error}")
        return 1
    checks.report(
        True,
        f"start and hello in {time.perf_counter() - began:.2f} s: {info.name} {info.version} ({info.language}); "
        "the hello matches its schema",
    )
    checks.report(
        True, f"claims {', '.join(info.capabilities) or 'no capability'}; profiles {', '.join(info.profiles)}"
    )
    if "p1.worker" in info.capabilities:
        _origin_hooks(checks)
    try:
        _no_stray_output(checks, process, "the hello")
        _decisions(checks, process, case, info.capabilities)
        _restart(checks, process, case, info.capabilities)
        if "phase0.store" in info.capabilities:
            _store(checks, process, info.capabilities)
    finally:
        process.close()
    if "phase0.crash" in info.capabilities:
        problem = orderly_exit_problem(process_factory(spec, timeout=timeout))
        checks.report(
            problem is None,
            "an orderly exit (stop, end of stdin) after crash.arm writes the marker"
            if problem is None
            else f"{MARKER_NEVER_WRITTEN}: {problem}",
        )
    if "p1.worker" in info.capabilities:
        for ok, text in _doctor_p1.run(spec, timeout):
            checks.report(ok, text)
    write(f"{'all checks passed' if not checks.failures else f'{checks.failures} check(s) failed'}\n")
    return 1 if checks.failures else 0


def _decisions(checks: _Checks, process: ProcessAdapter, case: DecisionCase, capabilities: tuple[str, ...]) -> None:
    if "phase0.projection" not in capabilities:
        return
    began = time.perf_counter()
    result = run_decision(case, process, "core")
    elapsed = time.perf_counter() - began
    checks.report(
        result.outcome is Outcome.PASSED,
        f"plan for {case.id!r}: {result.outcome.value} in {elapsed * 1000:.1f} ms {_why(result)}".rstrip(),
    )
    checks.report(elapsed < process.timeout, f"answered within the {process.timeout:g} s timeout")
    time.sleep(_STRAY_WAIT)
    stray = process.process.pending() if process.process else []
    checks.report(
        not stray, "stdout carries protocol lines only" if not stray else f"stray stdout lines: {_shown(stray)}"
    )


def _restart(checks: _Checks, process: ProcessAdapter, case: DecisionCase, capabilities: tuple[str, ...]) -> None:
    old = process.process.pid if process.process else None
    process.kill()
    try:
        process.restart()
    except AdapterStartError as error:
        checks.report(False, f"restart after a kill: {error}")
        return
    new = process.process.pid if process.process else None
    checks.report(old != new, f"killed pid {old}, restarted as pid {new}, hello replayed")
    if "phase0.projection" in capabilities:
        result = run_decision(case, process, "core")
        checks.report(
            result.outcome is Outcome.PASSED, f"plan after the restart: {result.outcome.value} {_why(result)}".rstrip()
        )
        _no_stray_output(checks, process, "the plan after the restart")


def _store(checks: _Checks, process: ProcessAdapter, capabilities: tuple[str, ...]) -> None:
    case = _trivial_case()
    scratch = _files.scratch("doctor")
    try:
        workspace = scratch / "workspace"
        workspace.mkdir()
        replies = [process.request("phase0.store.open", workspace=str(workspace), sessionId="session-1", runId="run-1")]
        replies += [process.request("phase0.store.append", event=event) for event in case.events]
        replies.append(process.request("phase0.store.read"))
        failed = next((r for r in replies if r.outcome != "result"), None)
        read = replies[-1].value if failed is None else None
        ok = isinstance(read, dict) and read.get("status") == "ok" and read.get("events") == list(case.events)
        reason = f": {failed.message}" if failed else "" if ok else f": the read answered {read!r}"[:400]
        checks.report(ok, "store round trip: open, append, read" + reason)
        if failed is None:
            _no_stray_output(checks, process, "the store round trip")
        if "phase0.crash" in capabilities:
            reply = process.request("phase0.crash.arm", marker=str(scratch / "finally.marker"))
            pid = reply.value.get("pid") if isinstance(reply.value, dict) else None
            owned = process.process is not None and process.process.owns(pid)
            checks.report(
                owned,
                f"crash.arm reports pid {pid!r}, the adapter or one of its descendants"
                if owned
                else f"crash.arm reports pid {pid!r}, which is not the adapter or one of its descendants"
                + (f": {reply.message}" if reply.outcome != "result" else ""),
            )
            if reply.outcome == "result":
                _no_stray_output(checks, process, "crash.arm")
    finally:
        process.close()
        _files.remove(scratch)
