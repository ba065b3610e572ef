"""Failpoints (docs/spec/p1.md, section 14): a worker blocks at the site armed, in the durable state its
catalog names there (FPT-1, FPT-2).

The harness records each block (``blocked``: the site the worker named, the one armed, and what the kit
read as it stood there: the task's rows, the last row of every attempt, the cache and any temporaries).
"""

from __future__ import annotations

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.moment_checks import failpoint_state, known_failpoint
from resumekit.conformance.results import Mismatch

ANY_FAILPOINT = "*"  # the hit-th failpoint site of any name (capability p1.failpoint-any)


def block(history: Story, scenario: Scenario) -> list[Mismatch]:
    """FPT-1 and FPT-2: each block at a site the catalog names, the one armed, in the state named there."""
    found = []
    for event in history.of(None, "blocked"):
        name, armed = event.get("failpoint"), event.get("armed")
        if armed == ANY_FAILPOINT and isinstance(name, str):
            if not known_failpoint(name):
                note = f"blocked at {name!r}, a site the failpoint catalog does not name"
                expected = "a failpoint of golden/p1/failpoints.yaml"
                found.append(Mismatch("/wait/failpoint", expected, name, "FPT-1", note, event=event.seq))
                continue
        elif name != armed:
            note = "blocked at another failpoint"
            found.append(Mismatch("/wait/failpoint", armed, name, "FPT-2", note, event=event.seq))
            continue
        state = failpoint_state(
            str(name),
            list(event.get("rows", ())),
            [tuple(item) for item in event.get("temporaries", ())],
            tuple(event.get("cache", ("absent", None))),
            list(event.get("attempts", ())),
        )
        if state is not None:
            problem, clause = state
            note = f"blocked at {name}, but {problem}"
            found.append(Mismatch("/wait/observed", name, problem, clause, note, event=event.seq))
    return found
