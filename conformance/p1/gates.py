"""The nine P1 gates (docs/spec/p1.md, section 17) and the table every report carries.

A gate passes for a worker only when at least one of its scenarios ran in the profile, every one of its
claimed scenarios ran and passed, and nothing counts against it (``implicates``): a failed or errored
scenario fails every gate it names, and a failed check fails the gates of its clause in any scenario. A gate
with a claimed scenario that did not run is *not run*; a gate all of whose scenarios were not claimed is
*not claimed*; a gate with no scenario in the run is *not run*. None of them is ever passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resumekit.conformance.results import CaseResult, Outcome


def _span(prefix: str, first: int, last: int) -> tuple[str, ...]:
    return tuple(f"{prefix}-{n}" for n in range(first, last + 1))


# gate -> (core clauses, strict clauses, what part of its evidence is attested)
GATES: Mapping[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "CHECKPOINT_DURABLE_WRITE": (
        (*_span("JNL", 1, 7), *_span("CACHE", 1, 3), "SUB-1", "COMMIT-2", "EVID-3", "ADP-3"),
        ("JNL-8", "COMMIT-5"),
        "synchronous and busy timeout of each journal connection (JNL-5, JNL-6); the journal mode is also read "
        "from the file's header",
    ),
    "RESUME_FROM_CHECKPOINT": (
        (*_span("PHASE", 1, 5), "RESUME-2", "RESUME-3", "CACHE-4", "WRK-4", *_span("TASK", 2, 4), "FPT-1", "FPT-2"),
        (),
        "failpoint site names",
    ),
    "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT": (
        (*_span("COMMIT", 1, 3), "KEY-1", "KEY-2", "SUB-2", "SUB-4", "RESUME-4", "TASK-4"),
        (),
        "",
    ),
    "CRASH_RECOVERY_CONVERGENCE": (
        ("FPT-3", "FPT-4", "FPT-5", "RESUME-1", "RESUME-2", "COMMIT-4", "PHASE-4", "SUB-7", "LEASE-5", "OUT-2"),
        (),
        "failpoint site names",
    ),
    "WORKER_RESTART_RESUME": (
        ("WRK-1", "RESUME-1", "RESUME-5", "LEASE-1", "KEY-2", "CACHE-4", "JNL-5", "ADP-2"),
        ("RESUME-6", "WRK-5"),
        "synchronous of each worker process's journal connections (JNL-5)",
    ),
    "CHECKPOINT_SCOPE_ISOLATION": (
        (*_span("SCOPE", 1, 4), "PHASE-2", "PHASE-3", "KEY-1", "KEY-2", "TASK-1"),
        (*_span("SCOPE", 5, 7), "LEASE-6"),
        "",
    ),
    "RESULT_SUBMISSION_REPLAY_SAFE": (
        ("KEY-1", "KEY-2", *_span("SUB", 1, 7), "OUT-1"),
        (),
        "",
    ),
    "WORKSPACE_CLEANUP_RECOVERY": (
        (*_span("CLEAN", 1, 5), "WRK-4", "RESUME-1", "RESUME-3"),
        (),
        "",
    ),
    "LEASE_RENEWAL_RECOVERY": (
        (*_span("LEASE", 1, 5), "COMMIT-4", "SUB-6", "SUB-7"),
        ("LEASE-6", "COMMIT-6"),
        "",
    ),
}


# The clause of each gate's own definition (section 17), cited by every scenario that names the gate.
GATE_CLAUSES = {gate: f"GATE-{number}" for number, gate in enumerate(GATES, start=1)}

# What the kit checks on every scenario, whatever it scripts (section 16 and the harness): these clauses
# are exercised, and can be failed, by each one.
ALWAYS_CHECKED = (
    "WRK-3",
    "JNL-1",
    "JNL-2",
    "JNL-4",
    "JNL-5",
    "JNL-6",
    "PHASE-2",
    "PHASE-3",
    "PHASE-5",
    "KEY-1",
    "SUB-1",
    "COMMIT-2",
    "COMMIT-3",
    "CLEAN-1",
    "CLEAN-2",
    "ADP-1",
    "ADP-2",
    "ADP-3",
    "CP-22",
)


def scenario_clauses(own: Sequence[str], gates: Sequence[str]) -> tuple[str, ...]:
    """A scenario's own clauses, then its gates' clauses, then those the kit checks on every scenario."""
    extra = [GATE_CLAUSES[gate] for gate in gates] + list(ALWAYS_CHECKED)
    return tuple(own) + tuple(clause for clause in dict.fromkeys(extra) if clause not in own)


# The outcomes of a scenario that did not run although it was claimed: the kit could not run it on this
# machine, or the worker declined it. Neither is a pass.
UNRAN = frozenset({Outcome.NOT_RUN, Outcome.SKIPPED})


@dataclass(frozen=True, slots=True)
class Counted:
    """Why one scenario counts against a gate: it names the gate (*named*), or it failed a check of
    *clauses*, the gate's clauses its failed checks cite (either, or both)."""

    case_id: str
    named: bool
    clauses: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """As a summary row's ``failedBy`` carries it."""
        return {"case": self.case_id, "named": self.named, "clauses": list(self.clauses)}


