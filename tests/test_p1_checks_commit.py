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


# -- TASK-4: what the target branch gained is the governed commit the kit computes ------------------------------

OTHER = "e" * 40  # a commit on C's parent with another tree: the hook lets it land as it would C


def _gained(gained: list[str], governed: list[str] | None, moved: list[dict[str, Any]] = []) -> Told:  # noqa: B006
    """t-1's branch gained *gained* once the last step was done; the kit computed *governed* (None: no reading)."""
    told = Told().at_end(tasks={"t-1": {"task": TASK, "attempts": [TASK]}}, commits={"t-1": gained})
    if governed is None:
        return told
    computed = [{"repository": "acme/w", "ref": MAIN, "task_id": "t-1", "attempt": 1, "base_oid": BASE,
                 "commit": oid} for oid in governed]
    return told.origins(kit_refs={"acme/w": {MAIN: BASE, "refs/heads/later": LATER}}, ref_updates=moved,
                        governed=computed)


def test_a_branch_that_gained_another_commit_than_c_is_task_4() -> None:
    (found,) = judged("commit.landed", _gained([OTHER], [C]))
    found_as = (found.clause, found.pointer, found.expected, found.actual)
    assert found_as == ("TASK-4", "/origin/t-1/commits/0", [C], OTHER)
    assert "not the governed commit the kit computes" in (found.note or "")
    # Beside C, a second commit is COMMIT-3's (pushed_once) and not C either.
    assert [m.actual for m in judged("commit.landed", _gained([C, OTHER], [C]))] == [OTHER]


def test_a_gained_commit_with_no_governed_commit_computed_does_not_pass() -> None:
    # The kit read the branch but computed no C (origins unread, or no attempt it could compute): nothing bears
    # the commit out.
    assert clauses(judged("commit.landed", _gained([C], None))) == ["TASK-4"]
    assert clauses(judged("commit.landed", _gained([C], []))) == ["TASK-4"]


def test_c_or_a_commit_the_kit_put_there_passes() -> None:
    assert judged("commit.landed", Told()) == []
    assert judged("commit.landed", _gained([], [C])) == []  # no commit due (or none landed): COMMIT-3's to judge
    assert judged("commit.landed", _gained([C], [C])) == []
    assert judged("commit.landed", _gained([LATER, C], [C])) == []  # the kit's own later commit below it
    moved = [{"repository": "acme/w", "ref": MAIN, "new": OTHER, "by": "kit"}]
    assert judged("commit.landed", _gained([OTHER], [C], moved)) == []  # where the kit moved the branch
    # A governed commit of another task is not this task's.
    elsewhere = _gained([C], None)
    elsewhere.origins(governed=[{"repository": "acme/w", "ref": MAIN, "task_id": "t-2", "attempt": 1,
                                 "base_oid": BASE, "commit": C}])
    assert clauses(judged("commit.landed", elsewhere)) == ["TASK-4"]


# -- COMMIT-4: the receipt answered confirmed before result_pending --------------------------------------------


def _converging(receipt: dict[str, Any] | None, *, after: bool = False, journal: str = "first") -> Told:
    """t-1 attempt 1 writes commit_done (C) then result_pending; the control plane logs *receipt* (None: none)
    before the kit's read that shows result_pending, or *after* it."""
    done = [row(1, "claimed"), row(2, "verification_passed"), row(3, "commit_done", commit_oid=C)]
    pending = [*done, row(4, "result_pending", commit_oid=C)]
    told = Told().read(done, why="moment", journal=journal)
    if receipt is not None and not after:
        told.logged("receipt", **receipt)
    told.read(pending, why="wait", journal=journal)
    if receipt is not None and after:
        told.logged("receipt", **receipt)
    return told.read(pending, journal=journal)


CONFIRMED = {"job_id": "j", "task_id": "t-1", "attempt": 1, "commit_oid": C, "visibility": "confirmed"}


def test_result_pending_without_a_confirmed_receipt_before_it_is_commit_4() -> None:
    (found,) = judged("commit.confirmed_first", _converging(None))
    assert (found.clause, found.pointer, found.actual, found.event) == ("COMMIT-4", "/journal/t-1/1/receipt", None, 1)
    assert "went on from commit_done to result_pending" in (found.note or "")
    assert clauses(judged("commit.confirmed_first", _converging(CONFIRMED, after=True))) == ["COMMIT-4"]
    for wrong in ({"visibility": "not_visible"}, {"commit_oid": OTHER}, {"attempt": 2}, {"task_id": "t-2"}):
        assert clauses(judged("commit.confirmed_first", _converging({**CONFIRMED, **wrong}))) == ["COMMIT-4"]
    second = judged("commit.confirmed_first", _converging(None, journal="second"))
    assert [m.pointer for m in second] == ["/second-worker/journal/t-1/1/receipt"]


