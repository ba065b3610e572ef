"""Keys and result submission (KEY, SUB, TASK-2): the journal as each submission arrived (SUB-1, SUB-2), one key
and one body per attempt (KEY-1, SUB-4), the key taken from the row (KEY-2), the stored result (TASK-2), and
what a result_submitted row rests on (SUB-5, SUB-7); each rule over a history written by hand, absent
evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.p1.canonical import result_hash
from tests.p1_stories import Told, clauses, judged, row


@pytest.mark.parametrize("name", ["submission.arrivals", "submission.sent", "submission.stored_result",
                                  "submission.backing", "submission.exact_match", "submission.keys",
                                  "submission.second_worker_backing"])
def test_a_history_without_submissions_or_rows_has_nothing_wrong_for_them(name: str) -> None:
    assert judged(name, Told()) == []


def _sent(told: Told, request: int, status: int, key: str = "k", digest: str = "h", attempt: int = 1,
          state: str | None = None, stored: dict[str, Any] | None = None) -> Told:
    """A submission of t-1 as the control plane logs it: its moment, the task's state and stored result the
    answer carried (a 409's), and the request's entry with its status."""
    told.logged("moment", check="submission", request=request, task_id="t-1", attempt=attempt, key=key,
                result_hash=digest)
    if state is not None:
        told.logged("task_state", task_id="t-1", to=state, request=request)
    if stored is not None:
        told.logged("result_stored", task_id="t-1", request=request, **stored)
    return told.logged("request", worker="w1", endpoint="result", status=status, request=request)


# -- SUB-1, SUB-2: the journal as a submission arrived -----------------------------------------------------------


def _arrived(rows: list[dict[str, Any]], key: str = "k", digest: str = "h") -> Told:
    told = _sent(Told(), 2, 201, key, digest)
    return told.read(rows, why="moment", worker="w1", request=2, check="submission")


def test_a_submission_is_sub_1_only_when_its_attempt_has_no_durable_result_pending() -> None:
    source = row(1, "source_capture_done", result_hash="h")
    (early,) = judged("submission.arrivals", _arrived([source]))
    assert early.clause == "SUB-1" and "latest durable row is 'source_capture_done'" in (early.note or "")
    assert early.pointer == "/tasks/t-1/attempts/1/submission" and early.event == 2
    assert clauses(judged("submission.arrivals", _arrived([]))) == ["SUB-1"]  # an empty journal never passes
    # No read recorded at the request: no row was seen, which never passes either.
    assert clauses(judged("submission.arrivals", _sent(Told(), 2, 201))) == ["SUB-1"]
    pending = [source, row(2, "result_pending", idempotency_key="k", result_hash="h")]
    assert judged("submission.arrivals", _arrived(pending)) == []
    # A durable row under another key: KEY-1's and KEY-2's to name (submission.keys), not SUB-1's.
    assert judged("submission.arrivals", _arrived(pending, key="minted-again")) == []
    (other,) = judged("submission.arrivals", _arrived(pending, digest="other"))
    assert other.clause == "SUB-2" and "'other'" in (other.note or "")


# -- KEY-1, SUB-4, TASK-2 at the control plane ----------------------------------------------------------------


def test_one_key_and_one_body_per_attempt_and_no_key_shared_by_two() -> None:
    assert judged("submission.sent", _sent(Told(), 1, 201, "k1", "h1")) == []
    assert clauses(judged("submission.sent", _sent(_sent(Told(), 1, 201, "k1", "h1"), 2, 409, "k2", "h1"))) == [
        "KEY-1"
    ]
    assert clauses(judged("submission.sent", _sent(_sent(Told(), 1, 201, "k1", "h1"), 2, 409, "k1", "h2"))) == [
        "SUB-4"
    ]
    shared = _sent(_sent(Told(), 1, 201, "k1", "h1"), 2, 201, "k1", "h1", attempt=2)
    (found,) = judged("submission.sent", shared)
    assert (found.clause, found.pointer, found.actual) == ("KEY-1", "/control-plane/t-1/keys", {"k1": [1, 2]})


def test_the_stored_result_is_the_one_the_kit_computed_unless_the_scenario_scripts_it() -> None:
    body = {"kind": "source_capture"}
    wrong = Told().at_end(tasks={"t-1": {"stored": {"result_hash": "0" * 64, "result": {}}}},
                          expected={"t-1": body})
    assert clauses(judged("submission.stored_result", wrong)) == ["TASK-2"]
    right = Told().at_end(tasks={"t-1": {"stored": {"result_hash": result_hash(body), "result": body}}},
                          expected={"t-1": body})
    assert judged("submission.stored_result", right) == []
    scripted = Told().logged("result_stored", task_id="t-1", cause="scripted", attempt=1, result_hash="0" * 64)
    scripted.at_end(tasks={"t-1": {"stored": {"result_hash": "0" * 64, "result": {}}}}, expected={"t-1": body})
    assert judged("submission.stored_result", scripted) == []


# -- KEY-2: the key of the durable row ---------------------------------------------------------------------------


def test_a_submission_under_another_key_than_result_pending_is_key_2_naming_both_keys() -> None:
    rows = [row(1, "result_pending", idempotency_key="k1", result_hash="h")]
    assert judged("submission.keys", _sent(Told(), 1, 201, "k1").read(rows)) == []
    (found,) = judged("submission.keys", _sent(Told(), 1, 201, "k2").read(rows))
    assert found.clause == "KEY-2" and "'k2'" in (found.note or "") and "'k1'" in (found.note or "")


def test_two_attempts_pending_under_one_key_or_a_submitted_row_under_another_are_named() -> None:
    twice = [row(1, "result_pending", idempotency_key="k"), row(2, "result_pending", 2, idempotency_key="k")]
    assert clauses(judged("submission.keys", Told().read(twice))) == ["KEY-1"]
    reused = [twice[0], row(2, "result_pending", 2, idempotency_key="k", reused_from=1)]
    assert clauses(judged("submission.keys", Told().read(reused))) == ["KEY-2"]
    other = [twice[0], row(2, "result_submitted", idempotency_key="k2")]
    (found,) = judged("submission.keys", Told().read(other))
    assert (found.clause, found.pointer) == ("KEY-2", "/journal/t-1/1/result_submitted")


# -- SUB-7 and SUB-5: what a result_submitted row rests on --------------------------------------------------------

SUBMITTED = [row(1, "result_pending", idempotency_key="k", result_hash="h"),
             row(2, "result_submitted", idempotency_key="k", result_hash="h")]


def test_result_submitted_needs_a_2xx_answer_to_its_key_or_an_exact_match() -> None:
    done = SUBMITTED[1:]
    # No submission and nothing stored: the row rests on nothing the control plane holds.
    assert clauses(judged("submission.backing", Told().read(done))) == ["SUB-7"]
    assert clauses(judged("submission.backing", _sent(Told(), 1, 409).read(done))) == ["SUB-7"]
    assert judged("submission.backing", _sent(Told(), 1, 201).read(done)) == []
    exact = Told().read(done).at_end(tasks={"t-1": {"stored": {"attempt": 1, "result_hash": "h"}}})
    assert judged("submission.backing", exact) == []
    other = Told().read(done).at_end(tasks={"t-1": {"stored": {"attempt": 2, "result_hash": "h"}}})
    assert clauses(judged("submission.backing", other)) == ["SUB-7"]
    (second,) = judged("submission.second_worker_backing", Told().read(done, journal="second"))
    assert (second.clause, second.pointer) == ("SUB-7", "/second-worker/journal/t-1/1/result_submitted")


def test_result_submitted_after_a_5xx_or_no_answer_names_sub_4_and_what_the_control_plane_holds() -> None:
    # Attempt 1 took a 503 for a success; the control plane holds attempt 2's result (a re-issue): the rule
    # broken is SUB-4 (send the same submission again), and the note names whose result is held.
    done = SUBMITTED[1:]
    held = {"t-1": {"stored": {"attempt": 2, "result_hash": "h2"}}}
    (found,) = judged("submission.backing", _sent(Told(), 1, 503).read(done).at_end(tasks=held))
    assert (found.clause, found.pointer, found.actual) == ("SUB-4", "/journal/t-1/1/result_submitted",
                                                           {"statuses": [503]})
    assert "answered 503" in (found.note or "") and "holds attempt 2's result" in (found.note or "")
    assert clauses(judged("submission.backing", _sent(Told(), 1, 0).read(done))) == ["SUB-4"]  # no answer
    # A 5xx before a 2xx to the same key is a resend that succeeded; a 403 last is SUB-7's read-back.
    assert judged("submission.backing", _sent(_sent(Told(), 1, 502), 2, 200).read(done)) == []
    (lost,) = judged("submission.backing", _sent(Told(), 1, 403).read(done).at_end(tasks=held))
    assert (lost.clause, lost.actual) == ("SUB-7", {"attempt": 2, "result_hash": "h2"})
    assert "it holds attempt 2's result" in (lost.note or "")
    # Another attempt's 5xx is not this attempt's: nothing it sent, SUB-7.
    assert clauses(judged("submission.backing", _sent(Told(), 1, 503, attempt=2).read(done))) == ["SUB-7"]


def _answered(state: str | None, attempt: int = 1, digest: str | None = "h") -> Told:
    stored = None if digest is None else {"attempt": attempt, "result_hash": digest}
    return _sent(Told(), 2, 409, state=state, stored=stored)


def test_a_409_with_this_attempts_body_in_verifying_or_succeeded_backs_result_submitted() -> None:
    for state in ("VERIFYING", "SUCCEEDED"):
        assert judged("submission.exact_match", _answered(state).read(SUBMITTED)) == []


def test_a_409_in_another_state_or_with_another_result_is_sub_5_naming_what_differed() -> None:
    # A 409 logged before its moment: the kit recorded nothing of its answer, which shows no exact match.
    unrecorded = Told().logged("request", worker="w1", endpoint="result", status=409, request=2)
    unrecorded.logged("moment", check="submission", request=2, task_id="t-1", attempt=1, key="k", result_hash="h")
    cases = {
        "the task was 'RUNNING'": _answered("RUNNING"),
        "the stored result_hash is 'other'": _answered("VERIFYING", digest="other"),
        "attempt 2's": _answered("VERIFYING", attempt=2),
        "no stored result": _answered("VERIFYING", digest=None),
        "recorded nothing of the answer": unrecorded,
    }
    for why, told in cases.items():
        (found,) = judged("submission.exact_match", told.read(SUBMITTED))
        assert found.clause == "SUB-5" and found.pointer == "/journal/t-1/1/result_submitted", found
        assert why in (found.note or ""), (why, found.note)
        assert "'t-1' attempt 1" in (found.note or "")


def test_sub_5_judges_only_a_result_submitted_resting_on_409s_alone() -> None:
    running_then_created = _sent(_answered("RUNNING"), 3, 201)
    assert judged("submission.exact_match", running_then_created.read(SUBMITTED)) == []
    assert judged("submission.exact_match", Told().read(SUBMITTED)) == []  # no 409 at all: SUB-7's to judge
    assert judged("submission.exact_match", _answered("RUNNING").read(SUBMITTED[:1])) == []  # no row written
    # One exact match among the 409s backs the row.
    both = _sent(_answered("RUNNING"), 3, 409, state="VERIFYING", stored={"attempt": 1, "result_hash": "h"})
    assert judged("submission.exact_match", both.read(SUBMITTED)) == []


CONFLICTED = [row(1, "result_pending", idempotency_key="k", result_hash="h"),
              row(2, "reconciliation_required", reason="result_conflict")]


def test_an_exact_match_refused_for_result_conflict_is_sub_5() -> None:
    (found,) = judged("submission.exact_match", _answered("VERIFYING").read(CONFLICTED))
    assert found.clause == "SUB-5" and found.pointer == "/journal/t-1/1/reconciliation_required", found
    assert "was an exact match" in (found.note or "") and "'VERIFYING'" in (found.note or "")


def test_result_conflict_after_409s_that_were_no_exact_match_passes() -> None:
    for told in (_answered("RUNNING"), _answered("VERIFYING", digest="other"), _answered("VERIFYING", attempt=2)):
        assert judged("submission.exact_match", told.read(CONFLICTED)) == []
    assert judged("submission.exact_match", Told().read(CONFLICTED)) == []  # no 409 at all: nothing was refused
    # No result_pending row: nothing to match against (SUB-1 judges such a submission).
    assert judged("submission.exact_match", _answered("VERIFYING").read(CONFLICTED[1:])) == []
