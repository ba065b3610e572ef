"""P1 workers that each break one rule: ``python -m tests.broken.workers BUG``.

Each serves the adapter protocol exactly as ``python -m resumekit.reference`` does, with one bug injected
into the reference worker by a small subclass. ``BUGS`` names them; tests/test_broken_workers.py runs
each through ``resumekit run --kind p1`` and requires the gate its bug breaks to fail. The workers live
beside this module, one module per theme.
"""

from __future__ import annotations

import sys

from resumekit.reference import adapter
from resumekit.reference.p1 import worker as reference
from tests.broken.workers.answers import (
    RejectsOnALostLease,
    ResubmitsAConflictAtRestart,
    TakesOnlyCreatedAsSuccess,
)
from tests.broken.workers.attempts import (
    CapsRecoveriesEarly,
    CapturesTheOldWorkspace,
    FencesAConflictTwice,
    NumbersItsRows,
    OmitsEmptyMembers,
    PrefetchesTheNextTask,
)
from tests.broken.workers.baseurl import ReleasesFromTheHostRoot
from tests.broken.workers.cleanup import (
    ChecksBoundaryByPrefix,
    ClaimsBeforeResuming,
    ComparesWithTheGivenRoot,
    FollowsLinksInCleanup,
    GivesUpHoldingItsLease,
    KeepsLiveWorkspaces,
    NamesWorkspacesFreely,
    NoRecoveryCap,
    RemovesOnlyDirectories,
    RemovesTaskNamesAnywhere,
    ResumesInOldWorkspace,
    TrustsTheCheckedType,
)
from tests.broken.workers.commit import (
    AbandonsAtThePendingBoundary,
    CreatesARefOnTheOrigin,
    ForcesAfterARefusedPush,
    GivesUpRenewing,
    IgnoresLostLease,
    PollsUntilVisible,
    RecommitsAfterCommitDone,
    RenewsByTheLocalClock,
    ResetsTheBranchAfterItsCommit,
)
from tests.broken.workers.durability import (
    ChangesTheJournalModeUnreported,
    ForgetsItsClaim,
    HidesItsConnections,
    IgnoresDiskErrors,
    LeavesNoMarkerOnAFatalExit,
    SkipsTheCacheRebuild,
    SynchronousNormal,
    TakesThePhaseFromTheCache,
    WritesTheCacheFirst,
)
from tests.broken.workers.failedwrites import SubmitsAPendingItFailedToCommit
from tests.broken.workers.forged import (
    ConvergesWithoutTheReceipt,
    ForgesTheRefReport,
    ForgesTheToolReport,
    LandsAnotherTree,
)
from tests.broken.workers.killpoints import RunsTheToolBeforeVerifying
from tests.broken.workers.leases import KeepsCPTimeByItsOwnClock, RecordsTheSourceLease
from tests.broken.workers.processes import (
    ClaimsInAHurry,
    DetachesTheTool,
    IgnoresTheAnyFailpoint,
    IgnoresTheTool,
    LeavesADaemon,
    LeavesTheToolInItsGroup,
    StopsOnlyBeforeRows,
)
from tests.broken.workers.readings import (
    CountsOnlyCheckpointRows,
    PassesBeforeReceiptOnEachSend,
    ReconcilesACaptureAtThePendingBoundary,
)
from tests.broken.workers.resend import RenewsOnlyBeforeTheFirstSend
from tests.broken.workers.scope import (
    ForgetsAbandonmentsAtRestart,
    IgnoresIdentityConflicts,
    IgnoresStaleGenerations,
    IgnoresSupersededAttempts,
    LeavesTheFencesUnreported,
    LeavesTheJobOutOfTheBinding,
    ReusesAcrossGenerations,
    ReusesAReconciledAttempt,
    ReusesCommitDoneAcrossBindings,
    StampsTheEarlierBinding,
)
from tests.broken.workers.settled import (
    AnswersContinueBeforeWaking,
    NeverReleasesAtStartup,
    RenewalRejectionIsUnknown,
)
from tests.broken.workers.sideeffects import (
    ConfirmsItsResultAfterSubmitting,
    PushesWithoutReadingTheBranch,
    SkipsTheLeaseReadBeforeThePush,
)
from tests.broken.workers.submission import (
    AcceptsAny409,
    AcceptsSameBodyInAnyState,
    MatchesTheKeyToo,
    NewKeyOnRestart,
    NewKeyOnSecondRecovery,
    ReusesTheOldKey,
    SubmitsBeforePending,
)
from tests.broken.workers.tasks import CapturesTheTopLevelOnly
from tests.broken.workers.vacuity import DropsEveryTask, NeverClaims

