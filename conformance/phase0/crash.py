"""The crash harness: real processes, killed for real, and the ledger they leave behind.

Fault model: a process crash. The writer is killed with SIGKILL (TerminateProcess on Windows), so
data it handed to the operating system survives and nothing in its own buffers does. This proves
recovery from a process crash, not durability across power loss or a kernel crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance._process import LineProcess, NotInTree, plausible_pid, wait_pid_gone
from resumekit.conformance.adapters import AdapterStartError, ProcessAdapter, Reply, is_integer
from resumekit.conformance.canonical import canonical_json, same_json
from resumekit.conformance.fixtures import Case, CrashCase, LedgerFaultCase, ScheduleCase
from resumekit.conformance.phase0 import check, faults
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, plan_problem, result_for, start_failed

FAULT_MODEL = (
    "process crash (TerminateProcess); not power loss" if os.name == "nt" else "process crash (SIGKILL); not power loss"
)
Factory = Callable[[], ProcessAdapter]
SESSION_ID, RUN_ID = "session-1", "run-1"


class _Abort(Exception):
    """Ends a case early with its result."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.message or result.outcome.value)
        self.result = result


class _Session:
    """One case's dealings with implementation processes, turning every bad reply into _Abort."""

    def __init__(self, case: Case, factory: Factory, profile: str) -> None:
        self.case, self.factory, self.profile = case, factory, profile
        self.adapter: ProcessAdapter | None = None

    def start(self) -> ProcessAdapter:
        self.adapter = self.factory()
        try:
            self.adapter.start()
        except AdapterStartError as error:
            raise _Abort(start_failed(self.case, error, fault_model=FAULT_MODEL)) from None
        return self.adapter

    def ask(self, cmd: str, **fields: Any) -> Any:
        assert self.adapter is not None
        reply: Reply = self.adapter.request(cmd, **fields)
        if reply.outcome == "skipped":
            raise _Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message, fault_model=FAULT_MODEL))
        if reply.outcome != "result":
            raise _Abort(_with_model(errored(self.case, reply, cmd)))
        if not isinstance(reply.value, dict):
            raise _Abort(self.fail(f"{cmd} answered {reply.value!r}, not an object"))
        return reply.value

    def fail(self, message: str, *mismatches: Mismatch, **fields: Any) -> CaseResult:
        tail = self.adapter.stderr_tail() if self.adapter else ""
        return result_for(
            self.case,
            Outcome.FAILED,
            message=message,
            mismatches=mismatches or (Mismatch("", None, None, None, message),),
            fault_model=FAULT_MODEL,
            stderr_tail=tail or None,
            **fields,
        )

    def arm(self, marker: Path) -> int:
        """Arm the exit marker and return the pid the implementation says holds the store.

        The kit will kill that pid, so it must be the adapter process or one of its descendants.
        """
        pid = self.ask("phase0.crash.arm", marker=str(marker)).get("pid")
        assert self.adapter is not None and self.adapter.process is not None
        if not plausible_pid(pid):
            raise _Abort(
                self.fail(f"phase0.crash.arm reported pid {pid!r}, which the kit will not kill: not a process id")
            )
        if not self.adapter.process.owns(pid):
            raise _Abort(
                self.fail(
                    f"phase0.crash.arm reported pid {pid!r}, which the kit will not kill: "
                    f"pid {pid} is not the adapter or one of its descendants"
                )
            )
        return int(pid)

    def open(self, workspace: Path) -> None:
        self.ask("phase0.store.open", workspace=str(workspace), sessionId=SESSION_ID, runId=RUN_ID)

    def read(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.ask("phase0.store.read")
        return answer

    def close(self) -> None:
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None

    def crash(self, pid: int) -> None:
        """Kill the pid the implementation named, and the process the kit started, and reap both."""
        assert self.adapter is not None and self.adapter.process is not None
        process = self.adapter.process
        try:
            process.kill_member(pid)
        except NotInTree as error:
            raise _Abort(self.fail(f"the kit will not kill pid {pid}: {error}")) from None
        except OSError as error:
            raise _Abort(self.fail(f"cannot kill pid {pid} that phase0.crash.arm reported: {error}")) from None
        if pid != process.pid:
            process.kill()  # a wrapper around the real runtime
        process.wait(timeout=10.0)
        process.kill()
        if not wait_pid_gone(pid, timeout=10.0):
            raise _Abort(self.fail(f"pid {pid} still runs 10 s after it was killed"))
        self.adapter.process = None
        self.adapter = None


def _kill_if_running(process: LineProcess, pid: int) -> None:
    # Runs on a timer thread: a process that already died by itself is not an error to print there.
    with contextlib.suppress(NotInTree, OSError):
        process.kill_member(pid)


def _with_model(result: CaseResult) -> CaseResult:
    return dataclasses.replace(result, fault_model=FAULT_MODEL)


@contextlib.contextmanager
def _scratch(label: str, session: _Session) -> Iterator[Path]:
    path = _files.scratch(label)
    try:
        yield path
    finally:
        # Stop the implementation first: an armed exit path writes its marker into this folder.
        session.close()
        _files.remove(path)


def _same_events(expected: Sequence[Mapping[str, Any]], actual: Any) -> bool:
    if not isinstance(actual, list) or len(actual) != len(expected):
        return False
    # Equal plain JSON texts are equal canonical ones; only a difference (which may be 1.0 against 1)
    # needs the slower canonical form, whose normalising walk is in Python.
    plain = json.dumps(list(expected), sort_keys=True, ensure_ascii=False)
    return plain == json.dumps(actual, sort_keys=True, ensure_ascii=False) or (
        canonical_json(list(expected)) == canonical_json(actual)
    )


def _ids(events: Any) -> list[Any]:
    return [e.get("id") if isinstance(e, dict) else e for e in events] if isinstance(events, list) else [events]


def run_crash(case: CrashCase, factory: Factory, profile: str) -> CaseResult:
    """One failpoint: append its prefix, kill the writer, reopen, read, plan twice, decide."""
    session = _Session(case, factory, profile)
    try:
        with _scratch(case.failpoint.lower(), session) as scratch:
            workspace, marker = scratch / "workspace", scratch / "finally.marker"
            workspace.mkdir()
            session.start()
            session.open(workspace)
            pid = session.arm(marker)
            for index, event in enumerate(case.events):
                rows = session.ask("phase0.store.append", event=event).get("rows")
                if not is_integer(rows) or rows != index + 1:
                    raise _Abort(
                        session.fail(
                            "the acknowledgement counts the wrong rows",
                            Mismatch(f"/append/{index}/rows", index + 1, rows, "STORE-1"),
                        )
                    )
            session.crash(pid)
            if marker.exists():
                raise _Abort(
                    session.fail(
                        "the finally marker was written: an exit path ran, so this was not a crash",
                        Mismatch("/marker", "absent", "present", "CRASH-2"),
                    )
                )
            session.start()
            session.open(workspace)
            # From here to the end of the case nothing may change a file (STORE-6): `open` may prepare
            # the store, but the first read after reopening is already watched.
            before = _files.snapshot(workspace, settle=True)
            read = session.read()
            if read.get("status") != "ok" or not _same_events(case.events, read.get("events")):
                raise _Abort(
                    session.fail(
                        "the reopened ledger is not the committed prefix",
                        Mismatch(
                            "/read/events",
                            [e["id"] for e in case.events],
                            read if read.get("status") != "ok" else _ids(read.get("events")),
                            "CRASH-1",
                        ),
                    )
                )
            plans = []
            for _ in range(2):
                answer = session.ask("phase0.store.plan", profile=profile)
                problem = (
                    plan_problem(answer.get("plan"))
                    if answer.get("status") == "ok"
                    else f"status {answer.get('status')!r}"
                )
                if problem:
                    raise _Abort(session.fail(f"phase0.store.plan gave no plan: {problem}"))
                plans.append(answer["plan"])
            changes = _files.describe_changes(before, _files.snapshot(workspace))
            mismatches = check.compare_determinism(plans[0], plans[1])
            if changes:
                mismatches.append(
                    Mismatch("/workspace", "unchanged", changes, "STORE-6", "reading or planning changed the workspace")
                )
            mismatches += check.compare_plan(case.events, case.expect, plans[0])
            session.close()
            if mismatches:
                return session.fail(f"after the crash at {case.failpoint} the reopened run is wrong", *mismatches)
            return result_for(case, Outcome.PASSED, fault_model=FAULT_MODEL)
    except _Abort as abort:
        return abort.result
    finally:
        session.close()


def _variants(case: LedgerFaultCase, original: bytes) -> Iterator[tuple[str, bytes]]:
    kind = case.fault["kind"]
    if kind == "tear-last-row":
        for kept, damaged in faults.tear_last_row(original):
            yield f"last row cut after {kept} byte(s)", damaged
    else:
        how, row = case.fault["damage"], case.fault["row"]
        damaged = faults.damage_row(original, row, how)
        if case.fault.get("thenTear"):
            damaged += faults.rows(original)[-1][: len(faults.rows(original)[-1]) // 2]
        yield f"row {row} damaged ({how})", damaged


def expected_torn_tail(ledger: bytes) -> dict[str, int] | None:
    """The ``tornTail`` a read of *ledger* reports: the bytes after its last line feed (STORE-3, STORE-4)."""
    committed = ledger.rfind(b"\n") + 1
    return None if committed == len(ledger) else {"offset": committed, "length": len(ledger) - committed}


def _judge_read(case: LedgerFaultCase, read: Mapping[str, Any], label: str, ledger: bytes) -> list[Mismatch]:
    expect = case.expect
    if expect["status"] == "corrupt":
        line = read.get("line")
        if read.get("status") != "corrupt" or not is_integer(line) or line != expect["line"]:
            answered = {"status": read.get("status"), "line": read.get("line"), "events": _ids(read.get("events", []))}
            return [Mismatch(f"/read ({label})", {"status": "corrupt", "line": expect["line"]}, answered, "STORE-5")]
        return []
    committed = list(case.events[: expect["committedRows"]])
    if read.get("status") != "ok" or not _same_events(committed, read.get("events")):
        got = read if read.get("status") != "ok" else _ids(read.get("events"))
        return [Mismatch(f"/read ({label})", [e["id"] for e in committed], got, "STORE-4")]
    torn = expected_torn_tail(ledger)
    if not same_json(read.get("tornTail"), torn):
        return [
            Mismatch(
                f"/read/tornTail ({label})",
                torn,
                read.get("tornTail"),
                "STORE-4",
                "the torn tail is the bytes after the last line feed: its offset is the committed length",
            )
        ]
    return []


def run_ledger_fault(case: LedgerFaultCase, factory: Factory, profile: str) -> CaseResult:
    """Write the ledger through the implementation, damage its bytes, and judge what a read reports."""
    session = _Session(case, factory, profile)
    try:
        with _scratch("ledger", session) as scratch:
            workspace = scratch / "workspace"
            workspace.mkdir()
            session.start()
            session.open(workspace)
            for event in case.events:
                session.ask("phase0.store.append", event=event)
            located = session.ask("phase0.ledger.locate").get("path")
            session.close()
            try:  # the kit touches only files inside the workspace it made
                path = _files.inside(workspace, located)
                original = _files.read_bytes(workspace, path)
            except _files.Refused as error:
                raise _Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
            parsed = faults.rows(original)
            if len(parsed) != len(case.events) or not original.endswith(b"\n"):
                raise _Abort(
                    session.fail(
                        f"the ledger file has {len(parsed)} line(s) for {len(case.events)} appended rows: "
                        "it is not the JSON Lines file that phase0.ledger-file promises"
                    )
                )
            session.start()
            mismatches: list[Mismatch] = []
            checked = 0
            for label, damaged in _variants(case, original):
                try:
                    _files.write_bytes(workspace, path, damaged)
                except _files.Refused as error:
                    raise _Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
                session.open(workspace)
                before = _files.snapshot(workspace, settle=True)
                if case.fault.get("appendAfter"):
                    extra = dict(case.events[-1], id=f"{case.events[-1]['id']}-again")
                    session.ask("phase0.store.append", event=extra)
                    read = session.read()
                    want = [*case.events[: case.expect["committedRows"]], extra]
                    if read.get("status") != "ok" or not _same_events(want, read.get("events")):
                        mismatches.append(
                            Mismatch(
                                f"/read ({label}, then one append)", _ids(want), _ids(read.get("events")), "STORE-7"
                            )
                        )
                else:
                    read = session.read()
                    mismatches += _judge_read(case, read, label, damaged)
                    changes = _files.describe_changes(before, _files.snapshot(workspace))
                    if changes:
                        mismatches.append(
                            Mismatch(
                                f"/workspace ({label})", "unchanged", changes, "STORE-6", "a read changed the workspace"
                            )
                        )
                checked += 1
            if mismatches:
                shown = tuple(mismatches[:5])
                more = f" (showing 5 of {len(mismatches)})" if len(mismatches) > 5 else ""
                return session.fail(f"{len(mismatches)} of {checked} damaged ledger(s) were read wrongly{more}", *shown)
            return result_for(
                case,
                Outcome.PASSED,
                fault_model="damaged ledger bytes written by the kit",
                message=f"{checked} damaged ledger(s) checked",
            )
    except _Abort as abort:
        return abort.result
    finally:
        session.close()


def _stream_event(template: Mapping[str, Any], index: int) -> dict[str, Any]:
    event = dict(template)
    event["id"] = f"row-{index:05d}"
    event["ts"] = template.get("ts", 0) + index
    return event


KillProgress = Callable[[int, int], object]  # told (kills done, kills in all) as the schedule goes


# The schedule's kills are dealt to this many streams, each with a ledger of its own and a random
# generator seeded from the run's seed and its number: the same seed makes the same kills whatever
# --jobs is, and with --jobs the streams run side by side.
STREAMS = 4


@dataclasses.dataclass
class _Tally:
    """What the streams of one schedule saw, for the case's message."""

    kills: int = 0
    in_flight: int = 0  # kills that came before the last append was acknowledged
    landed: int = 0  # of those, the rows that were on disk anyway
    rows: int = 0  # in the final ledgers
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
) -> CaseResult:
    """Kill the writer at seeded random moments while it appends; every acknowledged row must survive.

    The kills are dealt to up to ``STREAMS`` streams (``stream_kills``), each a writer and a ledger of
    its own, run on up to *jobs* threads. The first stream that fails, in stream order, is the result.
    """
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
                           on_kill=killed, tally=tally)  # fmt: skip

    if on_kill is not None:
        on_kill(0, kills)
    outcomes: list[CaseResult | None] = [None] * len(shares)
    if jobs <= 1 or len(shares) == 1:
        for number in range(len(shares)):
            outcomes[number] = stream(number)
            if outcomes[number] is not None:
                break
    else:
        pending = list(range(len(shares)))
        taken = threading.Lock()
        raised: list[BaseException] = []

        def work() -> None:
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

        threads = [threading.Thread(target=work, daemon=True) for _ in range(min(jobs, len(shares)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if raised:
            raise raised[0]
    for number, outcome in enumerate(outcomes):
        if outcome is not None:
            prefix = f"stream {number + 1} of {len(shares)} (its own ledger): " if len(shares) > 1 else ""
            return dataclasses.replace(outcome, message=prefix + (outcome.message or ""))
    ledgers = f" over {len(shares)} ledgers" if len(shares) > 1 else ""
    return result_for(
        case,
        Outcome.PASSED,
        fault_model=FAULT_MODEL,
        replay=replay,
        message=(
            f"{kills} kills{ledgers}, {tally.in_flight} of them before the last append was acknowledged "
            f"({tally.landed} of those rows had landed anyway); "
            f"the final ledgers hold {tally.rows} rows, every acknowledged one among them"
        ),
    )


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
) -> CaseResult | None:
    """One stream of the schedule: *kills* kills of one writer of one ledger; None when it held."""
    session = _Session(case, factory, profile)
    sent: list[dict[str, Any]] = []
    acknowledged = 0
    latencies: list[float] = []  # seconds from sending an append to its acknowledgement
    in_flight_kills = landed_unacknowledged = 0
    try:
        with _scratch("schedule", session) as scratch:
            workspace = scratch / "workspace"
            workspace.mkdir()
            for cycle in range(kills):
                marker = scratch / f"finally-{cycle}.marker"
                session.start()
                session.open(workspace)
                read = session.read()
                events = read.get("events") if read.get("status") == "ok" else None
                if (
                    events is None
                    or not (acknowledged <= len(events) <= len(sent))
                    or not _same_events(sent[: len(events)], events)
                ):
                    raise _Abort(
                        session.fail(
                            f"after kill {cycle} the reopened ledger is not an acknowledged prefix of what was sent",
                            Mismatch(
                                "/read/events",
                                f"the first {acknowledged} to {len(sent)} rows sent",
                                _ids(events) if events is not None else read,
                                "CRASH-1",
                            ),
                            replay=replay,
                        )
                    )
                if len(events) > acknowledged:
                    landed_unacknowledged += 1
                del sent[len(events) :]  # the row in flight at the kill either landed or never will
                acknowledged = len(sent)
                pid = session.arm(marker)
                assert session.adapter is not None and session.adapter.process is not None
                appends = rng.randint(0, 6)
                # A fraction of a typical append's round trip: most kills land inside the last append
                # (before its write, between write and sync, before the acknowledgement), some after.
                fraction = rng.uniform(0.0, 1.5)
                for _ in range(appends):
                    event = _stream_event(case.template, len(sent))
                    sent.append(event)
                    began = time.perf_counter()
                    session.ask("phase0.store.append", event=event)
                    latencies.append(time.perf_counter() - began)
                    acknowledged = len(sent)
                typical = statistics.median(latencies[-50:]) if latencies else 0.002
                event = _stream_event(case.template, len(sent))
                sent.append(event)
                timer = threading.Timer(
                    fraction * typical, _kill_if_running, args=(session.adapter.process, pid)
                )
                timer.start()
                reply = session.adapter.request("phase0.store.append", event=event)
                timer.join()
                if reply.outcome == "result":
                    acknowledged = len(sent)
                else:
                    in_flight_kills += 1
                session.adapter.kill()
                if not wait_pid_gone(pid, timeout=10.0):
                    raise _Abort(session.fail(f"pid {pid} still runs 10 s after it was killed", replay=replay))
                session.adapter = None
                if marker.exists():
                    raise _Abort(
                        session.fail(
                            "the finally marker was written after a kill",
                            Mismatch("/marker", "absent", "present", "CRASH-2"),
                            replay=replay,
                        )
                    )
                on_kill()
            session.start()
            session.open(workspace)
            read = session.read()
            events = read.get("events") if read.get("status") == "ok" else None
            if events is None or len(events) < acknowledged or not _same_events(sent[: len(events)], events):
                raise _Abort(
                    session.fail(
                        "the final ledger lost acknowledged rows",
                        Mismatch("/read/events", acknowledged, _ids(events), "CRASH-1"),
                        replay=replay,
                    )
                )
            plans = [session.ask("phase0.store.plan", profile=profile).get("plan") for _ in range(2)]
            mismatches = check.compare_determinism(plans[0], plans[1])
            if mismatches:
                raise _Abort(session.fail("two plans of the final ledger differ", *mismatches, replay=replay))
            with tally.lock:
                tally.in_flight += in_flight_kills
                tally.landed += landed_unacknowledged
                tally.rows += len(events)
            return None
    except _Abort as abort:
        return abort.result
    finally:
        session.close()


MARKER_NEVER_WRITTEN = "the exit path never wrote the marker, so a kill cannot be told from an orderly exit"
ORDERLY_EXITS = ("stop", "end of stdin")


def orderly_exit_problem(factory: Factory, timeout: float | None = None) -> str | None:
    """The positive control of CRASH-2: why an orderly exit after ``phase0.crash.arm`` left no marker, or None.

    Once with ``stop`` and once by closing stdin: start, open a store, arm a marker, exit in order, and
    require the marker. A marker absent after a kill means something only if the exit path writes it.
    None too when the control cannot get as far as the exit (the cases then meet the same failure).
    """
    scratch = _files.scratch("marker-control")
    try:
        for way in ORDERLY_EXITS:
            workspace, marker = scratch / way.replace(" ", "-"), scratch / f"{way.replace(' ', '-')}.marker"
            workspace.mkdir()
            adapter = factory()
            try:
                adapter.start()
            except AdapterStartError:
                return None
            grace = timeout if timeout is not None else adapter.timeout
            replies = [
                adapter.request("phase0.store.open", workspace=str(workspace), sessionId=SESSION_ID, runId=RUN_ID),
                adapter.request("phase0.crash.arm", marker=str(marker)),
            ]
            if any(reply.outcome != "result" for reply in replies) or adapter.process is None:
                adapter.kill()
                return None
            if way == "stop":
                adapter.close()  # `stop`, then up to the timeout to exit, then the kill
                code = None
            else:
                code = adapter.process.stop(grace=grace)
                adapter.process = None
            if not marker.exists():
                how = f"exit status {code}" if code is not None else "its exit"
                return f"no marker after an orderly exit by {way!r} ({how}) following phase0.crash.arm"
        return None
    finally:
        _files.remove(scratch)


class _MarkerControl:
    """Runs the orderly-exit control once per run, before the first case that kills."""

    def __init__(self, factory: Factory) -> None:
        self.factory = factory
        self.checked = False
        self.problem: str | None = None
        self._lock = threading.Lock()  # with --jobs, cases of other threads wait for the one control

    def verdict(self, case: Case) -> CaseResult | None:
        with self._lock:
            if not self.checked:
                self.problem = orderly_exit_problem(self.factory)
                self.checked = True
        if self.problem is None:
            return None
        return result_for(
            case,
            Outcome.ERRORED,
            message=f"{MARKER_NEVER_WRITTEN} ({self.problem}; CRASH-2)",
            fault_model=FAULT_MODEL,
        )


def runners(
    factory: Factory,
    *,
    profile: str,
    seed: int,
    kills: int,
    adapter_spec: str,
    on_kill: KillProgress | None = None,
    jobs: int = 1,
) -> dict[str, Callable[[Any], CaseResult]]:
    """The case runners for the crash kinds, bound to a maker of fresh implementation processes.

    The cases that kill (crash, schedule) first need the positive control of the marker to pass.
    """
    control = _MarkerControl(factory)

    def crash(case: CrashCase) -> CaseResult:
        return control.verdict(case) or run_crash(case, factory, profile)

    def schedule(case: ScheduleCase) -> CaseResult:
        replay = f'resumekit run --adapter "{adapter_spec}" --only {case.id} --seed {seed} --kills {kills}'
        return control.verdict(case) or run_schedule(
            case, factory, profile, seed=seed, kills=kills, replay=replay, on_kill=on_kill, jobs=jobs
        )

    return {
        "crash": crash,
        "ledger-fault": lambda case: run_ledger_fault(case, factory, profile),
        "schedule": schedule,
    }


__all__ = [
    "FAULT_MODEL",
    "MARKER_NEVER_WRITTEN",
    "orderly_exit_problem",
    "run_crash",
    "run_ledger_fault",
    "run_schedule",
    "runners",
]
