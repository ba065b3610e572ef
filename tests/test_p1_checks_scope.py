"""Identity and scope (SCOPE-1, SCOPE-2, SCOPE-5) and the fence of a stale generation (LEASE-6): each rule over a
history written by hand, absent evidence included."""

from __future__ import annotations

from typing import Any

import pytest

from resumekit.conformance.p1.control_plane.state import IDENTITY
from tests.p1_stories import Told, clauses, judged, row

DONE = {"result_hash": "h", "result_body": "{}"}


@pytest.mark.parametrize(
    "name", ["scope.identities", "scope.bindings", "scope.reconciled_sources", "scope.stale_generations"]
)
def test_a_history_without_rows_has_nothing_wrong_for_them(name: str) -> None:
    assert judged(name, Told().at_end(last_wait="idle")) == []


def _issued(told: Told, attempt: int, kind: str = "attempt_issued", **changes: Any) -> Told:
    task = {name: row(0, "claimed", attempt)[name] for name in IDENTITY} | changes
    return told.logged(kind, task_id="t-1", attempt=attempt, task=task)


# -- SCOPE-1 -----------------------------------------------------------------------------------------------------


def test_rows_with_an_identity_the_control_plane_never_served_their_attempt_are_scope_1() -> None:
    rows = [row(1, "claimed"), row(2, "workspace_prepared"), row(3, "claimed", 2), row(4, "workspace_prepared", 2)]
    told = _issued(_issued(Told(), 1), 2)
    assert judged("scope.identities", told.read(rows)) == []
    # Attempt 2 was issued with generation 2; its rows carry attempt 1's: one finding for the identity.
    stamped = _issued(_issued(Told(), 1), 2, generation=2).read(rows)
    (found,) = judged("scope.identities", stamped)
    assert (found.clause, found.pointer) == ("SCOPE-1", "/journal/t-1/2/3/identity")
    assert "'generation': [1, 2]" in (found.note or "") and found.expected["generation"] == 2  # type: ignore[index]
    # Nothing issued at all: no row rests on a served attempt.
    assert clauses(judged("scope.identities", Told().read(rows))) == ["SCOPE-1", "SCOPE-1"]


def test_the_identity_a_faulty_delivery_served_is_one_the_attempt_was_served_with() -> None:
    rows = [row(1, "claimed"), row(2, "claimed", job_id="j2"), row(3, "reconciliation_required", job_id="j2",
                                                                    reason="identity_conflict")]
    told = _issued(_issued(Told(), 1), 1, "conflicting_delivery", job_id="j2")
    assert judged("scope.identities", told.read(rows)) == []
    assert clauses(judged("scope.identities", _issued(Told(), 1).read(rows))) == ["SCOPE-1"]


# -- SCOPE-2 -----------------------------------------------------------------------------------------------------


def test_a_reuse_between_attempts_issued_with_different_bindings_is_scope_2_whatever_the_rows_say() -> None:
    rows = [row(1, "claimed"), row(2, "source_capture_done", **DONE), row(3, "claimed", 2),
            row(4, "source_capture_done", 2, reused_from=2, **DONE)]
    assert judged("scope.bindings", _issued(_issued(Told(), 1), 2).read(rows)) == []
    # Issued under another Job, and the rows agree with each other: the reuse still joins two bindings.
    (found,) = judged("scope.bindings", _issued(_issued(Told(), 1), 2, job_id="j2").read(rows))
    assert (found.clause, found.pointer, found.actual) == (
        "SCOPE-2", "/journal/t-1/2/4/reused_from", {"job_id": ["j2", "j"]}
    )
    assert judged("resume.reuse", _issued(_issued(Told(), 1), 2, job_id="j2").read(rows)) == []
    # An attempt never issued is SCOPE-1's, a row of another task SCOPE-3's: nothing for SCOPE-2 to compare.
    assert judged("scope.bindings", _issued(Told(), 1).read(rows)) == []