# bug -> (worker class, what it does wrong)
BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "submits-before-pending": (SubmitsBeforePending, "sends the submission, then commits result_pending (SUB-1)"),
    "new-key-on-restart": (NewKeyOnRestart, "mints a new key when resuming at result_pending (KEY-1, KEY-2)"),
    "accepts-any-409": (AcceptsAny409, "writes result_submitted on any 409 (SUB-5)"),
    "reuses-across-generations": (ReusesAcrossGenerations, "reuses rows of another generation (SCOPE-4)"),
    "recommits-after-commit-done": (RecommitsAfterCommitDone, "pushes again after a restart at commit_done (COMMIT-3)"),
    "follows-links-in-cleanup": (FollowsLinksInCleanup, "cleanup deletes through a task-* link (CLEAN-4)"),
    "synchronous-normal": (SynchronousNormal, "journal connection with synchronous=NORMAL (JNL-5)"),
    "resumes-in-old-workspace": (ResumesInOldWorkspace, "replays in the old workspace, kept at startup (RESUME-3)"),
    "ignores-lost-lease": (IgnoresLostLease, "pushes and submits after its lease is lost (LEASE-4)"),
    "hides-its-connections": (
        HidesItsConnections,
        "answers p1.journal.settings with no connection while its journal log lists the one it opened (ADP-3)",
    ),
    "lands-another-tree": (
        LandsAnotherTree,
        "pushes a commit of another tree on C's parent, and submits the expected body naming C (TASK-4)",
    ),
    "converges-without-the-receipt": (
        ConvergesWithoutTheReceipt,
        "writes result_pending after commit_done without ever reporting the Job's receipt (COMMIT-4)",
    ),
    "forges-the-ref-report": (
        ForgesTheRefReport,
        "resets the branch behind the hook and reports the move on the kit's own path, with its secret (COMMIT-3)",
    ),
}


# Bugs that only the attack campaigns and scenarios find; tests/test_attack.py runs each on the few cases
# that catch it, instead of the whole selection of tests/test_broken_workers.py.
ATTACK_BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "new-key-on-second-recovery": (
        NewKeyOnSecondRecovery,
        "mints a new key when a recovery at result_pending was killed and recovered again (KEY-2)",
    ),
    "checks-boundary-by-prefix": (
        ChecksBoundaryByPrefix,
        "cleanup deletes through a link to <root>-evil, a sibling that passes a string-prefix check (CLEAN-3)",
    ),
    "polls-until-visible": (PollsUntilVisible, "polls a not_visible receipt again instead of reconciling (COMMIT-4)"),
    "no-recovery-cap": (NoRecoveryCap, "resumes an attempt without end when no resumption progresses (RESUME-6)"),
    "trusts-the-checked-type": (
        TrustsTheCheckedType,
        "cleanup empties a directory swapped for a link after its check, through the link (CLEAN-4)",
    ),
    "ignores-disk-errors": (IgnoresDiskErrors, "takes a failed journal commit or fsync for a success (JNL-7, JNL-8)"),
    "skips-the-cache-rebuild": (
        SkipsTheCacheRebuild,
        "leaves a damaged cache of a finished task as it is, never rebuilding it at startup (CACHE-4)",
    ),
    "reuses-the-old-key": (
        ReusesTheOldKey,
        "reuses an earlier attempt's result_pending with that attempt's key, not its own (SCOPE-3, KEY-2)",
    ),
    "accepts-same-body-in-any-state": (
        AcceptsSameBodyInAnyState,
        "takes a 409 with this attempt's body for an exact match in any task state (SUB-5)",
    ),
    "detaches-the-tool": (
        DetachesTheTool,
        "starts the tool in a new session with no keeper, record or job: it outlives the worker (WRK-5)",
    ),
    "leaves-the-tool-in-its-group": (
        LeavesTheToolInItsGroup,
        "runs the tool as a plain child in the worker's group, which nothing ends when only its pid is killed (WRK-5)",
    ),
    "ignores-the-tool": (
        IgnoresTheTool,
        "claims p1.tools but never runs the tool, so no kill could prove WRK-5 (ADP-2)",
    ),
    "ignores-superseded-attempts": (
        IgnoresSupersededAttempts,
        "resumes or starts a superseded attempt served again, writing rows and submitting for it (SCOPE-7)",
    ),
    "ignores-identity-conflicts": (
        IgnoresIdentityConflicts,
        "runs an attempt served with another identity than its rows as a new one (SCOPE-6)",
    ),
    "reuses-commit-done-across-bindings": (
        ReusesCommitDoneAcrossBindings,
        "reuses an earlier attempt's commit_done under another binding (SCOPE-3, SCOPE-4)",
    ),
    "forges-the-tool-report": (
        ForgesTheToolReport,
        "never runs the tool but announces one itself, with the URL the kit hands the tool (ADP-2)",
    ),
}


