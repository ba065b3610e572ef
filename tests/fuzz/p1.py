"""The campaign's ``p1`` part: the kit against hostile P1 workers (``tests/fuzz/p1_workers``).

Each attack runs ``resumekit run --kind p1 --only SCENARIO --jobs 1`` with one hostile worker, in a session
of its own, under a guard timeout, with TMPDIR in the try's own scratch folder, and is classified by
``campaign.classify_p1``: a hostile worker must fail its case naming the clause the attack breaks and what
the kit found (or pass, where what it does is allowed and the worker still does its work). Around every
try the guards of ``parts`` count writes outside, a killed decoy, orphans (by the campaign's tag) and
scratch left; the peak memory of the kit and of the processes it runs for itself (git, the origin's hooks,
its tool), not the adapter's, is read from /proc while it runs (``kit_memory``; the whole tree's elsewhere).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fuzz import guards
from tests.fuzz.campaign import BAD, Tally, classify_p1, p1_clauses_named
from tests.fuzz.kit_memory import KitMemory
from tests.fuzz.parts import Context, _guards_after, _wait
from tests.support import ROOT, python_command

GUARD = 240.0
CAPTURE = "p1-capture-completes"
COMMIT = "p1-commit-completes"
DOCTOR = "p1-killed-while-idle-restarts-and-stops-in-order"  # the scenario resumekit doctor runs
ADAPTER_MODULE = "tests.fuzz.p1_workers"  # the adapter runs this module: its tree is not the kit's (kit_memory)
CACHE = ("CACHE-1", "CACHE-3", "CACHE-4")  # EVID-3 names CACHE-1; a cache found wrong by idle breaks CACHE-4 too
WRITES = "{decoy_file}:{probe}"  # the argument of the attacks on the kit's writes


@dataclass(frozen=True)
class Attack:
    name: str  # the attack of tests.fuzz.p1_workers
    scenario: str
    expect: str = "refuse"  # or "pass"
    clauses: tuple[str, ...] = ()  # one of them must be named when the kit refuses
    argument: str = ""  # may name {decoy_journal}, {decoy_file} or {probe}
    proof: str = ""  # what the probe file must show: "cp-2" (JSON 400s), or a fragment that proves the attack fired
    unlock: bool = False  # the worker may leave immutable folders: clear them before the scratch is counted
    refused: str = ""  # a line the kit refuses errors the case: its message must hold this, and it is clear then


ATTACKS = [
    Attack("cache-fifo", CAPTURE, clauses=CACHE),
    Attack("cache-directory", CAPTURE, clauses=CACHE),
    Attack("cache-link-to-dev-zero", CAPTURE, clauses=CACHE),
    Attack("cache-sparse-gigabyte", CAPTURE, clauses=CACHE),
    Attack("journal-fifo", CAPTURE, clauses=("JNL-1",)),
    Attack("journal-link-outside", CAPTURE, clauses=("JNL-1",), argument="{decoy_journal}"),
    Attack("journal-slow-view", CAPTURE, clauses=("JNL-1",)),
    Attack("journal-null-attempt", CAPTURE, clauses=("JNL-1",)),
    Attack("journal-text-attempt", CAPTURE, clauses=("JNL-1",)),
    Attack("journal-blob-phase", CAPTURE, clauses=("JNL-1",)),
    Attack("claim-flood", "p1-idle-worker-waits-between-claims", clauses=("WRK-3",)),
    # Its requests name no worker's base URL (a request line with no path names none): WRK-1, and each got a JSON 400.
    Attack("malformed-requests", CAPTURE, clauses=("WRK-1",), argument="{probe}", proof="cp-2"),
    Attack("huge-stderr", CAPTURE, expect="pass", argument="{probe}", proof="209715200 bytes to stderr"),
    Attack("endless-stderr", CAPTURE, expect="pass"),
    # The worker abandons an attempt whose lease it still holds and says idle: OUT-2's idle is not reached.
    Attack("git-is-a-file", CAPTURE, clauses=("OUT-2", "LEASE-4")),
    Attack("odd-workspace-name", CAPTURE, clauses=("WRK-4", "JNL-2")),
    Attack("read-only-state", CAPTURE, expect="pass", unlock=True),
    Attack("full-disk", "p1-disk-journal-write-enospc-never-advances", expect="pass", argument="{probe}",
           proof="journal write failed"),
    Attack("orphan", CAPTURE, clauses=("WRK-5",)),
    Attack("tampered-file-links-outside", "p1-replay-ignores-a-tampered-old-workspace", expect="pass",
           argument="{decoy_file}"),
    Attack("tampered-file-is-a-fifo", "p1-replay-ignores-a-tampered-old-workspace", expect="pass"),
    Attack("tampered-file-is-a-directory", "p1-replay-ignores-a-tampered-old-workspace", expect="pass"),
    Attack("fifo-in-the-sibling-decoy", "p1-cleanup-never-enters-a-sibling-named-like-the-root",
           clauses=("CLEAN-2",)),
    Attack("fifo-where-the-watch-looks", "p1-strict-tool-tree-dies-with-the-worker", clauses=("WRK-5",)),
    # memory and time of what the kit reads through git: the origin, its hook, the mismatches it lists
    Attack("push-a-huge-sparse-blob", COMMIT, clauses=("COMMIT-2",)),
    Attack("alternates-to-dev-zero", CAPTURE, clauses=("COMMIT-3",)),
    Attack("origin-config-fifo", CAPTURE, clauses=("COMMIT-3",)),
    Attack("hundred-thousand-refs", CAPTURE, clauses=("COMMIT-3",)),
    Attack("five-hundred-refs", CAPTURE, clauses=("COMMIT-3",)),
    Attack("branch-to-a-huge-commit", COMMIT, clauses=("COMMIT-3",)),
    Attack("push-log-links-outside", COMMIT, clauses=("COMMIT-3",), argument="{decoy_file}"),
    Attack("text-in-requests", CAPTURE, expect="pass", argument="{probe}", proof="every request answered in JSON"),
    Attack("journal-text-not-utf8", CAPTURE, clauses=("JNL-1",)),
    Attack("cache-lone-surrogates", CAPTURE, clauses=CACHE),
    Attack("journal-log-lone-surrogates", CAPTURE, clauses=("JNL-5", "JNL-6")),
    Attack("huge-wait-answer", CAPTURE, refused="more than the 1000000 a message may hold"),
    # The kit's own writes (tests/fuzz/p1_workers/writes.py): nothing through a link, TMPDIR's mode kept.
    Attack("keeps-writing-in-the-scratch", CAPTURE, clauses=("WRK-5",), argument=WRITES, proof="daemons"),
    Attack("workspace-root-swapped-at-the-kill", "p1-replay-ignores-a-tampered-old-workspace", expect="pass",
           argument=WRITES, proof="SwapsItsWorkspaceRootAtTheKill"),
    Attack("state-swapped-at-the-kill", "p1-cache-garbage-changes-nothing", expect="pass", argument=WRITES,
           proof="SwapsItsStateDirectoryAtTheKill"),
    Attack("link-at-the-next-journal-log", "p1-cache-garbage-changes-nothing", expect="pass", argument=WRITES,
           proof="journal-log"),
    # Daemons the case's marker does not show: the case's subreaper adopts them (Linux).
    Attack("environment-rebuilt", CAPTURE, clauses=("WRK-5",), argument="{probe}", proof="daemon"),
    Attack("marker-overwritten", CAPTURE, clauses=("WRK-5",), argument="{probe}", proof="erased"),
    Attack("fork-loop", CAPTURE, clauses=("WRK-5",), argument="{probe}", proof="daemon"),
    # The scenario resumekit doctor runs (tests/fuzz/p1_workers/doctor.py): a bad stop, a journal gone at the restart.
    Attack("exits-non-zero-when-stopped", DOCTOR, clauses=("RESUME-5",)),
    Attack("forgets-its-journal-after-the-kill", DOCTOR, clauses=("JNL-4",)),
    # The readings p1.md settles (tests/fuzz/p1_workers/readings.py): rows of a table of the worker's own shift
    # the disk fault's hits to earlier commits, which the kit allows; the other side of two readings it refuses.
    Attack("own-rows-before-each-checkpoint", "p1-strict-disk-fault-hits-count-the-recoveries-row", expect="pass",
           argument="{probe}", proof="own rows"),
    Attack("capture-loss-reconciled", "p1-capture-lease-lost-at-the-pending-boundary-abandons-the-attempt",
           clauses=("LEASE-4",)),
    Attack("receipt-failpoint-on-each-resend", "p1-receipt-resent-passes-no-failpoint", clauses=("FPT-1",)),
]
# The block p1.worker.continue released, reported for ever (tests/fuzz/p1_workers/settled.py, p1.md 0.5 G20).
RELEASED = "p1-continue-releases-the-block-before-it-answers"
ATTACKS += [
    Attack("wait-reports-the-released-block", RELEASED, clauses=("ADP-2",)),
    # The object where a name belongs breaks the wait's schema: the case errors, saying where, in a bounded message.
    Attack("released-block-with-a-hostile-name", RELEASED, refused="breaks the protocol schema at /result/failpoint"),
    # Stories that pass and are false (tests/fuzz/p1_workers/forged.py): what landed, when the receipt was
    # confirmed, and reports on the kit's own paths made with the secret the worker read in the origin's policy.
    Attack("another-tree-on-the-parent", COMMIT, clauses=("TASK-4",)),
    Attack("receipt-after-pending", COMMIT, clauses=("COMMIT-4",)),
    Attack("ref-written-then-reported", COMMIT, clauses=("COMMIT-3",)),
    Attack("branch-deleted-and-reported", CAPTURE, clauses=("COMMIT-3",)),
    Attack("sleeper-announced-as-tool", "p1-tool-runs-to-its-end-and-changes-no-result", clauses=("ADP-2",)),
    # The worker is its tool's proxy: the kit's announcement goes straight to 127.0.0.1, never through it.
    Attack("proxies-its-tool", "p1-tool-runs-to-its-end-and-changes-no-result", expect="pass", argument="{probe}",
           proof="armed"),
    Attack("takes-a-5xx-for-a-rejection", "p1-submit-5xx-twice-then-success", clauses=("SUB-4",)),
]
# The preconditions of a governed side effect (tests/fuzz/p1_workers/sideeffects.py): every outcome as expected.
ATTACKS += [
    Attack("leases-read-of-another-branch", COMMIT, clauses=("COMMIT-6",)),
    Attack("leases-read-answered-400", COMMIT, clauses=("COMMIT-6",)),
    Attack("receipt-again-when-submitted", COMMIT, clauses=("RESUME-2",)),
]
# Traps in the entries without the task- prefix that the kit reads around cleanup (p1_workers/cleanup_bounds.py).
NESTED = "p1-cleanup-leaves-a-task-directory-nested-in-another-entry"
ATTACKS += [
    Attack("kept-entry-loops-to-the-root", NESTED, clauses=("CLEAN-2",)),
    Attack("kept-file-becomes-a-fifo", NESTED, clauses=("CLEAN-2",)),
]
# The renewal before each governed send (tests/fuzz/p1_workers/resend.py): a resend after a renewal that renewed
# another lease, a receipt resent with no renewal, and a renewal whose path encodes every byte of the lease id.
ATTACKS += [
    Attack("renews-another-lease-before-a-resend", "p1-submit-5xx-twice-then-success", clauses=("SUB-4",)),
    Attack("skips-the-renewal-before-a-receipt-resend", "p1-receipt-resent-passes-no-failpoint",
           clauses=("LEASE-3",)),
    Attack("renews-through-an-encoded-path", "p1-submit-5xx-twice-then-success", expect="pass", argument="{probe}",
           proof="encoded"),
]
# What a submission's answer means (tests/fuzz/p1_workers/answers.py): a rejection or a hard failure sent again
# under a fresh key, and a result_submitted row consistent in itself but not its result_pending row's.
ATTACKS += [
    Attack("rejection-resent-under-a-fresh-key", "p1-submit-400-is-rejected-and-not-sent-again", clauses=("SUB-6",)),
    Attack("conflict-resubmitted-under-a-fresh-key", "p1-restart-after-a-conflict-submits-nothing-more",
           clauses=("OUT-1",)),
    Attack("submitted-row-carries-another-body", CAPTURE, clauses=("SUB-3",)),
]
# Identity, scope and the WriterLease (tests/fuzz/p1_workers/scope_leases.py): a stale attempt's rows that name the
# branch's newer generation, and a lease id of a megabyte, each named by its clause in a bounded report.
ATTACKS += [
    Attack("forges-the-newer-generation", "p1-strict-stale-generation-is-fenced-by-the-worker",
           clauses=("SCOPE-1", "LEASE-6")),
    Attack("lease-id-of-a-megabyte", CAPTURE, clauses=("LEASE-1",)),
]

# The rows the kit reads for how attempts follow each other (tests/fuzz/p1_workers/attempts.py): seqs SQLite picks
# at random after one at its largest integer, and a claimed row's task nested deeper than a JSON reader recurses.
ATTACKS += [
    Attack("seq-at-the-integer-limit", CAPTURE, clauses=("JNL-3",)),
    Attack("claimed-task-nested-deep", CAPTURE, clauses=("PHASE-1",)),
]

# The last clauses the audit found with no check of their own (tests/fuzz/p1_workers/gaps.py): a capture body of
# 50,000 blobs the tree lacks, and a claim through a base URL the kit gave no process.
ATTACKS += [
    Attack("captures-fifty-thousand-blobs", CAPTURE, clauses=("TASK-3",)),
    Attack("claims-through-another-base-url", CAPTURE, clauses=("WRK-1",)),
]

def decoy_journal(context: Context) -> Path:
    """A SQLite file in WAL mode in the campaign's decoy tree, made once and the tree's checksum taken again:
    a reader that follows a link to it leaves a -shm or -wal beside it, which the checksum tells."""
    path = context.decoy_tree / "journal" / "checkpoints.sqlite3"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL)")
            db.execute("INSERT INTO checkpoints (task_id) VALUES ('a-decoy-row')")
        context.decoy_digest = guards.tree_digest(context.decoy_tree)
    return path


def run_attack(context: Context, attack: Attack, folder: Path, guard: float = GUARD) -> dict[str, Any]:
    """Run the kit on one hostile worker: its category, reason, the clauses named, seconds and peak memory."""
    folder.mkdir(parents=True)
    probe = folder / "probe.jsonl"
    argument = attack.argument.format(
        decoy_journal=decoy_journal(context), decoy_file=context.decoy_tree / "precious.jsonl", probe=probe
    )
    adapter = python_command("-m", "tests.fuzz.p1_workers", attack.name, *([argument] if argument else []))
    report = folder / "report.json"
    command = [
        sys.executable, "-m", "resumekit.conformance", "run", "-q", "--report-json", str(report),
        "--adapter", adapter, "--kind", "p1", "--only", attack.scenario, "--jobs", "1",
    ]
    began = time.monotonic()
    with open(folder / "output.txt", "wb") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=context.env(folder / "tmp"),
            start_new_session=True,
        )
        with KitMemory(process.pid, ADAPTER_MODULE) as memory:
            code, tree_peak = _wait(process, guard)
    # The kit's own processes where /proc shows them; elsewhere the whole tree's, the adapter's included.
    peak = memory.peak_kb if memory.available else tree_peak
    seconds = time.monotonic() - began
    output = (folder / "output.txt").read_text(encoding="utf-8", errors="replace")
    document = _report(report)
    category, reason = classify_p1(code, output, document, attack.expect, attack.clauses)
    if attack.refused and category == "unclear error" and attack.refused in reason:
        category = "clear error"  # the case errored on the line the kit refused, and says what it holds
    if attack.proof == "cp-2" and category not in ("traceback", "hang"):
        category, reason = _judge_probe(probe, category, reason)
    elif attack.proof and attack.proof not in _text(probe):
        raise RuntimeError(f"the campaign itself failed: {attack.name} never fired (no {attack.proof!r} in its probe)")
    if attack.unlock:
        unlock(folder)
    return {"category": category, "reason": reason, "seconds": seconds, "peakKb": peak, "treePeakKb": tree_peak,
            "largestKb": memory.largest_kb, "outputBytes": len(output.encode("utf-8")),
            "named": p1_clauses_named(document)}


def _report(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _judge_probe(probe: Path, category: str, reason: str) -> tuple[str, str]:
    """CP-2: every malformed request the worker sent got a JSON 400 ``bad_request`` with ``now_ms``."""
    try:
        answers = [json.loads(line) for line in probe.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError) as error:
        return "unclear error", f"the attack wrote no probe ({error}): it never reached an idle claim"
    wrong = [a for a in answers if not _bad_request(a)]
    if wrong:
        said = "; ".join(f"{a['sent']}: {a.get('status') or a.get('error')} {a.get('body', '')[:120]!r}" for a in wrong)
        return "accepted wrongly", f"CP-2: {len(wrong)} of {len(answers)} malformed requests got no JSON 400: {said}"
    return category, reason


def _bad_request(answer: dict[str, Any]) -> bool:
    try:
        body = json.loads(answer.get("body", ""))
    except ValueError:
        return False
    return (answer.get("status") == "400" and answer.get("contentType", "").startswith("application/json")
            and isinstance(body, dict) and body.get("error") == "bad_request" and isinstance(body.get("now_ms"), int))


def unlock(folder: Path) -> None:
    """Clear what a worker made immutable or read-only below *folder*, so that it can be counted and removed."""
    if shutil.which("chattr") and hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-f", "-i", str(folder)], capture_output=True, check=False, timeout=60)
    for current, dirs, _ in os.walk(folder):
        for name in dirs:
            # Only the owner's bits are given back: forcing a mode would change the try's own TMPDIR (1777, below
            # *folder* too), and the campaign would then blame the kit for a change it made itself.
            with contextlib.suppress(OSError):
                mode = stat.S_IMODE(Path(current, name).lstat().st_mode)
                if mode & stat.S_IRWXU != stat.S_IRWXU:
                    os.chmod(Path(current, name), mode | stat.S_IRWXU, follow_symlinks=False)


def selected(only: list[str] | None) -> list[Attack]:
    return [a for a in ATTACKS if not only or any(fnmatch.fnmatchcase(a.name, glob) for glob in only)]


def p1_part(context: Context, tally: Tally, arguments: argparse.Namespace) -> None:
    if sys.platform == "win32" or shutil.which("git") is None:
        print("  p1: skipped (the attacks need POSIX FIFOs and links, and the scenarios need git)")
        return
    for number, attack in enumerate(selected(arguments.only)):
        folder = context.work / "p1" / f"{number}-{attack.name}"
        before = (tally.outside_writes, tally.orphans, tally.scratch_left, tally.unrelated_kills)
        outcome = run_attack(context, attack, folder, arguments.p1_guard)
        category, seconds, peak = outcome["category"], outcome["seconds"], outcome["peakKb"]
        tally.add(category, attack.name, outcome["reason"], seconds=round(seconds, 1), scenario=attack.scenario)
        tally.peak_kb = max(tally.peak_kb, peak)
        _guards_after(context, tally, folder / "tmp", attack.name)
        after = (tally.outside_writes, tally.orphans, tally.scratch_left, tally.unrelated_kills)
        extra = dict(zip(("outsideWrites", "orphans", "scratchLeft", "unrelatedKills"),
                         (b - a for a, b in zip(before, after, strict=True)), strict=True))
        tally.tries.append({"attack": attack.name, "scenario": attack.scenario, "expected": _expected(attack),
                            "category": category, "seconds": round(seconds, 1), "peakMb": round(peak / 1024),
                            "treePeakMb": round(outcome["treePeakKb"] / 1024), "outputBytes": outcome["outputBytes"],
                            "named": outcome["named"], "reason": outcome["reason"][:300], **extra})
        print(f"  p1: {attack.name:<28} {category:<20} {seconds:6.1f} s  {peak / 1024:5.0f} MB kit  "
              f"{outcome['treePeakKb'] / 1024:5.0f} MB tree  {outcome['outputBytes']:>7} B out  "
              f"{','.join(outcome['named'][:4]) or '-'}", flush=True)
        if category not in BAD and not any(extra.values()):
            shutil.rmtree(folder, ignore_errors=True)
    print()
    print(format_tries(tally.tries))


def _expected(attack: Attack) -> str:
    return "pass" if attack.expect == "pass" else "refuse: " + ("/".join(attack.clauses) or "the line")


def format_tries(tries: list[dict[str, Any]]) -> str:
    """One row per attack: what it ran, what was expected, and what the kit did."""
    header = ["attack", "scenario", "expected", "category", "s", "peak MB", "clauses named", "outside", "orphans"]
    rows = [[t["attack"], t["scenario"], t["expected"], t["category"], f"{t['seconds']:.0f}", str(t["peakMb"]),
             ",".join(t["named"][:3]) or "-", str(t["outsideWrites"]), str(t["orphans"])] for t in tries]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join(lines)
