"""Mutation testing of the reference projection against the decision cases: ``nox -s mutation``.

Cosmic Ray (from PyPI) makes the mutants: every mutation position of each of its core operators in
``reference/phase0/projection.py``. Its own runner writes each mutant over the source file and runs a
test command; here the module is installed from a wheel under the ``resumekit`` namespace, so that
command would have to reinstall the wheel per mutant. This driver instead loads each mutant in place of
the installed module, in-process, and runs the decision cases through ``run_decision`` with a
``PythonAdapter``. A mutant is killed when some decision case does not pass (failed or errored,
including an exception or a hang past ``TIMEOUT`` seconds).

Each mutant is run first against the core cases with ``--profile core``; a survivor is run again
against every case with ``--profile strict``. The projection receives its inputs as the adapter protocol
delivers them, decoded from JSON, so a mutant that compares decoded values by identity (``is``) is
exercised as a protocol server would run it.

The core score counts only mutants the core profile can observe: a mutant on a line that no case runs
under ``--profile core`` (the strict checks, which the core profile never calls; the lines are traced on
the unmutated projection and printed) cannot be killed by a core case, whatever the cases say. Those
mutants still count in the core-and-strict score, so a line that no case runs at all shows up there as
survivors. Survivors judged equivalent (no input can tell them from
the original) are listed, each with why, in ``tests/mutation-equivalent.txt``, keyed by operator and
position. The run fails when fewer than ``CORE_THRESHOLD`` of the non-equivalent mutants are killed by
the core cases alone, or fewer than ``ALL_THRESHOLD`` by core and strict together.

    python -m tests.mutation [--limit N] [--jobs N]
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import multiprocessing
import signal
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent.parent / "reference" / "phase0" / "projection.py"
EQUIVALENT_FILE = Path(__file__).resolve().parent / "mutation-equivalent.txt"
MODULE = "resumekit.reference.phase0.projection"
# Issue targets, met and kept: Cosmic Ray 8.7 makes 357 mutants of the one-pass projection, 66 of them
# annotation-only; mutation-equivalent.txt lists 40 more as equivalent and 8 as equivalent under core only
# (the strict scan's switch). The core cases kill all 129 mutants the core profile can observe; core and
# strict cases together kill all 210 non-equivalent ones.
CORE_THRESHOLD = 0.95  # of non-equivalent mutants the core profile can observe, killed by core cases alone
ALL_THRESHOLD = 1.0  # of non-equivalent mutants killed by core and strict cases together
TIMEOUT = 20  # seconds for all decision cases against one mutant; a slower mutant counts as killed


@dataclass(frozen=True)
class Mutant:
    operator: str
    occurrence: int
    line: int
    column: int

    @property
    def key(self) -> str:
        return f"{self.operator} {self.line}:{self.column}"


def mutants(source: str) -> Iterator[Mutant]:
    """Every mutation Cosmic Ray's core operators can make of *source*."""
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.plugins import get_operator, operator_names

    tree = get_ast(source)
    for name in operator_names():
        if not name.startswith("core/"):
            continue
        operator_class = get_operator(name)
        if operator_class.arguments():
            continue
        operator = operator_class()
        positions = ((start, end) for node in ast_nodes(tree) for start, end in operator.mutation_positions(node))
        for occurrence, (start, _end) in enumerate(positions):
            yield Mutant(name, occurrence, start[0], start[1])


def _mutated_source(source: str, mutant: Mutant) -> str | None:
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    code: str | None = mutate_code(source, get_operator(mutant.operator)(), mutant.occurrence)
    return code


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


@functools.cache
def _decisions() -> list[Any]:
    from resumekit.conformance.fixtures import load_suite
    from resumekit.conformance.phase0.cases import DecisionCase

    return [case for case in load_suite().cases if isinstance(case, DecisionCase)]


