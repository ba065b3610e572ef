"""The P1 attack cases: the crash matrix (p1.md FPT-5) and the scenarios that go beyond the baseline.

The full campaigns are opt-in (``--kind p1-campaign``, ``nox -s attack``) because they run hundreds of
worker processes. Here a matrix is cut to a few runs (a small golden directory with one narrow
two-crash matrix), run against the reference (which must pass and say how many points it visited) and
against a broken worker that only a crash during recovery exposes. Each other broken worker of
``ATTACK_BUGS`` runs only the one golden scenario that catches it, which must fail naming the clause.
The reference's passes of the golden scenarios themselves are `nox -s conformance`'s to show.
"""

from __future__ import annotations

import dataclasses
import errno
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from resumekit.conformance._resources import golden_dir
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1 import harness, world
from resumekit.conformance.p1.cases import ScenarioCase, SoakCase
from resumekit.conformance.p1.checks import failpoints, rules
from resumekit.conformance.p1.origin import create_origin
from resumekit.conformance.runner import missing_claims
from resumekit.reference.p1.control import Control, DiskFault
from tests.broken.workers import ATTACK_BUGS
from tests.support import gate_rows, python_command, run_resumekit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GUARD = 300  # seconds: far above an honest run, only there to turn a hang into a failure

# Two-crash matrices cut to one first crash each, then a crash at every point of the recovery path: just
# before the submission (about eight runs, where a recovery of a recovery can go wrong; the broken worker
# fails at its second), and after result_submitted (three runs, which the reference passes).
SMALL_MATRIX = "p1-matrix-capture-recovery-small"
TINY_MATRIX = "p1-matrix-capture-recovery-tiny"


def _golden(folder: Path) -> Path:
    source = yaml.safe_load((golden_dir() / "p1" / "crash-matrix.yaml").read_text(encoding="utf-8"))
    (matrix,) = [m for m in source["matrices"] if m["id"] == "p1-matrix-capture-recovery"]
    source["matrices"] = [
        dict(matrix, id=SMALL_MATRIX, first=["before_result_submit"]),
        dict(matrix, id=TINY_MATRIX, first=["after_result_submitted_row"]),
    ]
    root = folder / "golden"
    (root / "p1").mkdir(parents=True)
    (root / "p1" / "crash-matrix.yaml").write_text(yaml.safe_dump(source, sort_keys=False), encoding="utf-8")
    return root


def _run(adapter: str, report: Path, args: tuple[str, ...]) -> tuple[int, dict[str, Any], str]:
    return run_resumekit(report, "--adapter", adapter, *args, guard=GUARD)


# bug -> (the run's selection, the gate it must fail, clauses of which the failing case cites one)
CAUGHT: dict[str, tuple[tuple[str, ...], str, frozenset[str]]] = {}
# A broken worker of the default selection (tests/test_broken_workers.py) run as both workers of the
# two-worker scenarios: the first submits on the lease the second released, or that a new generation ended.
TWO_WORKERS = "ignores-lost-lease, two workers"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, dict[str, Any], str]]]:
    folder = tmp_path_factory.mktemp("attack")
    golden = _golden(folder)
    CAUGHT["new-key-on-second-recovery"] = (
        ("--golden", str(golden), "--kind", "p1-campaign", "--only", SMALL_MATRIX),
        "WORKER_RESTART_RESUME",
        frozenset({"KEY-1", "KEY-2"}),  # its result_pending row was durable: no SUB-1
    )
    jobs = {
        "reference": ("reference", ("--golden", str(golden), "--kind", "p1-campaign", "--only", TINY_MATRIX)),
        **{
            bug: (python_command("-m", "tests.broken.workers", bug), selection)
            for bug, (selection, _, _) in CAUGHT.items()
        },
        TWO_WORKERS: (python_command("-m", "tests.broken.workers", "ignores-lost-lease"),
                      ("--kind", "p1", "--only", "p1-two-workers-*")),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_run, adapter, folder / f"{name}.json", args) for name, (adapter, args) in jobs.items()
        }
        yield {name: future.result() for name, future in futures.items()}


