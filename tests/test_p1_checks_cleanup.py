"""Startup cleanup (CLEAN): no stale workspace left by a worker's first request (CLEAN-1), nothing outside the
workspace root changed (CLEAN-2); each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

from resumekit.conformance.p1.views import decoy_changes
from tests.p1_stories import Told, clauses, judged, row


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


_DECOYS = {"decoy/keep.txt": "file:1", "workspaces-evil/keep.txt": "file:2"}


def _linked(tree: str, *, sibling: bool = False) -> Told:
    return Told().kit("decoys", when="before", entries=_DECOYS).kit(
        "planted-link", name="task-evil", tree=tree, sibling=sibling
    )


def test_a_changed_target_of_a_planted_link_is_clean_4_naming_the_link() -> None:
    told = _linked("decoy").kit("decoys", when="after", entries={"workspaces-evil/keep.txt": "file:2"})
    (found,) = judged("cleanup.links", told)
    assert (found.clause, found.pointer, found.actual) == ("CLEAN-4", "/links/task-evil", {"decoy/keep.txt": "removed"})
    assert "'task-evil'" in (found.note or "") and found.event == 1
    # Another tree changed than the link's target: not this link's (CLEAN-2 names it).
    other = _linked("decoy").kit("decoys", when="after", entries={"decoy/keep.txt": "file:1"})
    assert judged("cleanup.links", other) == []
    assert judged("cleanup.links", _linked("decoy").kit("decoys", when="after", entries=_DECOYS)) == []
    # No link planted, or no listing at all: nothing to judge.
    assert judged("cleanup.links", Told()) == []
    unlinked = Told().kit("decoys", when="before", entries=_DECOYS).kit("decoys", when="after", entries={})
    assert judged("cleanup.links", unlinked) == []


def test_a_changed_sibling_named_like_the_root_is_clean_3() -> None:
    told = _linked("workspaces-evil", sibling=True).kit("decoys", when="after", entries={"decoy/keep.txt": "file:1"})
    assert clauses(judged("cleanup.boundary", told)) == ["CLEAN-3"]
    assert clauses(judged("cleanup.links", told)) == ["CLEAN-4"]  # it went through the link too
    (found,) = judged("cleanup.boundary", told)
    assert found.actual == {"workspaces-evil/keep.txt": "removed"}
    # A link to the other decoy is no sibling: its change is CLEAN-4's, not CLEAN-3's.
    plain = _linked("decoy").kit("decoys", when="after", entries={"workspaces-evil/keep.txt": "file:2"})
    assert judged("cleanup.boundary", plain) == []
    assert judged("cleanup.boundary", Told()) == []


def test_stale_workspaces_left_under_a_root_given_through_a_link_are_clean_3() -> None:
    told = Told().kit("root-through-link", link="scratch/workspaces-link")
    told.by("w1", "started", listing=["task-old", "keep"], givenRoot="scratch/workspaces-link")
    told.by("w1", "first-request", request=1, listing=["task-old", "keep"])
    (found,) = judged("cleanup.boundary", told)
    assert (found.clause, found.pointer, found.actual) == ("CLEAN-3", "/workers/w1/boundary", ["task-old"])
    assert found.event == 2
    # Cleaned under the link: nothing; and a root given as it is leaves the finding to CLEAN-1 alone.
    clean = Told().kit("root-through-link", link="scratch/workspaces-link")
    clean.by("w1", "started", listing=["task-old"], givenRoot="scratch/workspaces-link")
    assert judged("cleanup.boundary", clean.by("w1", "first-request", request=1, listing=[])) == []
    plain = Told().by("w1", "started", listing=["task-old"], givenRoot="scratch/workspaces")
    assert judged("cleanup.boundary", plain.by("w1", "first-request", request=1, listing=["task-old"])) == []
    # No first request at all: nothing was seen to judge.
    unseen = Told().kit("root-through-link", link="scratch/workspaces-link")
    unseen.by("w1", "started", listing=["task-old"], givenRoot="scratch/workspaces-link")
    assert judged("cleanup.boundary", unseen) == []


def _restarted(active: list[dict[str, object]], left: list[str]) -> Told:
    told = Told().read([row(1, "claimed"), row(2, "workspace_prepared", workspace="task-t-1-1-abc")])
    told.by("w2", "started", listing=["task-t-1-1-abc", "task-other"], activeAtStart=active)
    return told.by("w2", "first-request", request=1, listing=left)


def test_the_workspace_of_an_active_lease_left_at_the_first_request_is_clean_5() -> None:
    active = [{"task_id": "t-1", "attempt": 1}]
    (found,) = judged("cleanup.active_workspaces", _restarted(active, ["task-t-1-1-abc", "task-other"]))
    assert (found.clause, found.actual, found.event) == ("CLEAN-5", ["task-t-1-1-abc"], 2)
    assert found.pointer == "/workers/w2/active-workspaces"
    # Removed: nothing. Its lease no longer ACTIVE, or another attempt's: CLEAN-1 alone names what stayed.
    assert judged("cleanup.active_workspaces", _restarted(active, ["task-other"])) == []
    assert judged("cleanup.active_workspaces", _restarted([], ["task-t-1-1-abc"])) == []
    other = [{"task_id": "t-1", "attempt": 2}]
    assert judged("cleanup.active_workspaces", _restarted(other, ["task-t-1-1-abc"])) == []
    # No journal rows naming it, no first request, or nothing at all: nothing to judge.
    unnamed = Told().by("w2", "started", listing=["task-t-1-1-abc"], activeAtStart=active)
    unnamed.by("w2", "first-request", request=1, listing=["task-t-1-1-abc"])
    assert judged("cleanup.active_workspaces", unnamed) == []
    unseen = Told().read([row(2, "workspace_prepared", workspace="task-t-1-1-abc")])
    unseen.by("w2", "started", listing=["task-t-1-1-abc"], activeAtStart=active)
    assert judged("cleanup.active_workspaces", unseen) == []
    assert judged("cleanup.active_workspaces", Told()) == []


def test_an_entry_without_the_prefix_changed_by_the_first_request_is_clean_2() -> None:
    kept = {"keep": "dir", "keep/task-nested": "dir", "keep/task-nested/kept.txt": "file:1"}
    told = Told().by("w1", "started", listing=["keep"], kept=kept)
    told.by("w1", "first-request", request=1, listing=["keep"], kept={"keep": "dir"})
    (found,) = judged("cleanup.kept", told)
    assert (found.clause, found.pointer, found.event) == ("CLEAN-2", "/workers/w1/kept", 1)
    assert found.actual == {"keep/task-nested": "removed", "keep/task-nested/kept.txt": "removed"}
    same = Told().by("w1", "started", listing=["keep"], kept=kept)
    assert judged("cleanup.kept", same.by("w1", "first-request", request=1, listing=["keep"], kept=kept)) == []
    # Nothing planted, no first request, or nothing at all: nothing to judge.
    bare = Told().by("w1", "started", listing=[], kept={})
    assert judged("cleanup.kept", bare.by("w1", "first-request", request=1, listing=[], kept={})) == []
    assert judged("cleanup.kept", Told().by("w1", "started", listing=["keep"], kept=kept)) == []
    assert judged("cleanup.kept", Told()) == []
    # The planted entry gone whole, or swapped for a link, is a change too.
    gone = Told().by("w1", "started", listing=["keep"], kept=kept)
    gone.by("w1", "first-request", request=1, listing=[], kept={"keep": "absent"})
    assert clauses(judged("cleanup.kept", gone)) == ["CLEAN-2"]
