"""The crash harness: real processes, killed for real, and the ledger they leave behind.

Fault model: a process crash. The writer is killed with SIGKILL (TerminateProcess on Windows), so
data it handed to the operating system survives and nothing in its own buffers does. This proves
recovery from a process crash, not durability across power loss or a kernel crash.

With a ``PowerLoss`` (``resumekit run --fault-model power-loss``, Linux) the same cases run under a
simulated power cut instead: the workspace is a FUSE layer (``resumekit.conformance.powerloss``) that
keeps only what was synced, every kill is followed by a cut, and at every acknowledgement the kit
reads the durable view of the ledger (``phase0.ledger-file``) to see that the row was synced first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
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
from resumekit.conformance.cases import Case
from resumekit.conformance.fault_models import POWER_LOSS as POWER_LOSS_MODEL
from resumekit.conformance.fault_models import PROCESS_CRASH, Abort
from resumekit.conformance.phase0 import ledger_damage, plan_checks
from resumekit.conformance.phase0.cases import CrashCase, LedgerFaultCase, ScheduleCase
from resumekit.conformance.powerloss import LayerError, PowerLayer, PowerLoss, unavailable
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, plan_problem, result_for, start_failed

FAULT_MODEL = PROCESS_CRASH
Factory = Callable[[], ProcessAdapter]
SESSION_ID, RUN_ID = "session-1", "run-1"


class _Session:
    """One case's dealings with implementation processes, turning every bad reply into Abort."""

    def __init__(self, case: Case, factory: Factory, profile: str, power: PowerLoss | None = None) -> None:
        self.case, self.factory, self.profile = case, factory, profile
        self.adapter: ProcessAdapter | None = None
        self.power = power
        self.model = POWER_LOSS_MODEL if power is not None else FAULT_MODEL
        self.layer: PowerLayer | None = None  # mounted under power loss
        self.ledger: Path | None = None  # the ledger file, once located, whose durable view is checked
        self.cut_notes: list[str] = []

    def start(self) -> ProcessAdapter:
        self.adapter = self.factory()
        try:
            self.adapter.start()
        except AdapterStartError as error:
            raise Abort(start_failed(self.case, error, fault_model=self.model)) from None
        return self.adapter

    def ask(self, cmd: str, **fields: Any) -> Any:
        assert self.adapter is not None
        reply: Reply = self.adapter.request(cmd, **fields)
        if reply.outcome == "skipped":
            raise Abort(result_for(self.case, Outcome.SKIPPED, message=reply.message, fault_model=self.model))
        if reply.outcome != "result":
            raise Abort(dataclasses.replace(errored(self.case, reply, cmd), fault_model=self.model))
        if not isinstance(reply.value, dict):
            raise Abort(self.fail(f"{cmd} answered {reply.value!r}, not an object"))
        return reply.value

    def fail(self, message: str, *mismatches: Mismatch, **fields: Any) -> CaseResult:
        tail = self.adapter.stderr_tail() if self.adapter else ""
        return result_for(
            self.case,
            Outcome.FAILED,
            message=message,
            mismatches=mismatches or (Mismatch("", None, None, None, message),),
            fault_model=self.model,
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
            raise Abort(
                self.fail(f"phase0.crash.arm reported pid {pid!r}, which the kit will not kill: not a process id")
            )
        if not self.adapter.process.owns(pid):
            raise Abort(
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
        self.freeze()
        try:
            process.kill_member(pid)
        except NotInTree as error:
            raise Abort(self.fail(f"the kit will not kill pid {pid}: {error}")) from None
        except OSError as error:
            raise Abort(self.fail(f"cannot kill pid {pid} that phase0.crash.arm reported: {error}")) from None
        if pid != process.pid:
            process.kill()  # a wrapper around the real runtime
        process.wait(timeout=10.0)
        process.kill()
        if not wait_pid_gone(pid, timeout=10.0):
            raise Abort(self.fail(f"pid {pid} still runs 10 s after it was killed"))
        self.adapter.process = None
        self.adapter = None
        self.power_cut(seed=0, mode="lose")

    def errored(self, message: str) -> CaseResult:
        """The result of a case the kit's own layer failed (not the implementation)."""
        return result_for(self.case, Outcome.ERRORED, message=message, fault_model=self.model)

    def freeze(self) -> None:
        """Under power loss, the instant of the cut, taken just before the kill: no later sync lands."""
        if self.layer is None:
            return
        try:
            self.layer.freeze()
        except LayerError as error:
            raise Abort(self.errored(f"the power layer failed: {error}")) from None

    def power_cut(self, *, seed: int, mode: str) -> None:
        """Under power loss, after the kill: drop what was never synced (a no-op for a process crash)."""
        if self.layer is None:
            return
        try:
            self.cut_notes.append(f"{mode}: {self.layer.cut(mode, seed)}")
        except LayerError as error:
            raise Abort(self.errored(f"the power cut failed: {error}")) from None

    def acknowledged(self, rows: int, *, replay: str | None = None, locate: bool = True) -> None:
        """Under power loss, the ledger's durable view must hold *rows* rows when the kit hears the acknowledgement.

        Only where the implementation shows its ledger file (``phase0.ledger-file``); without it the
        cuts alone judge. The layer answers an fsync only after a delay, so a row acknowledged before
        its sync is still volatile here.
        """
        if self.layer is None:
            return
        if self.ledger is None:
            if not locate or self.adapter is None:
                return
            if "phase0.ledger-file" not in self.adapter.implementation.capabilities:
                return
            located = self.ask("phase0.ledger.locate").get("path")
            try:
                self.ledger = _files.inside(self.layer.mountpoint, located)
            except _files.Refused as error:
                raise Abort(self.fail(f"phase0.ledger.locate: {error}")) from None
        try:
            durable = self.layer.durable(self.ledger)
        except LayerError as error:
            raise Abort(self.errored(f"the power layer failed: {error}")) from None
        held = 0 if durable is None else durable.count(b"\n")
        if held < rows:
            where = "no ledger file at all" if durable is None else f"{held} row(s)"
            raise Abort(
                self.fail(
                    f"row {rows} was acknowledged before it was durable: when the acknowledgement arrived, a "
                    f"power cut would have left {where} (the row, or the file's name in its directory, was "
                    "not synced yet)",
                    Mismatch("/durable/rows", rows, held, "STORE-2"),
                    replay=replay,
                )
            )


def _kill_if_running(process: LineProcess, pid: int, layer: PowerLayer | None = None) -> None:
    # Runs on a timer thread: a process that already died by itself is not an error to print there.
    if layer is not None:  # the power goes first; a failed freeze shows in the cut that follows
        with contextlib.suppress(LayerError):
            layer.freeze()
    with contextlib.suppress(NotInTree, OSError):
        process.kill_member(pid)


@contextlib.contextmanager
def _scratch(label: str, session: _Session) -> Iterator[Path]:
    path = _files.scratch(label)
    try:
        yield path
    finally:
        # Stop the implementation first: an armed exit path writes its marker into this folder.
        session.close()
        if session.layer is not None:
            session.layer.stop()
            session.layer = None
        _files.remove(path)


def _make_workspace(scratch: Path, session: _Session) -> Path:
    """The case's workspace: a plain folder, or under power loss the mounted layer."""
    workspace = scratch / "workspace"
    if session.power is None:
        workspace.mkdir()
        return workspace
    session.layer = PowerLayer(scratch / "backing", workspace, session.power.sync_delay)
    try:
        session.layer.start()
    except LayerError as error:
        raise Abort(session.errored(f"cannot mount the power layer: {error}")) from None
    return workspace


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


def run_crash(case: CrashCase, factory: Factory, profile: str, power: PowerLoss | None = None) -> CaseResult:
    """One failpoint: append its prefix, kill the writer (and cut the power), reopen, read, plan twice, decide."""
    session = _Session(case, factory, profile, power)
    try:
        with _scratch(case.failpoint.lower(), session) as scratch:
            workspace, marker = _make_workspace(scratch, session), scratch / "finally.marker"
            session.start()
            session.open(workspace)
            pid = session.arm(marker)
            for index, event in enumerate(case.events):
                rows = session.ask("phase0.store.append", event=event).get("rows")
                if not is_integer(rows) or rows != index + 1:
                    raise Abort(
                        session.fail(
                            "the acknowledgement counts the wrong rows",
                            Mismatch(f"/append/{index}/rows", index + 1, rows, "STORE-1"),
                        )
                    )
                session.acknowledged(index + 1)
            session.crash(pid)
            if marker.exists():
                raise Abort(
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
                raise Abort(
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
                    raise Abort(session.fail(f"phase0.store.plan gave no plan: {problem}"))
                plans.append(answer["plan"])
            changes = _files.describe_changes(before, _files.snapshot(workspace))
            mismatches = plan_checks.compare_determinism(plans[0], plans[1])
            if changes:
                mismatches.append(
                    Mismatch("/workspace", "unchanged", changes, "STORE-6", "reading or planning changed the workspace")
                )
            mismatches += plan_checks.compare_plan(case.events, case.expect, plans[0])
            session.close()
            if mismatches:
                return session.fail(f"after the crash at {case.failpoint} the reopened run is wrong", *mismatches)
            return result_for(case, Outcome.PASSED, fault_model=session.model)
    except Abort as abort:
        return abort.result
    finally:
        session.close()


def _variants(case: LedgerFaultCase, original: bytes) -> Iterator[tuple[str, bytes | None]]:
    """(label, the ledger bytes to leave) for each damage the case names; None removes the file."""
    kind = case.fault["kind"]
    if kind == "tear-last-row":
        for kept, damaged in ledger_damage.tear_last_row(original):
            yield f"last row cut after {kept} byte(s)", damaged
    elif kind == "tail":
        tail = case.fault["tail"]
        yield f"last row replaced by the {tail} tail", ledger_damage.replace_tail(original, tail)
    elif kind == "no-ledger":
        yield "no ledger file", None
    elif kind == "append-other-run":
        yield "the ledger as written, then an event of another run appended", original
    else:
        how, row = case.fault["damage"], case.fault["row"]
        damaged = ledger_damage.damage_row(original, row, how)
        if case.fault.get("thenTear"):
            damaged += ledger_damage.rows(original)[-1][: len(ledger_damage.rows(original)[-1]) // 2]
        yield f"row {row} damaged ({how})", damaged


def expected_torn_tail(ledger: bytes) -> dict[str, int] | None:
    """The ``tornTail`` a read of *ledger* reports: the bytes after its last line feed (STORE-3, STORE-4)."""
    committed = ledger.rfind(b"\n") + 1
    return None if committed == len(ledger) else {"offset": committed, "length": len(ledger) - committed}


@dataclasses.dataclass(frozen=True)
class _Observed:
    """What the implementation did with one damaged ledger: the facts every reading is judged on."""

    label: str
    damaged: bytes  # the ledger the kit left (empty when it removed the file)
    read: Mapping[str, Any]
    changes: list[str]  # workspace changes from just after open to the end, when nothing was appended
    appended: Mapping[str, Any] | None = None  # the event the kit appended, if it appended
    refused: bool = False  # the append was answered with an error
    after_append: bytes | None = None  # the ledger bytes after the append (None: no file)


def _ledger_events(case: LedgerFaultCase) -> list[Mapping[str, Any]]:
    """The events the damaged ledger's rows hold: the case's, with a row moved to another run if so damaged."""
    events: list[Mapping[str, Any]] = list(case.events)
    field = ledger_damage.REHOMED.get(case.fault.get("damage", ""))
    if field is not None:
        row = case.fault["row"] - 1
        events[row] = ledger_damage.rehome(events[row], field)
    return events


def _expected_rows(case: LedgerFaultCase, expect: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    events = _ledger_events(case)
    if "rows" in expect:
        return [events[row - 1] for row in expect["rows"]]
    return events[: expect["committedRows"]]


def _judge_read(
    case: LedgerFaultCase, expect: Mapping[str, Any], read: Mapping[str, Any], label: str, ledger: bytes,
    appended: Mapping[str, Any] | None = None,
) -> list[Mismatch]:
    """The read against one reading: corrupt at its line, or these rows (and the appended one) and this tail."""
    if expect["status"] == "corrupt":
        line = read.get("line")
        if read.get("status") != "corrupt" or not is_integer(line) or line != expect["line"]:
            answered = {"status": read.get("status"), "line": read.get("line"), "events": _ids(read.get("events", []))}
            return [Mismatch(f"/read ({label})", {"status": "corrupt", "line": expect["line"]}, answered, "STORE-5")]
        return []
    committed = [*_expected_rows(case, expect), *([appended] if appended is not None else [])]
    if read.get("status") != "ok" or not _same_events(committed, read.get("events")):
        got = read if read.get("status") != "ok" else _ids(read.get("events"))
        return [Mismatch(f"/read ({label})", [e["id"] for e in committed], got, "STORE-4")]
    torn = None if "tornTail" in expect else expected_torn_tail(ledger)
    if not same_json(read.get("tornTail"), torn):
        return [
            Mismatch(
                f"/read/tornTail ({label})",
                torn,
                read.get("tornTail"),
                "STORE-4",
                "the torn tail is the bytes after the last line feed: its offset is the committed length"
                if torn is not None
                else "this reading counts the unterminated bytes as a row, so no torn tail remains",
            )
        ]
    return []


def _judge(case: LedgerFaultCase, expect: Mapping[str, Any], seen: _Observed) -> list[Mismatch]:
    """Every way *seen* departs from the reading *expect* (pure)."""
    mismatches: list[Mismatch] = []
    if seen.appended is None:
        mismatches += _judge_read(case, expect, seen.read, seen.label, seen.damaged)
        if seen.changes:
            mismatches.append(
                Mismatch(
                    f"/workspace ({seen.label})", "unchanged", seen.changes, "STORE-6", "a read changed the workspace"
                )
            )
        return mismatches
    if expect.get("append", "accepted") == "refused":
        clause = "STORE-10" if case.fault["kind"] == "append-other-run" else "STORE-9"
        if not seen.refused:
            mismatches.append(
                Mismatch(f"/append ({seen.label})", "refused", "accepted", clause, "the append must refuse")
            )
        elif seen.after_append != seen.damaged:
            mismatches.append(
                Mismatch(
                    f"/ledger ({seen.label})", "every byte left", "changed", clause, "a refused append changed bytes"
                )
            )
        return mismatches + _judge_read(case, expect, seen.read, seen.label, seen.damaged)
    if seen.refused:
        return [Mismatch(f"/append ({seen.label})", "accepted", "refused", "STORE-7", "the append must succeed")]
    after = seen.after_append if seen.after_append is not None else b""
    return _judge_read(case, expect, seen.read, f"{seen.label}, then one append", after, seen.appended)


def _noted(mismatch: Mismatch, note: str) -> Mismatch:
    return dataclasses.replace(mismatch, note=f"{note}: {mismatch.note}" if mismatch.note else note)


def _reading_name(expect: Mapping[str, Any], profile: str) -> str:
    return str(expect.get("reading", profile))


def run_ledger_fault(case: LedgerFaultCase, factory: Factory, profile: str) -> CaseResult:
    """Write the ledger through the implementation, damage its bytes, and judge what it then reports.

    A case may accept several readings (core alternatives, docs/spec/phase0.md section 9): each damaged
    ledger passes when it meets any one, and the result names the readings met.
    """
    session = _Session(case, factory, profile)
    readings = case.readings_for(profile)
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
                raise Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
            parsed = ledger_damage.rows(original)
            if len(parsed) != len(case.events) or not original.endswith(b"\n"):
                raise Abort(
                    session.fail(
                        f"the ledger file has {len(parsed)} line(s) for {len(case.events)} appended rows: "
                        "it is not the JSON Lines file that phase0.ledger-file promises"
                    )
                )
            session.start()
            mismatches: list[Mismatch] = []
            met: list[str] = []
            checked = 0
            for label, damaged in _variants(case, original):
                seen = _observe(case, session, workspace, path, label, damaged)
                judged = [(expect, _judge(case, expect, seen)) for expect in readings]
                passing = [expect for expect, found in judged if not found]
                if passing:
                    name = _reading_name(passing[0], profile)
                    if name not in met:
                        met.append(name)
                elif len(judged) == 1:
                    mismatches += judged[0][1]
                else:
                    for expect, found in judged:
                        note = f"not the {_reading_name(expect, profile)!r} reading"
                        mismatches += [_noted(m, note) for m in found]
                checked += 1
            expectation = case.expectation_profile(profile)
            if mismatches:
                shown = tuple(mismatches[:5])
                more = f" (showing 5 of {len(mismatches)})" if len(mismatches) > 5 else ""
                failed = session.fail(
                    f"{len(mismatches)} mismatch(es) in {checked} damaged ledger(s){more}"
                    + (f"; the readings accepted: {', '.join(_reading_name(e, profile) for e in readings)}"
                       if len(readings) > 1 else ""),
                    *shown,
                )
                return dataclasses.replace(failed, expectation=expectation)
            alternatives = f"; reading matched: {', '.join(met)}" if len(readings) > 1 else ""
            return dataclasses.replace(
                result_for(
                    case,
                    Outcome.PASSED,
                    fault_model="damaged ledger bytes written by the kit",
                    message=f"{checked} damaged ledger(s) checked{alternatives}",
                    expectation=expectation,
                ),
                readings=tuple(met) if len(readings) > 1 else (),
            )
    except Abort as abort:
        return abort.result
    finally:
        session.close()


def _observe(
    case: LedgerFaultCase, session: _Session, workspace: Path, path: Path, label: str, damaged: bytes | None
) -> _Observed:
    """Leave *damaged* as the ledger, reopen the store, append if the case says so, and read."""
    try:
        if damaged is None:
            _files.remove_file(workspace, path)
        elif not path.exists():
            raise _files.Refused(f"{str(path)!r} is gone")
        else:
            _files.write_bytes(workspace, path, damaged)
    except _files.Refused as error:
        raise Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
    session.open(workspace)
    left = damaged if damaged is not None else b""
    appends = case.fault.get("appendAfter") or case.fault["kind"] == "append-other-run"
    if not appends:
        before = _files.snapshot(workspace, settle=True)  # only a read must leave the files as they are
        read = session.read()
        changes = _files.describe_changes(before, _files.snapshot(workspace))
        return _Observed(label, left, read, changes)
    last = case.events[-1]
    extra = dict(last, id=f"{last['id']}-again")
    if case.fault["kind"] == "append-other-run":
        extra = ledger_damage.rehome(extra, "runId")
    assert session.adapter is not None
    reply = session.adapter.request("phase0.store.append", event=extra)
    refused = reply.outcome == "errored" and bool(reply.context.get("caught"))
    if reply.outcome != "result" and not refused:
        raise Abort(dataclasses.replace(errored(case, reply, "phase0.store.append"), fault_model=session.model))
    try:
        after = _files.read_bytes(workspace, path) if path.exists() else None
    except _files.Refused as error:
        raise Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
    read = session.read()
    return _Observed(label, left, read, [], appended=extra, refused=refused, after_append=after)


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
    cuts = f" and power cuts ({_cut_counts(tally.cut_notes)})" if power is not None else ""
    return result_for(
        case,
        Outcome.PASSED,
        fault_model=FAULT_MODEL if power is None else POWER_LOSS_MODEL,
        replay=replay,
        message=(
            f"{kills} kills{ledgers}{cuts}, {tally.in_flight} of them before the last append was acknowledged "
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
    power: PowerLoss | None = None,
) -> CaseResult | None:
    """One stream of the schedule: *kills* kills of one writer of one ledger; None when it held."""
    session = _Session(case, factory, profile, power)
    sent: list[dict[str, Any]] = []
    acknowledged = 0
    latencies: list[float] = []  # seconds from sending an append to its acknowledgement
    in_flight_kills = landed_unacknowledged = 0
    try:
        with _scratch("schedule", session) as scratch:
            workspace = _make_workspace(scratch, session)
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
                    raise Abort(
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
                    session.acknowledged(acknowledged, replay=replay)
                typical = statistics.median(latencies[-50:]) if latencies else 0.002
                event = _stream_event(case.template, len(sent))
                sent.append(event)
                timer = threading.Timer(
                    fraction * typical, _kill_if_running, args=(session.adapter.process, pid, session.layer)
                )
                timer.start()
                reply = session.adapter.request("phase0.store.append", event=event)
                timer.join()
                acked_in_flight = reply.outcome == "result"
                if acked_in_flight:
                    acknowledged = len(sent)
                else:
                    in_flight_kills += 1
                session.adapter.kill()
                if not wait_pid_gone(pid, timeout=10.0):
                    raise Abort(session.fail(f"pid {pid} still runs 10 s after it was killed", replay=replay))
                if acked_in_flight and session.layer is not None:
                    # The process is dead; the layer still answers what a cut would leave.
                    session.acknowledged(acknowledged, replay=replay, locate=False)
                session.adapter = None
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
            session.start()
            session.open(workspace)
            read = session.read()
            events = read.get("events") if read.get("status") == "ok" else None
            if events is None or len(events) < acknowledged or not _same_events(sent[: len(events)], events):
                raise Abort(
                    session.fail(
                        "the final ledger lost acknowledged rows",
                        Mismatch("/read/events", acknowledged, _ids(events), "CRASH-1"),
                        replay=replay,
                    )
                )
            plans = [session.ask("phase0.store.plan", profile=profile).get("plan") for _ in range(2)]
            mismatches = plan_checks.compare_determinism(plans[0], plans[1])
            if mismatches:
                raise Abort(session.fail("two plans of the final ledger differ", *mismatches, replay=replay))
            with tally.lock:
                tally.in_flight += in_flight_kills
                tally.landed += landed_unacknowledged
                tally.rows += len(events)
                tally.cut_notes.extend(session.cut_notes)
            return None
    except Abort as abort:
        return abort.result
    finally:
        session.close()


def _cut_counts(notes: Sequence[str]) -> str:
    counted: dict[str, int] = {}
    for note in notes:
        mode = note.split(":", 1)[0]
        counted[mode] = counted.get(mode, 0) + 1
    return ", ".join(f"{count} {mode}" for mode, count in sorted(counted.items()))


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
    power: PowerLoss | None = None,
    jobs: int = 1,
) -> dict[str, Callable[[Any], CaseResult]]:
    """The case runners for the crash kinds, bound to a maker of fresh implementation processes.

    The cases that kill (crash, schedule) first need the positive control of the marker to pass.
    With *power* they run under simulated power cuts; where the layer cannot run, they are not run,
    with the reason.
    """
    control = _MarkerControl(factory)
    option = " --fault-model power-loss" if power is not None else ""

    def not_run(case: Case) -> CaseResult | None:
        if power is None:
            return None
        reason = unavailable()
        if reason is None:
            return None
        return result_for(case, Outcome.NOT_RUN, message=f"power loss cannot be simulated here: {reason}",
                          fault_model=POWER_LOSS_MODEL)

    def crash(case: CrashCase) -> CaseResult:
        return not_run(case) or control.verdict(case) or run_crash(case, factory, profile, power)

    def schedule(case: ScheduleCase) -> CaseResult:
        replay = f'resumekit run --adapter "{adapter_spec}" --only {case.id} --seed {seed} --kills {kills}{option}'
        return (
            not_run(case)
            or control.verdict(case)
            or run_schedule(
                case, factory, profile, seed=seed, kills=kills, replay=replay, on_kill=on_kill, jobs=jobs, power=power
            )
        )

    return {
        "crash": crash,
        "ledger-fault": lambda case: run_ledger_fault(case, factory, profile),
        "schedule": schedule,
    }


__all__ = [
    "FAULT_MODEL",
    "MARKER_NEVER_WRITTEN",
    "POWER_LOSS_MODEL",
    "PowerLoss",
    "orderly_exit_problem",
    "run_crash",
    "run_ledger_fault",
    "run_schedule",
    "runners",
]