def test_the_reference_passes_a_crash_matrix_and_reports_the_points_it_visited(
    runs: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    code, document, output = runs["reference"]
    assert code == 3, output  # a passed subset run: --kind narrows it
    (result,) = document["results"]
    assert result["outcome"] == "passed", result
    assert result["kind"] == "p1-campaign"
    assert "crash points visited for the source_capture task" in result["message"], result["message"]
    visited = int(result["message"].split(" ")[0])
    assert visited >= 1, result["message"]  # the recovery path: at least the release of the lease
    assert f"{TINY_MATRIX}: {result['message']}" in output


def test_a_new_key_after_a_crash_during_recovery_is_caught_by_the_matrix(
    runs: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    (result,) = runs["new-key-on-second-recovery"][1]["results"]
    # The message names the run and the crash points that led to the failure.
    assert "crash matrix, run" in result["message"] and "before_result_submit then" in result["message"], result


def test_every_attack_bug_is_caught() -> None:
    assert set(ATTACK_BUGS) == {"new-key-on-second-recovery", *STATIC}


@pytest.mark.parametrize("bug", sorted(ATTACK_BUGS))
def test_a_broken_worker_fails_the_case_that_attacks_its_bug(
    bug: str, runs: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    _, gate, clauses = CAUGHT[bug]
    code, document, output = runs[bug]
    assert code == 1, output  # not certified
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    cited = {mismatch.get("clause") for mismatch in result["mismatches"]}
    assert cited & clauses, (bug, cited, result["message"])
    # Every mismatch names the check that made it, a registered one (``resumekit list --checks``).
    listed = {name for name, _, _ in rules.listing()}
    assert {mismatch.get("check") for mismatch in result["mismatches"]} <= listed, result["mismatches"]
    verdicts = {name: row["verdict"] for name, row in gate_rows(document).items()}
    assert verdicts[gate] == "failed", verdicts


# The broken workers that one golden scenario catches: bug -> (the scenario, its gate, the clauses).
STATIC: dict[str, tuple[str, str, frozenset[str]]] = {
    # Its workspace_prepared row names a directory that is no task- name.
    "names-workspaces-freely": ("p1-capture-completes", "RESUME_FROM_CHECKPOINT", frozenset({"WRK-4"})),
    # Idle with the attempt at verification_passed and its lease ACTIVE: the task never converges.
    "gives-up-holding-its-lease": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"OUT-2"})),
    # Idle, it asks for work again at once although each empty answer says to wait 20 ms.
    "claims-in-a-hurry": ("p1-idle-worker-waits-between-claims", "WORKER_RESTART_RESUME", frozenset({"WRK-3"})),
    # Blocked after the verification_passed row, the cache already shows it: it was written before the row.
    "writes-the-cache-first": (
        "p1-orderly-stop-mid-task-then-resume",
        "CHECKPOINT_DURABLE_WRITE",
        frozenset({"CACHE-2"}),
    ),
    # Reported as WAL, the journal's header shows a rollback journal.
    "changes-the-journal-mode-unreported": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"JNL-5"})),
    # Restarted with an attempt at verification_passed, it claims before resuming it.
    "claims-before-resuming": (
        "p1-orderly-stop-mid-task-then-resume",
        "WORKER_RESTART_RESUME",
        frozenset({"RESUME-1"}),
    ),
    # The claimed row is gone by the first wait: only the snapshot taken as the submission arrived had it.
    "forgets-its-claim": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"JNL-4"})),
    # Deleting through the link empties <root>-evil, the sibling decoy: the boundary check cites CLEAN-3 (and
    # the decoy check CLEAN-2, the link check CLEAN-4).
    "checks-boundary-by-prefix": (
        "p1-cleanup-never-enters-a-sibling-named-like-the-root",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-3"}),
    ),
    # The walk through the swapped-in link empties the decoy: the link check cites CLEAN-4.
    "trusts-the-checked-type": (
        "p1-cleanup-directory-swapped-for-a-link-is-not-followed",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-4"}),
    ),
    # Told the root through a link, it finds no candidate inside the root as given: the stale entries stay.
    "compares-with-the-given-root": (
        "p1-cleanup-through-a-root-given-as-a-link",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-3"}),
    ),
    # The task- file and FIFO stay under the root at the first request.
    "removes-only-directories": (
        "p1-cleanup-removes-task-files-and-fifos",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-1"}),
    ),
    # The task- directory nested in not-a-workspace is gone by the first request.
    "removes-task-names-anywhere": (
        "p1-cleanup-leaves-a-task-directory-nested-in-another-entry",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-2"}),
    ),
    # The killed attempt's workspace, its lease still ACTIVE, stays at the first request of the restart.
    "keeps-live-workspaces": (
        "p1-cleanup-removes-the-workspace-of-an-active-lease",
        "WORKSPACE_CLEANUP_RECOVERY",
        frozenset({"CLEAN-5"}),
    ),
    # The final row is result_submitted, resting on a 409 that showed the task RUNNING: no exact match (SUB-5).
    "accepts-same-body-in-any-state": (
        "p1-409-same-body-running-is-a-hard-failure",
        "RESULT_SUBMISSION_REPLAY_SAFE",
        frozenset({"SUB-5"}),
    ),
    # Its own clock says the lease is young; the kit's clock has moved 28 s of a 30 s TTL, and the next step
    # boundaries write their rows without a renewal (LEASE-3, decided on CP time: LEASE-2).
    "renews-by-the-local-clock": (
        "p1-lease-renewed-across-slow-steps",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"LEASE-3"}),
    ),
    # The cache forged ahead to result_submitted ends the attempt, which the journal has at source_capture_done,
    # with a release and no further row (CACHE-4).
    "takes-the-phase-from-the-cache": (
        "p1-cache-newer-at-source-capture-done-still-submits",
        "RESUME_FROM_CHECKPOINT",
        frozenset({"CACHE-4"}),
    ),
    # No row is written for the finished task, so only the startup rebuild could repair its cache: the idle
    # check finds it unlike the journal's last row (CACHE-4).
    "skips-the-cache-rebuild": (
        "p1-cache-of-a-finished-task-is-rebuilt-before-idle",
        "RESUME_FROM_CHECKPOINT",
        frozenset({"CACHE-4"}),
    ),
    # The reused result_pending carries attempt 1's key, not the key of attempt 2's identity.
    "reuses-the-old-key": (
        "p1-scope-identical-binding-may-reuse-the-pending-result",
        "CHECKPOINT_SCOPE_ISOLATION",
        frozenset({"KEY-1", "KEY-2", "SCOPE-3"}),
    ),
    # Polling again, the attempt converges where it must end in receipt_not_visible: each outcome names the
    # scenario's rule, COMMIT-4 (no longer FPT-4, a clause of kills, or PHASE-4's list of reasons).
    "polls-until-visible": (
        "p1-commit-delayed-visibility-reconciles",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"COMMIT-4"}),
    ),
    # Without the cap the sixth resumption completes the task instead of ending it in recovery_cap (RESUME-6).
    "no-recovery-cap": (
        "p1-strict-recovery-cap-after-five-restarts-without-progress",
        "WORKER_RESTART_RESUME",
        frozenset({"RESUME-6"}),
    ),
    # The tool and its grandchild outlive the killed worker and keep writing into its old workspace, which the
    # watch from the next worker's first request sees (WRK-5); recreating that workspace during the startup
    # cleanup, they also leave it standing at the first request (CLEAN-1).
    "detaches-the-tool": ("p1-strict-tool-tree-dies-with-the-worker", "WORKER_RESTART_RESUME", frozenset({"WRK-5"})),
    "leaves-the-tool-in-its-group": (
        "p1-strict-tool-tree-dies-with-the-worker",
        "WORKER_RESTART_RESUME",
        frozenset({"WRK-5"}),
    ),
    # Claiming p1.tools, it never runs the tool: the kit's own check that the tool announced itself from a
    # workspace fails (ADP-2, a clause of WORKER_RESTART_RESUME), so no tool case can pass for want of a tool.
    "ignores-the-tool": (
        "p1-tool-runs-to-its-end-and-changes-no-result",
        "WORKER_RESTART_RESUME",
        frozenset({"ADP-2"}),
    ),
    # It announces a tool itself instead of running it (the announce file's URL carries the secret): what the kit
    # sees of the process named, no tool running in the workspace, fails ADP-2 (Linux; elsewhere the kit cannot look).
    "forges-the-tool-report": (
        "p1-tool-runs-to-its-end-and-changes-no-result",
        "WORKER_RESTART_RESUME",
        frozenset({"ADP-2"}),
    ),
    # The replayed attempt 1 is resumed from its journal with its revived lease: rows after attempt 2's,
    # a receipt and a submission for it.
    "ignores-superseded-attempts": (
        "p1-strict-superseded-commit-attempt-served-again-gets-nothing",
        "CHECKPOINT_SCOPE_ISOLATION",
        frozenset({"SCOPE-7"}),
    ),
    # The restart finds attempt 1's lease revived by the replay and submits for it, although the first process
    # was told the lease was lost (LEASE-4, a clause of that gate).
    "forgets-abandonments-at-restart": (
        "p1-abandoned-attempt-revived-before-a-restart-gets-nothing",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"LEASE-4"}),
    ),
    # Attempt 1 is left at commit_done, not ended in reconciliation_required (lease_not_converged) by idle.
    "abandons-at-the-pending-boundary": (
        "p1-commit-lease-lost-at-the-pending-boundary-does-not-converge",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"COMMIT-4"}),
    ),
    # Run as a new attempt, the conflicting identity gets a workspace, a capture and a submission.
    "ignores-identity-conflicts": (
        "p1-strict-capture-attempt-served-with-another-digest-is-an-identity-conflict",
        "CHECKPOINT_SCOPE_ISOLATION",
        frozenset({"SCOPE-6"}),
    ),
    # Attempt 2's reused commit_done names attempt 1's row, of another Job.
    "reuses-commit-done-across-bindings": (
        "p1-scope-commit-job-id-differs-at-commit-done-adopts-without-a-second-push",
        "CHECKPOINT_SCOPE_ISOLATION",
        frozenset({"SCOPE-4"}),
    ),
    # Taking the failed sync of result_pending for a success, the worker goes on to idle instead of
    # exiting: the wait for its exit cites JNL-8.
    "ignores-disk-errors": (
        "p1-strict-disk-journal-fsync-eio-is-fatal",
        "CHECKPOINT_DURABLE_WRITE",
        frozenset({"JNL-8"}),
    ),
    # Five renewals unanswered in a row, it abandons attempt 1, whose lease stays ACTIVE, and says idle holding it.
    "gives-up-renewing": (
        "p1-a-long-run-of-unanswered-renewals-is-no-loss",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"OUT-2"}),
    ),
    # The exact-match 409 stores the body under a key of the kit's: refused, the attempt ends in result_conflict.
    "matches-the-key-too": (
        "p1-409-exact-match-verifying-is-accepted",
        "RESULT_SUBMISSION_REPLAY_SAFE",
        frozenset({"SUB-5"}),
    ),
    # Stopped while blocked before its push, it pushes at the renewal it did not stop at, then exits.
    "stops-only-before-rows": (
        "p1-orderly-stop-before-the-push-pushes-nothing-until-the-restart",
        "WORKER_RESTART_RESUME",
        frozenset({"RESUME-5"}),
    ),
    # The stale attempt's reconciliation_required row is never reported, so the task stays RUNNING.
    "leaves-the-fences-unreported": (
        "p1-strict-stale-generation-is-fenced-by-the-worker",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"PHASE-4"}),
    ),
    # It exits non-zero as JNL-8 asks, but the marker its exit path should have written is absent.
    "leaves-no-marker-on-a-fatal-exit": (
        "p1-strict-disk-journal-fsync-eio-is-fatal",
        "CHECKPOINT_DURABLE_WRITE",
        frozenset({"JNL-8"}),
    ),
    # Every request and row is the reference's; only the origin read after the last step shows the target
    # branch back at the base, not at the commit the origin's hook let land (COMMIT-3, a clause of that gate).
    "resets-the-branch-after-its-commit": (
        "p1-commit-completes",
        "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT",
        frozenset({"COMMIT-3"}),
    ),
    # The tag's push reaches the origin (COMMIT-2: no other ref), and the tag it writes itself is a ref the kit
    # never made (COMMIT-3).
    "creates-a-ref-on-the-origin": (
        "p1-commit-completes",
        "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT",
        frozenset({"COMMIT-2", "COMMIT-3"}),
    ),
    # The attempt still ends in push_refused, as the scenario expects; the forced update that reached the
    # origin, from the moved branch to C, is no fast-forward (COMMIT-2).
    "forces-after-a-refused-push": (
        "p1-commit-branch-moved-after-the-read-refuses-the-push",
        "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT",
        frozenset({"COMMIT-2"}),
    ),
    # Attempt 1 ends in reconciliation_required (lease_not_converged) where its loss abandons it: a source_capture
    # attempt records no governed commit, whatever the rank of source_capture_done (LEASE-4).
    "reconciles-a-capture-at-the-pending-boundary": (
        "p1-capture-lease-lost-at-the-pending-boundary-abandons-the-attempt",
        "LEASE_RENEWAL_RECOVERY",
        frozenset({"LEASE-4"}),
    ),
    # Its recoveries row uncounted, the restarted process never reaches a fourth journal fsync and goes idle
    # where the kit waits for its fatal exit (JNL-8).
    "counts-only-checkpoint-rows": (
        "p1-strict-disk-fault-hits-count-the-recoveries-row",
        "CHECKPOINT_DURABLE_WRITE",
        frozenset({"JNL-8"}),
    ),
    # Passing before_receipt again on the first task's resend, it blocks there: the lease the kit lets expire is
    # the first task's, which ends in lease_not_converged, and the second task converges in one attempt.
    "passes-before-receipt-on-each-send": (
        "p1-receipt-resent-passes-no-failpoint",
        "CRASH_RECOVERY_CONVERGENCE",
        frozenset({"FPT-1"}),
    ),
}
# The other reading of a question p1.md 0.5 settles (golden/p1/scenarios/readings.yaml).
STATIC.update(
    {
        # Attempt 1, abandoned at result_pending and superseded by attempt 2, gets no request before the claim.
        "never-releases-at-startup": (
            "p1-abandoned-attempt-is-released-at-every-restart",
            "WORKER_RESTART_RESUME",
            frozenset({"RESUME-1"}),
        ),
        # After the 404, it renews again, answered ACTIVE, and submits for attempt 1 (LEASE-4).
        "renewal-rejection-is-unknown": (
            "p1-renewal-answered-404-is-a-loss",
            "LEASE_RENEWAL_RECOVERY",
            frozenset({"LEASE-4"}),
        ),
        # The wait after continue still reports after_workspace_prepared_row (ADP-2).
        "answers-continue-before-waking": (
            "p1-continue-releases-the-block-before-it-answers",
            "WORKER_RESTART_RESUME",
            frozenset({"ADP-2"}),
        ),
    }
)
# The preconditions of the governed side effects (tests/broken/workers/sideeffects.py), each named by its clause.
STATIC.update(
    {
        # The restarted process submits, writes result_submitted, then sends the result again (RESUME-2).
        "confirms-its-result-after-submitting": (
            "p1-kill-after-pending-resends-the-same-key",
            "RESULT_SUBMISSION_REPLAY_SAFE",
            frozenset({"RESUME-2"}),
        ),
        # The branch moved while it was blocked before its push; unread, its push is refused (COMMIT-1).
        "pushes-without-reading-the-branch": (
            "p1-commit-branch-moved-before-the-read-is-never-pushed",
            "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT",
            frozenset({"COMMIT-1"}),
        ),
        # The second ACTIVE lease unseen, its push lands (COMMIT-6).
        "skips-the-lease-read-before-the-push": (
            "p1-strict-second-lease-before-the-push-is-a-lease-conflict",
            "LEASE_RENEWAL_RECOVERY",
            frozenset({"COMMIT-6"}),
        ),
    }
)
# Renewed before the first send only, its two resends after the 502 and the 503 follow no renewal (SUB-4).
STATIC["renews-only-before-the-first-send"] = (
    "p1-submit-5xx-twice-then-success",
    "RESULT_SUBMISSION_REPLAY_SAFE",
    frozenset({"SUB-4"}),
)
# What a submission's answer means (tests/broken/workers/answers.py), each named by its clause's own check.
STATIC.update(
    {
        # The restart's resend is answered 200, the replay of the stored result; it writes no result_submitted.
        "takes-only-created-as-success": (
            "p1-kill-after-the-server-stored-the-result-resends-once",
            "RESULT_SUBMISSION_REPLAY_SAFE",
            frozenset({"SUB-3"}),
        ),
        # The lease expired while it was down; it writes result_rejected though no submission was rejected.
        "rejects-on-a-lost-lease": (
            "p1-stored-result-read-back-after-the-lease-expired-while-down",
            "RESULT_SUBMISSION_REPLAY_SAFE",
            frozenset({"SUB-6"}),
        ),
        # Killed before its report, the restart sends the conflicting attempt's submission again (OUT-1).
        "resubmits-a-conflict-at-restart": (
            "p1-restart-after-a-conflict-submits-nothing-more",
            "RESULT_SUBMISSION_REPLAY_SAFE",
            frozenset({"OUT-1"}),
        ),
    }
)
# How rows are numbered and attempts follow each other (tests/broken/workers/attempts.py), each named by its clause.
STATIC.update(
    {
        # Its seqs are microsecond timestamps, not 1, 2, 3, ... (JNL-3).
        "numbers-its-rows": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"JNL-3"})),
        # Two tasks on two repositories: the second's claimed row comes between the first's rows (WRK-2).
        "prefetches-the-next-task": (
            "p1-receipt-resent-passes-no-failpoint",
            "CRASH_RECOVERY_CONVERGENCE",
            frozenset({"WRK-2"}),
        ),
        # The capture task's empty payload is missing from its claimed row (PHASE-1).
        "omits-empty-members": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"PHASE-1"})),
        # The conflicting identity served again, already fenced, gets claimed and identity_conflict again (RESUME-4).
        "fences-a-conflict-twice": (
            "p1-strict-identity-conflict-served-again-gets-no-row",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"RESUME-4"}),
        ),
        # The kit's file in the kept old workspace is in the replayed capture's result (RESUME-3).
        "captures-the-old-workspace": (
            "p1-replay-ignores-a-tampered-old-workspace",
            "WORKSPACE_CLEANUP_RECOVERY",
            frozenset({"RESUME-3"}),
        ),
        # The fifth resumption without progress writes recovery_cap (RESUME-6).
        "caps-recoveries-early": (
            "p1-strict-four-restarts-without-progress-are-not-capped",
            "WORKER_RESTART_RESUME",
            frozenset({"RESUME-6"}),
        ),
    }
)
# Identity, scope and the WriterLease (tests/broken/workers/scope.py and leases.py), each named by its clause.
STATIC.update(
    {
        # The reused result_pending of attempt 2 records lease-of-attempt-1, granted to attempt 1 only (LEASE-1).
        "records-the-source-lease": (
            "p1-scope-identical-binding-may-reuse-the-pending-result",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"LEASE-1"}),
        ),
        # The clock moved 28 s of a 30 s TTL; its estimate still young, it writes source_capture_done and
        # result_pending with no request in between, so no CP time reached it (LEASE-2).
        "keeps-cp-time-by-its-own-clock": (
            "p1-lease-renewed-across-slow-steps",
            "LEASE_RENEWAL_RECOVERY",
            frozenset({"LEASE-2"}),
        ),
        # Attempt 2, issued with generation 2, writes rows of generation 1: an identity never served (SCOPE-1).
        "stamps-the-earlier-binding": (
            "p1-scope-generation-differs-reuses-nothing",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"SCOPE-1"}),
        ),
        # Attempt 2 of another Job reuses attempt 1's source_capture_done (SCOPE-2).
        "leaves-the-job-out-of-the-binding": (
            "p1-scope-job-id-differs-reuses-nothing",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"SCOPE-2"}),
        ),
        # Attempt 2 reuses the result_pending of attempt 1, which ended in result_conflict (SCOPE-5).
        "reuses-a-reconciled-attempt": (
            "p1-strict-nothing-reused-from-a-reconciled-attempt",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"SCOPE-5"}),
        ),
        # The generation-1 attempt served after generation 2's rows runs to a submission (LEASE-6).
        "ignores-stale-generations": (
            "p1-strict-stale-generation-is-fenced-by-the-worker",
            "CHECKPOINT_SCOPE_ISOLATION",
            frozenset({"LEASE-6"}),
        ),
    }
)
# The last clauses the audit found with no check of their own, each named by it (tests/broken/workers/tasks.py, ...).
STATIC.update(
    {
        # The capture's body lists README.md only, not src/widget.txt (TASK-3).
        "captures-the-top-level-only": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"TASK-3"})),
        # The result_pending commit fails with ENOSPC; it submits the row from memory (JNL-7).
        "submits-a-pending-it-failed-to-commit": (
            "p1-disk-journal-write-enospc-never-advances",
            "CHECKPOINT_DURABLE_WRITE",
            frozenset({"JNL-7"}),
        ),
        # Its release goes to the host's root, outside the base URL it was given (WRK-1).
        "releases-from-the-host-root": ("p1-capture-completes", "CHECKPOINT_DURABLE_WRITE", frozenset({"WRK-1"})),
        # Killed at tool_started, its journal ends at workspace_prepared, not verification_passed (FPT-3).
        "runs-the-tool-before-verifying": (
            "p1-strict-tool-tree-dies-with-the-worker",
            "WORKER_RESTART_RESUME",
            frozenset({"FPT-3"}),
        ),
    }
)
CAUGHT.update(
    {bug: (("--kind", "p1", "--only", scenario), gate, clauses) for bug, (scenario, gate, clauses) in STATIC.items()}
)