def test_a_confirmed_receipt_before_result_pending_passes() -> None:
    assert judged("commit.confirmed_first", Told()) == []
    assert judged("commit.confirmed_first", _converging(CONFIRMED)) == []
    # commit_done alone, or a reconciliation after it, goes on to nothing the receipt gates.
    done = [row(1, "claimed"), row(2, "commit_done", commit_oid=C), row(3, "reconciliation_required")]
    assert judged("commit.confirmed_first", Told().read(done)) == []


def test_a_reused_result_pending_is_submitted_only_after_its_attempts_receipt() -> None:
    reused = [row(1, "claimed", attempt=2), row(2, "result_pending", attempt=2, commit_oid=C, reused_from=9)]
    submitted = Told().read(reused, why="moment").logged("moment", check="submission", task_id="t-1", attempt=2)
    assert clauses(judged("commit.confirmed_first", submitted)) == ["COMMIT-4"]
    receipt = {**CONFIRMED, "attempt": 2}
    told = Told().read(reused, why="moment").logged("receipt", **receipt)
    told.logged("moment", check="submission", task_id="t-1", attempt=2)
    assert judged("commit.confirmed_first", told) == []
    assert judged("commit.confirmed_first", Told().read(reused)) == []  # never submitted: nothing yet to hold


# -- COMMIT-3: a report that a ref moved is borne out by the kit's own reading ----------------------------------


def _report(push: dict[str, Any] | None, report: dict[str, Any]) -> Told:
    """The hook asked about *push* (None: never), then a report that main moved came in on the kit's path."""
    told = Told()
    if push is not None:
        told.logged("push", **{"repository": "acme/w", "ref": MAIN, "old": BASE, "new": C, "accepted": True,
                               "read": BASE, **push})
    return told.logged("origin_ref_updated", **{"repository": "acme/w", "ref": MAIN, "old": BASE, "new": C,
                                                 "read": C, **report})


def test_a_report_no_landed_push_bears_out_is_commit_3() -> None:
    (found,) = judged("commit.ref_reports", _report(None, {}))
    assert (found.clause, found.pointer, found.event) == ("COMMIT-3", "/origin/acme/w/reports/0", 0)
    assert "let no such update land" in (found.note or "")
    assert clauses(judged("commit.ref_reports", _report({"accepted": False}, {}))) == ["COMMIT-3"]
    assert clauses(judged("commit.ref_reports", _report({"new": OTHER}, {}))) == ["COMMIT-3"]
    # A reset reported after the governed push: no update from C to the base was ever let land.
    reset = _report({}, {}).logged("origin_ref_updated", repository="acme/w", ref=MAIN, old=C, new=BASE, read=BASE)
    assert [m.pointer for m in judged("commit.ref_reports", reset)] == ["/origin/acme/w/reports/1"]
    # One landed push bears out one report, not two.
    twice = _report({}, {}).logged("origin_ref_updated", repository="acme/w", ref=MAIN, old=BASE, new=C, read=C)
    assert clauses(judged("commit.ref_reports", twice)) == ["COMMIT-3"]


def test_a_report_the_kits_reading_of_the_branch_belies_is_commit_3() -> None:
    # The branch was not at the update's old value when the hook asked (it moved behind the hook's back first).
    early = judged("commit.ref_reports", _report({"read": C}, {}))
    assert "when the hook asked, the kit read the branch at" in (early[0].note or "")
    # The branch was not at the new value when the report came in.
    late = judged("commit.ref_reports", _report({}, {"read": BASE}))
    assert "when the report arrived" in (late[0].note or "")
    # Readings the kit did not take (no read recorded) bear nothing out.
    assert clauses(judged("commit.ref_reports", _report({"read": None}, {}))) == ["COMMIT-3"]
    assert clauses(judged("commit.ref_reports", _report({}, {"read": None}))) == ["COMMIT-3"]


def test_a_report_of_a_landed_push_the_kit_read_so_passes() -> None:
    assert judged("commit.ref_reports", Told()) == []
    assert judged("commit.ref_reports", _report({}, {})) == []
    # A push accepted that never landed (its worker killed in it) and has no report is nothing to hold.
    assert judged("commit.ref_reports", Told().logged("push", repository="acme/w", ref=MAIN, old=BASE, new=C,
                                                       accepted=True, read=BASE)) == []


def _lease(event: str, request: int | None, attempt: int = 1) -> dict[str, Any]:
    return {"event": event, "request": request, "lease": {"lease_id": f"lease-{attempt}", "task_id": "t-1",
                                                          "attempt": attempt, "state": "ACTIVE"}}


def _asked(
    told: Told, request: int, endpoint: str, worker: str = "w1", status: int = 200, branch: str = "main"
) -> Told:
    """A request of *worker*; a read of leases answered 200 names *branch* of acme/w, as the control plane logs it."""
    if endpoint == "leases" and status == 200:
        told = told.logged("leases_read", request=request, repository="acme/w", target_branch=branch, leases=1)
    return told.logged("request", request=request, worker=worker, endpoint=endpoint, status=status)