def _without_annotations(code: str) -> str:
    """*code*'s syntax tree with every annotation dropped: under ``from __future__ import annotations``
    a change there cannot change behaviour."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return ast.dump(tree)


def _as_the_protocol_delivers(build: Any) -> Any:
    """*build*, called with its inputs decoded from JSON, as a protocol server hands them over."""

    def plan(events: Any, *, expected_high_water: Any = None, profile: Any = "strict") -> Any:
        wire = json.loads(json.dumps({"events": list(events), "high": expected_high_water, "profile": profile}))
        return build(wire["events"], expected_high_water=wire["high"], profile=wire["profile"])

    return plan


def _load(code: str) -> types.ModuleType:
    module = types.ModuleType(MODULE)
    module.__file__ = str(SOURCE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # a mutant's `is "strict"`
        exec(compile(code, str(SOURCE), "exec"), module.__dict__)
    return module


def lines_run_under_core(source: str) -> set[int]:
    """The lines of the unmutated projection that some case runs under ``--profile core``."""
    from resumekit.conformance.adapters import PythonAdapter
    from resumekit.conformance.phase0.decisions import run_decision

    adapter = PythonAdapter(_as_the_protocol_delivers(_load(source).build_resume_plan), name="traced")
    seen: set[int] = set()
    filename = str(SOURCE)

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != filename:
            return None
        seen.add(frame.f_lineno)
        return trace

    sys.settrace(trace)
    try:
        for case in _decisions():
            run_decision(case, adapter, "core")
    finally:
        sys.settrace(None)
    # The tracer reports the lines of the instructions it runs; a statement spread over several lines
    # counts as run on all of them (for a compound statement, its header) when any one was.
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt):
            body = getattr(node, "body", None)
            last = body[0].lineno - 1 if isinstance(body, list) and body else (node.end_lineno or node.lineno)
            span = set(range(node.lineno, last + 1))
            if span & seen:
                seen |= span
    return seen


def _spans(lines: list[int]) -> str:
    spans: list[str] = []
    for line in lines:
        if spans and int(spans[-1].rpartition("-")[2]) == line - 1:
            spans[-1] = f"{spans[-1].partition('-')[0]}-{line}"
        else:
            spans.append(str(line))
    return ", ".join(spans)


def _outcome(code: str) -> str:
    """'core' or 'strict' (the profile whose cases killed the mutant), 'timeout', 'invalid', or 'survived'."""
    from resumekit.conformance.adapters import PythonAdapter
    from resumekit.conformance.phase0.decisions import run_decision
    from resumekit.conformance.results import Outcome

    try:
        module = _load(code)
    except Exception:
        return "invalid"  # does not even import: killed by any test
    adapter = PythonAdapter(_as_the_protocol_delivers(module.build_resume_plan), name="mutant")
    decisions = _decisions()
    if hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        for profile in ("core", "strict"):
            for case in decisions:
                if profile == "core" and case.profile != "core":
                    continue
                if run_decision(case, adapter, profile).outcome is not Outcome.PASSED:
                    return profile
    except _Timeout:
        return "timeout"
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
    return "survived"


def _run(job: tuple[str, Mutant]) -> tuple[Mutant, str, str]:
    source, mutant = job
    code = _mutated_source(source, mutant)
    if code is None or code == source:
        return mutant, "unchanged", ""
    try:
        stripped = _without_annotations(code)
    except SyntaxError:
        return mutant, "unchanged", ""  # not Python at all: an incompetent mutant, not counted
    if stripped == _without_annotations(source):
        return mutant, "annotation", _changed_line(source, code)
    return mutant, _outcome(code), _changed_line(source, code)


def _changed_line(source: str, code: str) -> str:
    for old, new in zip(source.splitlines(), code.splitlines(), strict=False):
        if old != new:
            return f"{old.strip()}  =>  {new.strip()}"
    return ""


def equivalent_keys(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """``operator line:column`` -> why the mutant there is equivalent, from the file the session reads.

    A key ending in `` [core]`` is a mutant equivalent under the core profile only: it is left out of the
    core score, and the strict cases must kill it.
    """
    keys: dict[str, str] = {}
    if not path.exists():
        return keys
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, why = line.partition("  # ")
        keys[key.strip()] = why.strip()
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N mutants (a quick look)")
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(), help="worker processes")
    arguments = parser.parse_args(argv)
    source = SOURCE.read_text(encoding="utf-8")
    original = _outcome(source)
    if original != "survived":
        print(f"the unmutated projection does not pass the decision cases ({original}): nothing to measure")
        return 2
    todo = list(mutants(source))[: arguments.limit]
    print(f"{len(todo)} mutants of {SOURCE.name} (Cosmic Ray core operators), {arguments.jobs} worker(s)")
    with multiprocessing.get_context("spawn").Pool(arguments.jobs) as pool:
        results = pool.map(_run, [(source, m) for m in todo], chunksize=4)
    equivalent = equivalent_keys()
    annotations = sum(outcome == "annotation" for _, outcome, _ in results)
    counted = [(m, outcome, line) for m, outcome, line in results if outcome not in ("unchanged", "annotation")]
    judged = [(m, o, line) for m, o, line in counted if m.key not in equivalent]
    listed_equivalent = [(m, o, line) for m, o, line in counted if m.key in equivalent]
    core_equivalent = {key.removesuffix(" [core]") for key in equivalent if key.endswith(" [core]")}
    core_lines = lines_run_under_core(source)
    core_judged = [(m, o) for m, o, _ in judged if m.line in core_lines and m.key not in core_equivalent]
    by_core = sum(o in ("core", "timeout", "invalid") for _, o in core_judged)
    by_any = sum(o in ("core", "timeout", "invalid", "strict") for _, o, _ in judged)
    survivors = [(m, line) for m, o, line in judged if o == "survived"]
    total = len(judged)
    core_score = by_core / len(core_judged) if core_judged else 1.0
    all_score = by_any / total if total else 1.0
    beyond_core = sorted({m.line for m, _, _ in judged} - core_lines)
    print(f"mutants that change only an annotation (equivalent by construction, not counted): {annotations}")
    print(f"mutants counted: {len(counted)}; judged equivalent ({EQUIVALENT_FILE.name}): {len(listed_equivalent)}")
    print(
        f"mutants not counted for core: {total - len(core_judged)}, of them {len(core_equivalent)} listed as "
        f"equivalent under core and the rest on lines no case runs under --profile core: {_spans(beyond_core)}"
    )
    print(
        f"killed by core cases alone: {by_core}/{len(core_judged)} = {core_score:.1%} (threshold {CORE_THRESHOLD:.0%})"
    )
    print(f"killed by core and strict cases: {by_any}/{total} = {all_score:.1%} (threshold {ALL_THRESHOLD:.0%})")
    strict_only = [(m, line) for m, o, line in judged if o == "strict"]
    for title, rows in (("killed by strict cases only", strict_only), ("SURVIVING", survivors)):
        if rows:
            print(f"\n{title} ({len(rows)}):")
            for mutant, line in rows:
                print(f"  {mutant.key}  line {mutant.line}: {line}")
    stale = sorted({key.removesuffix(" [core]") for key in equivalent} - {m.key for m, _, _ in counted})
    wrongly = [(m, o) for m, o, _ in listed_equivalent if o != "survived"]
    wrongly += [(m, o) for m, o, _ in counted if m.key in core_equivalent and o not in ("strict", "survived")]
    for key in stale:
        print(f"listed as equivalent but no such mutant now: {key}")
    for mutant, outcome in wrongly:
        print(f"listed as equivalent but killed ({outcome}): {mutant.key}: take it off the list")
    if arguments.limit is None and (stale or wrongly):
        return 1
    return 0 if core_score >= CORE_THRESHOLD and all_score >= ALL_THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
