"""The governed commit and the origins (COMMIT, CP-17, CP-18): a push only from verification_passed, a receipt
only after commit_done, one commit pushed once, every push a fast-forward of a target branch, every ref where
the kit and the landed pushes left it, an origin the kit could not read, and no attempt left at commit_done;
each rule over a history written by hand, origins never read included."""

from __future__ import annotations

from typing import Any

from resumekit.conformance.p1.checks import rules
from resumekit.conformance.p1.checks.story import Scenario
from tests.p1_stories import Told, clauses, judged, row

BASE, C, LATER = "b" * 40, "c" * 40, "d" * 40
MAIN = "refs/heads/main"
TASK = {"task_id": "t-1", "attempt": 1, "repository": "acme/w", "target_branch": "main", "kind": "commit"}
LANDED = [{"repository": "acme/w", "ref": MAIN, "new": C, "by": "push"}]


def _moment(check: str, rows: list[dict[str, Any]], **named: Any) -> Told:
    """A push or a receipt of t-1 attempt 1 (request 1), with the journal as the kit read it then."""
    told = Told().logged("moment", check=check, request=1, task_id="t-1", attempt=1, **named)
    return told.read(rows, why="moment", worker="w1", request=1, check=check)


def test_a_push_reaches_the_origin_only_from_verification_passed() -> None:
    assert judged("commit.pushes", Told()) == []
    passed = [row(1, "claimed"), row(2, "verification_passed")]
    assert judged("commit.pushes", _moment("push", passed, ref=MAIN, old=BASE, new=C)) == []
    (found,) = judged("commit.pushes", _moment("push", passed[:1], ref=MAIN, old=BASE, new=C))
    assert (found.clause, found.pointer, found.actual) == ("COMMIT-2", "/tasks/t-1/attempts/1/push", "claimed")
    # No journal read at the push: no row shows it was in order.
    no_read = Told().logged("moment", check="push", request=1, task_id="t-1", attempt=1)
    assert clauses(judged("commit.pushes", no_read)) == ["COMMIT-2"]
    # Either journal may show it: the origin cannot tell which worker pushed.
    second = _moment("push", passed[:1]).read(passed, why="moment", journal="second", request=1, check="push")
    assert judged("commit.pushes", second) == []


def test_a_receipt_arrives_only_once_commit_done_is_durable_in_strict() -> None:
    done = [row(1, "claimed"), row(2, "commit_done", commit_oid=C)]
    assert judged("commit.receipts", _moment("receipt", done, commit_oid=C)) == []
    early = _moment("receipt", done[:1], commit_oid=C)
    (found,) = judged("commit.receipts", early)
    assert (found.clause, found.actual) == ("COMMIT-5", "claimed")
    assert judged("commit.receipts", early, profile="core") == []
    assert clauses(judged("commit.receipts", Told().logged("moment", check="receipt", request=1, task_id="t-1",
                                                           attempt=1, commit_oid=C))) == ["COMMIT-5"]
    carried = [row(1, "claimed"), row(2, "result_pending", reused_from=9, commit_oid=C)]
    assert judged("commit.receipts", _moment("receipt", carried, commit_oid=C)) == []


def test_an_origin_the_kit_could_not_read_safely_fails_commit_3() -> None:
    assert judged("commit.unreadable_origins", Told()) == []
    told = Told().by("origin", "unreadable", repository="acme/w", where="config", expected="a regular file",
                     found="a FIFO")
    (found,) = judged("commit.unreadable_origins", told)
    assert (found.clause, found.pointer, found.event) == ("COMMIT-3", "/origin/acme/w/config", 0)
    assert "CP-17" in (found.note or "")


def test_a_push_after_an_accepted_one_or_a_second_commit_on_the_branch_is_commit_3() -> None:
    assert judged("commit.pushed_once", Told()) == []
    push = {"repository": "acme/w", "ref": MAIN, "accepted": True}
    once = Told().logged("push", **push)
    assert judged("commit.pushed_once", once) == []
    assert clauses(judged("commit.pushed_once", once.logged("push", **{**push, "accepted": False}))) == ["COMMIT-3"]
    two = Told().at_end(commits={"t-1": ["c1", "c2"]})
    assert clauses(judged("commit.pushed_once", two)) == ["COMMIT-3"]


