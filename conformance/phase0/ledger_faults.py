"""The ledger-fault cases: write a ledger through the implementation, damage its bytes, then read.

The damage itself is ``ledger_damage``'s (pure bytes in, bytes out); here the kit leaves each damaged
ledger in the workspace, reopens the store, appends where the case says so, reads, and judges the
answer against every reading the case accepts (STORE-3 to STORE-10).

A verdict needs the damage to reach what the store reads, so the kit checks that too (STORE-1): once
per case a control (the file phase0.ledger.locate names, cut to all but its last row, must read as
those rows), and for each damaged ledger that the file still holds the bytes the kit wrote once the
store is open, just before the read or the append. A damage that left the bytes as they were errors
the case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance.adapters import is_integer
from resumekit.conformance.canonical import same_json
from resumekit.conformance.fault_models import Abort
from resumekit.conformance.phase0 import ledger_damage
from resumekit.conformance.phase0.cases import LedgerFaultCase
from resumekit.conformance.phase0.session import Factory, Session, ids, same_events, scratch_folder
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import errored, result_for

# The fault model a ledger-fault result names: no process is killed, the kit writes the damage.
LEDGER_FAULT_MODEL = "damaged ledger bytes written by the kit"
# Checked on every case beside the clauses its fixture cites: the acknowledgements' row counts, the
# control read and that each damage is in the file the store reads.
ALWAYS_CHECKED = ("STORE-1",)
# The one fault whose ledger is the one written, undamaged: its damage is the append of another run.
_UNDAMAGED = "append-other-run"


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
    rows: Any = None  # the rows an accepted append's acknowledgement counted
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
            answered = {"status": read.get("status"), "line": read.get("line"), "events": ids(read.get("events", []))}
            return [Mismatch(f"/read ({label})", {"status": "corrupt", "line": expect["line"]}, answered, "STORE-5")]
        return []
    committed = [*_expected_rows(case, expect), *([appended] if appended is not None else [])]
    if read.get("status") != "ok" or not same_events(committed, read.get("events")):
        got = read if read.get("status") != "ok" else ids(read.get("events"))
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
    if expect["status"] == "ok":
        rows = len(_expected_rows(case, expect)) + 1
        if not is_integer(seen.rows) or seen.rows != rows:
            mismatches.append(
                Mismatch(
                    f"/append/rows ({seen.label})",
                    rows,
                    seen.rows,
                    "STORE-1",
                    "the acknowledgement counts the committed rows the ledger then holds",
                )
            )
    return mismatches + _judge_read(case, expect, seen.read, f"{seen.label}, then one append", after, seen.appended)


def _noted(mismatch: Mismatch, note: str) -> Mismatch:
    return dataclasses.replace(mismatch, note=f"{note}: {mismatch.note}" if mismatch.note else note)


def _reading_name(expect: Mapping[str, Any], profile: str) -> str:
    return str(expect.get("reading", profile))


@dataclasses.dataclass(frozen=True)
class _Findings:
    """What every damaged ledger of one case came to: the mismatches, the readings met, how many were checked."""

    mismatches: tuple[Mismatch, ...]
    met: tuple[str, ...]  # the names of the readings met, in the order first met
    checked: int


def run_ledger_fault(case: LedgerFaultCase, factory: Factory, profile: str) -> CaseResult:
    """Write the ledger through the implementation, damage its bytes, and judge what it then reports.

    A case may accept several readings (core alternatives, docs/spec/phase0.md section 9): each damaged
    ledger passes when it meets any one, and the result names the readings met.
    """
    session = Session(case, factory, profile)
    readings = case.readings_for(profile)
    try:
        with scratch_folder("ledger", session) as scratch:
            workspace = scratch / "workspace"
            workspace.mkdir()
            path, original = _write_ledger(session, case, workspace)
            session.start()
            _control(session, case, workspace, path, original)
            findings = _check_damages(session, case, readings, profile, workspace, path, original)
            return session.told(_cited(_verdict(session, case, readings, profile, findings)))
    except Abort as abort:
        return session.told(_cited(abort.result))
    finally:
        session.close()


def _cited(result: CaseResult) -> CaseResult:
    """*result* citing, beside its fixture's clauses, the clauses every case checks (ALWAYS_CHECKED)."""
    extra = tuple(clause for clause in ALWAYS_CHECKED if clause not in result.clauses)
    return dataclasses.replace(result, clauses=result.clauses + extra)


