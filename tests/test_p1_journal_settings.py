"""JNL-5 and JNL-6 over every worker process (settings_checks), the journal file's header and the journal
log (evidence), and RESUME-1's order of a restart (resume_checks): each check fails on absent evidence."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1 import evidence
from resumekit.conformance.p1 import evidence_checks as checks
from resumekit.conformance.p1.evidence_data import JournalSettings

GOOD = {"synchronous": 2, "journalMode": "wal", "busyTimeoutMs": 5000}


def _clauses(found: list[Any]) -> list[str | None]:
    return [mismatch.clause for mismatch in found]


# -- settings_checks ----------------------------------------------------------------------------------------


def test_no_p1_journal_and_no_connection_at_all_never_pass() -> None:
    assert _clauses(checks.settings_checks(None)) == ["ADP-1"]
    assert _clauses(checks.settings_checks(JournalSettings(reported={}))) == ["JNL-5"]
    assert _clauses(checks.settings_checks(JournalSettings(reported={"w1": []}, wrote=("w1",)))) == ["JNL-5"]


def test_every_process_is_checked_not_only_the_last() -> None:
    weak = {**GOOD, "synchronous": 1}
    found = checks.settings_checks(JournalSettings(reported={"w1": [weak], "w2": [GOOD]}, wrote=("w1", "w2")))
    assert [(m.clause, m.pointer) for m in found] == [("JNL-5", "/p1.journal/w1/connections/0")]
    short = {**GOOD, "busyTimeoutMs": 100}
    found = checks.settings_checks(JournalSettings(reported={"w1": [GOOD], "b1": [short]}))
    assert [(m.clause, m.pointer) for m in found] == [("JNL-6", "/p1.journal/b1/connections/0/busyTimeoutMs")]


def test_a_process_that_wrote_rows_must_have_reported_or_logged_a_connection() -> None:
    asked = JournalSettings(reported={"w1": [GOOD], "w2": []}, wrote=("w1", "w2"))
    assert [m.pointer for m in checks.settings_checks(asked)] == ["/p1.journal/w2/connections"]
    logged = JournalSettings(reported={"w1": [GOOD]}, wrote=("w1", "w2"), logged=True)
    assert [m.pointer for m in checks.settings_checks(logged)] == ["/p1.journal/w2"]
    # Killed at a kit-side point without the log: never asked, so not a failure, but marked as unreported.
    unasked = JournalSettings(reported={"w1": [GOOD]}, wrote=("w1", "w2"))
    assert checks.settings_checks(unasked) == []
    assert checks.unreported(unasked) == ["w2"]
    assert any("not reported: w2" in mark for mark in checks.attested(unasked, ()))


def test_an_unreadable_log_fails_jnl_5_naming_the_process() -> None:
    settings = JournalSettings(reported={"w1": [GOOD]}, logged=True, unreadable={"w2": "line 1 is not JSON"})
    (found,) = checks.settings_checks(settings)
    assert found.clause == "JNL-5" and "w2" in (found.note or "")


def test_the_file_header_holds_the_reported_mode_to_account() -> None:
    def judged(header: str, mode: str) -> list[str | None]:
        connection = {**GOOD, "journalMode": mode}
        return _clauses(checks.settings_checks(JournalSettings(reported={"w1": [connection]}, header=header,
                                                               header_of=("w1",))))

    assert judged("wal", "wal") == [] and judged("rollback", "delete") == [] and judged("rollback", "persist") == []
    assert judged("rollback", "wal") == ["JNL-5"]
    assert judged("wal", "truncate") == ["JNL-5"]


def test_attested_marks_name_what_was_taken_on_the_workers_word() -> None:
    assert checks.attested(None, ()) == ()
    marks = checks.attested(JournalSettings(reported={"w1": [GOOD, GOOD]}, header="wal"), ["after_claimed_row"])
    assert marks[0].startswith("JNL-5, JNL-6: synchronous and busy timeout of 2 journal connection(s) of w1")
    assert marks[1] == "FPT-2: that each block was at the site its name says (after_claimed_row)"


# -- the journal file's header and the journal log -------------------------------------------------------------


@pytest.mark.parametrize(("mode", "header"), [("wal", "wal"), ("delete", "rollback"), ("truncate", "rollback")])
def test_the_header_shows_the_journal_mode(tmp_path: Path, mode: str, header: str) -> None:
    db = sqlite3.connect(tmp_path / evidence.JOURNAL_FILE)
    db.execute(f"PRAGMA journal_mode={mode}")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    assert evidence.journal_header(tmp_path) == header


def test_no_journal_or_no_whole_header_reads_as_none(tmp_path: Path) -> None:
    assert evidence.journal_header(tmp_path) is None
    (tmp_path / evidence.JOURNAL_FILE).write_bytes(b"SQLite format 3\x00" + b"\x02" * 10)
    assert evidence.journal_header(tmp_path) is None


def test_a_journal_log_is_read_line_by_line_and_a_torn_last_line_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "journal-w1.jsonl"
    log.write_bytes(b'{"synchronous": 2}\n{"synchronous": 3}\n{"synch')
    assert evidence.read_journal_log(tmp_path, log) == ([{"synchronous": 2}, {"synchronous": 3}], None)
    log.write_bytes(b"")
    assert evidence.read_journal_log(tmp_path, log) == ([], None)


@pytest.mark.parametrize("content", [b"not json\n", b"[1]\n", b"\xff\n"])
def test_a_journal_log_that_is_not_json_objects_is_refused(tmp_path: Path, content: bytes) -> None:
    log = tmp_path / "journal-w1.jsonl"
    log.write_bytes(content)
    connections, why = evidence.read_journal_log(tmp_path, log)
    assert connections is None and why is not None and "line 1" in why


def test_a_journal_log_too_large_missing_or_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"{}\n" * (evidence.JOURNAL_LOG_LIMIT // 3 + 1))
    assert evidence.read_journal_log(tmp_path, big)[0] is None
    assert evidence.read_journal_log(tmp_path, tmp_path / "absent.jsonl")[0] is None
    assert evidence.read_journal_log(tmp_path, tmp_path)[0] is None
    if sys.platform != "win32":
        fifo = tmp_path / "fifo.jsonl"
        os.mkfifo(fifo)
        assert evidence.read_journal_log(tmp_path, fifo)[0] is None  # and it did not block


# -- RESUME-1 -----------------------------------------------------------------------------------------------


def _row(task_id: str, phase: str, attempt: int = 1) -> dict[str, Any]:
    return {"task_id": task_id, "attempt": attempt, "phase": phase, "lease_id": f"L-{task_id}"}


def _evidence(open_rows: dict[str, list[dict[str, Any]]], requests: list[tuple[str, str, str]]) -> Any:
    base = checks.Evidence(rows=(), snapshots=(), submissions=(), tasks={}, leases=(), pushes=(), commits={},
                           expected={}, caches={}, idle=False, settings=None, decoy_changed=False)
    listed = [{"worker": w, "endpoint": e, "path": p} for w, e, p in requests]
    return dataclasses.replace(base, open_at_start=open_rows, requests=listed)


def test_open_attempts_are_the_non_terminal_ones_in_claimed_order() -> None:
    rows = [_row("a", "claimed"), _row("b", "claimed"), _row("a", "result_submitted"), _row("b", "commit_done")]
    assert checks.open_attempts(rows) == [_row("b", "commit_done")]
    assert checks.open_attempts([]) == []


def test_resume_1_needs_each_open_attempt_touched_before_the_first_claim() -> None:
    open_rows = {"w2": [_row("a", "verification_passed")]}
    renew = ("w2", "renew", "v1/leases/L-a/renew")
    claim = ("w2", "claim", "v1/claims")
    assert checks.resume_checks(_evidence(open_rows, [renew, claim])) == []
    assert checks.resume_checks(_evidence(open_rows, [])) == []  # it never claimed
    (found,) = checks.resume_checks(_evidence(open_rows, [claim, renew]))
    assert found.clause == "RESUME-1" and "'a' attempt 1" in (found.note or "")
    # Another process's requests do not count for this one.
    (found,) = checks.resume_checks(_evidence(open_rows, [("w1", "renew", "v1/leases/L-a/renew"), claim]))
    assert found.clause == "RESUME-1"


def test_resume_1_wants_the_order_of_the_claimed_rows() -> None:
    open_rows = {"w2": [_row("a", "claimed"), _row("b", "claimed")]}
    in_order = [("w2", "renew", "v1/leases/L-a/renew"), ("w2", "task", "v1/tasks/b"), ("w2", "claim", "v1/claims")]
    assert checks.resume_checks(_evidence(open_rows, in_order)) == []
    (found,) = checks.resume_checks(_evidence(open_rows, [in_order[1], in_order[0], in_order[2]]))
    assert found.clause == "RESUME-1" and "order" in (found.note or "")
