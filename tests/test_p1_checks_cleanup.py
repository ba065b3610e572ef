"""Startup cleanup (CLEAN): no stale workspace left by a worker's first request (CLEAN-1), nothing outside the
workspace root changed (CLEAN-2); each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

from resumekit.conformance.p1.views import decoy_changes
from tests.p1_stories import Told, clauses, judged


def test_no_first_request_or_no_stale_workspace_is_nothing_to_judge() -> None:
    assert judged("cleanup.first_requests", Told()) == []
    clean = Told().by("w2", "started", listing=["task-old"]).by("w2", "first-request", request=1, listing=[])
    assert judged("cleanup.first_requests", clean) == []


def test_a_stale_workspace_still_there_at_the_first_request_is_clean_1() -> None:
    told = Told().by("w2", "started", listing=["task-old", "keep.txt"])
    told.by("w2", "first-request", request=1, listing=["task-old", "keep.txt"])
    (found,) = judged("cleanup.first_requests", told)
    assert (found.clause, found.pointer, found.actual, found.event) == (
        "CLEAN-1", "/workers/w2/first-request", ["task-old"], 1
    )
    # One the kit swapped for a link may stay (CLEAN-4).
    swapped = Told().by("w2", "started", listing=["task-old"]).kit("swapped-for-link", name="task-old")
    assert judged("cleanup.first_requests", swapped.by("w2", "first-request", request=1, listing=["task-old"])) == []


def test_a_changed_decoy_names_each_path_relative_to_its_tree() -> None:
    before = {"decoy/keep.txt": "file:1", "decoy/deep": "dir", "decoy/deep/also.txt": "file:2"}
    after = {"decoy/keep.txt": "file:9", "decoy/new.txt": "file:3"}
    changes = decoy_changes(before, after)
    assert changes == {"decoy/deep": "removed", "decoy/deep/also.txt": "removed", "decoy/keep.txt": "changed",
                       "decoy/new.txt": "added"}
    assert decoy_changes(before, before) == {}
    told = Told().kit("decoys", when="before", entries=before).kit("decoys", when="after", entries=after)
    (found,) = judged("cleanup.decoys", told)
    assert found.clause == "CLEAN-2" and found.actual == changes
    assert "'decoy/keep.txt' (changed)" in (found.note or "") and "4 path(s)" in (found.note or "")
    unchanged = Told().kit("decoys", when="before", entries=before).kit("decoys", when="after", entries=before)
    assert judged("cleanup.decoys", unchanged) == []
    assert judged("cleanup.decoys", Told()) == []  # no listing at all: no change was seen
    # A listing taken before the first step and none after (the kit read nothing at the end) is a change.
    assert clauses(judged("cleanup.decoys", Told().kit("decoys", when="before", entries=before))) == ["CLEAN-2"]
