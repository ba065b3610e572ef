"""What a hostile worker leaves in its state directory is read defensively (issue table of hostile P1
workers): a cache or journal that is a FIFO, a directory, a device or a link out of the state directory,
a slow VIEW in place of the table, and values of the wrong type each become a clear refusal, never a
hang, a traceback or a write outside the state directory."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from resumekit.conformance.p1 import evidence, journal_reader, model
from resumekit.conformance.p1.model import COLUMNS

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are POSIX")


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "tasks").mkdir(parents=True)
    return state


def _journal(path: Path, **row: object) -> None:
    values: dict[str, object] = dict.fromkeys(COLUMNS, "x")
    values.update({"seq": 1, "attempt": 1, "generation": 1, "reused_from": None, **row})
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE checkpoints ({', '.join(COLUMNS)})")
        connection.execute(f"INSERT INTO checkpoints VALUES ({', '.join('?' * len(COLUMNS))})",
                           [values[name] for name in COLUMNS])
    connection.close()


@posix_only
def test_a_cache_that_is_a_fifo_is_unreadable_at_once(tmp_path: Path) -> None:
    state = _state(tmp_path)
    os.mkfifo(state / "tasks" / "t-1.json")
    status, what = evidence.read_cache(state, "t-1")
    assert status == "unreadable" and "not a regular file" in what


def test_a_cache_that_is_a_directory_is_unreadable(tmp_path: Path) -> None:
    state = _state(tmp_path)
    (state / "tasks" / "t-1.json").mkdir()
    assert evidence.read_cache(state, "t-1")[0] == "unreadable"


@posix_only
def test_a_cache_linked_to_dev_zero_or_out_of_the_state_directory_is_unreadable(tmp_path: Path) -> None:
    state = _state(tmp_path)
    (state / "tasks" / "t-1.json").symlink_to("/dev/zero")
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (state / "tasks" / "t-2.json").symlink_to(outside)
    for task in ("t-1", "t-2"):
        status, what = evidence.read_cache(state, task)
        assert status == "unreadable" and "outside" in what, (task, what)


def test_a_cache_larger_than_any_cache_is_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _state(tmp_path)
    monkeypatch.setattr(evidence, "MAX_CACHE", 16)
    (state / "tasks" / "t-1.json").write_text('{"a": "' + "x" * 32 + '"}')
    status, what = evidence.read_cache(state, "t-1")
    assert status == "unreadable" and "more than 16 bytes" in what


def test_an_absent_cache_and_a_torn_one_keep_their_names(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert evidence.read_cache(state, "t-1") == ("absent", None)
    (state / "tasks" / "t-1.json").write_text('{"cache_version": 1')
    assert evidence.read_cache(state, "t-1") == ("torn", '{"cache_version": 1')


@posix_only
def test_a_journal_that_is_a_fifo_says_so(tmp_path: Path) -> None:
    state = _state(tmp_path)
    os.mkfifo(state / model.JOURNAL_FILE)
    with pytest.raises(journal_reader.JournalUnreadable, match="is a FIFO, not a regular file"):
        journal_reader.read_journal(state)


def test_a_journal_linked_elsewhere_is_refused_and_nothing_is_created_beside_its_target(tmp_path: Path) -> None:
    state = _state(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _journal(elsewhere / "db.sqlite3")
    with sqlite3.connect(elsewhere / "db.sqlite3") as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    connection.close()
    before = sorted(os.listdir(elsewhere))
    try:
        (state / model.JOURNAL_FILE).symlink_to(elsewhere / "db.sqlite3")
    except OSError:
        pytest.skip("this account may not make symbolic links")
    with pytest.raises(journal_reader.JournalUnreadable, match="a symbolic link"):
        journal_reader.read_journal(state)
    assert sorted(os.listdir(elsewhere)) == before


@pytest.mark.parametrize(("column", "value", "says"), [
    ("attempt", None, "NULL in the NOT NULL column 'attempt'"),
    ("attempt", "2", "'2' (str) in column 'attempt', which JNL-1 declares INTEGER"),
    ("phase", b"claimed", "(bytes) in column 'phase', which JNL-1 declares TEXT"),
    ("generation", 1.5, "(float) in column 'generation'"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_the_row_and_column(
    tmp_path: Path, column: str, value: object, says: str
) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE, **{column: value})
    with pytest.raises(journal_reader.JournalUnreadable, match="row seq 1 holds") as caught:
        journal_reader.read_journal(state)
    assert says in str(caught.value)


def test_rows_of_the_right_types_are_read(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    (row,) = journal_reader.read_journal(state)
    assert row["attempt"] == 1 and row["phase"] == "x"


def test_a_slow_view_in_place_of_the_table_is_cut_off_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state(tmp_path)
    columns = ", ".join(f"1 AS {name}" for name in COLUMNS)
    slow = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000000) "
            f"SELECT {columns} FROM n WHERE i < 0")
    with sqlite3.connect(state / model.JOURNAL_FILE) as connection:
        connection.execute(f"CREATE VIEW checkpoints AS {slow}")
    connection.close()
    monkeypatch.setattr(journal_reader, "QUERY_SECONDS", 0.3)
    started = time.monotonic()
    with pytest.raises(journal_reader.JournalUnreadable, match="longer than the kit allows"):
        journal_reader.read_journal(state)
    # Not a time assertion on the kit's speed: only that the read ended instead of running for hours.
    assert time.monotonic() - started < 60


def _listing(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder)) if (folder / name).is_file()}


def test_rows_only_in_the_write_ahead_log_are_read_and_nothing_beside_the_journal_changes(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    writer = sqlite3.connect(state / model.JOURNAL_FILE)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the second row stays in the WAL only
        writer.execute(f"INSERT INTO checkpoints SELECT {', '.join('2' if c == 'seq' else c for c in COLUMNS)} "
                       "FROM checkpoints")
        writer.commit()
        assert (state / (model.JOURNAL_FILE + "-wal")).stat().st_size > 0
        before = _listing(state)
        rows = journal_reader.read_journal(state)
        assert [row["seq"] for row in rows] == [1, 2]
        assert _listing(state) == before  # no side file made, none changed: the kit read its own copy
    finally:
        writer.close()


@posix_only
@pytest.mark.parametrize("side", ["-wal", "-journal"])
def test_a_side_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, side: str) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    os.mkfifo(state / (model.JOURNAL_FILE + side))
    with pytest.raises(journal_reader.JournalUnreadable, match=f"{model.JOURNAL_FILE}{side} is a FIFO"):
        journal_reader.read_journal(state)


def test_a_journal_larger_than_the_kit_copies_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    monkeypatch.setattr(journal_reader, "MAX_JOURNAL", 1024)
    with pytest.raises(journal_reader.JournalUnreadable, match="holds more than 1024 bytes"):
        journal_reader.read_journal(state)


def test_a_journal_that_changes_during_every_copy_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    copies = 0
    original = journal_reader._Source.read

    def busy_writer(source: journal_reader._Source, name: str) -> bytes:
        nonlocal copies
        copies += 1
        data = original(source, name)
        with open(source.state_dir / name, "ab") as handle:  # a writer appending while the kit copies
            handle.write(b"\0")
        return data

    monkeypatch.setattr(journal_reader._Source, "read", busy_writer)
    with pytest.raises(journal_reader.JournalUnreadable, match="changed during each of 5 copies"):
        journal_reader.read_journal(state)
    assert copies == 5


# -- text that is not UTF-8, or holds a lone surrogate (issue 36) ----------------------------------------


def test_journal_text_that_is_not_utf8_names_its_row_and_column(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE, seq=7)
    with sqlite3.connect(state / model.JOURNAL_FILE) as connection:
        connection.execute("UPDATE checkpoints SET lease_id = CAST(X'6C65FF0A1BEDA080' AS TEXT)")
    connection.close()
    with pytest.raises(journal_reader.JournalUnreadable) as refused:
        journal_reader.read_journal(state)
    stored = "b'le\\xff\\n\\x1b\\xed\\xa0\\x80'"
    assert str(refused.value) == f"row seq 7, lease_id: TEXT that is not UTF-8 (JNL-1): {stored}"


def test_a_cache_or_a_journal_log_with_lone_surrogates_is_read_as_their_escapes(tmp_path: Path) -> None:
    state = _state(tmp_path)
    (state / "tasks" / "t-1.json").write_text('{"lease_id": "\\ud800\\u001b", "\\udfff": "\\ud83d\\ude00"}')
    assert evidence.read_cache(state, "t-1") == ("ok", {"lease_id": "\\ud800\x1b", "\\udfff": "\U0001f600"})
    (state / "tasks" / "t-2.json").write_bytes(b'{"lease_id": "\xff')
    assert evidence.read_cache(state, "t-2") == ("torn", '{"lease_id": "\\xff')
    log = state / "journal-w1.jsonl"
    log.write_text('{"path": "\\ud800", "synchronous": 2}\n', encoding="utf-8")
    assert journal_reader.read_journal_log(state, log) == ([{"path": "\\ud800", "synchronous": 2}], None)


def test_a_state_directory_swapped_for_a_link_is_read_where_the_kit_made_it(tmp_path: Path) -> None:
    # Before: the kit read the journal by its path, so a worker that swapped its state directory for a link
    # to an empty folder at the moment of its kill made its journal read empty, or "disappeared".
    from resumekit.conformance._folders import Folder

    state = _state(tmp_path)
    _journal(state / model.JOURNAL_FILE)
    expected = journal_reader.read_journal(state)
    assert expected
    with Folder.open(state) as held:
        elsewhere = tmp_path / "empty"
        elsewhere.mkdir()
        os.rename(state, tmp_path / "moved-away")
        os.symlink(elsewhere, state, target_is_directory=True)
        assert journal_reader.read_journal(state) == []  # by its path, the link's empty folder
        assert journal_reader.read_journal(state, held) == expected  # in the folder the kit holds