def _write_ledger(session: Session, case: LedgerFaultCase, workspace: Path) -> tuple[Path, bytes]:
    """Append the case's events through the implementation, stop it, and return its ledger file and bytes."""
    session.start()
    session.open(workspace)
    for index, event in enumerate(case.events):
        rows = session.ask("phase0.store.append", event=event).get("rows")
        if not is_integer(rows) or rows != index + 1:
            raise Abort(
                session.fail(
                    f"the acknowledgement of row {index + 1} counts {rows!r} row(s)",
                    Mismatch(f"/append/{index}/rows", index + 1, rows, "STORE-1"),
                )
            )
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
    return path, original


def _check_damages(
    session: Session,
    case: LedgerFaultCase,
    readings: Sequence[Mapping[str, Any]],
    profile: str,
    workspace: Path,
    path: Path,
    original: bytes,
) -> _Findings:
    """Leave each damaged ledger the case names, observe the implementation, and judge it against the readings."""
    mismatches: list[Mismatch] = []
    met: list[str] = []
    checked = 0
    for label, damaged in _variants(case, original):
        if damaged == original and case.fault["kind"] != _UNDAMAGED:
            raise Abort(
                session.errored(
                    f"the damage {label!r} left the {len(original)} bytes of the ledger as they were: the case would "
                    "judge an undamaged ledger"
                )
            )
        seen = _observe(case, session, workspace, path, label, damaged)
        found, name = _judge_readings(case, readings, profile, seen)
        mismatches += found
        if name is not None and name not in met:
            met.append(name)
        checked += 1
    return _Findings(tuple(mismatches), tuple(met), checked)


def _judge_readings(
    case: LedgerFaultCase, readings: Sequence[Mapping[str, Any]], profile: str, seen: _Observed
) -> tuple[list[Mismatch], str | None]:
    """*seen* against every reading: no mismatches and the first reading met, or each reading's mismatches."""
    judged = [(expect, _judge(case, expect, seen)) for expect in readings]
    passing = [expect for expect, found in judged if not found]
    if passing:
        return [], _reading_name(passing[0], profile)
    if len(judged) == 1:
        return judged[0][1], None
    mismatches: list[Mismatch] = []
    for expect, found in judged:
        note = f"not the {_reading_name(expect, profile)!r} reading"
        mismatches += [_noted(m, note) for m in found]
    return mismatches, None


def _verdict(
    session: Session, case: LedgerFaultCase, readings: Sequence[Mapping[str, Any]], profile: str, findings: _Findings
) -> CaseResult:
    """The case's result: the first five mismatches, or a pass naming the readings met where several are accepted."""
    expectation = case.expectation_profile(profile)
    mismatches, checked = findings.mismatches, findings.checked
    if mismatches:
        shown = mismatches[:5]
        more = f" (showing 5 of {len(mismatches)})" if len(mismatches) > 5 else ""
        failed = session.fail(
            f"{len(mismatches)} mismatch(es) in {checked} damaged ledger(s){more}"
            + (f"; the readings accepted: {', '.join(_reading_name(e, profile) for e in readings)}"
               if len(readings) > 1 else ""),
            *shown,
        )
        return dataclasses.replace(failed, expectation=expectation)
    alternatives = f"; reading matched: {', '.join(findings.met)}" if len(readings) > 1 else ""
    return dataclasses.replace(
        result_for(
            case,
            Outcome.PASSED,
            fault_model=LEDGER_FAULT_MODEL,
            message=f"{checked} damaged ledger(s) checked{alternatives}",
            expectation=expectation,
        ),
        readings=findings.met if len(readings) > 1 else (),
    )


def _control(session: Session, case: LedgerFaultCase, workspace: Path, path: Path, original: bytes) -> None:
    """Cut the named ledger to all but its last row and require a read of exactly those rows (STORE-1).

    Without it a store that reads a file other than the one it names would pass every reading that an
    undamaged ledger also meets, the damage never reaching the read.
    """
    kept = b"".join(ledger_damage.rows(original)[:-1])
    label = "the control: the ledger cut to all but its last row"
    _leave(session, workspace, path, kept, label)
    session.open(workspace)
    _check_held(session, workspace, path, kept, label)
    read = session.read()
    rows = case.events[:-1]
    if read.get("status") == "ok" and same_events(rows, read.get("events")) and read.get("tornTail") is None:
        return
    answered = dict(read, events=ids(read.get("events"))) if read.get("status") == "ok" else read
    raise Abort(
        session.fail(
            f"a read does not return the rows of the ledger file phase0.ledger.locate named, {str(path)!r}: the "
            f"kit cut it to its first {len(rows)} row(s), and the read answered {answered!r}",
            Mismatch(f"/read ({label})", {"events": [e["id"] for e in rows], "tornTail": None}, answered, "STORE-1"),
        )
    )