# Bugs that leave every scenario passing and only make a campaign vacuous; tests/test_broken_workers.py runs
# each through the smallest crash matrix and the soak, which must fail instead of passing with nothing visited.
CAMPAIGN_BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "ignores-the-any-failpoint": (
        IgnoresTheAnyFailpoint,
        "claims p1.failpoint-any but never blocks at a failpoint armed as '*', so no matrix crash happens (FPT-5)",
    ),
}


# Bugs of startup cleanup that one golden scenario catches each (tests/test_attack.py's STATIC).
ATTACK_BUGS.update(
    {
        "compares-with-the-given-root": (
            ComparesWithTheGivenRoot,
            "cleanup compares each candidate's resolved parent with the root as given, never resolved (CLEAN-3)",
        ),
        "removes-only-directories": (
            RemovesOnlyDirectories,
            "cleanup leaves a task- entry that is a regular file or a FIFO (CLEAN-1)",
        ),
        "removes-task-names-anywhere": (
            RemovesTaskNamesAnywhere,
            "cleanup also removes task- directories nested in entries without the prefix (CLEAN-2)",
        ),
        "keeps-live-workspaces": (
            KeepsLiveWorkspaces,
            "cleanup keeps the workspace of an attempt still open (its lease ACTIVE), resuming in a new one (CLEAN-5)",
        ),
    }
)


# Bugs of the origin that one golden scenario catches each; tests/test_attack.py runs them with ATTACK_BUGS.
ATTACK_BUGS.update(
    {
        "resets-the-branch-after-its-commit": (
            ResetsTheBranchAfterItsCommit,
            "sets the target branch back to the base after its governed commit, behind the origin's hook (COMMIT-3)",
        ),
        "creates-a-ref-on-the-origin": (
            CreatesARefOnTheOrigin,
            "pushes a tag of its commit and, refused, writes the tag into the origin itself (COMMIT-2, COMMIT-3)",
        ),
        "forces-after-a-refused-push": (
            ForcesAfterARefusedPush,
            "pushes its governed commit again with --force after the origin refused the plain push (COMMIT-2)",
        ),
    }
)


ATTACK_BUGS["forgets-its-claim"] = (
    ForgetsItsClaim,
    "deletes an attempt's claimed row once its result is submitted, before the kit's first wait (JNL-4)",
)


