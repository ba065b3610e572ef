"""The task cache mirrors the journal, is replaced atomically, and is rebuilt from the journal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from resumekit.reference.p1.cache import cache_bytes, cache_path, rebuild, remove_temporaries, write_cache
from resumekit.reference.p1.journal import Journal, Row
from tests.test_p1_journal import IDENTITY


def _rows(state: Path) -> list[Row]:
    journal = Journal(state)
    journal.append({**IDENTITY, "phase": "claimed", "lease_id": "lease-1", "task": "{}"})
    journal.append({**IDENTITY, "phase": "workspace_prepared", "lease_id": "lease-1", "workspace": "task-t-1-1-ab"})
    journal.append({**IDENTITY, "task_id": "t-2", "phase": "claimed", "lease_id": "lease-2", "task": "{}"})
    rows = journal.rows()
    journal.close()
    return rows


def test_the_cache_is_the_latest_row_with_every_column(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    write_cache(tmp_path, rows[1])
    cached = json.loads(cache_path(tmp_path, "t-1").read_text(encoding="utf-8"))
    assert cached == {"cache_version": 1, **rows[1].as_dict()}
    assert cached["task"] is None and cached["seq"] == 2


def test_the_replace_is_atomic(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    write_cache(tmp_path, rows[0])
    seen: list[Any] = []

    def at_the_site() -> None:
        tasks = tmp_path / "tasks"
        seen.append(sorted(p.name for p in tasks.iterdir()))
        seen.append(json.loads(cache_path(tmp_path, "t-1").read_text(encoding="utf-8"))["seq"])

    write_cache(tmp_path, rows[1], before_replace=at_the_site)
    assert seen == [[".t-1.json.tmp", "t-1.json"], 1]
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["t-1.json"]


@pytest.mark.parametrize("damage", ["torn", "garbage", "stale", "newer", "missing", "not-the-shape"])
def test_a_damaged_cache_is_rebuilt_from_the_journal(tmp_path: Path, damage: str) -> None:
    rows = _rows(tmp_path)
    for row in (rows[1], rows[2]):
        write_cache(tmp_path, row)
    path = cache_path(tmp_path, "t-1")
    good = path.read_bytes()
    if damage == "torn":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "stale":
        path.write_bytes(cache_bytes(rows[0]))
    elif damage == "newer":
        newer = json.loads(good)
        newer.update(seq=9, phase="result_submitted")
        path.write_text(json.dumps(newer), encoding="utf-8")
    elif damage == "missing":
        path.unlink()
    else:
        path.write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "tasks" / ".t-1.json.tmp").write_bytes(b"half")
    assert remove_temporaries(tmp_path) == [".t-1.json.tmp"]
    assert rebuild(tmp_path, rows) == ["t-1"]
    assert path.read_bytes() == good
    assert rebuild(tmp_path, rows) == []


@pytest.mark.skipif(sys.platform != "win32", reason="Windows only: a reader holding the cache blocks its replace")
def test_a_replace_blocked_by_a_reader_is_retried_until_the_reader_lets_go(tmp_path: Path) -> None:
    import threading
    import time

    rows = _rows(tmp_path)
    write_cache(tmp_path, rows[0])
    holder = cache_path(tmp_path, "t-1").open("rb")  # CPython opens without FILE_SHARE_DELETE

    def let_go() -> None:
        time.sleep(0.3)
        holder.close()

    threading.Thread(target=let_go).start()
    write_cache(tmp_path, rows[1])
    assert json.loads(cache_path(tmp_path, "t-1").read_text(encoding="utf-8"))["seq"] == rows[1].seq
