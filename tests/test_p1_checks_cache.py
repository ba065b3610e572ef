"""The task cache (CACHE): whole after a power cut (CACHE-3), a readable mirror of the journal's last row at idle
(CACHE-1, CACHE-4), and a damaged cache never trusted over the journal (CACHE-4); each rule over a history
written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.p1.model import COLUMNS
from tests.p1_stories import Told, clauses, judged, row


@pytest.mark.parametrize("name", ["cache.after_power_cuts", "cache.at_idle", "cache.damaged"])
def test_a_history_without_caches_or_rows_has_nothing_wrong_for_them(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


def test_a_cache_torn_or_empty_after_a_power_cut_is_cache_3() -> None:
    whole = {"t-1.json": ["ok", {"cache_version": 1}], "t-2.json": ["absent", None]}
    assert judged("cache.after_power_cuts", Told().kit("caches-after-cut", caches=whole)) == []
    torn = Told().kit("caches-after-cut", caches={"t-1.json": ["torn", '{"cache_version": 1'], "t-2.json": [
        "unreadable", ""]})
    found = judged("cache.after_power_cuts", torn)
    assert [(m.clause, m.pointer, m.actual) for m in found] == [
        ("CACHE-3", "/caches/t-1.json/after-power-cut", '{"cache_version": 1'),
        ("CACHE-3", "/caches/t-2.json/after-power-cut", "empty"),
    ]


def _mirror(last: dict[str, Any]) -> dict[str, Any]:
    return {"cache_version": 1, **{name: last[name] for name in COLUMNS}}


def test_every_cache_mirrors_its_tasks_last_row_at_idle() -> None:
    rows = [row(1, "claimed"), row(2, "result_submitted")]
    good = Told().read(rows).at_end(caches={"t-1": ["ok", _mirror(rows[-1])]}, last_wait="idle")
    assert judged("cache.at_idle", good) == []
    stale = Told().read(rows).at_end(caches={"t-1": ["ok", _mirror(rows[0])]}, last_wait="idle")
    (found,) = judged("cache.at_idle", stale)
    assert (found.clause, found.pointer, found.expected) == ("CACHE-4", "/caches/t-1", {"seq": 2,
                                                                                        "phase": "result_submitted"})
    # A cache the kit never read is no mirror; one that is no regular file is CACHE-1.
    assert clauses(judged("cache.at_idle", Told().read(rows).at_end(last_wait="idle"))) == ["CACHE-4"]
    fifo = Told().read(rows).at_end(caches={"t-1": ["unreadable", "a FIFO"]}, last_wait="idle")
    assert clauses(judged("cache.at_idle", fifo)) == ["CACHE-1"]
    # Judged once idle only.
    assert judged("cache.at_idle", Told().read(rows).at_end(last_wait="blocked")) == []


HELD = row(4, "source_capture_done")


def _damaged(rows: list[dict[str, Any]], lease: str | None, *, idle: bool = True,
             held: dict[str, Any] | None = HELD) -> Told:
    told = Told().kit("cache-damaged", task_id="t-1", how="newer", at=None, open=held).read(rows)
    leases = [] if lease is None else [{"lease_id": "lease-1", "state": lease}]
    return told.at_end(leases=leases, last_wait="idle" if idle else "blocked")


def test_an_open_attempt_left_as_it_was_after_its_cache_was_damaged_is_cache_4() -> None:
    for lease in ("RELEASED", "ACTIVE", None):  # a lease the kit did not find never passes
        (found,) = judged("cache.damaged", _damaged([HELD], lease))
        assert found.clause == "CACHE-4" and found.pointer == "/caches/t-1/damaged-newer", found
        note = found.note or ""
        assert "'newer'" in note and "'source_capture_done'" in note and f"{lease!r}" in note
    back = judged("cache.damaged", _damaged([HELD, row(5, "workspace_prepared")], "ACTIVE"))
    assert clauses(back) == ["CACHE-4"] and "'workspace_prepared'" in (back[0].note or "")


def test_an_attempt_that_went_on_from_its_journal_row_or_lost_its_lease_passes() -> None:
    assert judged("cache.damaged", _damaged([HELD, row(5, "result_pending")], "ACTIVE")) == []
    assert judged("cache.damaged", _damaged([HELD, row(5, "reconciliation_required")], "RELEASED")) == []
    assert judged("cache.damaged", _damaged([HELD], "EXPIRED")) == []  # abandoned (LEASE-4)
    assert judged("cache.damaged", _damaged([HELD], "RELEASED", idle=False)) == []  # judged once idle
    # A finished task's rebuild is cache.at_idle's to judge.
    assert judged("cache.damaged", _damaged([HELD], "RELEASED", held=None)) == []