def _leave(session: Session, workspace: Path, path: Path, damaged: bytes | None, label: str) -> None:
    """Leave *damaged* as the named ledger (None removes the file), and see it there: the kit's write landed."""
    try:
        if damaged is None:
            _files.remove_file(workspace, path)
        elif not path.exists():
            raise _files.Refused(f"{str(path)!r} is gone")
        else:
            _files.write_bytes(workspace, path, damaged)
    except _files.Refused as error:
        raise Abort(session.fail(f"phase0.ledger.locate: {error}")) from None
    held = _held(session, workspace, path)
    if held != damaged:
        raise Abort(
            session.errored(
                f"{str(path)!r} does not hold the {len(damaged or b'')} byte(s) the kit just left there ({label}): "
                f"it holds {_described(held)}"
            )
        )


def _check_held(session: Session, workspace: Path, path: Path, left: bytes, label: str) -> None:
    """Fail the case unless the open store left the named ledger as the kit wrote it (b"" also stands for no file).

    Only an append changes a ledger (STORE-1): a ledger that ``open`` rewrote is not the damage the case
    judges, and a read of it would judge nothing.
    """
    held = _held(session, workspace, path)
    if held == left or (held is None and not left):
        return
    raise Abort(
        session.fail(
            f"after phase0.store.open the ledger file phase0.ledger.locate named, {str(path)!r}, no longer holds "
            f"the {len(left)} byte(s) the kit wrote ({label}): it holds {_described(held)}, so the read would "
            "not judge the damage",
            Mismatch(f"/ledger ({label})", f"the {len(left)} byte(s) the kit wrote", _described(held), "STORE-1"),
        )
    )


def _held(session: Session, workspace: Path, path: Path) -> bytes | None:
    """The bytes of the named ledger, or None when there is no such file."""
    try:
        return _files.read_bytes(workspace, path) if path.exists() else None
    except _files.Refused as error:
        raise Abort(session.fail(f"phase0.ledger.locate: {error}")) from None


def _described(held: bytes | None) -> str:
    return "no file" if held is None else f"{len(held)} byte(s) ending {held[-24:]!r}"


def _observe(
    case: LedgerFaultCase, session: Session, workspace: Path, path: Path, label: str, damaged: bytes | None
) -> _Observed:
    """Leave *damaged* as the ledger, reopen the store, see the damage still there, append if the case says so, read."""
    _leave(session, workspace, path, damaged, label)
    session.open(workspace)
    left = damaged if damaged is not None else b""
    _check_held(session, workspace, path, left, label)
    appends = case.fault.get("appendAfter") or case.fault["kind"] == _UNDAMAGED
    if not appends:
        before = _files.snapshot(workspace, settle=True)  # only a read must leave the files as they are
        read = session.read()
        changes = _files.describe_changes(before, _files.snapshot(workspace))
        return _Observed(label, left, read, changes)
    last = case.events[-1]
    extra = dict(last, id=f"{last['id']}-again")
    if case.fault["kind"] == _UNDAMAGED:
        extra = ledger_damage.rehome(extra, "runId")
    assert session.adapter is not None
    reply = session.adapter.request("phase0.store.append", event=extra)
    refused = reply.outcome == "errored" and bool(reply.context.get("caught"))
    if reply.outcome != "result" and not refused:
        raise Abort(dataclasses.replace(errored(case, reply, "phase0.store.append"), fault_model=session.model))
    rows = reply.value.get("rows") if reply.outcome == "result" and isinstance(reply.value, dict) else None
    after = _held(session, workspace, path)
    read = session.read()
    return _Observed(label, left, read, [], appended=extra, refused=refused, rows=rows, after_append=after)


__all__ = ["LEDGER_FAULT_MODEL", "expected_torn_tail", "run_ledger_fault"]
