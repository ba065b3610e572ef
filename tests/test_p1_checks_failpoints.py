"""Failpoints (FPT-1, FPT-2): a block at a site the catalog names, the one armed, in the durable state the
catalog says holds there; the catalog's own table of what is durable at each site."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1.checks.failpoints import failpoint_state
from tests.p1_stories import Told, clauses, judged, row


def _fp_row(seq: int, phase: str) -> dict[str, Any]:
    return {"task_id": "t", "seq": seq, "phase": phase}


def _cache_of(row: dict[str, Any]) -> tuple[str, Any]:
    return "ok", {"cache_version": 1, **row}


def _blocked(name: str, armed: str, rows: list[dict[str, Any]], **read: Any) -> Told:
    cache = list(read.get("cache", ("absent", None)))
    return Told().by("w1", "blocked", failpoint=name, armed=armed, rows=rows, attempts=read.get("attempts", rows[-1:]),
                     cache=cache, temporaries=read.get("temporaries", []))


# -- the rule over recorded blocks ---------------------------------------------------------------------------


def test_a_block_where_the_catalog_says_passes_and_no_block_is_nothing_to_judge() -> None:
    assert judged("failpoints.block", Told()) == []
    rows = [_fp_row(1, "claimed")]
    assert judged("failpoints.block", _blocked("after_claimed_row", "after_claimed_row", rows)) == []


def test_the_block_continue_released_reported_again_is_adp_2_not_fpt_2() -> None:
    # p1.md 0.5 G20: after p1.worker.continue has answered, a wait never reports the block it released.
    rows = [_fp_row(1, "claimed")]
    stale = Told().by("w1", "blocked", failpoint="after_claimed_row", armed="before_push", released="after_claimed_row",
                      rows=rows, attempts=rows, cache=["absent", None], temporaries=[])
    assert judged("failpoints.block", stale) == []  # ADP-2's, with the message that says what happened
    (found,) = judged("failpoints.released", stale)
    assert (found.clause, found.pointer, found.event) == ("ADP-2", "/wait/state", 0)
    assert "'after_claimed_row'" in (found.note or "") and "before it answers continue" in (found.note or "")
    # With nothing armed the wait wanted idle: the answer it got is the released block, ADP-2 of this rule alone.
    answer = {"state": "blocked", "failpoint": "after_claimed_row", "pid": 7}
    idle = Told().by("w1", "not-as-waited", wanted="idle", state="blocked", answer=answer, released="after_claimed_row")
    (found,) = judged("failpoints.released", idle)
    assert (found.clause, found.actual) == ("ADP-2", answer)
    assert judged("processes.waits", idle) == []


def test_a_block_at_the_released_name_is_no_finding_where_the_worker_may_have_reached_it_anew() -> None:
    rows = [_fp_row(1, "claimed")]
    for armed in ("after_claimed_row", "*"):  # armed again under that name, or the next site of any name
        told = Told().by("w1", "blocked", failpoint="after_claimed_row", armed=armed, released="after_claimed_row",
                         rows=rows, attempts=rows, cache=["absent", None], temporaries=[])
        assert judged("failpoints.released", told) == []
    # No continue since the last wait ended: nothing was released.
    assert judged("failpoints.released", _blocked("after_claimed_row", "before_push", rows)) == []
    answer = {"state": "blocked", "failpoint": "after_claimed_row", "pid": 7}
    unreleased = Told().by("w1", "not-as-waited", wanted="idle", state="blocked", answer=answer, released=None)
    assert judged("failpoints.released", unreleased) == []
    assert clauses(judged("processes.waits", unreleased)) == ["ADP-2"]


def test_a_block_at_another_site_than_armed_is_fpt_2() -> None:
    (found,) = judged("failpoints.block", _blocked("after_claimed_row", "before_push", [_fp_row(1, "claimed")]))
    assert (found.clause, found.pointer, found.expected, found.actual) == (
        "FPT-2", "/wait/failpoint", "before_push", "after_claimed_row"
    )
    assert found.check == "failpoints.block" and found.event == 0


def test_a_block_armed_as_any_at_a_name_the_catalog_lacks_is_fpt_1() -> None:
    (found,) = judged("failpoints.block", _blocked("after_lunch_row", "*", [_fp_row(1, "claimed")]))
    assert found.clause == "FPT-1" and "'after_lunch_row'" in (found.note or "")


def test_a_block_without_the_durable_state_named_there_names_the_rule_broken() -> None:
    # Blocked before the receipt with no row read at all: absent evidence never passes.
    (found,) = judged("failpoints.block", _blocked("before_receipt", "before_receipt", []))
    assert found.clause == "COMMIT-5" and found.pointer == "/wait/observed"
    claimed, prepared = _fp_row(1, "claimed"), _fp_row(2, "workspace_prepared")
    early = _blocked("after_workspace_prepared_row", "*", [claimed, prepared], cache=_cache_of(prepared))
    assert clauses(judged("failpoints.block", early)) == ["CACHE-2"]
    late = _blocked("after_workspace_prepared_row", "after_workspace_prepared_row", [claimed])
    assert clauses(judged("failpoints.block", late)) == ["FPT-2"]


# -- the catalog ----------------------------------------------------------------------------------------------


def test_a_cache_ahead_of_its_row_is_seen_before_the_row_and_after_it() -> None:
    claimed, prepared = _fp_row(1, "claimed"), _fp_row(2, "workspace_prepared")
    # Written before its row (CACHE-2): the cache names a seq the journal does not have yet.
    ahead = failpoint_state("before_workspace_prepared_row", [claimed], (), _cache_of(prepared))
    assert ahead is not None and "ahead of the journal" in ahead[0] and ahead[1] == "CACHE-2"
    early = failpoint_state("after_workspace_prepared_row", [claimed, prepared], (), _cache_of(prepared))
    assert early is not None and "already shows" in early[0] and early[1] == "CACHE-2"
    assert failpoint_state("after_workspace_prepared_row", [claimed, prepared], (), _cache_of(claimed)) is None


def test_a_temporary_must_hold_this_tasks_row_and_the_cache_must_show_it_after_the_rename() -> None:
    rows = [_fp_row(1, "claimed")]
    other = ("ok", {"task_id": "u", "seq": 1, "phase": "claimed"})
    assert failpoint_state("before_claimed_cache", rows, (), ("absent", None)) is not None
    assert failpoint_state("before_claimed_cache", rows, (other,), ("absent", None)) is not None
    assert failpoint_state("before_claimed_cache", rows, (_cache_of(rows[0]),), ("absent", None)) is None
    assert failpoint_state("after_claimed_cache", rows, (), ("absent", None)) is not None
    assert failpoint_state("after_claimed_cache", rows, (), ("torn", "{")) is not None
    assert failpoint_state("after_claimed_cache", rows, (), _cache_of(rows[0])) is None


def test_the_failpoints_beside_the_rows_name_the_latest_row() -> None:
    pending = [_fp_row(1, "claimed"), _fp_row(2, "result_pending")]
    assert failpoint_state("before_result_submit", pending) is None
    assert failpoint_state("before_push", pending) is not None
    # Blocked before the side effect without its row: the rule ordering the two is the one broken.
    assert failpoint_state("before_result_submit", pending[:1]) == (
        "no attempt's last row is result_pending (the last rows: ['claimed'])",
        "SUB-1",
    )
    # A restart releases a terminal attempt's lease while another task's row is the journal's latest.
    done, other = _fp_row(3, "result_submitted"), {"task_id": "u", "seq": 4, "phase": "commit_done"}
    assert failpoint_state("before_release", [other], attempts=[done, other]) is None
    assert failpoint_state("before_release", [other], attempts=[other]) is not None
    assert failpoint_state("before_release", pending) is not None
    assert failpoint_state("before_release", [*pending, _fp_row(3, "result_submitted")]) is None
    assert failpoint_state("before_receipt", []) is not None  # absent evidence never passes
    assert failpoint_state("cleanup_before_remove", []) is None  # "unchanged": attested, documented


# -- FPT-1: before_receipt once per convergence check, never on a resend ------------------------------------------

RECEIPT = "v1/jobs/j/receipt"


def _blocked_after(told: Told, worker: str = "w1") -> Told:
    return told.by(worker, "blocked", failpoint="before_receipt", armed="before_receipt",
                   rows=[row(1, "commit_done", commit_oid="c" * 40)], attempts=[], cache=["absent", None],
                   temporaries=[])


def test_before_receipt_passed_again_on_a_resend_is_fpt_1() -> None:
    told = Told().logged("request", worker="w1", endpoint="receipt", path=RECEIPT, status=503, answer="answer")
    (found,) = judged("failpoints.receipt_resends", _blocked_after(told))
    assert (found.clause, found.pointer) == ("FPT-1", "/wait/failpoint")
    assert "'v1/jobs/j/receipt' got status 503" in (found.note or "") and "resend" in (found.note or "")
    dropped = Told().logged("request", worker="w1", endpoint="receipt", path=RECEIPT, status=0, answer="drop")
    assert "got no answer" in (judged("failpoints.receipt_resends", _blocked_after(dropped))[0].note or "")


def test_before_receipt_at_a_convergence_checks_first_send_is_no_fpt_1_finding() -> None:
    renewed = Told().logged("request", worker="w1", endpoint="receipt", path=RECEIPT, status=503, answer="answer")
    renewed.logged("request", worker="w1", endpoint="renew", path="v1/leases/lease-1/renew", status=200,
                   answer="answer")
    answered = Told().logged("request", worker="w1", endpoint="receipt", path=RECEIPT, status=200, answer="answer")
    # The unanswered receipt was another worker process's: this one starts its own convergence check.
    other = Told().logged("request", worker="w1", endpoint="receipt", path=RECEIPT, status=503, answer="answer")
    for told in (renewed, answered, Told()):
        assert judged("failpoints.receipt_resends", _blocked_after(told)) == []
    assert judged("failpoints.receipt_resends", _blocked_after(other, "w2")) == []
    assert judged("failpoints.receipt_resends", Told()) == []


# -- the kit-side kill points (FPT-3) ----------------------------------------------------------------------------

_KILLED = "a kit-side kill point"


def _killed_at(at: str, endpoint: str, rows: list[dict[str, Any]], *, before: Told | None = None,
               **named: Any) -> Told:
    """A request number 7 the control plane killed w1 on at *at*, the entries naming its attempt, the kill, and
    the journal as the kit read it next."""
    told = before or Told()
    for kind, entry in named.items():
        told.logged(kind, request=7, **entry)
    told.logged("request", request=7, worker="w1", endpoint=endpoint, status=0, answer="drop", kill_point=at)
    return told.by("w1", "killed", signal="SIGKILL", at=at, by=_KILLED).read(rows, why="wait", worker="w1")


def test_no_kill_point_or_no_read_after_it_is_nothing_to_judge() -> None:
    assert judged("failpoints.kit_kills", Told().read([row(1, "claimed")], why="wait")) == []
    unread = Told().logged("request", request=7, kill_point="server_result_stored", endpoint="result")
    assert judged("failpoints.kit_kills", unread.by("w1", "killed", at="server_result_stored", by=_KILLED)) == []
    # A kill of a step (no kill point) is not judged here, whatever the journal holds.
    stepped = Told().by("w1", "killed", at=None, by="a step").read([row(1, "claimed")], why="wait")
    assert judged("failpoints.kit_kills", stepped) == []


def test_each_kill_point_leaves_the_row_its_table_names_as_the_attempts_last() -> None:
    through = ["claimed", "workspace_prepared", "verification_passed", "commit_done", "result_pending"]
    cases = [
        ("server_result_received", "result", {"moment": {"check": "submission", "task_id": "t-1", "attempt": 1}}, 5),
        ("server_result_stored", "result", {"governed": {"task_id": "t-1", "attempt": 1}}, 5),
        ("server_receipt_recorded", "receipt", {"governed": {"task_id": "t-1", "attempt": 1}}, 4),
        ("origin_ref_updated", "origin_updated", {"origin_ref_updated": {"task_id": "t-1", "attempt": 1}}, 3),
        ("tool_started", "tool_started", {}, 3),
    ]
    for at, endpoint, named, upto in cases:
        rows = [row(seq, phase) for seq, phase in enumerate(through[:upto], 1)]
        assert judged("failpoints.kit_kills", _killed_at(at, endpoint, rows, **named)) == [], at
        ahead = [*rows, row(upto + 1, "result_submitted" if upto == 5 else through[upto])]
        (found,) = judged("failpoints.kit_kills", _killed_at(at, endpoint, ahead, **named))
        assert (found.clause, found.pointer) == ("FPT-3", f"/kill-points/{at}"), at
        assert f"not {through[upto - 1]!r}" in (found.note or ""), found.note
    # Another attempt's rows after it are not this attempt's: its last row is what counts.
    other = [row(1, "claimed"), row(2, "result_pending", attempt=1), row(3, "claimed", attempt=2)]
    named = {"governed": {"task_id": "t-1", "attempt": 1}}
    assert judged("failpoints.kit_kills", _killed_at("server_result_stored", "result", other, **named)) == []


def test_a_claim_killed_before_its_answer_leaves_no_row_of_the_attempt() -> None:
    granted = {"lease": {"event": "granted", "lease": {"task_id": "t-1", "attempt": 1}}}
    assert judged("failpoints.kit_kills", _killed_at("server_claim_granted", "claim", [], **granted)) == []
    (found,) = judged("failpoints.kit_kills", _killed_at("server_claim_granted", "claim", [row(1, "claimed")],
                                                          **granted))
    assert found.clause == "FPT-3" and "['claimed']" in (found.note or "")
    # A delivery served again: the rows held as the claim arrived (the kit's read at it) are no new rows ...
    held = [row(1, "claimed"), row(2, "workspace_prepared")]
    replayed = {"replayed_delivery": {"task_id": "t-1", "attempt": 1}}
    read_at = Told().read(held, why="moment", worker="w1", request=7)
    told = _killed_at("server_claim_granted", "claim", held, before=read_at, **replayed)
    assert judged("failpoints.kit_kills", told) == []
    # ... and without that read its earlier rows cannot be told from new ones: nothing is judged.
    assert judged("failpoints.kit_kills", _killed_at("server_claim_granted", "claim", held, **replayed)) == []
