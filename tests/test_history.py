"""A case's history (``conformance/history.py``): append-only, in order from every thread, bounded while it is
recorded, and bounded again in a report's copy, with what was cut said in an event."""

from __future__ import annotations

import json
import threading

from resumekit.conformance.events import CUT, REPORT_BYTES, Event, for_report
from resumekit.conformance.history import History, ReportBudget


def test_events_are_numbered_in_order_and_keep_their_data() -> None:
    history = History()
    history.record("kit", "step", index=0, verb="start")
    history.record("w1", "started", pid=42)
    events = history.events()
    assert [(e.seq, e.actor, e.kind) for e in events] == [(0, "kit", "step"), (1, "w1", "started")]
    assert events[1].get("pid") == 42
    assert events[0].at_ms <= events[1].at_ms
    assert Event.from_dict(events[1].to_dict()) == events[1]


def test_data_may_carry_members_named_like_the_envelope() -> None:
    history = History()
    history.record("control-plane", "request", actor="not the envelope's", kind="nor this")
    (event,) = history.events()
    assert (event.actor, event.kind, event.get("actor")) == ("control-plane", "request", "not the envelope's")


def test_a_full_history_records_one_cut_event_and_counts_the_rest() -> None:
    history = History(max_events=5)
    for number in range(10):
        history.record("w1", "request", number=number)
    events = history.events()
    assert len(events) == 5
    assert events[-1].kind == CUT and events[-1].get("events") == 4
    assert history.cut == {"w1 request": 6}


def test_the_byte_cap_holds_too() -> None:
    history = History(max_bytes=2000)
    for _ in range(100):
        history.record("journal", "read", rows=["x" * 100])
    assert sum(len(json.dumps(e.to_dict())) for e in history.events()) < 4000
    assert history.events()[-1].kind == CUT


def test_threads_record_without_losing_an_event() -> None:
    history = History()

    def record(actor: str) -> None:
        for number in range(500):
            history.record(actor, "tick", number=number)

    threads = [threading.Thread(target=record, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = history.events()
    assert [e.seq for e in events] == list(range(2000))
    for actor in ("t0", "t1", "t2", "t3"):
        assert [e.get("number") for e in events if e.actor == actor] == list(range(500))


def test_a_report_keeps_the_start_and_the_end_and_says_what_it_left_out() -> None:
    history = History()
    for number in range(3000):
        history.record("control-plane", "request", number=number, body="b" * 200)
    shown = for_report(history.events())
    assert len(json.dumps(shown)) <= REPORT_BYTES + 4096
    assert shown[0]["data"]["number"] == 0 and shown[-1]["data"]["number"] == 2999
    (cut,) = [e for e in shown if e["kind"] == CUT]
    kept = len(shown) - 1
    assert cut["data"]["leftOut"] == {"control-plane request": 3000 - kept}
    assert [e["seq"] for e in shown if e["kind"] != CUT] == sorted(e["seq"] for e in shown if e["kind"] != CUT)


def test_a_report_shortens_long_values() -> None:
    history = History()
    history.record("journal", "read", rows=list(range(1000)), note="n" * 10_000)
    (shown,) = for_report(history.events())
    assert shown["data"]["rows"][0] == "... 960 earlier items" and shown["data"]["rows"][-1] == 999
    assert shown["data"]["note"].endswith("(10000 characters)") and len(shown["data"]["note"]) < 2100


def test_the_run_budget_is_shared_and_runs_out() -> None:
    budget = ReportBudget(total=50_000)
    histories = []
    for _ in range(5):
        history = History()
        for number in range(200):
            history.record("w1", "request", number=number, body="x" * 100)
        histories.append(for_report(history.events(), budget=budget))
    sizes = [len(json.dumps(shown)) for shown in histories]
    assert sum(sizes) < 50_000 + 5 * 2048
    assert histories[-1] == [e for e in histories[-1] if e["kind"] == CUT]  # nothing left: only the cut event
    assert histories[0][0]["data"]["number"] == 0


def test_a_cut_history_says_so_in_the_report_too() -> None:
    history = History(max_events=3)
    for number in range(10):
        history.record("w1", "request", number=number)
    shown = for_report(history.events(), history.cut)
    cuts = [e for e in shown if e["kind"] == CUT]
    assert cuts and cuts[-1]["data"]["leftOut"] == {"w1 request": 8}
