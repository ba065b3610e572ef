"""What is true when a row of a phase is written (PHASE-1): a claimed row holds the task as served, a commit_done
row follows the push that landed its commit; each rule over a history written by hand, absent evidence
included."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.p1_stories import Told, judged, row

SERVED = {"task_id": "t-1", "attempt": 1, "execution_digest": "d-1", "job_id": "j", "repository": "acme/w",
          "base_oid": "a" * 40, "expected_branch_oid": "a" * 40, "target_branch": "main", "generation": 1,
          "kind": "source_capture", "payload": {}, "origin_url": "file:///origin.git"}


@pytest.mark.parametrize("name", ["phases.claimed_as_served", "phases.commit_done_landed"])
def test_a_history_without_the_events_a_rule_judges_has_nothing_wrong_for_it(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


def _claimed(task: Any) -> dict[str, Any]:
    return row(1, "claimed", task=json.dumps(task, sort_keys=True, separators=(",", ":")))


def test_a_claimed_row_holds_the_task_as_the_claim_answer_served_it() -> None:
    issued = Told().logged("attempt_issued", task_id="t-1", attempt=1, task=SERVED)
    assert judged("phases.claimed_as_served", issued.read([_claimed(SERVED)])) == []
    # An empty member left out, or one added, is not the task as served.
    omitted = {name: value for name, value in SERVED.items() if name != "payload"}
    (found,) = judged("phases.claimed_as_served", issued.read([_claimed(omitted)]))
    assert (found.clause, found.pointer, found.expected) == ("PHASE-1", "/journal/t-1/1/1/task", SERVED)
    assert "['payload']" in (found.note or "")
    added = judged("phases.claimed_as_served", Told().logged("attempt_issued", task=SERVED)
                   .read([_claimed({**SERVED, "lease_id": "x"})]))
    assert [m.clause for m in added] == ["PHASE-1"]
    # No task at all, or a task never served for that attempt, is no claim answer's either.
    assert [m.clause for m in judged("phases.claimed_as_served", issued.read([row(1, "claimed")]))] == ["PHASE-1"]
    (unserved,) = judged("phases.claimed_as_served", Told().read([_claimed(SERVED)]))
    assert "which no claim answer served" in (unserved.note or "")
    # A task nested deeper than a JSON reader recurses is no task, and no traceback.
    deep = row(1, "claimed", task="[" * 100_000 + "]" * 100_000)
    assert [m.clause for m in judged("phases.claimed_as_served", issued.read([deep]))] == ["PHASE-1"]
    # A replayed or conflicting delivery serves a task too; the second worker's journal is judged as well.
    replayed = Told().logged("replayed_delivery", task_id="t-1", attempt=1, worker="w1", task=SERVED)
    assert judged("phases.claimed_as_served", replayed.read([_claimed(SERVED)])) == []
    second = judged("phases.claimed_as_served", issued.read([_claimed(SERVED)]).read([_claimed(omitted)],
                                                                                     journal="second"))
    assert [m.pointer for m in second] == ["/second-worker/journal/t-1/1/1/task"]


def _pushed(told: Told, new: str, accepted: bool = True, ref: str = "refs/heads/main") -> Told:
    return told.logged("push", repository="acme/w", ref=ref, old="a" * 40, new=new, accepted=accepted,
                       task_id="t-1", attempt=1)


def test_commit_done_is_written_once_a_push_of_its_commit_landed_on_the_target_branch() -> None:
    done = [row(1, "claimed"), row(2, "commit_done", commit_oid="c" * 40, result_hash="h", result_body="{}")]
    landed = _pushed(Told().read(done[:1], why="moment"), "c" * 40).read(done, why="wait").read(done)
    assert judged("phases.commit_done_landed", landed) == []
    # Read before any push of its commit landed: a refused push, another ref or another commit do not count.
    for told in (
        Told().read(done, why="wait").read(done),
        _pushed(Told(), "c" * 40, accepted=False).read(done),
        _pushed(Told(), "c" * 40, ref="refs/heads/other").read(done),
        _pushed(Told(), "d" * 40).read(done),
        _pushed(Told().read(done, why="moment"), "c" * 40).read(done),
    ):
        (found,) = judged("phases.commit_done_landed", told)
        assert (found.clause, found.pointer) == ("PHASE-1", "/journal/t-1/1/2/commit_oid")