# -- SCOPE-5 -----------------------------------------------------------------------------------------------------


def test_a_reuse_of_an_attempt_that_ended_in_reconciliation_required_is_scope_5_in_strict() -> None:
    rows = [row(1, "claimed"), row(2, "result_pending", **DONE),
            row(3, "reconciliation_required", reason="result_conflict"), row(4, "claimed", 2),
            row(5, "result_pending", 2, reused_from=2, **DONE)]
    (found,) = judged("scope.reconciled_sources", Told().read(rows))
    assert (found.clause, found.pointer, found.actual) == ("SCOPE-5", "/journal/t-1/2/5/reused_from", 2)
    assert "'result_conflict', seq 3" in (found.note or "")
    assert judged("scope.reconciled_sources", Told().read(rows), profile="core") == []
    # The source attempt never ended so: a reuse SCOPE-3 may allow.
    assert judged("scope.reconciled_sources", Told().read([rows[0], rows[1], *rows[3:]])) == []


# -- LEASE-6 -----------------------------------------------------------------------------------------------------

NEWER = [row(1, "claimed", task_id="t-2", generation=2), row(2, "result_submitted", task_id="t-2", generation=2)]


def test_an_attempt_first_written_after_rows_of_a_higher_generation_on_its_branch_is_fenced() -> None:
    fenced = [*NEWER, row(3, "claimed"), row(4, "reconciliation_required", reason="stale_generation")]
    assert judged("scope.stale_generations", Told().read(fenced)) == []
    ran = [*NEWER, row(3, "claimed"), row(4, "workspace_prepared", workspace="task-x")]
    (found,) = judged("scope.stale_generations", Told().read(ran))
    assert (found.clause, found.pointer) == ("LEASE-6", "/journal/t-1/1/stale_generation")
    assert found.actual == {"rows": ["claimed", "workspace_prepared"], "governed": []}
    assert "row seq 1 of 't-2', generation 2" in (found.note or "")
    assert judged("scope.stale_generations", Told().read(ran), profile="core") == []


def test_a_governed_send_of_a_fenced_attempt_is_lease_6_even_with_the_two_rows() -> None:
    fenced = [*NEWER, row(3, "claimed"), row(4, "reconciliation_required", reason="stale_generation")]
    told = Told().logged("moment", check="submission", request=7, task_id="t-1", attempt=1, key="k", result_hash="h")
    (found,) = judged("scope.stale_generations", told.read(fenced))
    assert found.actual["governed"] == [{"check": "submission", "request": 7}]  # type: ignore[index]


def test_no_fence_before_the_higher_generation_or_on_another_branch() -> None:
    before = [row(1, "claimed"), row(2, "workspace_prepared", workspace="task-x"), *[dict(r, seq=r["seq"] + 2)
                                                                                     for r in NEWER]]
    assert judged("scope.stale_generations", Told().read(before)) == []
    elsewhere = [*NEWER, row(3, "claimed", target_branch="release"), row(4, "workspace_prepared",
                                                                          target_branch="release")]
    assert judged("scope.stale_generations", Told().read(elsewhere)) == []


def test_a_field_of_a_megabyte_is_named_cut_short() -> None:
    rows = [row(1, "claimed", job_id="j" * (1 << 20))]
    (found,) = judged("scope.identities", _issued(Told(), 1).read(rows))
    assert found.clause == "SCOPE-1" and len(found.note or "") < 2000 and len(repr(found.actual)) < 1000


def test_the_second_workers_rows_carry_served_identities_too() -> None:
    rows = [row(1, "claimed", generation=2)]
    second = _issued(Told(), 1).read(rows, journal="second")
    (found,) = judged("scope.second_worker_identities", second)
    assert (found.clause, found.pointer) == ("SCOPE-1", "/second-worker/journal/t-1/1/1/identity")
    served = _issued(Told(), 1).read([row(1, "claimed")], journal="second")
    assert judged("scope.second_worker_identities", served) == []