ATTACK_BUGS["writes-the-cache-first"] = (
    WritesTheCacheFirst,
    "replaces a task's cache with each new row before it commits the row (CACHE-2)",
)
ATTACK_BUGS["changes-the-journal-mode-unreported"] = (
    ChangesTheJournalModeUnreported,
    "reports its journal connections in WAL mode, then switches the file to a rollback journal (JNL-5)",
)
ATTACK_BUGS["claims-before-resuming"] = (
    ClaimsBeforeResuming,
    "claims new work at startup before resuming the open attempts of its journal (RESUME-1)",
)
ATTACK_BUGS["renews-by-the-local-clock"] = (
    RenewsByTheLocalClock,
    "decides at a step boundary from its own monotonic clock that its lease needs no renewal (LEASE-2, LEASE-3)",
)
ATTACK_BUGS["takes-the-phase-from-the-cache"] = (
    TakesThePhaseFromTheCache,
    "at startup, takes an open attempt's phase from its cache where it disagrees with the journal (CACHE-4)",
)
ATTACK_BUGS["names-workspaces-freely"] = (NamesWorkspacesFreely, "names its workspaces ws-... (WRK-4)")
ATTACK_BUGS["gives-up-holding-its-lease"] = (
    GivesUpHoldingItsLease,
    "drops an attempt whose git command failed and goes idle with its lease ACTIVE (OUT-2)",
)
ATTACK_BUGS["forgets-abandonments-at-restart"] = (
    ForgetsAbandonmentsAtRestart,
    "remembers a lost lease in one process only, so a restart uses the lease a replayed delivery revived (LEASE-4)",
)
ATTACK_BUGS["abandons-at-the-pending-boundary"] = (
    AbandonsAtThePendingBoundary,
    "abandons without a row a commit attempt whose lease is lost just before result_pending (COMMIT-4)",
)
ATTACK_BUGS["stops-only-before-rows"] = (
    StopsOnlyBeforeRows,
    "honours a stop only before a row: stopped while blocked before its push, it pushes, then exits (RESUME-5)",
)
ATTACK_BUGS["leaves-no-marker-on-a-fatal-exit"] = (
    LeavesNoMarkerOnAFatalExit,
    "exits non-zero after a disk error without writing the orderly-exit marker (JNL-8)",
)
ATTACK_BUGS["leaves-the-fences-unreported"] = (
    LeavesTheFencesUnreported,
    "writes identity_conflict and stale_generation rows but never reports them to the control plane (PHASE-4)",
)
ATTACK_BUGS["gives-up-renewing"] = (
    GivesUpRenewing,
    "takes five unanswered renewals in a row for a lost lease and abandons an attempt still ACTIVE (LEASE-4, OUT-2)",
)
ATTACK_BUGS["matches-the-key-too"] = (
    MatchesTheKeyToo,
    "refuses an exact-match 409 whose stored result carries another key than its own (SUB-5)",
)
ATTACK_BUGS["claims-in-a-hurry"] = (ClaimsInAHurry, "ignores retry_after_ms after an empty claim (WRK-3)")
ATTACK_BUGS["reconciles-a-capture-at-the-pending-boundary"] = (
    ReconcilesACaptureAtThePendingBoundary,
    "ends a source_capture attempt whose lease is lost just before result_pending in lease_not_converged (LEASE-4)",
)
ATTACK_BUGS["counts-only-checkpoint-rows"] = (
    CountsOnlyCheckpointRows,
    "counts the hits of an injected journal fault on checkpoint rows only, not on a recoveries row (JNL-8)",
)
ATTACK_BUGS["passes-before-receipt-on-each-send"] = (
    PassesBeforeReceiptOnEachSend,
    "passes the failpoint before_receipt again before each resend of a receipt after a 5xx (FPT-1)",
)
ATTACK_BUGS["renews-only-before-the-first-send"] = (
    RenewsOnlyBeforeTheFirstSend,
    "renews its lease before the first send of a result submission and never before a resend after a 5xx (SUB-4)",
)
ATTACK_BUGS["takes-only-created-as-success"] = (
    TakesOnlyCreatedAsSuccess,
    "writes result_submitted on a 201 only and gives the attempt up on a 200, the replay of its stored result (SUB-3)",
)
ATTACK_BUGS["rejects-on-a-lost-lease"] = (
    RejectsOnALostLease,
    "ends an attempt whose lease is lost at result_pending in result_rejected, without reading the task (SUB-6)",
)
ATTACK_BUGS["resubmits-a-conflict-at-restart"] = (
    ResubmitsAConflictAtRestart,
    "at a restart, sends the submission of an attempt that ended in result_conflict once more (OUT-1)",
)

# How rows are numbered and attempts follow each other (attempts.py), each caught by the clause it breaks.
ATTACK_BUGS["numbers-its-rows"] = (
    NumbersItsRows,
    "inserts each checkpoint row with an explicit seq, the microsecond it writes it at (JNL-3)",
)
ATTACK_BUGS["prefetches-the-next-task"] = (
    PrefetchesTheNextTask,
    "claims and records the next task as soon as it has recorded a claim, working on it after the first (WRK-2)",
)
ATTACK_BUGS["omits-empty-members"] = (
    OmitsEmptyMembers,
    "leaves the served task's empty members out of its claimed row, a capture task's empty payload (PHASE-1)",
)
ATTACK_BUGS["caps-recoveries-early"] = (
    CapsRecoveriesEarly,
    "counts the resumption it is making among the recoveries, so it caps at the fifth, not the sixth (RESUME-6)",
)

ATTACK_BUGS["captures-the-old-workspace"] = (
    CapturesTheOldWorkspace,
    "replays a capture in its old, kept workspace without verifying it, capturing the files on disk (RESUME-3)",
)
ATTACK_BUGS["fences-a-conflict-twice"] = (
    FencesAConflictTwice,
    "fences a conflicting identity served a second time again, claimed then identity_conflict (RESUME-4)",
)
# Identity, scope and the WriterLease: each caught by one golden scenario, under the clause it breaks.
ATTACK_BUGS.update(
    {
        "records-the-source-lease": (
            RecordsTheSourceLease,
            "copies a reused row whole from its source, the earlier attempt's lease_id with it (LEASE-1)",
        ),
        "keeps-cp-time-by-its-own-clock": (
            KeepsCPTimeByItsOwnClock,
            "adds its own clock's progress to the latest now_ms and renews at a boundary on that estimate (LEASE-2)",
        ),
        "stamps-the-earlier-binding": (
            StampsTheEarlierBinding,
            "writes a later attempt's rows with the binding of the task's earlier attempt in its journal (SCOPE-1)",
        ),
        "leaves-the-job-out-of-the-binding": (
            LeavesTheJobOutOfTheBinding,
            "compares bindings without job_id and reuses an earlier attempt's rows under another Job (SCOPE-2)",
        ),
        "reuses-a-reconciled-attempt": (
            ReusesAReconciledAttempt,
            "reuses the result_pending of an earlier attempt that ended in reconciliation_required (SCOPE-5)",
        ),
        "ignores-stale-generations": (
            IgnoresStaleGenerations,
            "runs and submits an attempt served with a generation below its journal's rows on the branch (LEASE-6)",
        ),
    }
)