def test_a_finding_that_quotes_a_log_entry_whole_is_seen_at_the_event_that_recorded_it() -> None:
    push = {"repository": "acme/w", "ref": MAIN, "accepted": True}
    told = Told().kit("step", index=0).logged("push", **push).logged("push", **{**push, "accepted": False})
    (found,) = judged("commit.pushed_once", told)
    assert (found.check, found.event) == ("commit.pushed_once", 2)  # the second push, the timeline marks it there
    two = Told().at_end(commits={"t-1": ["c1", "c2"]})
    (unplaced,) = judged("commit.pushed_once", two)
    assert unplaced.event is None  # a list of commits read at the end is no one event's entry


def test_no_attempt_is_left_at_commit_done_at_idle() -> None:
    left = Told().read([row(1, "claimed"), row(2, "commit_done", commit_oid=C)])
    (found,) = judged("commit.left_open", left.at_end(last_wait="idle"))
    assert (found.clause, found.pointer) == ("COMMIT-4", "/journal/t-1/1/last")
    assert judged("commit.left_open", left.at_end(last_wait="blocked")) == []  # judged once idle only


def _origin(refs: dict[str, str] | None, updates: list[dict[str, Any]] = [],  # noqa: B006 - never changed
            made: dict[str, str] | None = None, pushes: list[dict[str, Any]] = [],  # noqa: B006
            placed: dict[tuple[str, str, str], bool | None] | None = None) -> Told:
    """One commit task on acme/w, whose origin the kit made with main at BASE and later at LATER."""
    told = Told()
    for push in pushes:
        told.logged("push", **push)
    told.at_end(tasks={"t-1": {"state": "VERIFYING", "task": TASK, "attempts": [TASK]}})
    return told.origins(
        origin_refs=None if refs is None else {"acme/w": refs},
        kit_refs={"acme/w": {MAIN: BASE, "refs/heads/later": LATER} if made is None else made},
        ref_updates=updates,
        fast_forward=[[*key, known] for key, known in (placed or {}).items()],
    )


def _found(found: list[Any]) -> list[tuple[str | None, str, Any, Any]]:
    return [(m.clause, m.pointer, m.expected, m.actual) for m in found]


def test_origins_never_read_or_read_empty_do_not_pass() -> None:
    # No refs read: the check cannot pass for want of evidence, and the verdict carries it.
    assert clauses(judged("commit.origin_refs", _origin(None, LANDED))) == ["COMMIT-3"]
    assert clauses(judged("commit.origin_refs", Told())) == ["COMMIT-3"]
    verdict = rules.judge(_origin(None, LANDED).story(), Scenario({}, {}))
    assert [m.check for m in verdict if m.clause == "COMMIT-3"] == ["commit.origin_refs"]
    nothing = Told().origins(origin_refs={})
    assert [(m.clause, m.pointer) for m in judged("commit.origin_refs", nothing)] == [("COMMIT-3", "/origin/refs")]
    # Refs read, but not of the origin the task names, or with nothing known of what the kit made there.
    elsewhere = Told().at_end(tasks={"t-1": {"task": TASK, "attempts": [TASK]}})
    elsewhere.origins(origin_refs={"acme/other": {}}, kit_refs={})
    assert {m.pointer for m in judged("commit.origin_refs", elsewhere)} == {"/origin/acme/w/refs",
                                                                          "/origin/acme/other/refs"}


def test_an_origin_whose_target_branch_is_missing_does_not_pass() -> None:
    found = judged("commit.origin_refs", _origin({"refs/heads/later": LATER}, LANDED))
    assert _found(found) == [("COMMIT-3", "/origin/acme/w/refs/heads/main", C, None)]
    assert "'acme/w'" in (found[0].note or "") and "'refs/heads/main'" in (found[0].note or "")
    # An origin with no ref at all misses every ref the kit made.
    assert len(judged("commit.origin_refs", _origin({}, []))) == 2


