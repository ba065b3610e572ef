"""The governed commit and the origin (docs/spec/p1.md, section 9; p1-control-plane.md CP-17, CP-18): a push
only from verification_passed (COMMIT-2), a receipt only once commit_done is durable (COMMIT-5), and an origin
the kit cannot read safely was changed behind its hook's back (COMMIT-3)."""

from __future__ import annotations

import dataclasses

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.p1.origin_checks import unreadable
from resumekit.conformance.results import Mismatch


def unreadable_origins(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-3: every origin the kit read (at a request or once the last step was done) could be read safely:
    its files as the kit made them and pushes leave them, every git command within the kit's limits."""
    found = []
    for event in history.of("origin", "unreadable"):
        where, expected, actual = str(event.get("where")), str(event.get("expected")), str(event.get("found"))
        mismatch = unreadable(str(event.get("repository")), where, expected, actual)
        found.append(dataclasses.replace(mismatch, event=event.seq))
    return found


def pushes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-2: a push reaches the origin only while the attempt's latest durable row is verification_passed.
    The origin cannot tell which worker pushed: with a second worker holding the same attempt, the push is in
    order if the attempt's latest row is verification_passed in either journal."""
    found = []
    for moment in history.moments("push"):
        task_id, attempt = moment.get("task_id"), moment.get("attempt")
        latest = None
        for read in history.reads_at(moment.get("request")):
            rows = [r for r in read.get("rows", ()) if r["task_id"] == task_id and r["attempt"] == attempt]
            if rows:
                latest = rows[-1]["phase"]
                if latest == "verification_passed":
                    break
        if latest != "verification_passed":
            note = "a push reached the origin while the attempt's latest row was not verification_passed"
            pointer = f"/tasks/{task_id}/attempts/{attempt}/push"
            found.append(Mismatch(pointer, "verification_passed", latest, "COMMIT-2", note))
    return found


def receipts(history: Story, scenario: Scenario) -> list[Mismatch]:
    """COMMIT-5 (strict): a receipt arrives only once its commit_done is durable. A reused result_pending
    carries an earlier attempt's commit_done, and SCOPE-3 has the new attempt report its receipt after it
    (COMMIT-4): the commit is durable in the attempt's rows either way."""
    found = []
    for moment in history.moments("receipt"):
        task_id, attempt, oid = moment.get("task_id"), moment.get("attempt"), moment.get("commit_oid")
        reads = history.reads_at(moment.get("request"))
        read = reads[0].get("rows", ()) if reads else ()
        rows = [r for r in read if r["task_id"] == task_id and r["attempt"] == attempt]
        carried = any(
            r["phase"] == "result_pending" and r["reused_from"] is not None and r["commit_oid"] == oid for r in rows
        )
        if not carried and (
            not rows or (rows[-1]["phase"] != "commit_done" and "commit_done" not in {r["phase"] for r in rows})
        ):
            note = "a receipt arrived before commit_done was durable"
            pointer = f"/tasks/{task_id}/attempts/{attempt}/receipt"
            latest = rows[-1]["phase"] if rows else None
            found.append(Mismatch(pointer, "commit_done durable", latest, "COMMIT-5", note))
    return found