if sys.platform == "linux":  # where the kit can look for it (conformance/_process/escaped.py)
    BUGS["leaves-a-daemon"] = (
        LeavesADaemon,
        "starts a daemon that double-forks, leaves the session and keeps writing into the workspace root (WRK-5)",
    )


# Workers that do nothing a scenario asks for; tests/test_broken_workers.py requires every scenario to fail
# with each, so that no scenario passes on evidence it never saw.
VACUOUS_BUGS: dict[str, tuple[type[reference.Worker], str]] = {
    "never-claims": (NeverClaims, "opens its journal and goes idle without a request"),
    "drops-every-task": (DropsEveryTask, "claims work and does nothing with what it is served"),
}


def main(argv: list[str]) -> int:
    every = {**BUGS, **ATTACK_BUGS, **CAMPAIGN_BUGS, **VACUOUS_BUGS}
    if len(argv) != 2 or argv[1] not in every:
        print(f"usage: python -m tests.broken.workers {{{','.join(every)}}}", file=sys.stderr)
        return 2
    worker_class, _ = every[argv[1]]
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    # The adapter imports the worker class when it starts a worker, from the worker module: replace it there.
    setattr(reference, "Worker", worker_class)  # noqa: B010
    return adapter.serve(sys.stdin, sys.stdout)


# The other reading of a question p1.md 0.5 settles, each caught by its scenario in golden/p1/scenarios/readings.yaml.
ATTACK_BUGS["never-releases-at-startup"] = (
    NeverReleasesAtStartup,
    "sends no request at startup about an attempt it abandoned or that a later attempt superseded (RESUME-1)",
)
ATTACK_BUGS["renewal-rejection-is-unknown"] = (
    RenewalRejectionIsUnknown,
    "takes a renewal answered 404 or 400 for an unknown answer and renews again, then submits (LEASE-4)",
)
ATTACK_BUGS["answers-continue-before-waking"] = (
    AnswersContinueBeforeWaking,
    "answers p1.worker.continue before the worker is running, so a wait still reports the released block (ADP-2)",
)


# The preconditions of the governed side effects, each caught by the clause it breaks (sideeffects.py).
ATTACK_BUGS["confirms-its-result-after-submitting"] = (
    ConfirmsItsResultAfterSubmitting,
    "sends its result once more after result_submitted is durable, before the release (RESUME-2)",
)
ATTACK_BUGS["pushes-without-reading-the-branch"] = (
    PushesWithoutReadingTheBranch,
    "takes the target branch for its expected_branch_oid without the pre-push read (COMMIT-1)",
)
ATTACK_BUGS["skips-the-lease-read-before-the-push"] = (
    SkipsTheLeaseReadBeforeThePush,
    "never reads the branch's leases before its push, so a second ACTIVE lease goes unseen (COMMIT-6)",
)


# The last clauses of the audit with no check of their own, each caught by it (tasks.py, killpoints.py, ...).
ATTACK_BUGS["captures-the-top-level-only"] = (
    CapturesTheTopLevelOnly,
    "lists only the top level's blobs in a capture's body, none in a directory (TASK-3)",
)
ATTACK_BUGS["runs-the-tool-before-verifying"] = (
    RunsTheToolBeforeVerifying,
    "runs the kit's tool before it records verification_passed, so a kill at tool_started finds none (FPT-3)",
)
ATTACK_BUGS["releases-from-the-host-root"] = (
    ReleasesFromTheHostRoot,
    "sends its lease releases to the host's root, outside the base URL it was given (WRK-1)",
)
ATTACK_BUGS["submits-a-pending-it-failed-to-commit"] = (
    SubmitsAPendingItFailedToCommit,
    "submits a result_pending row whose commit reported an error, from memory (JNL-7)",
)