def test_the_target_branch_is_where_the_kit_and_the_landed_pushes_left_it() -> None:
    assert judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": LATER}, LANDED)) == []
    # No commit due: the branch stays at the base.
    assert judged("commit.origin_refs", _origin({MAIN: BASE, "refs/heads/later": LATER})) == []
    # Reset to the base after the governed commit landed.
    reset = judged("commit.origin_refs", _origin({MAIN: BASE, "refs/heads/later": LATER}, LANDED))
    assert _found(reset) == [("COMMIT-3", "/origin/acme/w/refs/heads/main", C, BASE)]
    assert repr(BASE) in (reset[0].note or "") and "CP-17" in (reset[0].note or "")
    # A commit on the branch that no update of the hook let land.
    assert _found(judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": LATER}))) == [
        ("COMMIT-3", "/origin/acme/w/refs/heads/main", BASE, C)
    ]
    # Where the kit moved the branch, it stays; a later landed push moves it on.
    moved = [{"repository": "acme/w", "ref": MAIN, "new": LATER, "by": "kit"}]
    assert judged("commit.origin_refs", _origin({MAIN: LATER, "refs/heads/later": LATER}, moved)) == []
    assert len(judged("commit.origin_refs", _origin({MAIN: BASE, "refs/heads/later": LATER}, moved))) == 1
    assert judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": LATER}, [*moved, *LANDED])) == []
    # Updates of another repository change nothing here; a deletion by the kit removes the ref.
    other = [{"repository": "acme/other", "ref": MAIN, "new": C, "by": "push"}]
    assert len(judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": LATER}, other))) == 1
    deleted = [{"repository": "acme/w", "ref": "refs/heads/later", "new": "0" * 40, "by": "kit"}]
    assert judged("commit.origin_refs", _origin({MAIN: BASE}, deleted)) == []


def test_a_ref_the_kit_never_made_or_a_kit_ref_changed_does_not_pass() -> None:
    tagged = judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": LATER, "refs/tags/x": C}, LANDED))
    assert _found(tagged) == [("COMMIT-3", "/origin/acme/w/refs/tags/x", None, C)]
    assert "CP-17" in (tagged[0].note or "")
    mine = {MAIN: C, "refs/heads/later": LATER, "refs/heads/mine": BASE}
    assert [m.pointer for m in judged("commit.origin_refs", _origin(mine, LANDED))] == [
        "/origin/acme/w/refs/heads/mine"
    ]
    gone = judged("commit.origin_refs", _origin({MAIN: C}, LANDED))
    assert _found(gone) == [("COMMIT-3", "/origin/acme/w/refs/heads/later", LATER, None)]
    changed = judged("commit.origin_refs", _origin({MAIN: C, "refs/heads/later": C}, LANDED))
    assert _found(changed) == [("COMMIT-3", "/origin/acme/w/refs/heads/later", LATER, C)]


def _push(ref: str = MAIN, old: str = BASE, new: str = C) -> dict[str, Any]:
    return {"repository": "acme/w", "ref": ref, "old": old, "new": new, "accepted": False, "task_id": "t-1"}


def test_every_push_is_a_fast_forward_of_the_target_branch() -> None:
    assert judged("commit.origin_pushes", Told()) == []
    refs = {MAIN: BASE, "refs/heads/later": LATER}
    plain = _origin(refs, pushes=[_push()], placed={("acme/w", BASE, C): True})
    assert judged("commit.origin_pushes", plain) == []
    forced = judged("commit.origin_pushes", _origin(refs, pushes=[_push(old=LATER)],
                                                    placed={("acme/w", LATER, C): False}))
    expected = f"a fast-forward of {LATER!r} to the governed commit"
    assert _found(forced) == [("COMMIT-2", "/origin/pushes/0", expected, C)]
    assert "forced" in (forced[0].note or "")
    # A push the kit could not place (not on the origin, no governed commit), or did not place, does not pass.
    unknown = _origin(refs, pushes=[_push(new=LATER)], placed={("acme/w", BASE, LATER): None})
    assert clauses(judged("commit.origin_pushes", unknown)) == ["COMMIT-2"]
    assert clauses(judged("commit.origin_pushes", _origin(refs, pushes=[_push()]))) == ["COMMIT-2"]
    tag = judged("commit.origin_pushes", _origin(refs, pushes=[_push(ref="refs/tags/x", old="0" * 40)]))
    assert _found(tag) == [("COMMIT-2", "/origin/pushes/0/ref", [MAIN], "refs/tags/x")]
    deleted = judged("commit.origin_pushes", _origin(refs, pushes=[_push(new="0" * 40)]))
    assert [(m.clause, m.pointer) for m in deleted] == [("COMMIT-2", "/origin/pushes/0/new")]
    # Without the tasks, no ref is a target branch: nothing passes.
    bare = Told().logged("push", **_push())
    assert [m.pointer for m in judged("commit.origin_pushes", bare)] == ["/origin/pushes/0/ref"]
