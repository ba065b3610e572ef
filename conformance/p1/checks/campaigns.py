"""The campaigns (docs/spec/p1.md, FPT-4 and FPT-5): a crash matrix or a soak passes only when it crashed the
worker where it meant to, and fired what it scripted; one that proved nothing fails, never passes empty.

A campaign runs many scenarios, each judged on its own history; what the campaign itself adds is judged here
from the counts its loops kept (points visited, first crashes blocked, kills at a failpoint, faults fired).
"""

from __future__ import annotations

from resumekit.conformance.results import Mismatch

# Every campaign check, as ``resumekit list --checks`` lists it: its name, the clauses it may fail, and when.
CHECKS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("campaigns.matrix_visited_nothing", ("FPT-5",), "a crash matrix whose loop ended with no point visited"),
    ("campaigns.matrix_never_ends", ("FPT-5",), "a crash matrix still reaching new points at its limit"),
    ("campaigns.first_never_reached", ("FPT-2",), "a crash matrix whose named first crash point was never reached"),
    ("campaigns.soak_vacuous", ("FPT-5", "FPT-4"), "a soak that converged"),
)


def matrix_visited_nothing(armed: str, blocks: int) -> Mismatch:
    """FPT-5: a matrix whose loop ended without one converged run at a crash point."""
    if blocks:  # two crashes: the first crashes blocked, no recovery after them did
        note = (
            f"the matrix visited 0 crash points: the worker blocked at {blocks!r} first crash(es), but after each "
            "the restarted worker never blocked at any failpoint site of its recovery it was armed at"
        )
        actual = f"{blocks} first crash(es), no crash in recovery"
    else:
        note = (
            f"the worker never blocked at any failpoint site it was armed at: armed at {armed}, it went idle "
            "without blocking, so the matrix visited 0 crash points"
        )
        actual = "idle, never blocked"
    return Mismatch("/wait/failpoint", "blocked at the armed failpoint site", actual, "FPT-5", note,
                    check="campaigns.matrix_visited_nothing")


def matrix_never_ends(limit: int) -> Mismatch:
    """FPT-5: the worker still reached a new failpoint after the matrix's limit of points."""
    note = f"the worker still reached a new failpoint after {limit} points: the loop never ends"
    return Mismatch("", limit, None, "FPT-5", note, check="campaigns.matrix_never_ends")


def first_never_reached(name: str) -> Mismatch:
    """FPT-2: a matrix's named first crash point was never reached."""
    note = f"the armed failpoint {name} was never reached"
    return Mismatch("/wait/failpoint", name, None, "FPT-2", note, check="campaigns.first_never_reached")


def soak_vacuous(rounds: int, blocks: int, kills: int, fired: int, scripted: int) -> list[Mismatch]:
    """FPT-5 and FPT-4: a converged soak that crashed no worker at a failpoint, or fired no fault."""
    found = []
    if not blocks:
        note = (
            f"no worker kill was at a failpoint: armed at a random hit of any failpoint ('*') in each of its "
            f"{rounds!r} rounds, the worker never blocked at one, and {kills!r} kills found it idle"
        )
        actual = f"{kills} kills, none at a failpoint"
        found.append(Mismatch("/soak/kills", "a worker kill at a failpoint", actual, "FPT-5", note,
                              check="campaigns.soak_vacuous"))
    if not fired:
        note = f"no control-plane fault fired: {scripted!r} were scripted, and the worker converged without any"
        found.append(Mismatch("/soak/faults", "a control-plane fault fired", f"0 of {scripted} fired", "FPT-4", note,
                              check="campaigns.soak_vacuous"))
    return found
