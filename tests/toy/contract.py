"""The toy contract: one kind (``toy-sum``), one fixture file kind (``toy/sums``), one summary table.

Its "implementation" is a function of this module chosen by the environment variable
``RESUMEKIT_TOY_IMPL`` (``right``, the default, or ``wrong``), so a test can make it fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumekit.conformance.cases import Case
from resumekit.conformance.contracts import CaseRunner, Contract, FileKind, Kind, RunContext
from resumekit.conformance.fixtures import FixtureFile
from resumekit.conformance.results import CaseResult, Mismatch, Outcome, Summary
from resumekit.conformance.runner import result_for

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"


@dataclass(frozen=True, slots=True, kw_only=True)
class SumCase(Case):
    """Numbers, and the sum an implementation must give for them."""

    group: str
    numbers: tuple[int, ...]
    sum: int

    kind = "toy-sum"

    @property
    def counts_toward(self) -> tuple[str, ...]:
        """The row of the toy's table the case counts towards: its group."""
        return (self.group,)


def read_sums(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The cases of a ``toy/sums`` file."""
    for index, raw in file.good_cases(data):
        yield SumCase(
            id=raw["id"],
            description=raw["description"],
            clauses=tuple(raw["clauses"]),
            profile=raw["profile"],
            source=file.source(f"/cases/{index}"),
            group=raw["group"],
            numbers=tuple(raw["numbers"]),
            sum=raw["sum"],
        )


def _answer(numbers: Sequence[int]) -> int:
    total = sum(numbers)
    return total + 1 if os.environ.get("RESUMEKIT_TOY_IMPL") == "wrong" and numbers else total


def run_sum(case: SumCase) -> CaseResult:
    """Ask the toy implementation for the sum and compare it with the case's."""
    answer = _answer(case.numbers)
    if answer == case.sum:
        return result_for(case, Outcome.PASSED)
    mismatch = Mismatch("/sum", str(case.sum), str(answer), case.clauses[0], "the sum differs")
    return result_for(case, Outcome.FAILED, mismatches=(mismatch,))


def runners(context: RunContext) -> Mapping[str, CaseRunner]:
    """The toy kind runs with any adapter: its implementation is in this module."""
    return {"toy-sum": run_sum}  # type: ignore[dict-item]


def group_rows(results: Sequence[CaseResult], profile: str) -> tuple[Mapping[str, Any], ...]:
    """A row per group: failed when a case of it failed, not run when none ran."""
    rows = []
    for group in ("small", "large"):
        mine = [result for result in results if group in result.counts_toward]
        ran = [result for result in mine if result.outcome not in (Outcome.NOT_CLAIMED, Outcome.SKIPPED)]
        failed = [result.case_id for result in mine if result.outcome in (Outcome.FAILED, Outcome.ERRORED)]
        verdict = "failed" if failed else "passed" if ran else "not run"
        rows.append(
            {
                "name": group,
                "verdict": verdict,
                "cases": len(mine),
                "passed": sum(1 for result in ran if result.case_id not in failed),
                "failed": failed,
                "notRun": len(mine) - len(ran),
                "clauses": ["TOY-1", "TOY-2"],
                "attested": "",
            }
        )
    return tuple(rows)


CONTRACT = Contract(
    name="toy",
    title="Toy",
    kinds=(Kind("toy-sum", (), "numbers and their sum", in_process=True),),
    files=(FileKind("toy/sums", "https://resumekit.dev/schemas/toy/sums.json", read_sums),),
    case_types=(SumCase,),
    spec_files=("toy.md",),
    spec_root=lambda: HERE / "spec",
    schema_dirs=(HERE / "schemas",),
    runners=runners,
    summary=Summary(key="groups", title="Toy groups", row_label="toy group", case_label="sums"),
    summarize=group_rows,
)
