"""Hostile P1 workers for the fuzz campaign's ``p1`` part: ``python -m tests.fuzz.p1_workers ATTACK [ARG]``.

Each serves the adapter protocol as ``python -m resumekit.reference`` does, with a subclass of the
reference worker that sabotages what the kit will read, receive or walk: its journal, its caches, its
state directory, its workspaces, its requests, its stderr, its children. ``ATTACKS`` names them;
``tests/fuzz/p1.py`` runs each on the scenario that meets it. ARG, where an attack takes one, is a path
the campaign chose (a decoy outside every folder of the case, or a probe file of its own).
"""

from __future__ import annotations

import signal
import sys

from resumekit.reference import adapter
from resumekit.reference.p1 import worker as reference
from tests.fuzz.p1_workers import (
    _base,
    answers,
    attempts,
    cleanup_bounds,
    doctor,
    files,
    forged,
    gaps,
    labels,
    memory,
    places,
    platforms,
    procs,
    readings,
    resend,
    scope_leases,
    settled,
    sideeffects,
    text,
    traffic,
    writes,
)

ATTACKS: dict[str, type[reference.Worker]] = {
    "cache-fifo": files.CacheIsAFifo,
    "cache-directory": files.CacheIsADirectory,
    "cache-link-to-dev-zero": files.CacheLinksToDevZero,
    "cache-sparse-gigabyte": files.CacheIsASparseGigabyte,
    "journal-fifo": files.JournalIsAFifo,
    "journal-link-outside": files.JournalLinksOutside,
    "journal-slow-view": files.CheckpointsIsASlowView,
    "journal-null-attempt": files.NullAttempt,
    "journal-text-attempt": files.TextAttempt,
    "journal-blob-phase": files.BlobPhase,
    "claim-flood": traffic.FloodsClaims,
    "malformed-requests": traffic.SendsMalformedRequests,
    "huge-stderr": traffic.HugeStderr,
    "endless-stderr": traffic.EndlessStderr,
    "git-is-a-file": places.GitIsAFile,
    "odd-workspace-name": places.OddWorkspaceName,
    "read-only-state": places.MakesItsStateReadOnly,
    "full-disk": places.FillsItsDisk,
    "orphan": places.LeavesAnOrphan,
    "tampered-file-links-outside": places.TamperedFileLinksOutside,
    "tampered-file-is-a-fifo": places.TamperedFileIsAFifo,
    "tampered-file-is-a-directory": places.TamperedFileIsADirectory,
    "fifo-in-the-sibling-decoy": places.FifoInTheSiblingDecoy,
    "fifo-where-the-watch-looks": places.FifoWhereTheWatchLooks,
    "push-a-huge-sparse-blob": memory.PushesAHugeSparseBlob,
    "alternates-to-dev-zero": memory.AlternatesToDevZero,
    "origin-config-fifo": memory.ConfigIsAFifo,
    "hundred-thousand-refs": memory.HundredThousandRefs,
    "five-hundred-refs": memory.FiveHundredRefs,
    "branch-to-a-huge-commit": memory.BranchToAHugeCommit,
    "push-log-links-outside": memory.PushLogLinksOutside,
    "text-in-requests": text.TextInRequests,
    "journal-text-not-utf8": text.JournalTextNotUtf8,
    "cache-lone-surrogates": text.CacheWithLoneSurrogates,
    "journal-log-lone-surrogates": text.JournalLogWithLoneSurrogates,
    "huge-wait-answer": text.HugeWaitAnswer,
    "keeps-writing-in-the-scratch": writes.KeepsWritingInTheScratch,
    "workspace-root-swapped-at-the-kill": writes.SwapsItsWorkspaceRootAtTheKill,
    "state-swapped-at-the-kill": writes.SwapsItsStateDirectoryAtTheKill,
    "link-at-the-next-journal-log": writes.LinksTheNextJournalLog,
    "environment-rebuilt": procs.RebuildsTheEnvironment,
    "marker-overwritten": procs.OverwritesTheMarker,
    "fork-loop": procs.ForksOnAndOn,
    "exits-non-zero-when-stopped": doctor.ExitsNonZeroWhenStopped,
    "forgets-its-journal-after-the-kill": doctor.ForgetsItsJournalAfterTheKill,
    "own-rows-before-each-checkpoint": readings.OwnRowsBeforeEachCheckpoint,
    "capture-loss-reconciled": readings.CaptureLossReconciled,
    "receipt-failpoint-on-each-resend": readings.ReceiptFailpointOnEachResend,
    "another-tree-on-the-parent": forged.AnotherTreeOnTheParent,
    "receipt-after-pending": forged.ReceiptAfterPending,
    "ref-written-then-reported": forged.WritesTheRefThenReports,
    "branch-deleted-and-reported": forged.DeletesTheBranchAndReports,
    "sleeper-announced-as-tool": forged.AnnouncesASleeperAsTheTool,
    "proxies-its-tool": platforms.ProxiesItsTool,
    "takes-a-5xx-for-a-rejection": labels.TakesA5xxForARejection,
}
ATTACKS.update(
    {
        "wait-reports-the-released-block": settled.ReportsTheReleasedBlockForEver,
        "released-block-with-a-hostile-name": settled.ReleasedBlockWithAHostileName,
    }
)
# The preconditions of a governed side effect (sideeffects.py): each caught by the check of its clause.
ATTACKS.update(
    {
        "leases-read-of-another-branch": sideeffects.ReadsTheLeasesOfAnotherBranch,
        "leases-read-answered-400": sideeffects.ReadsTheLeasesWithATwiceNamedBranch,
        "receipt-again-when-submitted": sideeffects.SendsTheReceiptAgainWhenSubmitted,
    }
)
ATTACKS.update(
    {
        "kept-entry-loops-to-the-root": cleanup_bounds.KeptEntryLoopsToTheRoot,
        "kept-file-becomes-a-fifo": cleanup_bounds.KeptFileBecomesAFifo,
    }
)
ATTACKS.update(
    {
        "renews-another-lease-before-a-resend": resend.RenewsAnotherLeaseBeforeAResend,
        "skips-the-renewal-before-a-receipt-resend": resend.SkipsTheRenewalBeforeAReceiptResend,
        "renews-through-an-encoded-path": resend.RenewsThroughAnEncodedPath,
    }
)
ATTACKS.update(
    {
        "rejection-resent-under-a-fresh-key": answers.ResendsARejectionUnderAFreshKey,
        "conflict-resubmitted-under-a-fresh-key": answers.ResubmitsAConflictUnderAFreshKeyAtRestart,
        "submitted-row-carries-another-body": answers.SubmittedRowCarriesAnotherBody,
        "forges-the-newer-generation": scope_leases.ForgesTheNewerGeneration,
        "lease-id-of-a-megabyte": scope_leases.LeaseIdOfAMegabyte,
    }
)

ATTACKS.update(
    {
        "seq-at-the-integer-limit": attempts.SeqAtTheIntegerLimit,
        "claimed-task-nested-deep": attempts.ClaimedTaskNestedDeep,
    }
)

ATTACKS.update(
    {
        "captures-fifty-thousand-blobs": gaps.CapturesFiftyThousandBlobs,
        "claims-through-another-base-url": gaps.ClaimsThroughAnotherBaseUrl,
    }
)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ATTACKS:
        print(f"usage: python -m tests.fuzz.p1_workers {{{','.join(ATTACKS)}}} [ARG]", file=sys.stderr)
        return 2
    _base.ARGUMENTS[:] = argv[2:]
    if hasattr(signal, "SIGXFSZ"):
        # A write past RLIMIT_FSIZE then fails with EFBIG, as on a full disk, instead of killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    # The adapter imports the worker class when it starts a worker, from the worker module: replace it there.
    setattr(reference, "Worker", ATTACKS[argv[1]])  # noqa: B010
    return adapter.serve(sys.stdin, sys.stdout)