def _push_after(*requests: tuple[int, str, str, int], renewer: str = "w1") -> Told:
    """The claim (request 1) granting t-1 attempt 1's lease, then *requests* (number, endpoint, worker, status), a
    renewal of the lease at request 8 by *renewer* and a push of the attempt at request 9."""
    told = Told().logged("attempt_issued", request=None, task={**TASK, "expected_branch_oid": BASE})
    told = _asked(told.logged("lease", **_lease("granted", 1)), 1, "claim")
    for request, endpoint, worker, status in requests:
        told = _asked(told, request, endpoint, worker, status)
    told = _asked(told.logged("lease", **_lease("renewed", 8)), 8, "renew", renewer)
    return told.logged("moment", check="push", request=9, task_id="t-1", attempt=1, ref=MAIN, old=BASE, new=C)


def test_a_push_follows_a_read_of_the_branchs_leases_in_strict() -> None:
    assert judged("commit.lease_read", Told()) == []
    assert judged("commit.lease_read", _push_after((7, "leases", "w1", 200))) == []
    # No read, a read not answered, or one before the attempt was granted its lease: nothing shows the branch.
    for told in (_push_after(), _push_after((7, "leases", "w1", 503))):
        (found,) = judged("commit.lease_read", told)
        assert (found.clause, found.pointer) == ("COMMIT-6", "/tasks/t-1/attempts/1/push/leases")
        assert "request 9" in (found.note or "")
    before = _asked(Told(), 0, "leases")
    before.events.extend(_push_after().events)
    assert clauses(judged("commit.lease_read", before)) == ["COMMIT-6"]
    # A read of another branch's leases shows nothing of this one (the rule goes by request numbers, not order).
    other = _asked(_push_after(), 7, "leases", branch="elsewhere")
    assert clauses(judged("commit.lease_read", other)) == ["COMMIT-6"]
    assert judged("commit.lease_read", _push_after(), profile="core") == []


def test_the_lease_read_before_a_push_is_the_pushing_process_own() -> None:
    # w2 started (request 5) after w1 read the leases (request 4), then renewed and pushed: w1's read does not count.
    restarted = _push_after((4, "leases", "w1", 200), (5, "renew", "w2", 200), renewer="w2")
    assert clauses(judged("commit.lease_read", restarted)) == ["COMMIT-6"]
    assert judged("commit.lease_read", _push_after((4, "leases", "w1", 200), (5, "renew", "w1", 200))) == []


def _moved_while(step: str, rows: list[dict[str, Any]], final: list[dict[str, Any]], **push: Any) -> Told:
    """Attempt 1 of t-1 issued; the kit's last step *step*; the journal read; the kit moves main to LATER at once;
    then the final journal *final*, and a push of the attempt if *push* names one."""
    told = Told().logged("attempt_issued", request=None, task={**TASK, "expected_branch_oid": BASE})
    told = told.kit("step", verb=step).read(rows, why="wait").kit("step", verb="fault")
    told = told.logged("branch_moved", request=None, repository="acme/w", branch="main", old=BASE, new=LATER,
                       done=True)
    if push:
        told = told.logged("moment", check="push", request=9, task_id="t-1", attempt=1, ref=MAIN, **push)
    return told.read(final)


def test_a_branch_moved_before_the_pre_push_read_is_never_pushed_to() -> None:
    assert judged("commit.branch_read", Told()) == []
    passed = [row(1, "claimed"), row(2, "verification_passed")]
    moved = [*passed, row(3, "reconciliation_required", reason="branch_moved")]
    refused = [*passed, row(3, "reconciliation_required", reason="push_refused")]
    assert judged("commit.branch_read", _moved_while("wait", passed, moved)) == []
    (found,) = judged("commit.branch_read", _moved_while("wait", passed, refused))
    assert (found.clause, found.pointer, found.event) == ("COMMIT-1", "/tasks/t-1/attempts/1/branch-read", 4)
    assert "push_refused" in str(found.actual)
    (pushed,) = judged("commit.branch_read", _moved_while("kill", passed, moved, old=LATER, new=C))
    assert "a push of the attempt reached the origin" in str(pushed.actual)
    # A worker running on its own may have read the branch before the move: nothing to judge.
    assert judged("commit.branch_read", _moved_while("continue", passed, refused)) == []
    # Past its push when the branch moved: the move comes after the read.
    done = [*passed, row(3, "commit_done", commit_oid=C)]
    assert judged("commit.branch_read", _moved_while("wait", done, [*done, row(4, "result_pending")])) == []


def test_a_branch_moved_again_or_moved_by_a_request_is_not_judged() -> None:
    passed = [row(1, "claimed"), row(2, "verification_passed")]
    refused = [*passed, row(3, "reconciliation_required", reason="push_refused")]
    again = _moved_while("wait", passed, refused).logged("branch_moved", request=None, repository="acme/w",
                                                           branch="main", old=LATER, new=BASE, done=True)
    assert judged("commit.branch_read", again) == []
    on_renew = _moved_while("wait", passed, refused)
    on_renew.events[4] = on_renew.events[4].__class__(4, 4.0, "control-plane", "branch_moved",
                                                      {**on_renew.events[4].data, "request": 8})
    assert judged("commit.branch_read", on_renew) == []