def test_the_failpoint_any_counts_every_site_of_any_name() -> None:
    control = Control(("*", 3))
    control.failpoint("before_claimed_row")
    control.failpoint("after_claimed_row")
    assert control.state() is None  # two sites reached, the third is armed
    blocked = threading.Thread(target=control.failpoint, args=("before_claimed_cache",), daemon=True)
    blocked.start()
    assert control.wait(5.0) == {"state": "blocked", "failpoint": "before_claimed_cache"}
    control.release(None)
    blocked.join(5.0)
    assert not blocked.is_alive()


def test_a_soak_schedule_is_a_function_of_its_seed_and_a_prefix_of_a_longer_one() -> None:
    (case,) = [c for c in load_suite().cases if isinstance(c, SoakCase)]
    assert len(case.issue) >= 20
    first, again, other = harness.soak_steps(case, 7), harness.soak_steps(case, 7), harness.soak_steps(case, 8)
    assert first == again and first != other
    shorter = harness.soak_steps(dataclasses.replace(case, rounds=10), 7)
    assert shorter[:-2] == first[: len(shorter) - 2]  # the first ten rounds, then the undisturbed run
    kills = sum(1 for step in first if "crash_or_idle" in step)
    faults = sum(1 for step in first if "fault" in step)
    assert kills == case.rounds and kills + faults >= 100  # planned; the report counts those that fired


