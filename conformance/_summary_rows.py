"""How a row of a contract's summary table (P1: a gate) is told in every report: its counts and its failures.

A row counts the cases that name it (``cases``, of which ``passed`` passed), and lists apart the cases that
count against it (``failed``), which need not be among them: a P1 scenario fails every gate whose clause
one of its checks failed on, whichever gates it names. So a row of a narrowed run can fail with no case
of its own, and its counts alone would read "failed, 0 of 0": every report names the cases and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NO_CASES = "-"  # the counts of a row none of whose cases is in the run: nothing was counted
SHOWN = 3  # cases a line of text names before it counts the rest


def counts(row: Mapping[str, Any]) -> tuple[str, str]:
    """The row's *passed* and *of*, or ``-`` for both when the run holds none of its cases."""
    cases = row.get("cases")
    if not cases:
        return NO_CASES, NO_CASES
    return str(row.get("passed", "")), str(cases)


def failed_by(row: Mapping[str, Any], label: str) -> list[tuple[str, str]]:
    """Each case that counts against the row, and why (``""`` when the report does not say, as one written
    by an older kit): one of its *label*, or not, and the row's clauses its failed checks cite."""
    named = [str(case) for case in row.get("failed") or () if isinstance(case, str)]
    why: dict[str, str] = {}
    for entry in row.get("failedBy") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("case"), str):
            why[entry["case"]] = _why(entry, label)
    return [(case, why.get(case, "")) for case in named]


def _why(entry: Mapping[str, Any], label: str) -> str:
    clauses = ", ".join(str(c) for c in entry.get("clauses") or () if isinstance(c, str))
    if entry.get("named") is True:
        return f"one of its {label}" + (f", failed on {clauses}" if clauses else "")
    return f"not one of its {label}: a failed check of {clauses or 'one of its clauses'}"


def failed_by_text(row: Mapping[str, Any], label: str, shown: int | None = SHOWN) -> str:
    """The cases that count against the row, as one line: the first *shown* (all with None), then a count."""
    told = failed_by(row, label)
    parts = [f"{case} ({why})" if why else case for case, why in told[:shown]]
    rest = len(told) - len(parts)
    return "; ".join(parts) + (f"; and {rest} more" if rest else "")

