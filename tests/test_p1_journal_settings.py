"""What the kit reads for JNL-5 and JNL-6 (``journal_reader``): the journal file's header and the journal log of
``p1.journal-log``, each read defensively (the rule that judges them is tested in test_p1_checks_journal)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance.p1 import journal_reader, model

GOOD = {"synchronous": 2, "journalMode": "wal", "busyTimeoutMs": 5000}


def _clauses(found: list[Any]) -> list[str | None]:
    return [mismatch.clause for mismatch in found]


# -- the journal file's header and the journal log -------------------------------------------------------------


@pytest.mark.parametrize(("mode", "header"), [("wal", "wal"), ("delete", "rollback"), ("truncate", "rollback")])
def test_the_header_shows_the_journal_mode(tmp_path: Path, mode: str, header: str) -> None:
    db = sqlite3.connect(tmp_path / model.JOURNAL_FILE)
    db.execute(f"PRAGMA journal_mode={mode}")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    assert journal_reader.journal_header(tmp_path) == header


def test_no_journal_or_no_whole_header_reads_as_none(tmp_path: Path) -> None:
    assert journal_reader.journal_header(tmp_path) is None
    (tmp_path / model.JOURNAL_FILE).write_bytes(b"SQLite format 3\x00" + b"\x02" * 10)
    assert journal_reader.journal_header(tmp_path) is None


def test_a_journal_log_is_read_line_by_line_and_a_torn_last_line_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "journal-w1.jsonl"
    log.write_bytes(b'{"synchronous": 2}\n{"synchronous": 3}\n{"synch')
    assert journal_reader.read_journal_log(tmp_path, log) == ([{"synchronous": 2}, {"synchronous": 3}], None)
    log.write_bytes(b"")
    assert journal_reader.read_journal_log(tmp_path, log) == ([], None)


@pytest.mark.parametrize("content", [b"not json\n", b"[1]\n", b"\xff\n"])
def test_a_journal_log_that_is_not_json_objects_is_refused(tmp_path: Path, content: bytes) -> None:
    log = tmp_path / "journal-w1.jsonl"
    log.write_bytes(content)
    connections, why = journal_reader.read_journal_log(tmp_path, log)
    assert connections is None and why is not None and "line 1" in why


def test_a_journal_log_too_large_missing_or_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"{}\n" * (journal_reader.JOURNAL_LOG_LIMIT // 3 + 1))
    assert journal_reader.read_journal_log(tmp_path, big)[0] is None
    assert journal_reader.read_journal_log(tmp_path, tmp_path / "absent.jsonl")[0] is None
    assert journal_reader.read_journal_log(tmp_path, tmp_path)[0] is None
    if sys.platform != "win32":
        fifo = tmp_path / "fifo.jsonl"
        os.mkfifo(fifo)
        assert journal_reader.read_journal_log(tmp_path, fifo)[0] is None  # and it did not block
