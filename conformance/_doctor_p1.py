"""``resumekit doctor``'s P1 check: one small golden scenario run through the real harness, told step by step.

An adapter that claims ``p1.worker`` is asked what a full run asks of it, once: the scenario below starts a
worker, waits for it to go idle, kills it, starts it again, waits again and stops it in order, and the kit
asks for the journal settings at the stop and at the end, then judges as ``resumekit run`` does. What
failed is named by the step it failed at (the last step the case's story began) and by what the kit saw.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance._text import printable
from resumekit.conformance.events import CUT
from resumekit.conformance.results import CaseResult, Outcome

SCENARIO = "p1-killed-while-idle-restarts-and-stops-in-order"
PROFILE = "core"  # a smoke test: the strict profile's extra rules are a full run's
_SHOWN_MISMATCHES = 3


def step_names(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each step as a reader says it: ``start``, ``wait idle``, ``kill``, ``stop``."""
    names: list[str] = []
    ended = ""  # how the last worker ended, if one did: a start after it is a restart
    for step in steps:
        ((verb, argument),) = step.items()
        if verb == "start" and ended:
            names.append(f"start again after the {ended}")
        else:
            names.append(f"{verb} {argument}" if isinstance(argument, str) else str(verb))
        ended = str(verb) if verb in ("kill", "stop") else "" if verb == "start" else ended
    return names


def _last_step(history: Sequence[Mapping[str, Any]]) -> tuple[int | None, bool]:
    """The index of the last step the case's story shows the kit beginning (None before the first), and
    whether the story a report keeps was cut after it, so that a later step may have begun unseen."""
    cut = False
    for event in reversed(history):
        data = event.get("data")
        cut = cut or event.get("kind") == CUT
        if event.get("actor") == "kit" and event.get("kind") == "step" and isinstance(data, Mapping):
            index = data.get("index")
            if isinstance(index, int) and not isinstance(index, bool):
                return index, cut
    return None, cut


def _reached_the_end(history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the kit got past every step to reading what they left (the verdict's evidence)."""
    return any(event.get("actor") == "kit" and event.get("kind") == "at-end" for event in history)


def _why(result: CaseResult) -> str:
    """What the kit saw, in one line: the message's first line, then the first checks that failed."""
    lines = printable(result.message or "").splitlines()
    parts = [lines[0]] if lines else []
    for mismatch in result.mismatches[:_SHOWN_MISMATCHES]:
        where = f"{mismatch.clause or 'no clause'}" + (f" {mismatch.check}" if mismatch.check else "")
        note = printable(mismatch.note or f"expected {mismatch.expected!r}, got {mismatch.actual!r}")
        first = note.splitlines()[0] if note else ""
        part = where if first in parts else f"{where}: {first}"
        if part not in parts:
            parts.append(part)
    if len(result.mismatches) > _SHOWN_MISMATCHES:
        parts.append(f"and {len(result.mismatches) - _SHOWN_MISMATCHES} more")
    return "; ".join(parts)[:1000] or "no reason given"


def told(result: CaseResult, steps: Sequence[Mapping[str, Any]], seconds: float) -> list[tuple[bool, str]]:
    """The doctor's lines for the scenario's *result*: (passed, text) for each step it took, up to the one
    it failed at, or for the verdict after them."""
    names = step_names(steps)
    total = len(names)
    if result.outcome is Outcome.PASSED:
        taken = ", ".join(names)
        text = f"{taken}, then the journal settings and the verdict: passed in {seconds:.2f} s"
        return [(True, f"P1 scenario {SCENARIO!r} ({PROFILE}): {text}")]
    outcome, why = result.outcome.value, _why(result)
    if result.outcome not in (Outcome.FAILED, Outcome.ERRORED):  # declined or not run: no story to tell
        return [(False, f"P1 scenario {SCENARIO!r}: {outcome}: {why}")]
    last, cut = _last_step(result.history)
    if last is None:
        where = "at a step its kept story does not show" if cut else "before its first step"
        return [(False, f"P1 scenario {SCENARIO!r}: {outcome} {where}: {why}")]
    done = _reached_the_end(result.history)
    count = total if done else min(last, total)
    lines = [(True, f"P1 step {index + 1} of {total}: {names[index]}") for index in range(count)]
    if done:
        lines.append((False, f"P1 verdict after the {total} steps of {SCENARIO!r}: {outcome}: {why}"))
    else:
        name = names[last] if 0 <= last < total else "a step the scenario does not have"
        later = " or a later one (the story the kit kept is cut after it)" if cut else ""
        lines.append((False, f"P1 step {last + 1} of {total}: {name}{later}: {outcome}: {why}"))
    return lines


def run(spec: str, timeout: float) -> list[tuple[bool, str]]:
    """Run the doctor's scenario against fresh adapter processes of *spec*: the lines to report."""
    from resumekit.conformance.adapters import process_factory
    from resumekit.conformance.fixtures import load_suite
    from resumekit.conformance.p1.cases import ScenarioCase
    from resumekit.conformance.p1.harness import run_scenario

    case = next((c for c in load_suite().cases if isinstance(c, ScenarioCase) and c.id == SCENARIO), None)
    if case is None:
        raise LookupError(f"the golden suite lacks the P1 scenario {SCENARIO!r}")
    began = time.perf_counter()
    result = run_scenario(case, process_factory(spec, timeout=timeout), PROFILE)
    return told(result, case.steps, time.perf_counter() - began)
