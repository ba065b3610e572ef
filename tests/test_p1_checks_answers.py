"""What a worker does with its submission's answer (SUB-3, SUB-6): a 200 or 201 is written as result_submitted with
the result_pending row's values, a 4xx other than 403 and 409 is result_rejected and never sent again; each rule
over a history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from tests.p1_stories import Told, clauses, judged, row

PENDING = {"idempotency_key": "k", "result_hash": "h", "result_body": '{"r":1}', "commit_oid": None}


def _sent(told: Told, request: int, status: int, worker: str = "w1", answer: str = "answer", **extra: Any) -> Told:
    """A submission of attempt 1 of t-1 as the control plane logs it: its moment, then its request's entry."""
    told.logged("moment", check="submission", request=request, worker=worker, task_id="t-1", attempt=1, key="k",
                result_hash="h")
    return told.logged("request", worker=worker, endpoint="result", status=status, request=request, answer=answer,
                       **extra)


def _idle(told: Told, worker: str = "w1") -> Told:
    return told.by(worker, "state", wanted="idle", answer={"state": "idle"})


def _ended(told: Told, *rows: dict[str, Any]) -> Told:
    return told.read(list(rows), why="final", worker="w1")


def _pending() -> list[dict[str, Any]]:
    return [row(1, "claimed"), row(2, "source_capture_done", result_hash="h", result_body='{"r":1}'),
            row(3, "result_pending", **PENDING)]


@pytest.mark.parametrize("name", ["answers.successes", "answers.rejections"])
def test_a_history_without_submissions_or_rows_has_nothing_for_them_to_judge(name: str) -> None:
    assert judged(name, Told()) == []


# -- SUB-3: a 200 or 201 is written as result_submitted ---------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201])
def test_a_success_the_worker_said_idle_after_without_a_result_submitted_row_is_sub_3(status: int) -> None:
    (found,) = judged("answers.successes", _ended(_idle(_sent(Told(), 7, status)), *_pending()))
    assert (found.clause, found.pointer, found.actual) == ("SUB-3", "/tasks/t-1/attempts/1/result_submitted",
                                                          "result_pending")
    assert f"(request 7) was answered {status}, and 'w1' said idle after it" in (found.note or "")
    # An empty journal is no evidence of the row: it fails too.
    (empty,) = judged("answers.successes", _ended(_idle(_sent(Told(), 7, status))))
    assert empty.clause == "SUB-3" and empty.actual is None


def test_a_success_followed_by_its_result_submitted_row_passes() -> None:
    done = row(4, "result_submitted", **PENDING)
    assert judged("answers.successes", _ended(_idle(_sent(Told(), 7, 201)), *_pending(), done)) == []


@pytest.mark.parametrize(
    ("answer", "extra", "idle_by"),
    [("drop", {}, "w1"), ("delay", {}, "w1"), ("answer", {"kill_point": "server_result_stored"}, "w1"),
     ("answer", {}, None), ("answer", {}, "w2")],
    ids=["dropped", "held-back", "killed-first", "never-idle", "another-process-idle"],
)
def test_a_success_the_process_never_got_or_never_finished_with_is_not_judged(
    answer: str, extra: dict[str, Any], idle_by: str | None
) -> None:
    told = _sent(Told(), 7, 201, answer=answer, **extra)
    if idle_by is not None:
        _idle(told, idle_by)
    assert judged("answers.successes", _ended(told, *_pending())) == []


def test_an_idle_answer_before_the_success_does_not_count() -> None:
    told = _sent(_idle(Told()), 7, 201)
    assert judged("answers.successes", _ended(told, *_pending())) == []


def test_a_success_of_a_second_workers_process_is_not_judged_against_the_first_journal() -> None:
    told = Told().read([], why="start", journal="second", worker="s1")
    assert judged("answers.successes", _ended(_idle(_sent(told, 7, 201, worker="s1"), "s1"), *_pending())) == []


@pytest.mark.parametrize(("column", "value"), [("result_hash", "other"), ("result_body", '{"r":2}'),
                                               ("commit_oid", "c" * 40)])
def test_a_result_submitted_row_with_another_hash_body_or_commit_than_its_pending_row_is_sub_3(
    column: str, value: str
) -> None:
    done = row(4, "result_submitted", **{**PENDING, column: value})
    (found,) = judged("answers.successes", _ended(Told(), *_pending(), done))
    assert (found.clause, found.pointer) == ("SUB-3", f"/journal/t-1/1/result_submitted/{column}")
    assert (found.expected, found.actual) == (PENDING[column], value)
    # Without a result_pending row there is nothing to compare: PHASE-3 names that.
    assert judged("answers.successes", _ended(Told(), row(1, "claimed"), done)) == []


# -- SUB-6: a 4xx other than 403 and 409 is result_rejected, never sent again ------------------------------------

REJECTED = row(4, "reconciliation_required", reason="result_rejected")


@pytest.mark.parametrize("status", [400, 404, 422, 418])
def test_a_rejection_ended_in_result_rejected_and_not_sent_again_passes(status: int) -> None:
    assert judged("answers.rejections", _ended(_idle(_sent(Told(), 7, status)), *_pending(), REJECTED)) == []


def test_a_rejection_sent_again_by_the_same_process_is_sub_6() -> None:
    told = _sent(_sent(Told(), 7, 400), 8, 201)
    (found,) = judged("answers.rejections", _ended(told, *_pending()))
    assert (found.clause, found.pointer, found.actual) == ("SUB-6", "/tasks/t-1/attempts/1/submission/again", [8])
    assert "again (request 8) after request 7 was answered 400" in (found.note or "")
    # Another process, which never got the answer (its predecessor was killed before writing the row), may.
    assert judged("answers.rejections", _ended(_sent(_sent(Told(), 7, 400), 8, 201, worker="w2"), *_pending())) == []
    # An answer the worker never got is no rejection to it.
    assert judged("answers.rejections", _ended(_sent(_sent(Told(), 7, 400, answer="drop"), 8, 201))) == []


def test_a_rejection_the_process_said_idle_after_without_result_rejected_is_sub_6() -> None:
    other = row(4, "reconciliation_required", reason="result_conflict")
    for journal, ended in ((_pending(), "result_pending"), ([*_pending(), other], "reconciliation_required: "
                                                                                  "result_conflict"), ([], None)):
        (found,) = judged("answers.rejections", _ended(_idle(_sent(Told(), 7, 422)), *journal))
        assert (found.clause, found.pointer, found.actual) == ("SUB-6", "/tasks/t-1/attempts/1/submission/reason",
                                                              ended)


@pytest.mark.parametrize("statuses", [[403], [409], [503], [201], []], ids=str)
def test_result_rejected_without_a_rejection_is_sub_6(statuses: list[int]) -> None:
    told = Told()
    for request, status in enumerate(statuses, start=7):
        _sent(told, request, status)
    (found,) = judged("answers.rejections", _ended(told, *_pending(), REJECTED))
    assert (found.clause, found.pointer, found.actual) == ("SUB-6", "/journal/t-1/1/reconciliation_required",
                                                          statuses)
    assert "only a 4xx other than 403 and 409 is a rejection" in (found.note or "")


def test_a_rejection_is_judged_for_its_own_attempt_only() -> None:
    told = _sent(Told(), 7, 400)
    second = [row(5, "claimed", attempt=2), row(6, "reconciliation_required", attempt=2, reason="result_rejected")]
    found = judged("answers.rejections", _ended(told, *_pending(), REJECTED, *second))
    assert clauses(found) == ["SUB-6"] and found[0].pointer == "/journal/t-1/2/reconciliation_required"
