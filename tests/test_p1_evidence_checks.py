"""The pure P1 checks: reuse across bindings (SCOPE-4), keys (KEY-2), lost leases (LEASE-4), superseded
attempts and identity conflicts (SCOPE-6, SCOPE-7), a second worker's journal, and the origins: every push a
plain update of a target branch (COMMIT-2), every ref where the kit and the landed pushes left it (COMMIT-3)."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from resumekit.conformance.p1 import evidence_checks as checks
from resumekit.conformance.p1 import model
from resumekit.conformance.p1.canonical import result_hash
from resumekit.conformance.p1.evidence import COLUMNS


def _row(seq: int, attempt: int, phase: str, **columns: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(seq=seq, task_id="t-1", attempt=attempt, execution_digest="d-1", job_id="j", repository="acme/w",
               base_oid="a" * 40, expected_branch_oid="a" * 40, target_branch="main", generation=1, phase=phase,
               lease_id=f"lease-{attempt}")
    row.update(columns)
    return row


def _evidence(rows: list[dict[str, Any]], submissions: list[dict[str, Any]] = [],  # noqa: B006 - never changed
              pushes: list[dict[str, Any]] = []) -> checks.Evidence:  # noqa: B006
    return checks.Evidence(rows=rows, snapshots=(), submissions=submissions, tasks={}, leases=(), pushes=pushes,
                           commits={}, expected={}, caches={}, idle=False, settings=None, decoy_changed=False)


def _clauses(found: list[Any]) -> list[str | None]:
    return [mismatch.clause for mismatch in found]


def test_a_submission_under_another_key_than_result_pending_is_key_2() -> None:
    rows = [_row(1, 1, "result_pending", idempotency_key="k1")]
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h", "status": 201}]
    assert checks.key_checks(_evidence(rows, sent)) == []
    sent.append({"task_id": "t-1", "attempt": 1, "key": "k2", "result_hash": "h", "status": 409})
    assert _clauses(checks.key_checks(_evidence(rows, sent))) == ["KEY-2"]


def test_a_push_or_submission_with_a_lost_lease_is_lease_4() -> None:
    sent = [{"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h", "status": 403}]
    pushes = [{"task_id": "t-1", "accepted": False, "lease": {"lease_id": "lease-1", "state": "FENCED"}},
              {"task_id": "t-1", "accepted": True, "lease": {"lease_id": "lease-2", "state": "ACTIVE"}}]
    assert _clauses(checks.lease_checks(_evidence([], sent, pushes))) == ["LEASE-4", "LEASE-4"]


def test_the_second_workers_journal_is_checked_and_its_outcome_judged() -> None:
    ok = [_row(1, 1, "claimed"), _row(2, 1, "reconciliation_required", reason="lease_not_converged")]
    ev = dataclasses.replace(_evidence([]), second_rows=ok)
    expect = {"task": {"second_worker": {"final": "result_submitted", "attempts": 1}}}
    found = checks.outcome_checks(expect, {"task": "t-1"}, ev)
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/second_worker/final")]


def test_an_attempt_left_holding_its_lease_at_idle_is_told_as_out_2_beside_fpt_4() -> None:
    rows = [_row(1, 1, "claimed"), _row(2, 1, "verification_passed")]
    expect = {"task": {"final": "result_submitted"}}
    active = [{"lease_id": "lease-1", "state": "ACTIVE"}]
    held = dataclasses.replace(_evidence(rows), idle=True, leases=active)
    found = checks.outcome_checks(expect, {"task": "t-1"}, held)
    assert [(m.clause, m.pointer) for m in found] == [("FPT-4", "/expect/task/final"), ("OUT-2", "/expect/task/idle")]
    # Not idle, the lease not held, or lost once (a revived lease is not the worker's to keep): FPT-4 alone.
    lost = [{"kind": "lease", "event": "expired", "lease": {"lease_id": "lease-1", "state": "EXPIRED"}}]
    for ev in (dataclasses.replace(held, idle=False), dataclasses.replace(held, leases=()),
               dataclasses.replace(held, lease_log=lost)):
        assert _clauses(checks.outcome_checks(expect, {"task": "t-1"}, ev)) == ["FPT-4"]
    # A converged task says nothing of its lease here (LEASE-5 does).
    done = dataclasses.replace(held, rows=[*rows, _row(3, 1, "result_submitted")])
    assert checks.outcome_checks(expect, {"task": "t-1"}, done) == []


def test_the_journal_model_judges_plain_values() -> None:
    # What the kit expects and compares, computed from values alone: no origin, no journal file.
    blobs = [("100644", "README.md", b"hello\n"), ("100755", "bin/run", b"")]
    assert model.capture_body("a" * 40, blobs) == {
        "base_oid": "a" * 40,
        "files": [{"path": path, "sha256": hashlib.sha256(data).hexdigest()} for _, path, data in blobs],
        "kind": "source_capture",
    }
    commit = {"name": "kit", "email": "kit@resumekit.invalid", "timestamp": 1767225600, "message": "p1: t\n"}
    person = "kit <kit@resumekit.invalid> 1767225600 +0000"
    assert model.commit_text("t" * 40, "p" * 40, commit) == (
        f"tree {'t' * 40}\nparent {'p' * 40}\nauthor {person}\ncommitter {person}\n\np1: t\n".encode()
    )
    before = {"a": ("dir",), "a/f": ("file", 1, 10, "h"), "gone": ("link", "x")}
    after = {"a": ("dir",), "a/f": ("file", 1, 11, "h"), "new": ("dir",)}
    assert model.tree_changes(before, after) == {"new": "created", "gone": "removed", "a/f": "changed"}
    rows = [_row(1, 1, "claimed"), _row(2, 1, "workspace_prepared", workspace="task-x")]
    assert model.Snapshot.of(rows[:1]).kept_by(model.Snapshot.of(rows))
    assert not model.Snapshot.of(rows).kept_by(model.Snapshot.of(rows[1:]))


BASE, C, LATER = "b" * 40, "c" * 40, "d" * 40
MAIN = "refs/heads/main"


def _origin(refs: dict[str, str] | None, updates: list[dict[str, Any]] = [],  # noqa: B006 - never changed
            made: dict[str, str] | None = None, pushes: list[dict[str, Any]] = [],  # noqa: B006
            placed: dict[tuple[str, str, str], bool | None] | None = None) -> checks.Evidence:
    """Evidence of one commit task on acme/w, whose origin the kit made with main at BASE and later at LATER."""
    task = {"task_id": "t-1", "attempt": 1, "repository": "acme/w", "target_branch": "main", "kind": "commit"}
    return dataclasses.replace(
        _evidence([], pushes=pushes),
        tasks={"t-1": {"state": "VERIFYING", "task": task, "attempts": [task]}},
        origin_refs=None if refs is None else {"acme/w": refs},
        kit_refs={"acme/w": {MAIN: BASE, "refs/heads/later": LATER} if made is None else made},
        ref_updates=updates,
        fast_forward={} if placed is None else placed,
    )


def _found(found: list[Any]) -> list[tuple[str | None, str, Any, Any]]:
    return [(m.clause, m.pointer, m.expected, m.actual) for m in found]


LANDED = [{"repository": "acme/w", "ref": MAIN, "new": C, "by": "push"}]


def test_origins_never_read_or_read_empty_do_not_pass() -> None:
    # No refs read: the check cannot pass for want of evidence.
    assert [m.clause for m in checks.ref_checks(_origin(None, LANDED))] == ["COMMIT-3"]
    nothing = dataclasses.replace(_evidence([]), origin_refs={})
    assert [(m.clause, m.pointer) for m in checks.ref_checks(nothing)] == [("COMMIT-3", "/origin/refs")]
    # Refs read, but not of the origin the task names, or with nothing known of what the kit made there.
    elsewhere = dataclasses.replace(_origin({MAIN: C}, LANDED), origin_refs={"acme/other": {}}, kit_refs={})
    assert {m.pointer for m in checks.ref_checks(elsewhere)} == {"/origin/acme/w/refs", "/origin/acme/other/refs"}


def test_an_origin_whose_target_branch_is_missing_does_not_pass() -> None:
    found = checks.ref_checks(_origin({"refs/heads/later": LATER}, LANDED))
    assert _found(found) == [("COMMIT-3", "/origin/acme/w/refs/heads/main", C, None)]
    assert "'acme/w'" in found[0].note and "'refs/heads/main'" in found[0].note and repr(C) in found[0].note
    # An origin with no ref at all misses every ref the kit made.
    assert len(checks.ref_checks(_origin({}, []))) == 2


def test_the_target_branch_is_where_the_kit_and_the_landed_pushes_left_it() -> None:
    assert checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER}, LANDED)) == []
    # No commit due: the branch stays at the base.
    assert checks.ref_checks(_origin({MAIN: BASE, "refs/heads/later": LATER})) == []
    # Reset to the base after the governed commit landed.
    reset = checks.ref_checks(_origin({MAIN: BASE, "refs/heads/later": LATER}, LANDED))
    assert _found(reset) == [("COMMIT-3", "/origin/acme/w/refs/heads/main", C, BASE)]
    assert repr(BASE) in reset[0].note and "CP-17" in reset[0].note
    # A commit on the branch that no update of the hook let land.
    assert _found(checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER}))) == [
        ("COMMIT-3", "/origin/acme/w/refs/heads/main", BASE, C)
    ]
    # Where the kit moved the branch, it stays; a later landed push moves it on.
    moved = [{"repository": "acme/w", "ref": MAIN, "new": LATER, "by": "kit"}]
    assert checks.ref_checks(_origin({MAIN: LATER, "refs/heads/later": LATER}, moved)) == []
    assert len(checks.ref_checks(_origin({MAIN: BASE, "refs/heads/later": LATER}, moved))) == 1
    assert checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER}, [*moved, *LANDED])) == []
    # Updates of another repository change nothing here.
    other = [{"repository": "acme/other", "ref": MAIN, "new": C, "by": "push"}]
    assert len(checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER}, other))) == 1


def test_a_ref_the_kit_never_made_or_a_kit_ref_changed_does_not_pass() -> None:
    tagged = checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER, "refs/tags/x": C}, LANDED))
    assert _found(tagged) == [("COMMIT-3", "/origin/acme/w/refs/tags/x", None, C)]
    assert "CP-17" in tagged[0].note
    branch = checks.ref_checks(_origin({MAIN: C, "refs/heads/later": LATER, "refs/heads/mine": BASE}, LANDED))
    assert [m.pointer for m in branch] == ["/origin/acme/w/refs/heads/mine"]
    gone = checks.ref_checks(_origin({MAIN: C}, LANDED))
    assert _found(gone) == [("COMMIT-3", "/origin/acme/w/refs/heads/later", LATER, None)]
    changed = checks.ref_checks(_origin({MAIN: C, "refs/heads/later": C}, LANDED))
    assert _found(changed) == [("COMMIT-3", "/origin/acme/w/refs/heads/later", LATER, C)]


def _push(ref: str = MAIN, old: str = BASE, new: str = C) -> dict[str, Any]:
    return {"repository": "acme/w", "ref": ref, "old": old, "new": new, "accepted": False, "task_id": "t-1"}


def test_every_push_is_a_fast_forward_of_the_target_branch() -> None:
    refs = {MAIN: BASE, "refs/heads/later": LATER}
    plain = _origin(refs, pushes=[_push()], placed={("acme/w", BASE, C): True})
    assert checks.push_checks(plain) == []
    forced = _origin(refs, pushes=[_push(old=LATER)], placed={("acme/w", LATER, C): False})
    assert _found(checks.push_checks(forced)) == [
        ("COMMIT-2", "/origin/pushes/0", f"a fast-forward of {LATER!r} to the governed commit", C)
    ]
    assert "forced" in checks.push_checks(forced)[0].note
    # A push the kit could not place (not on the origin, no governed commit), or did not place, does not pass.
    unknown = _origin(refs, pushes=[_push(new=LATER)], placed={("acme/w", BASE, LATER): None})
    assert [m.clause for m in checks.push_checks(unknown)] == ["COMMIT-2"]
    assert [m.clause for m in checks.push_checks(_origin(refs, pushes=[_push()]))] == ["COMMIT-2"]
    tag = checks.push_checks(_origin(refs, pushes=[_push(ref="refs/tags/x", old="0" * 40)]))
    assert _found(tag) == [("COMMIT-2", "/origin/pushes/0/ref", [MAIN], "refs/tags/x")]
    deleted = checks.push_checks(_origin(refs, pushes=[_push(new="0" * 40)]))
    assert [(m.clause, m.pointer) for m in deleted] == [("COMMIT-2", "/origin/pushes/0/new")]
    # Without the tasks, no ref is a target branch: nothing passes.
    bare = dataclasses.replace(plain, tasks={})
    assert [m.pointer for m in checks.push_checks(bare)] == ["/origin/pushes/0/ref"]


# -- checks of what the control plane and the origin saw, each shown to fail ---------------------------------


def test_side_effects_fail_on_a_second_push_two_keys_two_bodies_a_shared_key_and_a_wrong_stored_result() -> None:
    push = {"repository": "acme/w", "ref": "refs/heads/main", "accepted": True}
    ev = _evidence([], pushes=[push, {**push, "accepted": False}])
    assert _clauses(checks.side_effect_checks(ev)) == ["COMMIT-3"]
    assert _clauses(checks.side_effect_checks(dataclasses.replace(_evidence([]), commits={"t-1": ["c1", "c2"]}))) == [
        "COMMIT-3"
    ]
    sent = {"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h1", "status": 201}
    assert checks.side_effect_checks(_evidence([], [sent])) == []
    assert _clauses(checks.side_effect_checks(_evidence([], [sent, {**sent, "key": "k2"}]))) == ["KEY-1"]
    assert _clauses(checks.side_effect_checks(_evidence([], [sent, {**sent, "result_hash": "h2"}]))) == ["SUB-4"]
    assert _clauses(checks.side_effect_checks(_evidence([], [sent, {**sent, "attempt": 2}]))) == ["KEY-1"]
    body = {"kind": "source_capture"}
    stored = {"t-1": {"stored": {"result_hash": "0" * 64, "result": {}}}}
    wrong = dataclasses.replace(_evidence([]), tasks=stored, expected={"t-1": body})
    assert _clauses(checks.side_effect_checks(wrong)) == ["TASK-2"]
    right = {"t-1": {"stored": {"result_hash": result_hash(body), "result": body}}}
    assert checks.side_effect_checks(dataclasses.replace(wrong, tasks=right)) == []


def test_result_submitted_needs_a_2xx_answer_to_its_key_or_an_exact_match() -> None:
    row = _row(3, 1, "result_submitted", idempotency_key="k1", result_hash="h1")
    # No submission and nothing stored: the row rests on nothing the control plane holds.
    assert _clauses(checks.submitted_backing(_evidence([row]))) == ["SUB-7"]
    refused = {"task_id": "t-1", "attempt": 1, "key": "k1", "result_hash": "h1", "status": 409}
    assert _clauses(checks.submitted_backing(_evidence([row], [refused]))) == ["SUB-7"]
    assert checks.submitted_backing(_evidence([row], [{**refused, "status": 201}])) == []
    exact = dataclasses.replace(_evidence([row]), tasks={"t-1": {"stored": {"attempt": 1, "result_hash": "h1"}}})
    assert checks.submitted_backing(exact) == []
    other = dataclasses.replace(exact, tasks={"t-1": {"stored": {"attempt": 2, "result_hash": "h1"}}})
    assert _clauses(checks.submitted_backing(other)) == ["SUB-7"]