def test_every_failpoint_of_the_catalog_is_known_to_the_any_check() -> None:
    catalog = yaml.safe_load((golden_dir() / "p1" / "failpoints.yaml").read_text(encoding="utf-8"))
    assert all(failpoints.known_failpoint(point["name"]) for point in catalog["worker"])
    assert not failpoints.known_failpoint("after_lunch_row")


def test_disk_fault_scenarios_are_not_claimed_without_the_capability() -> None:
    disk = [c for c in load_suite().cases if "-disk-" in c.id]
    assert {c.profile for c in disk} == {"core", "strict"} and len(disk) >= 4
    claims = ("p1.worker", "p1.journal", "p1.failpoint-any")
    for case in disk:
        reason = missing_claims(case, claims, ("core", "strict"))
        assert reason is not None and "p1.disk-faults" in reason, (case.id, reason)
        assert missing_claims(case, (*claims, "p1.disk-faults"), ("core", "strict")) is None


@pytest.mark.parametrize("bug", ["detaches-the-tool", "leaves-the-tool-in-its-group"])
def test_a_tool_that_outlives_the_worker_is_named_by_the_paths_it_changed(
    bug: str, runs: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    (result,) = runs[bug][1]["results"]
    message = result["message"]
    assert "WRK-5" in message and "outlived it" in message, message
    assert "/resumekit-tool" in message, message  # the tool's own file, under the old workspace's name
    (watch,) = [m for m in result["mismatches"] if m.get("clause") == "WRK-5"]
    assert all(path.startswith("task-") for path in watch["actual"]), watch


def test_tool_scenarios_are_not_claimed_without_the_capability() -> None:
    tools = [
        case
        for case in load_suite().cases
        if isinstance(case, ScenarioCase) and any("tool" in step.get("start", {}) for step in case.steps)
    ]
    assert {c.profile for c in tools} == {"core", "strict"} and len(tools) >= 3
    claims = ("p1.worker", "p1.journal", "p1.failpoint-any", "p1.disk-faults")
    for case in tools:
        reason = missing_claims(case, claims, ("core", "strict"))
        assert reason is not None and "p1.tools" in reason, (case.id, reason)
        assert missing_claims(case, (*claims, "p1.tools"), ("core", "strict")) is None


def test_a_disk_fault_fails_only_its_own_hit_of_its_own_operation() -> None:
    control = Control(None, DiskFault("journal", "fsync", "EIO", 2))
    control.disk("journal", "fsync")
    control.disk("journal", "write")
    control.disk("cache", "fsync")
    with pytest.raises(OSError, match="injected: fsync #2 of the journal") as raised:
        control.disk("journal", "fsync")
    assert raised.value.errno == errno.EIO
    control.disk("journal", "fsync")  # one hit only: the third passes


def test_a_tear_at_any_offset_keeps_fewer_bytes_than_the_cache() -> None:
    assert [world._torn_length(10, at) for at in (None, 0, 1, 9, 10, 99, -1, -10, -99)] == [5, 0, 1, 9, 9, 9, 9, 0, 0]
    assert all(world._torn_length(size, at) < size for size in (1, 2, 300) for at in range(-size - 1, size + 2))


def test_a_worker_that_ignores_a_lost_lease_is_caught_when_a_second_worker_shares_its_task(
    runs: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    code, document, output = runs[TWO_WORKERS]
    assert code == 1, output
    results = document["results"]
    assert len(results) == 2 and all(result["outcome"] == "failed" for result in results), results
    for result in results:
        cited = {mismatch.get("clause") for mismatch in result["mismatches"]}
        assert "LEASE-4" in cited, (result["id"], cited)
    verdicts = {name: row["verdict"] for name, row in gate_rows(document).items()}
    assert verdicts["LEASE_RENEWAL_RECOVERY"] == "failed", verdicts


def _mismatches(document: dict[str, Any]) -> list[tuple[Any, Any, Any, Any]]:
    (result,) = document["results"]
    return [(m.get("clause"), m.get("pointer"), m.get("expected"), m.get("actual")) for m in result["mismatches"]]


@pytest.mark.parametrize(
    ("bug", "tree"), [("checks-boundary-by-prefix", "workspaces-evil/"), ("trusts-the-checked-type", "decoy/")]
)
def test_a_changed_decoy_is_named_by_the_paths_that_changed(
    bug: str, tree: str, runs: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    (result,) = runs[bug][1]["results"]
    (decoy,) = [m for m in result["mismatches"] if m.get("clause") == "CLEAN-2"]
    assert decoy["actual"] and all(path.startswith(tree) for path in decoy["actual"]), decoy
    assert f"'{tree}keep.txt' (removed)" in decoy["note"], decoy


def test_the_origins_end_state_names_the_repository_the_ref_and_both_objects(
    runs: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    # The reset: the one finding is the target branch, at the base where the landed push left C.
    ((clause, pointer, expected, actual),) = _mismatches(runs["resets-the-branch-after-its-commit"][1])
    assert (clause, pointer) == ("COMMIT-3", "/origin/acme/widgets/refs/heads/main")
    assert isinstance(expected, str) and isinstance(actual, str) and len(expected) == len(actual) == 40
    assert expected != actual
    # The tag: refused as a push of another ref, then found on the origin, where no ref was expected.
    found = _mismatches(runs["creates-a-ref-on-the-origin"][1])
    assert {(clause, pointer) for clause, pointer, _, _ in found} == {
        ("COMMIT-2", "/origin/pushes/1/ref"),
        ("COMMIT-3", "/origin/acme/widgets/refs/tags/t-commit-done"),
    }, found
    # The forced push: the one finding is the update from the moved branch, which is not C's ancestor.
    ((clause, pointer, expected, actual),) = _mismatches(runs["forces-after-a-refused-push"][1])
    assert (clause, pointer) == ("COMMIT-2", "/origin/pushes/0"), (clause, pointer)


def test_every_branch_a_golden_scenario_moves_is_moved_to_a_commit_of_its_origin(tmp_path: Path) -> None:
    # A fault's oid is a literal: the kit's origin commits are a function of their files, so it stays true
    # only while the files of the scenario's repository stay as they are.
    cases = [case for case in load_suite().cases if isinstance(case, ScenarioCase)]
    moves = [
        (case, fault)
        for case in cases
        for fault in (*case.faults, *(step["fault"] for step in case.steps if "fault" in step))
        if fault.get("fault") == "MoveBranch"
    ]
    assert len(moves) >= 2
    for index, (case, fault) in enumerate(moves):
        spec = case.repositories[fault["repository"]]
        made = create_origin(tmp_path / str(index), spec["files"], branch=spec["branch"],
                             branches=spec.get("branches", ()), later=spec.get("later"))
        assert fault["oid"] in (made.base_oid, made.later_oid), (case.id, fault, made)


# The broken workers whose clause a check names for what it sees itself, not only the scenario's expected outcome.
OWN_CHECKS = {
    "confirms-its-result-after-submitting": "resume.after_submitted",
    "pushes-without-reading-the-branch": "commit.branch_read",
    "skips-the-lease-read-before-the-push": "commit.lease_read",
    "takes-only-created-as-success": "answers.successes",
    "rejects-on-a-lost-lease": "answers.rejections",
    "resubmits-a-conflict-at-restart": "convergence.hard_failures",
    "captures-the-top-level-only": "tasks.captures",
    "runs-the-tool-before-verifying": "failpoints.kit_kills",
    "releases-from-the-host-root": "processes.base_urls",
    "submits-a-pending-it-failed-to-commit": "journal.failed_writes",
}


@pytest.mark.parametrize("bug", sorted(OWN_CHECKS))
def test_a_broken_precondition_of_a_side_effect_is_named_by_its_own_check(
    bug: str, runs: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    (result,) = runs[bug][1]["results"]
    _, _, clauses = CAUGHT[bug]
    named = {(mismatch.get("check"), mismatch.get("clause")) for mismatch in result["mismatches"]}
    assert {(OWN_CHECKS[bug], clause) for clause in clauses} <= named, named