@dataclass(frozen=True, slots=True)
class GateRow:
    """One line of the gate table.

    *scenarios* counts the scenarios that name the gate; *passed* those of them that ran and passed;
    *failed* the scenarios that count against it (its own and others); *not_run* those of its scenarios
    that did not run for any reason, of which *not_claimed* were not claimed. *failed_by* says why each of
    *failed* counts: whether it names the gate, and the gate's clauses its failed checks cite. A scenario
    of another gate counts against this one by those clauses alone, so a gate can fail with no scenario
    of its own in a narrowed run (*scenarios* 0).
    """

    gate: str
    scenarios: int
    passed: int
    failed: tuple[str, ...]
    not_run: int
    clauses: tuple[str, ...]
    attested: str
    not_claimed: int = 0
    failed_by: tuple[Counted, ...] = ()

    @property
    def verdict(self) -> str:
        """``failed`` if a scenario counts against the gate; else ``not run`` if a claimed scenario did not
        run; else ``passed`` if one ran (and so all that ran passed); else ``not claimed`` if it has
        scenarios, none of them claimed; else (no scenario at all) ``not run``."""
        if self.failed:
            return "failed"
        if self.not_run > self.not_claimed:
            return "not run"
        if self.passed:
            return "passed"
        return "not claimed" if self.not_claimed else "not run"

    def to_dict(self) -> dict[str, Any]:
        """The row as the report's JSON carries it."""
        return {
            "gate": self.gate,
            "verdict": self.verdict,
            "scenarios": self.scenarios,
            "passed": self.passed,
            "failed": list(self.failed),
            "notRun": self.not_run,
            "notClaimed": self.not_claimed,
            "clauses": list(self.clauses),
            "attested": self.attested,
            "failedBy": [counted.to_dict() for counted in self.failed_by],
        }


def implicates(result: CaseResult, gate: str, gate_clauses: Sequence[str], named: Sequence[str]) -> bool:
    """Whether a result counts against *gate* (docs/spec/p1.md, section 17).

    A failed or errored scenario counts against every gate it names, whatever its mismatches cite (a
    scenario failed on a clause of no gate, or on none, still proves nothing for its gates). A failed check
    also counts against the gates whose clauses include the check's clause, in whichever scenario it
    failed, since the kit checks some clauses on every scenario; a scenario's own expectations (its
    `expect`) count only against the gates it names.
    """
    if result.outcome not in (Outcome.FAILED, Outcome.ERRORED):
        return False
    if gate in named:
        return True
    if result.outcome is not Outcome.FAILED:
        return False
    return bool(cited_clauses(result, gate_clauses))


def cited_clauses(result: CaseResult, gate_clauses: Sequence[str]) -> tuple[str, ...]:
    """The gate's clauses that *result*'s checks failed on, each once, in the order they failed; a scenario's
    own expectations (its ``expect``) aside, which count only against the gates it names."""
    cited = (m.clause for m in result.mismatches if m.clause in gate_clauses and not m.pointer.startswith("/expect"))
    return tuple(dict.fromkeys(clause for clause in cited if clause is not None))


def gate_table(
    gates_of: Mapping[str, Sequence[str]], results: Iterable[CaseResult], *, profile: str
) -> tuple[GateRow, ...]:
    """The table of every gate over the P1 results of a run; *gates_of* maps a case id to its gates."""
    chosen = [result for result in results if result.case_id in gates_of]
    rows = []
    for gate, (core, strict, attested) in GATES.items():
        clauses = core + (strict if profile == "strict" else ())
        mine = [r for r in chosen if gate in gates_of[r.case_id]]
        against = [r for r in chosen if implicates(r, gate, clauses, gates_of[r.case_id])]
        failed_by = tuple(Counted(r.case_id, gate in gates_of[r.case_id], cited_clauses(r, clauses)) for r in against)
        not_claimed = sum(1 for r in mine if r.outcome is Outcome.NOT_CLAIMED)
        rows.append(
            GateRow(
                gate=gate,
                scenarios=len(mine),
                passed=sum(1 for r in mine if r.outcome is Outcome.PASSED),
                failed=tuple(r.case_id for r in against),
                not_run=not_claimed + sum(1 for r in mine if r.outcome in UNRAN),
                clauses=clauses,
                attested=attested,
                not_claimed=not_claimed,
                failed_by=failed_by,
            )
        )
    return tuple(rows)
