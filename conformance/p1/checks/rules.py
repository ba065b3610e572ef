"""The table of P1 rules: every check, the clauses it may fail, and when it judges; and the loops that run it.

A rule's check is ``(history, scenario) -> list[Mismatch]``. ``judge`` runs every rule whose conditions hold
over the history of a run that took all its steps; ``halt`` runs the rules marked ``at_stop`` over what the
harness just recorded, so that a scenario stops where a worker did something it cannot go on from. Every
mismatch is stamped with the name of the rule that made it, and the mismatches of one clause are capped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from resumekit.conformance.events import Event
from resumekit.conformance.p1.checks import (
    answers,
    cache,
    campaigns,
    cleanup,
    commit,
    convergence,
    failpoints,
    journal,
    leases,
    phases,
    processes,
    restarts,
    resume,
    scope,
    submission,
    tasks,
)
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch

Check = Callable[[Story, Scenario], list[Mismatch]]
MAX_PER_CLAUSE = 20  # mismatches of one clause a result lists; one more counts the rest


@dataclass(frozen=True)
class Rule:
    """One check of the table: its name (``<section>.<check>``), the clauses it may fail, and when it judges."""

    name: str
    clauses: tuple[str | None, ...]  # None: a finding of no clause, which fails only the scenario's own gates
    check: Check
    at_stop: bool = False  # also judged as the run goes: a failure stops the scenario there
    strict: bool = False  # only in the strict profile
    idle: bool = False  # only when the run ended with the worker idle
    moment: bool = False  # judges what was seen as the run went: judged too when the end could not be read

    @property
    def when(self) -> str:
        """When the rule judges, in words (``resumekit list --checks``)."""
        parts = ["as the run goes and at its end" if self.at_stop else "at the end"]
        if self.moment:
            parts.append("also when the end could not be read")
        if self.idle:
            parts.append("once the worker is idle")
        if self.strict:
            parts.append("strict profile only")
        return "; ".join(parts)


RULES: tuple[Rule, ...] = (
    # what stops a scenario where it stands
    Rule("failpoints.block", ("FPT-1", "FPT-2", "CACHE-2", "SUB-1", "COMMIT-5"), failpoints.block, at_stop=True),
    Rule("failpoints.released", ("ADP-2",), failpoints.released, at_stop=True),
    Rule("journal.readable", ("JNL-1",), journal.readable, at_stop=True),
    Rule("journal.fatal_exits", ("JNL-8",), journal.fatal_exits, at_stop=True),
    Rule("processes.replies", ("ADP-2",), processes.replies, at_stop=True),
    Rule("processes.kit_files", ("ADP-2", "ADP-3"), processes.kit_files, at_stop=True),
    Rule("processes.waits", ("ADP-2", "OUT-2", "WRK-3"), processes.waits, at_stop=True),
    Rule("processes.kill_points", ("ADP-2", None), processes.kill_points, at_stop=True),
    Rule("processes.crashes", ("CRASH-2", "ADP-2"), processes.crashes, at_stop=True),
    Rule("resume.orderly_stops", ("RESUME-5",), resume.orderly_stops, at_stop=True),
    # what was seen as the run went (``moment``: judged even when the end could not be read)
    Rule("commit.unreadable_origins", ("COMMIT-3",), commit.unreadable_origins, moment=True),
    Rule("cleanup.first_requests", ("CLEAN-1",), cleanup.first_requests, moment=True),
    Rule("submission.arrivals", ("SUB-1", "SUB-2"), submission.arrivals, moment=True),
    Rule("commit.receipts", ("COMMIT-5",), commit.receipts, strict=True, moment=True),
    Rule("commit.pushes", ("COMMIT-2",), commit.pushes, moment=True),
    Rule("resume.after_submitted", ("RESUME-2",), resume.after_submitted, moment=True),
    Rule("cache.after_power_cuts", ("CACHE-3",), cache.after_power_cuts, moment=True),
    Rule("processes.tool", ("ADP-2",), processes.tool),
    Rule("processes.watch", ("WRK-5",), processes.watch, moment=True),
    Rule("processes.outlived", ("WRK-5",), processes.outlived, strict=True, moment=True),
    Rule("processes.scratch_left", ("WRK-5",), processes.scratch_left, strict=True, moment=True),
    # what the whole history shows once the run took every step
    Rule("journal.rows", ("JNL-2", "JNL-4", "PHASE-4", "WRK-4"), journal.rows),
    Rule("journal.seq_order", ("JNL-3",), journal.seq_order),
    Rule("journal.one_attempt_at_a_time", ("WRK-2",), journal.one_attempt_at_a_time),
    Rule("journal.failed_writes", ("JNL-7",), journal.failed_writes, moment=True),
    Rule("resume.phases", ("PHASE-2", "PHASE-3", "PHASE-5"), resume.phases),
    Rule("phases.claimed_as_served", ("PHASE-1",), phases.claimed_as_served),
    Rule("phases.commit_done_landed", ("PHASE-1",), phases.commit_done_landed),
    Rule("commit.pushed_once", ("COMMIT-3",), commit.pushed_once),
    Rule("submission.sent", ("KEY-1", "SUB-4"), submission.sent),
    Rule("submission.stored_result", ("TASK-2",), submission.stored_result),
    Rule("tasks.captures", ("TASK-3",), tasks.captures),
    Rule("submission.backing", ("SUB-4", "SUB-7"), submission.backing),
    Rule("submission.exact_match", ("SUB-5",), submission.exact_match),
    Rule("answers.successes", ("SUB-3",), answers.successes),
    Rule("answers.rejections", ("SUB-6",), answers.rejections),
    Rule("convergence.hard_failures", ("OUT-1",), convergence.hard_failures, moment=True),
    Rule("resume.reuse", ("SCOPE-3", "SCOPE-4"), resume.reuse),
    Rule("submission.keys", ("KEY-1", "KEY-2"), submission.keys),
    Rule("leases.lost", ("LEASE-4",), leases.lost),
    Rule("leases.renewals", ("LEASE-3",), leases.renewals),
    Rule("leases.renewed_sends", ("LEASE-3", "SUB-4"), leases.renewed_sends, moment=True),
    Rule("leases.capture_losses", ("LEASE-4",), leases.capture_losses),
    Rule("leases.own_leases", ("LEASE-1",), leases.own_leases),
    Rule("leases.clock_reads", ("LEASE-2",), leases.clock_reads),
    Rule("failpoints.receipt_resends", ("FPT-1",), failpoints.receipt_resends),
    Rule("failpoints.kit_kills", ("FPT-3",), failpoints.kit_kills),
    Rule("processes.kit_paths", ("CP-22",), processes.kit_paths),
    Rule("processes.base_urls", ("WRK-1",), processes.base_urls),
    Rule("commit.origin_pushes", ("COMMIT-2",), commit.origin_pushes),
    Rule("commit.origin_refs", ("COMMIT-3",), commit.origin_refs),
    Rule("commit.ref_reports", ("COMMIT-3",), commit.ref_reports),
    Rule("commit.landed", ("TASK-4",), commit.landed),
    Rule("commit.confirmed_first", ("COMMIT-4",), commit.confirmed_first),
    Rule("commit.lease_read", ("COMMIT-6",), commit.lease_read, strict=True),
    Rule("commit.branch_read", ("COMMIT-1",), commit.branch_read),
    Rule("processes.pacing", ("WRK-3",), processes.pacing),
    Rule("resume.open_attempts", ("RESUME-1",), resume.open_attempts),
    Rule("resume.stops", ("RESUME-5",), resume.stops),
    Rule("leases.released", ("LEASE-5",), leases.released, idle=True),
    Rule("commit.left_open", ("COMMIT-4",), commit.left_open, idle=True),
    Rule("resume.reported", ("PHASE-4",), resume.reported, idle=True),
    Rule("cache.at_idle", ("CACHE-1", "CACHE-4"), cache.at_idle, idle=True),
    Rule("cache.damaged", ("CACHE-4",), cache.damaged, idle=True),
    Rule("journal.settings", ("ADP-1", "JNL-5", "JNL-6"), journal.settings),
    Rule("journal.answered_settings", ("ADP-3",), journal.answered_settings),
    Rule("cleanup.decoys", ("CLEAN-2",), cleanup.decoys),
    Rule("cleanup.boundary", ("CLEAN-3",), cleanup.boundary),
    Rule("cleanup.links", ("CLEAN-4",), cleanup.links),
    Rule("cleanup.active_workspaces", ("CLEAN-5",), cleanup.active_workspaces),
    Rule("cleanup.kept", ("CLEAN-2",), cleanup.kept),
    Rule("restarts.replayed", ("RESUME-3",), restarts.replayed),
    Rule("restarts.served_again", ("RESUME-4",), restarts.served_again),
    Rule("restarts.recovery_cap", ("RESUME-6",), restarts.recovery_cap, strict=True, moment=True),
    Rule("resume.superseded", ("SCOPE-7",), resume.superseded, strict=True),
    Rule("scope.identities", ("SCOPE-1",), scope.identities),
    Rule("scope.bindings", ("SCOPE-2",), scope.bindings),
    Rule("scope.reconciled_sources", ("SCOPE-5",), scope.reconciled_sources, strict=True),
    Rule("scope.stale_generations", ("LEASE-6",), scope.stale_generations, strict=True),
    Rule("resume.deliveries", ("SCOPE-6", "SCOPE-7"), resume.deliveries, strict=True),
    Rule("journal.second_worker_rows", ("JNL-2", "JNL-4", "PHASE-4", "WRK-4"), journal.second_worker_rows),
    Rule("resume.second_worker_phases", ("PHASE-2", "PHASE-3", "PHASE-5"), resume.second_worker_phases),
    Rule("resume.second_worker_reuse", ("SCOPE-3", "SCOPE-4"), resume.second_worker_reuse),
    Rule("submission.second_worker_backing", ("SUB-4", "SUB-7"), submission.second_worker_backing),
    Rule("resume.second_worker_superseded", ("SCOPE-7",), resume.second_worker_superseded, strict=True),
    Rule("scope.second_worker_identities", ("SCOPE-1",), scope.second_worker_identities),
    Rule("leases.second_worker_own_leases", ("LEASE-1",), leases.second_worker_own_leases),
    # an outcome names the scenario's own rule for it, or no clause (convergence.STANDS_FOR)
    Rule("convergence.outcomes", (*convergence.CLAUSES, "OUT-2", None), convergence.outcomes),
)
BY_NAME = {rule.name: rule for rule in RULES}
# The table's own findings: what ``capped`` leaves out of one clause, and a stop no rule judged.
OWN: tuple[tuple[str, tuple[str | None, ...], str], ...] = (
    ("rules.capped", (), "more than 20 findings of one clause: one more counts the rest, under that clause"),
    ("rules.halt", (None,), "a scenario stopped where no rule judges, or that the full history could not record"),
)


def listing() -> list[tuple[str, tuple[str | None, ...], str]]:
    """Every check a P1 mismatch can name (its ``check``): name, the clauses it may fail, and when it judges."""
    return [(rule.name, rule.clauses, rule.when) for rule in RULES] + list(campaigns.CHECKS) + list(OWN)


def _applies(rule: Rule, history: Story) -> bool:
    return (not rule.strict or history.strict) and (not rule.idle or history.idle)


def _stamped(found: Mismatch, name: str, history: Story) -> Mismatch:
    """*found* naming its rule, and seen at the event that recorded the entry it quotes, when the check did not
    say where: a mismatch whose value is one log entry (a push, a request) is marked on the timeline there."""
    event = found.event if found.event is not None else history.seen_at(found.actual)
    return dataclasses.replace(found, check=name, event=event)


def _run(rules: Sequence[Rule], history: Story, scenario: Scenario) -> list[Mismatch]:
    found = []
    for rule in rules:
        if _applies(rule, history):
            found += [_stamped(m, rule.name, history) for m in rule.check(history, scenario)]
    return found


def judge(history: Story, scenario: Scenario) -> list[Mismatch]:
    """Every rule's findings over the history of a run that took all its steps; an empty list is a pass."""
    return _run(RULES, history, scenario)


