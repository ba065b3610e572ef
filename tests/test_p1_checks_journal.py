"""The checkpoint journal (JNL): readable (JNL-1), what each row fills (JNL-2), no row rewritten (JNL-4), the
connections' settings every process reports (JNL-5, JNL-6, ADP-1), a fatal exit after a disk error (JNL-8),
and the second worker's journal; each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.checks import journal
from tests.p1_stories import Told, clauses, judged, row

GOOD = {"synchronous": 2, "journalMode": "wal", "busyTimeoutMs": 5000}
DISK = {"errno": "EIO", "op": "fsync", "hit": 1, "file": "journal"}


def test_every_unreadable_read_of_the_journal_fails_jnl_1() -> None:
    assert judged("journal.readable", Told()) == []
    (found,) = judged("journal.readable", Told().by("journal", "unreadable", worker="w1", error="not a database"))
    assert (found.clause, found.pointer, found.actual, found.event) == ("JNL-1", "/journal", "not a database", 0)


def test_after_a_disk_error_the_worker_exits_non_zero_through_its_exit_path() -> None:
    assert judged("journal.fatal_exits", Told()) == []
    ok = Told().by("w1", "exited", exitCode=1, marker=True, diskFault=DISK, settling=False)
    assert judged("journal.fatal_exits", ok) == []
    zero = Told().by("w1", "exited", exitCode=0, marker=True, diskFault=DISK, settling=False)
    assert [(m.clause, m.pointer) for m in judged("journal.fatal_exits", zero)] == [("JNL-8", "/wait/exitCode")]
    silent = Told().by("w1", "exited", exitCode=1, marker=False, diskFault=DISK, settling=False)
    (found,) = judged("journal.fatal_exits", silent)
    assert found.pointer == "/marker" and "(EIO from fsync #1 of the journal)" in (found.note or "")
    went_on = Told().by("w1", "not-as-waited", wanted="exited", state="idle", answer={"state": "idle"}, diskFault=DISK)
    (found,) = judged("journal.fatal_exits", went_on)
    assert found.clause == "JNL-8" and "or it never counted that many" in (found.note or "")
    assert "a row of a side table (recoveries, abandonments) included" in (found.note or "")
    running = Told().by("w1", "not-as-waited", wanted="exited", state="blocked", answer={}, diskFault=DISK)
    (found,) = judged("journal.fatal_exits", running)
    assert (found.note or "").endswith("instead of exiting: it took the failed operation for a success")
    # No disk error armed, or a settling exit: not JNL-8's.
    assert judged("journal.fatal_exits", Told().by("w1", "exited", exitCode=0, marker=False, diskFault=None)) == []


def _rows(*rows: dict[str, Any]) -> Told:
    return Told().read(rows)


def test_a_workspace_prepared_row_names_a_task_directory_right_under_the_root() -> None:
    def found(name: object) -> list[str | None]:
        return clauses(judged("journal.rows", _rows(row(1, "claimed"), row(2, "workspace_prepared", workspace=name))))

    assert found("task-t-1-1-0a1b2c3d") == []
    assert found(None) == found("") == found(7) == ["JNL-2"]
    for odd in ("- odd name", "tasks", "task-a/../../b", "task-a\\b", "task-a\0"):
        assert found(odd) == ["WRK-4"], odd


def test_the_rows_of_each_phase_fill_what_jnl_2_says() -> None:
    body = '{"a":1}'
    good = {"result_body": body, "result_hash": result_hash({"a": 1})}
    rows = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-1"), row(3, "verification_passed"),
            row(4, "source_capture_done", **good), row(5, "result_pending", idempotency_key="k", **good)]
    assert judged("journal.rows", _rows(*rows)) == []
    for column, value in (("result_body", '{"a": 1}'), ("result_body", None), ("result_hash", "0" * 64),
                          ("idempotency_key", None)):
        broken = [*rows[:4], {**rows[4], column: value}]
        assert clauses(judged("journal.rows", _rows(*broken))) == ["JNL-2"], (column, value)
    committed = _rows(row(1, "claimed"), row(2, "commit_done", result_body=body, result_hash=good["result_hash"]))
    assert [m.pointer for m in judged("journal.rows", committed)] == ["/journal/t-1/1/1/commit_oid"]
    unreasoned = _rows(row(1, "claimed"), row(2, "reconciliation_required"))
    assert clauses(judged("journal.rows", unreasoned)) == ["PHASE-4"]


def test_a_result_body_nested_past_the_parser_is_jnl_2_not_a_traceback() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    rows = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-1"), row(3, "verification_passed"),
            row(4, "source_capture_done", result_body=deep, result_hash="0" * 64)]
    assert clauses(judged("journal.rows", _rows(*rows))) == ["JNL-2"]


def test_a_row_changed_or_gone_between_two_reads_is_jnl_4_once() -> None:
    first = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x")]
    kept = Told().read(first[:1], why="wait").read(first, why="moment").read(first)
    assert judged("journal.rows", kept) == []
    gone = Told().read(first, why="wait").read(first[1:], why="moment").read(first[1:])
    (found,) = judged("journal.rows", gone)
    assert (found.clause, found.pointer, found.note) == ("JNL-4", "/journal", "the journal was rewritten")
    # A read at a worker's start or of the durable view stands for no moment of the live journal.
    assert judged("journal.rows", Told().read(first, why="start").read(first[1:], why="durable").read(first)) == []


def test_no_rows_read_is_nothing_to_judge_of_the_rows() -> None:
    # What must exist (a row per attempt, the final phase) is the outcome's to judge (convergence.outcomes).
    assert judged("journal.rows", Told()) == []
    assert judged("journal.second_worker_rows", Told()) == []


def test_the_second_workers_journal_obeys_the_same_rules_under_its_own_pointer() -> None:
    ok = [row(1, "claimed"), row(2, "reconciliation_required", reason="lease_not_converged")]
    assert judged("journal.second_worker_rows", Told().read(ok, journal="second")) == []
    broken = Told().read([row(1, "claimed"), row(2, "workspace_prepared", workspace=None)], journal="second")
    (found,) = judged("journal.second_worker_rows", broken)
    assert (found.clause, found.pointer) == ("JNL-2", "/second-worker/journal/t-1/1/1/workspace")
    # The first worker's rows are not the second's.
    assert judged("journal.second_worker_rows", Told().read(broken.events[0].get("rows"))) == []


# -- JNL-5, JNL-6: the settings of every process's journal connections -------------------------------------


def _settings(reported: dict[str, list[dict[str, Any]]] | None, **rest: Any) -> list[str | None]:
    return clauses(judged("journal.settings", Told().settings(reported, **rest)))


def test_no_p1_journal_and_no_connection_at_all_never_pass() -> None:
    assert clauses(judged("journal.settings", Told())) == ["ADP-1"]  # nothing recorded: as without p1.journal
    assert _settings(None) == ["ADP-1"]
    assert _settings({}) == ["JNL-5"]
    assert _settings({"w1": []}, wrote=["w1"]) == ["JNL-5"]


def test_every_process_is_checked_not_only_the_last() -> None:
    weak = {**GOOD, "synchronous": 1}
    found = judged("journal.settings", Told().settings({"w1": [weak], "w2": [GOOD]}, wrote=["w1", "w2"]))
    assert [(m.clause, m.pointer) for m in found] == [("JNL-5", "/p1.journal/w1/connections/0")]
    short = {**GOOD, "busyTimeoutMs": 100}
    found = judged("journal.settings", Told().settings({"w1": [GOOD], "b1": [short]}))
    assert [(m.clause, m.pointer) for m in found] == [("JNL-6", "/p1.journal/b1/connections/0/busyTimeoutMs")]


def test_a_process_that_wrote_rows_must_have_reported_or_logged_a_connection() -> None:
    asked = Told().settings({"w1": [GOOD], "w2": []}, wrote=["w1", "w2"])
    assert [m.pointer for m in judged("journal.settings", asked)] == ["/p1.journal/w2/connections"]
    logged = Told().settings({"w1": [GOOD]}, wrote=["w1", "w2"], logged=True)
    assert [m.pointer for m in judged("journal.settings", logged)] == ["/p1.journal/w2"]
    # Killed at a kit-side point without the log: never asked, so not a failure, but marked as unreported.
    unasked = Told().settings({"w1": [GOOD]}, wrote=["w1", "w2"])
    assert judged("journal.settings", unasked) == []
    assert journal.unreported(unasked.story().settings) == ["w2"]
    assert any("not reported: w2" in mark for mark in journal.attested(unasked.story().settings, ()))


def test_an_unreadable_log_fails_jnl_5_naming_the_process() -> None:
    (found,) = judged("journal.settings", Told().settings({"w1": [GOOD]}, logged=True,
                                                          unreadable={"w2": "line 1 is not JSON"}))
    assert found.clause == "JNL-5" and "w2" in (found.note or "")


def test_the_file_header_holds_the_reported_mode_to_account() -> None:
    def found(header: str, mode: str) -> list[str | None]:
        return _settings({"w1": [{**GOOD, "journalMode": mode}]}, header=header, header_of=["w1"])

    assert found("wal", "wal") == [] and found("rollback", "delete") == [] and found("rollback", "persist") == []
    assert found("rollback", "wal") == ["JNL-5"]
    assert found("wal", "truncate") == ["JNL-5"]


def test_attested_marks_name_what_was_taken_on_the_workers_word() -> None:
    assert journal.attested(None, ()) == ()
    settings = Told().settings({"w1": [GOOD, GOOD]}, header="wal").story().settings
    marks = journal.attested(settings, ["after_claimed_row"])
    assert marks[0].startswith("JNL-5, JNL-6: synchronous and busy timeout of 2 journal connection(s) of w1")
    assert marks[1] == "FPT-2: that each block was at the site its name says (after_claimed_row)"


# -- ADP-3: the answer and the journal log tell of the same connections -----------------------------------------


def _answered(answer: list[dict[str, Any]], logged: list[dict[str, Any]] | None, **rest: Any) -> Told:
    """w1 answered p1.journal.settings with *answer*; with p1.journal-log its log listed *logged* (None: no log)."""
    told = Told().by("w1", "settings", connections=answer)
    if logged is None:
        return told.settings({"w1": answer})
    return told.settings({"w1": logged}, logged=True, **rest)


def test_an_answer_of_no_connection_beside_a_log_of_one_is_adp_3() -> None:
    (found,) = judged("journal.answered_settings", _answered([], [GOOD]))
    assert (found.clause, found.pointer, found.actual, found.event) == ("ADP-3", "/p1.journal/w1/answer", [], 0)
    assert "w1 answered p1.journal.settings with no connection" in (found.note or "")
    # The log alone passes JNL-5: only the contradiction shows the answer is false.
    assert judged("journal.settings", _answered([], [GOOD])) == []


def test_an_answer_the_log_bears_out_or_no_log_to_hold_it_to_passes() -> None:
    assert judged("journal.answered_settings", Told()) == []
    assert judged("journal.answered_settings", _answered([GOOD], [GOOD])) == []
    assert judged("journal.answered_settings", _answered([], [])) == []  # no connection either way
    assert judged("journal.answered_settings", _answered([], None)) == []  # no log: JNL-5's to judge
    # A log the kit could not read is JNL-5's to judge; and a process never asked has no answer to hold.
    unread = _answered([], [], unreadable={"w1": "line 1 is not JSON"})
    assert judged("journal.answered_settings", unread) == []
    assert judged("journal.answered_settings", Told().settings({"w1": [GOOD]}, logged=True)) == []


def test_seq_follows_commit_order_and_is_sqlites_own() -> None:
    good = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x")]
    assert judged("journal.seq_order", Told()) == []
    assert judged("journal.seq_order", Told().read(good[:1], why="wait").read(good)) == []
    # A row committed after a read must carry a seq above that read's: here it slipped in below it.
    late = [row(1, "claimed"), row(3, "workspace_prepared", workspace="task-x")]
    below = [row(1, "claimed"), row(2, "verification_passed"), row(3, "workspace_prepared", workspace="task-x")]
    (found,) = judged("journal.seq_order", Told().read(late, why="wait").read(below))
    assert (found.clause, found.pointer, found.actual) == ("JNL-3", "/journal/seq", [2])
    # Seqs the worker chose: a gap, or a start above 1, is no seq SQLite gives an append-only table.
    chosen = [row(7, "claimed"), row(9, "workspace_prepared", workspace="task-x")]
    (found,) = judged("journal.seq_order", Told().read(chosen))
    assert found.clause == "JNL-3" and found.actual == [7, 9] and "not 1 to 2" in (found.note or "")
    second = judged("journal.seq_order", Told().read(good).read(chosen, journal="second"))
    assert [m.pointer for m in second] == ["/second-worker/journal/seq"]
    # The reorder is JNL-3's alone: no row of the earlier read changed (JNL-4).
    assert judged("journal.rows", Told().read(late, why="wait").read(below)) == []


def test_the_rows_of_one_attempt_come_before_the_next_attempts_claim() -> None:
    def task(seq: int, phase: str, task_id: str, **columns: Any) -> dict[str, Any]:
        return row(seq, phase, task_id=task_id, **columns)

    assert judged("journal.one_attempt_at_a_time", Told()) == []
    one_by_one = [task(1, "claimed", "a"), task(2, "reconciliation_required", "a", reason="task_invalid"),
                  task(3, "claimed", "b")]
    assert judged("journal.one_attempt_at_a_time", Told().read(one_by_one)) == []
    # An abandoned attempt's rows stay as they were: the next attempt may follow it at any phase.
    abandoned = [task(1, "claimed", "a"), task(2, "claimed", "b"), task(3, "workspace_prepared", "b", workspace="t")]
    assert judged("journal.one_attempt_at_a_time", Told().read(abandoned)) == []
    both = [task(1, "claimed", "a"), task(2, "claimed", "b"), task(3, "workspace_prepared", "a", workspace="t")]
    (found,) = judged("journal.one_attempt_at_a_time", Told().read(both))
    assert (found.clause, found.pointer, found.actual) == ("WRK-2", "/journal/a/1/3", "workspace_prepared")
    assert "after the claimed row (seq 2) of attempt 1 of 'b'" in (found.note or "")
    second = judged("journal.one_attempt_at_a_time", Told().read(one_by_one).read(both, journal="second"))
    assert [m.pointer for m in second] == ["/second-worker/journal/a/1/3"]


# -- JNL-7: no side effect on a row whose commit failed ------------------------------------------------------------

_FAULT = {"file": "journal", "op": "write", "errno": "ENOSPC", "hit": 5}


def _sent(rows: list[dict[str, Any]], check: str = "submission", fault: dict[str, Any] | None = _FAULT) -> Told:
    """w1 started (armed with *fault*), the journal the kit read as its request 7 arrived, and the moment."""
    told = Told().by("w1", "started", pid=1, diskFault=fault)
    told.read(rows, why="moment", worker="w1", request=7)
    return told.logged("moment", check=check, request=7, worker="w1", task_id="t-1", attempt=1)


def test_no_disk_fault_or_no_read_at_the_request_is_nothing_to_judge_for_jnl_7() -> None:
    assert judged("journal.failed_writes", Told()) == []
    assert judged("journal.failed_writes", _sent([row(1, "claimed")], fault=None)) == []
    # A cache's failed write leaves its row durable: nothing of the journal rests on it.
    assert judged("journal.failed_writes", _sent([row(1, "claimed")], fault={**_FAULT, "file": "cache"})) == []
    unread = Told().by("w1", "started", pid=1, diskFault=_FAULT).logged("moment", check="submission", request=7,
                                                                       worker="w1", task_id="t-1", attempt=1)
    assert judged("journal.failed_writes", unread) == []


def test_a_submission_or_receipt_without_its_row_after_a_failed_commit_is_jnl_7() -> None:
    done = [row(1, "claimed"), row(2, "source_capture_done", result_hash="h", result_body="{}")]
    assert judged("journal.failed_writes", _sent([*done, row(3, "result_pending", idempotency_key="k")])) == []
    (found,) = judged("journal.failed_writes", _sent(done))
    assert (found.clause, found.pointer, found.actual) == ("JNL-7", "/workers/w1/submission/7", ["source_capture_done"])
    assert "ENOSPC from write #5 of the journal" in (found.note or "")
    # A receipt rests on commit_done, or on a reused result_pending that carries the commit.
    verified = [row(1, "claimed"), row(2, "verification_passed")]
    assert clauses(judged("journal.failed_writes", _sent(verified, "receipt"))) == ["JNL-7"]
    assert judged("journal.failed_writes", _sent([*verified, row(3, "commit_done")], "receipt")) == []
    # Another attempt's row backs nothing of this one.
    other = [row(1, "claimed", 2), row(2, "result_pending", 2)]
    assert clauses(judged("journal.failed_writes", _sent(other))) == ["JNL-7"]
