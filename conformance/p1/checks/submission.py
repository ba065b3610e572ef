"""Result submission (docs/spec/p1.md, section 8): a submission arrives only once its result_pending row is
durable, under its key, with its hash (SUB-1, SUB-2)."""

from __future__ import annotations

import dataclasses

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.submission_checks import submission_problem
from resumekit.conformance.results import Mismatch


def arrivals(history: Story, scenario: Scenario) -> list[Mismatch]:
    """SUB-1 and SUB-2, for each submission, against the journal the kit read as it arrived."""
    found = []
    for moment in history.moments("submission"):
        reads = history.reads_at(moment.get("request"))
        rows = list(reads[0].get("rows", ())) if reads else []
        problem = submission_problem(
            rows, moment["task_id"], moment["attempt"], moment["key"], moment["result_hash"]
        )
        if problem is not None:
            found.append(dataclasses.replace(problem, event=reads[0].seq if reads else None))
    return found