def named(name: str, history: Story, scenario: Scenario) -> list[Mismatch]:
    """The findings of the one rule called *name*."""
    return _run([BY_NAME[name]], history, scenario)


def judge_moments(history: Story, scenario: Scenario) -> list[Mismatch]:
    """The findings of the rules that judge what was seen as the run went, for a run whose end could not be
    read (an origin the kit could not read safely) or that stopped early."""
    return _run([rule for rule in RULES if rule.moment], history, scenario)


def halt(history: Story, scenario: Scenario) -> list[Mismatch]:
    """The findings of the rules that stop a scenario, over *history* (what the harness just recorded)."""
    return _run([rule for rule in RULES if rule.at_stop], history, scenario)


def halt_at(event: Event | None, profile: str) -> list[Mismatch]:
    """The findings of the rules that stop a scenario about one event the harness just recorded."""
    return [] if event is None else halt(Story([event], profile), Scenario({}, {}, profile))


def unjudged_stop(kind: str, event: Event | None) -> list[Mismatch]:
    """Why a scenario stopped when no rule judged what stopped it: the history was too full to record it (a
    worker that flooded the kit), or the harness stopped at a kind no rule knows, which is the kit's fault."""
    if event is None:
        note = f"the scenario stopped at {kind!r}, which the history, full, could not record"
        return [Mismatch("/history", "room to record why the scenario stopped", kind, None, note, check="rules.halt")]
    note = f"the scenario stopped at {kind!r}, which no rule judges"
    return [Mismatch("/history", "a rule for each stop", kind, None, note, check="rules.halt", event=event.seq)]


def capped(found: Sequence[Mismatch], limit: int = MAX_PER_CLAUSE) -> list[Mismatch]:
    """*found* with at most *limit* mismatches of each clause, in their order, and after the last one listed,
    one that counts those left out: a worker that makes 100,000 refs fails COMMIT-3 in a report a person can
    read, not in 100,000 entries."""
    kept: list[Mismatch] = []
    seen: dict[str | None, int] = {}
    for item in found:
        seen[item.clause] = seen.get(item.clause, 0) + 1
        if seen[item.clause] <= limit:
            kept.append(item)
    for clause, count in seen.items():
        if count > limit:
            at = max(i for i, item in enumerate(kept) if item.clause == clause) + 1
            left = count - limit
            note = f"{left} more mismatch(es) of {clause or 'no clause'} like those above, not listed"
            pointer, expected = f"/{clause or 'mismatches'}/more", f"at most {limit} listed"
            kept.insert(at, Mismatch(pointer, expected, left, clause, note, check="rules.capped"))
    return kept
