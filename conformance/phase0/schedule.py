"""The seeded random crash schedule: kill the writer at random moments while it appends.

Every acknowledged row must survive every kill (CRASH-1), and a row in flight at the kill either
landed or never will. Under power loss every kill is followed by a power cut in a mode drawn from
the stream's generator, and each acknowledgement is checked against the ledger's durable view.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import wait_pid_gone
from resumekit.conformance.adapters import is_integer
from resumekit.conformance.fault_models import POWER_LOSS, PROCESS_CRASH, Abort
from resumekit.conformance.phase0 import grades, plan_checks, vocabulary
from resumekit.conformance.phase0.cases import ScheduleCase
from resumekit.conformance.phase0.session import (
    Factory,
    Session,
    ids,
    kill_if_running,
    make_workspace,
    same_events,
    scratch_folder,
)
from resumekit.conformance.powerloss import PowerLoss
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import result_for

KillProgress = Callable[[int, int], object]  # told (kills done, kills in all) as the schedule goes


# The schedule's kills are dealt to this many streams, each with a ledger of its own and a random
# generator seeded from the run's seed and its number: the same seed makes the same kills whatever
# --jobs is, and with --jobs the streams run side by side.
STREAMS = 4

# Checked on every schedule beside the clauses its fixture cites: the row counts of the acknowledgements
# (STORE-1), the workspace across every read and plan (STORE-6), and the final plans, field by field,
# against what the spec demands of the final ledger (each field's clause, plan_checks.FIELD_CLAUSES).
ALWAYS_CHECKED = ("STORE-1", "STORE-6", "PURE-2", *dict.fromkeys(plan_checks.FIELD_CLAUSES.values()))


@dataclasses.dataclass
class _Tally:
    """What the streams of one schedule saw, for the case's message."""

    kills: int = 0
    in_flight: int = 0  # kills that came before the last append was acknowledged
    landed: int = 0  # of those, the rows that were on disk anyway
    rows: int = 0  # in the final ledgers
    cut_notes: list[str] = dataclasses.field(default_factory=list)  # under power loss: each cut's mode
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def stream_kills(kills: int, streams: int = STREAMS) -> list[int]:
    """The kills of each stream: *kills* dealt as evenly as possible, at least one stream."""
    count = max(1, min(streams, kills))
    return [kills // count + (1 if number < kills % count else 0) for number in range(count)]


def run_schedule(
    case: ScheduleCase,
    factory: Factory,
    profile: str,
    *,
    seed: int,
    kills: int,
    replay: str,
    on_kill: KillProgress | None = None,
    jobs: int = 1,
    power: PowerLoss | None = None,
) -> CaseResult:
    """Kill the writer at seeded random moments while it appends; every acknowledged row must survive.

    Under power loss every kill is followed by a cut in a mode drawn from the stream's generator.

    The kills are dealt to up to ``STREAMS`` streams (``stream_kills``), each a writer and a ledger of
    its own, run on up to *jobs* threads. The first stream that fails, in stream order, is the result.
    """
    refused = _unjudgeable(case)
    if refused is not None:
        return refused
    shares = stream_kills(kills)
    tally = _Tally()

    def killed() -> None:
        with tally.lock:
            tally.kills += 1
            done = tally.kills
        if on_kill is not None:
            on_kill(done, kills)

    def stream(number: int) -> CaseResult | None:
        rng = random.Random(f"{seed}/{number}")
        return _run_stream(case, factory, profile, rng=rng, kills=shares[number], replay=replay,
                           on_kill=killed, tally=tally, power=power)  # fmt: skip

    if on_kill is not None:
        on_kill(0, kills)
    outcomes = _run_streams(stream, len(shares), jobs)
    for number, outcome in enumerate(outcomes):
        if outcome is not None:
            prefix = f"stream {number + 1} of {len(shares)} (its own ledger): " if len(shares) > 1 else ""
            return _cited(dataclasses.replace(outcome, message=prefix + (outcome.message or "")))
    return _passed(case, kills, len(shares), tally, replay, power)


def _unjudgeable(case: ScheduleCase) -> CaseResult | None:
    """An errored result when the kit cannot say what plan the spec demands of the template's rows, else None."""
    if plan_checks.plain_prefix_expectation([_stream_event(case.template, n) for n in range(2)]) is not None:
        return None
    message = (
        f"the template of {case.id!r} makes rows with tool facts or of several runs: the kit knows "
        "the plan the spec demands of a stream only for rows without a function call or response"
    )
    return _cited(result_for(case, Outcome.ERRORED, message=message))


def _passed(
    case: ScheduleCase, kills: int, streams: int, tally: _Tally, replay: str, power: PowerLoss | None
) -> CaseResult:
    """The schedule's passing result, its message saying what every kill and stream showed."""
    ledgers = f" over {streams} ledgers" if streams > 1 else ""
    cuts = f" and power cuts ({_cut_counts(tally.cut_notes)})" if power is not None else ""
    passed = result_for(
        case,
        Outcome.PASSED,
        fault_model=PROCESS_CRASH if power is None else POWER_LOSS,
        replay=replay,
        message=(
            f"{kills} kills{ledgers}{cuts}, {tally.in_flight} of them before the last append was acknowledged "
            f"({tally.landed} of those rows had landed anyway); "
            f"the final ledgers hold {tally.rows} rows, every acknowledged one among them; every acknowledgement "
            "counted its ledger's rows, no read or plan changed the workspace, and each final ledger's two plans "
            "were alike and the plan its rows demand"
        ),
    )
    return _cited(passed)


def _cited(result: CaseResult) -> CaseResult:
    """*result* citing, beside its fixture's clauses, every clause the schedule checks (ALWAYS_CHECKED)."""
    extra = tuple(clause for clause in ALWAYS_CHECKED if clause not in result.clauses)
    return dataclasses.replace(result, clauses=result.clauses + extra)


_StreamRun = Callable[[int], CaseResult | None]  # runs stream *number*: its failed result, or None


def _run_streams(stream: _StreamRun, count: int, jobs: int) -> list[CaseResult | None]:
    """The outcome of each of *count* streams; one at a time, the streams after the first failure are not run."""
    outcomes: list[CaseResult | None] = [None] * count
    if jobs <= 1 or count == 1:
        for number in range(count):
            outcomes[number] = stream(number)
            if outcomes[number] is not None:
                break
        return outcomes
    pending = list(range(count))
    taken = threading.Lock()
    raised: list[BaseException] = []
    case_thread = threading.current_thread()

    def work() -> None:
        _files.works_for(case_thread)  # its folders go, and it stops, when the run interrupts the case
        while True:
            with taken:
                if not pending or raised:
                    return
                number = pending.pop(0)
            try:
                outcomes[number] = stream(number)
            except BaseException as error:  # a bug of the kit's: the caller raises it, as with one job
                with taken:
                    raised.append(error)
                return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(min(jobs, count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if raised:
        raise raised[0]
    return outcomes


def _run_stream(
    case: ScheduleCase,
    factory: Factory,
    profile: str,
    *,
    rng: random.Random,
    kills: int,
    replay: str,
    on_kill: Callable[[], object],
    tally: _Tally,
    power: PowerLoss | None = None,
) -> CaseResult | None:
    """One stream of the schedule: *kills* kills of one writer of one ledger; None when it held."""
    session = Session(case, factory, profile, power)
    writer = _Writer(session, case.template, replay)
    try:
        with scratch_folder("schedule", session) as scratch:
            workspace = make_workspace(scratch, session)
            for cycle in range(kills):
                marker = scratch / f"finally-{cycle}.marker"
                writer.reopen(workspace, cycle)
                pid = session.arm(marker)
                appends = rng.randint(0, 6)
                # A fraction of a typical append's round trip: most kills land inside the last append
                # (before its write, between write and sync, before the acknowledgement), some after.
                fraction = rng.uniform(0.0, 1.5)
                writer.append(appends)
                writer.kill_in_append(pid, fraction)
                if power is not None:
                    session.power_cut(seed=rng.randrange(2**32), mode=rng.choice(power.modes))
                if marker.exists():
                    raise Abort(
                        session.fail(
                            "the finally marker was written after a kill",
                            Mismatch("/marker", "absent", "present", "CRASH-2"),
                            replay=replay,
                        )
                    )
                on_kill()
            rows = writer.final_rows(workspace, profile)
            with tally.lock:
                tally.in_flight += writer.in_flight_kills
                tally.landed += writer.landed_unacknowledged
                tally.rows += rows
                tally.cut_notes.extend(session.cut_notes)
            return None
    except Abort as abort:
        return session.told(abort.result)
    finally:
        session.close()


@dataclasses.dataclass
class _Writer:
    """One stream's writer and what it was sent and told: the state each kill hands to the next reopening."""

    session: Session
    template: Mapping[str, Any]
    replay: str
    sent: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    acknowledged: int = 0
    latencies: list[float] = dataclasses.field(default_factory=list)  # seconds from an append to its acknowledgement
    in_flight_kills: int = 0
    landed_unacknowledged: int = 0

    def reopen(self, workspace: Path, cycle: int) -> None:
        """Start and open the store after kill *cycle*; its ledger must be an acknowledged prefix of what was sent."""
        session = self.session
        session.start()
        session.open(workspace)
        events = self._read_prefix(workspace, f"after {cycle} kill(s) the reopened ledger", settle=False)
        if len(events) > self.acknowledged:
            self.landed_unacknowledged += 1
        del self.sent[len(events) :]  # the row in flight at the kill either landed or never will
        self.acknowledged = len(self.sent)

    def _read_prefix(self, workspace: Path, what: str, *, settle: bool) -> list[Any]:
        """Read the open store: an acknowledged prefix of what was sent (CRASH-1), read without a change (STORE-6)."""
        session = self.session
        # From just after open, the read may change nothing (STORE-6). Without *settle* a touch within one
        # tick of the clock may go unseen; the final reopening settles, and sees it.
        before = _files.snapshot(workspace, settle=settle)
        read = session.read()
        events = read.get("events") if read.get("status") == "ok" else None
        if (
            events is None
            or not (self.acknowledged <= len(events) <= len(self.sent))
            or not same_events(self.sent[: len(events)], events)
        ):
            raise Abort(
                session.fail(
                    f"{what} is not an acknowledged prefix of what was sent",
                    Mismatch(
                        "/read/events",
                        f"the first {self.acknowledged} to {len(self.sent)} rows sent",
                        ids(events) if events is not None else read,
                        "CRASH-1",
                    ),
                    replay=self.replay,
                )
            )
        self._unchanged(workspace, before, f"{what}'s read")
        return list(events)

    def _unchanged(self, workspace: Path, before: _files.Snapshot, what: str) -> None:
        """Fail the stream when the workspace differs from *before* (STORE-6)."""
        changes = _files.describe_changes(before, _files.snapshot(workspace))
        if changes:
            raise Abort(
                self.session.fail(
                    f"{what} changed the workspace: {', '.join(changes[:3])}",
                    Mismatch("/workspace", "unchanged", changes, "STORE-6", f"{what} changed the workspace"),
                    replay=self.replay,
                )
            )

    def _counted(self, rows: Any, what: str) -> Mismatch | None:
        """The mismatch when an acknowledgement's *rows* is not the rows the ledger now holds (STORE-1)."""
        if is_integer(rows) and rows == len(self.sent):
            return None
        return Mismatch(
            f"/append/{len(self.sent) - 1}/rows",
            len(self.sent),
            rows,
            "STORE-1",
            f"{what} counts the committed rows the ledger then holds: the {len(self.sent) - 1} before it and its own",
        )

    def append(self, count: int) -> None:
        """Append *count* rows, each acknowledged (and, under power loss, durable) before the next."""
        for _ in range(count):
            event = _stream_event(self.template, len(self.sent))
            self.sent.append(event)
            began = time.perf_counter()
            rows = self.session.ask("phase0.store.append", event=event).get("rows")
            self.latencies.append(time.perf_counter() - began)
            miscount = self._counted(rows, "an acknowledgement")
            if miscount is not None:
                raise Abort(
                    self.session.fail(
                        f"the acknowledgement of row {len(self.sent)} counts {rows!r} row(s)",
                        miscount,
                        replay=self.replay,
                    )
                )
            self.acknowledged = len(self.sent)
            self.session.acknowledged(self.acknowledged, replay=self.replay)

    def kill_in_append(self, pid: int, fraction: float) -> None:
        """Send one more append and kill *pid* *fraction* of a typical append's round trip after sending it."""
        session = self.session
        assert session.adapter is not None and session.adapter.process is not None
        typical = statistics.median(self.latencies[-50:]) if self.latencies else 0.002
        event = _stream_event(self.template, len(self.sent))
        self.sent.append(event)
        timer = threading.Timer(fraction * typical, kill_if_running, args=(session.adapter.process, pid, session.layer))
        session.history.record("kit", "kill-armed", pid=pid, afterSeconds=round(fraction * typical, 6))
        timer.start()
        reply = session.adapter.request("phase0.store.append", event=event)
        timer.join()
        answer = reply.value if reply.outcome == "result" else reply.message
        sent = {"event": event}
        session.history.record("impl", "phase0.store.append", sent=sent, outcome=reply.outcome, answer=answer)
        acked_in_flight = reply.outcome == "result"
        miscount = None
        if acked_in_flight:
            self.acknowledged = len(self.sent)
            rows = reply.value.get("rows") if isinstance(reply.value, dict) else reply.value
            miscount = self._counted(rows, "the acknowledgement that came before the kill")
        else:
            self.in_flight_kills += 1
        session.adapter.kill()
        if not wait_pid_gone(pid, timeout=10.0):
            raise Abort(session.fail(f"pid {pid} still runs 10 s after it was killed", replay=self.replay))
        if miscount is not None:
            raise Abort(
                session.fail(
                    f"the acknowledgement of row {len(self.sent)} before the kill counts {miscount.actual!r} row(s)",
                    miscount,
                    replay=self.replay,
                )
            )
        if acked_in_flight and session.layer is not None:
            # The process is dead; the layer still answers what a cut would leave.
            session.acknowledged(self.acknowledged, replay=self.replay, locate=False)
        session.adapter = None

    def final_rows(self, workspace: Path, profile: str) -> int:
        """Reopen once more and count the final ledger's rows: every acknowledged one kept, two plans alike and right.

        The plans must be the one the spec demands of the rows read (plan_checks.plain_prefix_expectation),
        and neither the read nor the plans may change the workspace (STORE-6).
        """
        session = self.session
        session.start()
        session.open(workspace)
        before = _files.snapshot(workspace, settle=True)
        events = self._read_prefix(workspace, "the final ledger", settle=False)
        plans = [session.plan(profile, len(events), replay=self.replay) for _ in range(2)]
        self._unchanged(workspace, before, "the final ledger's read and two plans")
        mismatches = plan_checks.compare_determinism(plans[0], plans[1])
        committed = self.sent[: len(events)]
        expect = plan_checks.plain_prefix_expectation(committed)
        assert expect is not None  # run_schedule refuses a template without one
        mismatches += vocabulary.judge_plan(committed, expect, plans[0])
        if mismatches:
            raise Abort(
                session.fail(
                    f"the plans of the final ledger of {len(events)} rows are not the plan its rows demand",
                    *mismatches,
                    replay=self.replay,
                    grade=grades.grade(committed, expect, plans),
                )
            )
        return len(events)


def _stream_event(template: Mapping[str, Any], index: int) -> dict[str, Any]:
    event = dict(template)
    event["id"] = f"row-{index:05d}"
    event["ts"] = template.get("ts", 0) + index
    return event


def _cut_counts(notes: Sequence[str]) -> str:
    counted: dict[str, int] = {}
    for note in notes:
        mode = note.split(":", 1)[0]
        counted[mode] = counted.get(mode, 0) + 1
    return ", ".join(f"{count} {mode}" for mode, count in sorted(counted.items()))


__all__ = ["STREAMS", "KillProgress", "run_schedule", "stream_kills"]
