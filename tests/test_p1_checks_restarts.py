"""Restarts and attempts served again (RESUME-3, RESUME-4, RESUME-6): nothing of an old workspace reaches a
replay's result, an attempt served again is not started over and a terminal one gets no step, restarts without
progress are capped; each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.p1.control_plane.state import IDENTITY
from tests.p1_stories import Told, clauses, judged, row

DONE = {"result_hash": "h", "result_body": '{"files":[{"path":"a.txt"}]}'}


@pytest.mark.parametrize("name", ["restarts.replayed", "restarts.served_again", "restarts.recovery_cap"])
def test_a_history_without_the_events_a_rule_judges_has_nothing_wrong_for_it(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


def test_no_result_names_a_file_the_kit_wrote_into_an_old_workspace() -> None:
    opened = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-1"), row(3, "verification_passed")]
    clean = [*opened, row(4, "source_capture_done", **DONE)]
    tampered = Told().read(opened, why="wait").kit("tampered", files=["tampered-by-the-kit-x.txt"])
    assert judged("restarts.replayed", tampered.read(clean)) == []
    read = {"result_hash": "h", "result_body": '{"files":[{"path":"tampered-by-the-kit-x.txt"}]}'}
    told = Told().read(opened, why="wait").kit("tampered", files=["tampered-by-the-kit-x.txt"])
    (found,) = judged("restarts.replayed", told.read([*opened, row(4, "source_capture_done", **read)]))
    assert (found.clause, found.pointer, found.actual) == (
        "RESUME-3", "/journal/t-1/1/4/result_body", ["tampered-by-the-kit-x.txt"]
    )
    # Nothing tampered: nothing to judge, whatever the body.
    assert judged("restarts.replayed", Told().read([*opened, row(4, "source_capture_done", **read)])) == []


def test_a_commit_written_after_the_old_workspace_changed_is_the_governed_one() -> None:
    opened = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-1"), row(3, "verification_passed")]
    done = [*opened, row(4, "commit_done", commit_oid="c" * 40, **DONE)]
    governed = [{"task_id": "t-1", "attempt": 1, "commit": "c" * 40}]
    told = Told().read(opened, why="wait").kit("tampered", files=["tampered-by-the-kit-x.txt"]).read(done)
    assert judged("restarts.replayed", told.origins(governed=governed)) == []
    other = [{"task_id": "t-1", "attempt": 1, "commit": "d" * 40}]
    told = Told().read(opened, why="wait").kit("tampered", files=["tampered-by-the-kit-x.txt"]).read(done)
    (found,) = judged("restarts.replayed", told.origins(governed=other))
    assert (found.clause, found.expected, found.actual) == ("RESUME-3", "d" * 40, "c" * 40)
    # A commit_done the kit read before it changed anything is no replay's.
    told = Told().read(done, why="wait").kit("tampered", files=["tampered-by-the-kit-x.txt"]).read(done)
    assert judged("restarts.replayed", told.origins(governed=other)) == []


SUBMITTED = [row(1, "claimed"), row(2, "result_pending", idempotency_key="k", **DONE),
             row(3, "result_submitted", idempotency_key="k", **DONE)]


def _served_again(held: list[dict[str, Any]], kind: str = "replayed_delivery") -> Told:
    return Told().read(held, why="wait", worker="w1").logged(kind, task_id="t-1", attempt=1, worker="w1", request=5)


def test_an_attempt_served_again_is_not_started_over() -> None:
    pending = SUBMITTED[:2]
    resumed = _served_again(pending).read(SUBMITTED)
    assert judged("restarts.served_again", resumed) == []
    again = _served_again(pending).read([*pending, row(3, "claimed")])
    (found,) = judged("restarts.served_again", again)
    assert (found.clause, found.pointer, found.actual) == ("RESUME-4", "/journal/t-1/1/3", "claimed")
    lower = _served_again(pending, "duplicate_delivery").read([*pending, row(3, "source_capture_done", **DONE)])
    assert clauses(judged("restarts.served_again", lower)) == ["RESUME-4"]
    # Served again where the journal holds no row of the attempt: a first delivery, nothing of RESUME-4's.
    assert judged("restarts.served_again", _served_again([]).read([row(1, "claimed")])) == []


def test_a_terminal_attempt_served_again_gets_no_row_and_no_governed_side_effect() -> None:
    assert judged("restarts.served_again", _served_again(SUBMITTED).read(SUBMITTED)) == []
    row_after = _served_again(SUBMITTED).read([*SUBMITTED, row(4, "reconciliation_required", reason="x")])
    assert clauses(judged("restarts.served_again", row_after)) == ["RESUME-4"]
    sent = _served_again(SUBMITTED).logged("moment", check="submission", worker="w1", task_id="t-1", attempt=1)
    (found,) = judged("restarts.served_again", sent.read(SUBMITTED))
    assert (found.clause, found.actual) == ("RESUME-4", ["submission"])
    # Up to the worker's next claim only; and another worker's side effects are not this one's.
    claim = _served_again(SUBMITTED).logged("request", worker="w1", endpoint="claim", path="v1/claims", status=200)
    later = claim.logged("moment", check="submission", worker="w1", task_id="t-1", attempt=1)
    assert judged("restarts.served_again", later.read(SUBMITTED)) == []
    other = _served_again(SUBMITTED).logged("moment", check="receipt", worker="b1", task_id="t-1", attempt=1)
    assert judged("restarts.served_again", other.read(SUBMITTED)) == []


def _restarts(times: int, *, blocked: int | None = None) -> Told:
    """*times* processes started with attempt 1 open at its claimed row, each renewed (200); the first *blocked*
    of them (all by default) then blocked at a failpoint, so each surely appended a recoveries row."""
    told = Told()
    blocked = times if blocked is None else blocked
    for number in range(2, times + 2):
        worker = f"w{number}"
        told.read([row(1, "claimed")], why="start", worker=worker)
        told.logged("request", worker=worker, endpoint="renew", path="v1/leases/lease-1/renew", status=200,
                    answer="answer", request=number)
        if number - 1 <= blocked:
            told.by(worker, "blocked", failpoint="before_workspace_prepared_row")
    return told


def test_the_resumption_after_five_without_progress_ends_in_recovery_cap() -> None:
    capped = [row(1, "claimed"), row(2, "reconciliation_required", reason="recovery_cap")]
    assert judged("restarts.recovery_cap", _restarts(6, blocked=5).read(capped)) == []
    went_on = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x")]
    (found,) = judged("restarts.recovery_cap", _restarts(6, blocked=5).read(went_on))
    assert (found.clause, found.pointer) == ("RESUME-6", "/journal/t-1/1/recoveries/1")
    assert "w7 resumed attempt 1" in (found.note or "")
    # Five resumptions may go on; and one killed before anything showed it counted is no sure recovery.
    assert judged("restarts.recovery_cap", _restarts(5).read(went_on)) == []
    assert judged("restarts.recovery_cap", _restarts(6, blocked=4).read(went_on)) == []
    # Blocked past the renewal at a site of another row than recovery_cap's, the sixth went on as well.
    (found,) = judged("restarts.recovery_cap", _restarts(6).read([row(1, "claimed")]))
    assert found.clause == "RESUME-6"
    # Core does not judge the strict clause.
    assert judged("restarts.recovery_cap", _restarts(6, blocked=5).read(went_on), profile="core") == []


def test_recovery_cap_only_after_five_earlier_resumptions_from_the_same_row() -> None:
    capped = [row(1, "claimed"), row(2, "reconciliation_required", reason="recovery_cap")]
    (found,) = judged("restarts.recovery_cap", _restarts(5).read(capped))
    assert (found.clause, found.actual) == ("RESUME-6", 5)
    # No resumption seen at all: the cap has nothing under it.
    (found,) = judged("restarts.recovery_cap", Told().read(capped))
    assert (found.clause, found.actual) == ("RESUME-6", 0)
    # Where the scenario stopped before its final read, the last read is judged.
    stopped = _restarts(5).read(capped, why="wait")
    assert clauses(judged("restarts.recovery_cap", stopped)) == ["RESUME-6"]


def test_a_conflicting_identity_served_again_is_a_terminal_attempt_served_again() -> None:
    conflict = [*SUBMITTED, row(4, "claimed", job_id="x"), row(5, "reconciliation_required", job_id="x",
                                                                 reason="identity_conflict")]
    served = {**{name: conflict[3][name] for name in IDENTITY}}
    def again(held: list[dict[str, Any]]) -> Told:
        return Told().read(held, why="wait", worker="w1").logged(
            "conflicting_delivery", task_id="t-1", attempt=1, worker="w1", request=5, task=served
        )

    assert judged("restarts.served_again", again(conflict).read(conflict)) == []
    fenced_twice = [*conflict, row(6, "claimed", job_id="x"),
                    row(7, "reconciliation_required", job_id="x", reason="identity_conflict")]
    (found,) = judged("restarts.served_again", again(conflict).read(fenced_twice))
    assert (found.clause, found.pointer, found.actual) == ("RESUME-4", "/journal/t-1/1/6", "claimed")
    # The first conflicting delivery, its identity without rows, is SCOPE-6's alone.
    assert judged("restarts.served_again", again(SUBMITTED).read(conflict)) == []
