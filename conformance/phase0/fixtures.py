"""Reading Phase 0's golden files: decisions, the failpoint catalog, ledger faults and the crash schedule.

Beyond its schema, each case is checked against the clauses that tie a plan's fields together, so that an
expectation no implementation could meet is a fixture error naming its line, not a failure of the runtime.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from resumekit.conformance import schemas
from resumekit.conformance.canonical import same_json
from resumekit.conformance.cases import Case, Event
from resumekit.conformance.fixtures import FixtureFile
from resumekit.conformance.phase0.cases import CrashCase, DecisionCase, LedgerFaultCase, ScheduleCase
from resumekit.conformance.phase0.plan_checks import expected_operations


def merge(envelopes: Sequence[Mapping[str, Any] | None], template: Mapping[str, Any]) -> Event:
    """*template* over the fields of each envelope in turn (a later envelope wins over an earlier one)."""
    event: Event = {}
    for envelope in envelopes:
        event.update(envelope or {})
    event.update(template)
    return event


def read_events(
    file: FixtureFile, envelopes: Sequence[Mapping[str, Any] | None], templates: list[Any], at: str, case_id: str | None
) -> tuple[Event, ...]:
    """The events *templates* make, each merged over *envelopes*; FixtureError at the first that is no RuntimeEvent."""
    events = []
    for index, template in enumerate(templates):
        event = merge(envelopes, template)
        violation = schemas.first_violation(schemas.RUNTIME_EVENT, event, exact_integers=True)
        if violation is not None:
            where = f"{at}/{index}{violation.pointer}"
            raise file.error(f"event is not a valid RuntimeEvent: {violation.message}", where, case_id)
        events.append(event)
    return tuple(events)


def _check_references(
    file: FixtureFile, case_id: str, events: Sequence[Event], expect: Mapping[str, Any], at: str
) -> None:
    """Expectations may only name events the case has: a typo would otherwise read as an implementation bug."""
    ids = {event["id"] for event in events}
    named: list[tuple[str, str]] = [(f"{at}/replay/{i}", name) for i, name in enumerate(expect["replay"])]
    for i, operation in enumerate(expect["operations"]):
        for key in ("callRuntimeEventId", "responseRuntimeEventId"):
            if key in operation:
                named.append((f"{at}/operations/{i}/{key}", operation[key]))
    for i, diagnostic in enumerate(expect["diagnostics"]):
        if "eventId" in diagnostic:
            named.append((f"{at}/diagnostics/{i}/eventId", diagnostic["eventId"]))
    for pointer, name in named:
        if name not in ids:
            raise file.error(f"names event {name!r}, which the case does not have", pointer, case_id)


STRICT_CODES = frozenset(
    {
        "duplicate_event_id",
        "duplicate_tool_call",
        "duplicate_tool_result",
        "tool_result_before_call",
        "run_identity_conflict",
        "tool_fact_after_terminal",
    }
)


def _check_consistency(
    file: FixtureFile, case_id: str, profile: str, events: Sequence[Event], expect: Mapping[str, Any], at: str
) -> None:
    """An expectation must agree with the clauses that tie plan fields together, or it cannot be met.

    *profile* is the profile whose expectation *expect* is: a core expectation may not hold what only
    the strict clauses produce (spec 0.1).
    """
    indeterminate = any(op["status"] == "indeterminate" for op in expect["operations"])
    safe = not expect["rejectionReasons"] and not expect["requiresVerification"]
    strict_codes = sorted({d["code"] for d in expect["diagnostics"]} & STRICT_CODES)
    rules = [
        (
            expect["requiresVerification"] == indeterminate,
            "requiresVerification",
            f"must be {indeterminate} because {'an' if indeterminate else 'no'} operation is indeterminate (PLAN-6)",
        ),
        (
            (expect["disposition"] == "safe_replay") == safe,
            "disposition",
            f"must be {'safe_replay' if safe else 'blocked'} given the reasons and requiresVerification (PLAN-7)",
        ),
        (
            expect["sourceRuntimeEventHighWater"] == len(events),
            "sourceRuntimeEventHighWater",
            f"must be {len(events)}, the number of events (PLAN-1)",
        ),
        (
            profile == "strict" or not strict_codes,
            "diagnostics",
            f"a core expectation cannot hold the strict codes {strict_codes}; give them in expect_strict (spec 0.1)",
        ),
        (
            profile == "strict" or "ledger_integrity_violation" not in expect["rejectionReasons"],
            "rejectionReasons",
            "a core expectation cannot hold 'ledger_integrity_violation'; give it in expect_strict (spec 0.1)",
        ),
    ]
    for holds, name, message in rules:
        if not holds:
            raise file.error(f"{name} {message}", f"{at}/{name}", case_id)


# The compared fields each diagnostic code carries (docs/spec/phase0.md, the note under PLAN-10), and the
# clause that says which event it names: a call, a response, or either (None).
DIAGNOSTIC_FIELDS: dict[str, tuple[frozenset[str], str, str | None]] = {
    "pending_tool_result": (frozenset({"eventId", "toolCallId"}), "PLAN-2", "function_call"),
    "unmatched_tool_result": (frozenset({"eventId", "toolCallId"}), "PLAN-3", "function_response"),
    "tool_name_mismatch": (frozenset({"eventId", "toolCallId"}), "PLAN-4", "function_response"),
    "duplicate_tool_call": (frozenset({"eventId", "toolCallId"}), "STRICT-2", "function_call"),
    "duplicate_tool_result": (frozenset({"eventId", "toolCallId"}), "STRICT-3", "function_response"),
    "tool_result_before_call": (frozenset({"eventId", "toolCallId"}), "STRICT-4", "function_response"),
    "tool_fact_after_terminal": (frozenset({"eventId", "toolCallId"}), "STRICT-6", None),
    "duplicate_event_id": (frozenset({"eventId"}), "STRICT-1", None),
    "run_identity_conflict": (frozenset({"eventId"}), "STRICT-5", None),
    "runtime_offset_mismatch": (frozenset(), "OFF-1", None),
}
_DANGLING_CODES = frozenset({"pending_tool_result", "unmatched_tool_result", "tool_name_mismatch"})

Problem = tuple[str, str]  # (JSON pointer below the expectation, what is wrong and the clause that says so)


def offset_problems(length: int, expected_high_water: int | None, expect: Mapping[str, Any]) -> list[Problem]:
    """Where *expect* contradicts OFF-1 for a prefix of *length* events read with *expected_high_water*.

    A high-water that differs from the length demands the diagnostic and its reason; one that is equal, or
    none at all, changes nothing, so neither may appear.
    """
    codes = [diagnostic["code"] for diagnostic in expect["diagnostics"]]
    reasons = list(expect["rejectionReasons"])
    code = "runtime_offset_mismatch"
    if expected_high_water is not None and expected_high_water != length:
        why = f"expectedHighWater {expected_high_water} differs from the {length} event(s) (OFF-1)"
        return [
            *([("/diagnostics", f"must hold a {code} diagnostic: {why}")] if code not in codes else []),
            *([("/rejectionReasons", f"must hold {code}: {why}")] if code not in reasons else []),
        ]
    why = (
        "no expectedHighWater is given"
        if expected_high_water is None
        else f"expectedHighWater {expected_high_water} equals the {length} event(s), which changes nothing"
    )
    problems = [(f"/diagnostics/{codes.index(code)}", f"cannot be {code}: {why} (OFF-1)")] if code in codes else []
    if code in reasons:
        problems.append((f"/rejectionReasons/{reasons.index(code)}", f"cannot be {code}: {why} (OFF-1)"))
    return problems


def reason_problems(expect: Mapping[str, Any]) -> list[Problem]:
    """Where *expect*'s core rejection reasons disagree with its diagnostics (PLAN-5)."""
    codes = {diagnostic["code"] for diagnostic in expect["diagnostics"]}
    reasons = set(expect["rejectionReasons"])
    problems = []
    for reason, present in (
        ("runtime_offset_mismatch", "runtime_offset_mismatch" in codes),
        ("dangling_tool_state", bool(codes & _DANGLING_CODES)),
    ):
        if present and reason not in reasons:
            problems.append(("/rejectionReasons", f"must hold {reason}, which its diagnostics give (PLAN-5)"))
        elif not present and reason in reasons:
            problems.append(("/rejectionReasons", f"holds {reason}, which no diagnostic gives (PLAN-5)"))
    return problems


def _tool_events(events: Sequence[Event], event_id: str, kinds: tuple[str, ...]) -> list[Mapping[str, Any]]:
    """The contents of the non-partial events called *event_id* whose content kind is one of *kinds*."""
    return [
        event["content"]
        for event in events
        if event["id"] == event_id
        and not event.get("partial")
        and isinstance(event.get("content"), Mapping)
        and event["content"].get("kind") in kinds
    ]


def tool_problems(events: Sequence[Event], expect: Mapping[str, Any]) -> list[Problem]:
    """Where *expect* names a tool call, tool name or event its events cannot give (OP-1, OP-3, PLAN-2 to PLAN-4,
    STRICT-1 to STRICT-6, and the diagnostic fields under PLAN-10)."""
    problems: list[Problem] = []
    for index, operation in enumerate(expect["operations"]):
        at, call_id = f"/operations/{index}", operation["toolCallId"]
        calls = _tool_events(events, operation["callRuntimeEventId"], ("function_call",))
        if not calls:
            problems.append((f"{at}/callRuntimeEventId", "names no non-partial function_call event (OP-1)"))
        elif not any(call.get("id") == call_id for call in calls):
            problems.append((f"{at}/toolCallId", f"{call_id!r} is not the tool-call id of its call event (OP-1)"))
        elif not any(call.get("id") == call_id and call.get("name") == operation["toolName"] for call in calls):
            message = f"{operation['toolName']!r} is not the name its call event gives (OP-1)"
            problems.append((f"{at}/toolName", message))
        if "responseRuntimeEventId" in operation:
            responses = _tool_events(events, operation["responseRuntimeEventId"], ("function_response",))
            if not any(response.get("id") == call_id for response in responses):
                message = f"names no non-partial function_response with tool-call id {call_id!r} (OP-2, OP-3)"
                problems.append((f"{at}/responseRuntimeEventId", message))
    for index, diagnostic in enumerate(expect["diagnostics"]):
        at, code = f"/diagnostics/{index}", diagnostic["code"]
        fields, clause, kind = DIAGNOSTIC_FIELDS[code]
        given = {name for name in ("eventId", "toolCallId") if name in diagnostic}
        if given != fields:
            carried = " and ".join(sorted(fields)) or "neither eventId nor toolCallId"
            problems.append((at, f"a {code} diagnostic carries {carried}, no more and no less (PLAN-10, {clause})"))
            continue
        if "toolCallId" in fields:
            kinds = (kind,) if kind else ("function_call", "function_response")
            named = _tool_events(events, diagnostic["eventId"], kinds)
            if not named:
                message = f"a {code} diagnostic names a non-partial {' or '.join(kinds)} event ({clause})"
                problems.append((f"{at}/eventId", message))
            elif not any(content.get("id") == diagnostic["toolCallId"] for content in named):
                call_id, event_id = diagnostic["toolCallId"], diagnostic["eventId"]
                message = f"{call_id!r} is not the tool-call id of event {event_id!r} ({clause})"
                problems.append((f"{at}/toolCallId", message))
    return problems


# Damaged rows that are valid JSON of another run, or a blank line: section 9.1 decides them per profile.
_OPEN_DAMAGES: Final = frozenset({"other-session", "other-run", "blank"})


def ledger_problems(fault: Mapping[str, Any], rows: int, expect: Mapping[str, Any]) -> list[Problem]:
    """Where a ledger-fault expectation contradicts what the fault leaves in a ledger of *rows* rows.

    Pointers are below the case. A torn last row leaves the rows before it and a read that succeeds
    (STORE-3, STORE-4); a damaged committed row is the first row that is no RuntimeEvent, so the read fails
    closed at its line (STORE-5). Faults whose readings the spec leaves open (alternatives, section 9.1),
    appends after the fault and rows of another run have their own rules and are left to the runner.
    """
    if "alternatives" in expect or fault.get("appendAfter") or fault.get("damage") in _OPEN_DAMAGES:
        return []
    if fault["kind"] not in ("tear-last-row", "damage-row"):
        return []
    if fault["kind"] == "tear-last-row":
        if expect["status"] != "ok":
            return [("/expect/status", "must be ok: a torn tail is never corruption, the read succeeds (STORE-4)")]
        if expect["committedRows"] != rows - 1:
            message = (
                f"must be {rows - 1}: the torn last row of {rows} is not committed, the rows before it are (STORE-3)"
            )
            return [("/expect/committedRows", message)]
        return []
    row = fault["row"]
    if expect["status"] != "corrupt":
        return [("/expect/status", f"must be corrupt: row {row} is damaged and the read fails closed (STORE-5)")]
    if expect["line"] != row:
        message = f"must be {row}: the damaged row is the first that is no RuntimeEvent (STORE-5)"
        return [("/expect/line", message)]
    return []


def _raise_first(file: FixtureFile, problems: list[Problem], at: str, case_id: str | None) -> None:
    if problems:
        pointer, message = problems[0]
        raise file.error(message, at + pointer, case_id)


def _check_semantics(
    file: FixtureFile, case_id: str, events: Sequence[Event], high_water: int | None, expect: Mapping[str, Any], at: str
) -> None:
    """An expectation the spec's clauses contradict would be blamed on every implementation: refuse it."""
    core_reasons = {
        **expect,
        "rejectionReasons": [r for r in expect["rejectionReasons"] if r != "ledger_integrity_violation"],
    }
    for problems in (
        offset_problems(len(events), high_water, expect),
        reason_problems(core_reasons),
        tool_problems(events, expect),
    ):
        _raise_first(file, problems, at, case_id)


def _check_strict_extends(
    file: FixtureFile,
    case_id: str,
    events: Sequence[Event],
    core: Mapping[str, Any],
    strict: Mapping[str, Any],
    at: str,
) -> None:
    """A strict expectation is the core one plus strict diagnostics and their reason (spec 8, STRICT-7)."""
    kept = {
        "requiresVerification": (core["requiresVerification"], strict["requiresVerification"]),
        "sourceRuntimeEventHighWater": (core["sourceRuntimeEventHighWater"], strict["sourceRuntimeEventHighWater"]),
        "operations": (expected_operations(events, core), expected_operations(events, strict)),
        "replay": (core["replay"], strict["replay"]),
    }
    for name, (want, got) in kept.items():
        if not same_json(want, got):
            raise file.error(
                f"{name} must equal the core expectation's: strict rules change neither operations nor replay (spec 8)",
                f"{at}/{name}",
                case_id,
            )

    def keys(expectation: Mapping[str, Any]) -> Counter[tuple[str, str, str]]:
        return Counter((d["code"], d.get("eventId", ""), d.get("toolCallId", "")) for d in expectation["diagnostics"])

    core_keys, strict_keys = keys(core), keys(strict)
    added = strict_keys - core_keys
    if core_keys - strict_keys or any(code not in STRICT_CODES for code, _, _ in added.elements()):
        raise file.error(
            "diagnostics must be the core expectation's plus strict codes only (spec 8)", f"{at}/diagnostics", case_id
        )
    if not added:
        raise file.error(
            "adds no strict diagnostic to the core expectation; leave expect_strict out (spec 0.1)", at, case_id
        )
    reasons = {*core["rejectionReasons"], "ledger_integrity_violation"}
    if set(strict["rejectionReasons"]) != reasons:
        raise file.error(
            f"rejectionReasons must be {sorted(reasons)}: the core ones plus ledger_integrity_violation (STRICT-7)",
            f"{at}/rejectionReasons",
            case_id,
        )


def _decision(file: FixtureFile, data: dict[str, Any], index: int, raw: dict[str, Any]) -> DecisionCase:
    at = f"/cases/{index}"
    events = read_events(file, [data.get("envelope"), raw.get("envelope")], raw["events"], f"{at}/events", raw["id"])
    high_water = raw.get("expectedHighWater")
    _check_references(file, raw["id"], events, raw["expect"], f"{at}/expect")
    _check_consistency(file, raw["id"], raw["profile"], events, raw["expect"], f"{at}/expect")
    _check_semantics(file, raw["id"], events, high_water, raw["expect"], f"{at}/expect")
    strict = raw.get("expect_strict")
    if strict is not None:
        if raw["profile"] != "core":
            raise file.error(
                "only a core case has expect_strict: a strict case's expect already is its strict expectation",
                f"{at}/expect_strict",
                raw["id"],
            )
        _check_references(file, raw["id"], events, strict, f"{at}/expect_strict")
        _check_consistency(file, raw["id"], "strict", events, strict, f"{at}/expect_strict")
        _check_strict_extends(file, raw["id"], events, raw["expect"], strict, f"{at}/expect_strict")
        _check_semantics(file, raw["id"], events, high_water, strict, f"{at}/expect_strict")
    return DecisionCase(
        id=raw["id"],
        description=raw["description"],
        clauses=tuple(raw["clauses"]),
        profile=raw["profile"],
        source=file.source(at),
        events=events,
        expect=raw["expect"],
        expect_strict=strict,
        expected_high_water=high_water,
    )


def read_decisions(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The decision cases of a ``phase0/decisions`` file."""
    for index, raw in file.good_cases(data):
        case = file.attempt(lambda: _decision(file, data, index, raw))  # noqa: B023 (called at once)
        if case is not None:
            yield case


# FP-1: the committed prefix each failpoint leaves behind, P0 first. P8 is a crash during the terminal
# append, so it leaves the prefix before it (FP-2).
_FP1_PREFIXES: Final = (
    "before_function_call",
    *["after_function_call"] * 4,
    *["after_function_response"] * 4,
    *["after_terminal_event"] * 3,
)


def _check_failpoint_ids(file: FixtureFile, failpoints: Sequence[Mapping[str, Any]]) -> None:
    """The ids must be FP-1's P0 to P11, in order, each once.

    The schema knows only an id's shape: a gap, a repeat or a missing boundary would pass it and leave a
    boundary of the spec untested without a word.
    """
    first: dict[str, int] = {}
    for index, failpoint in enumerate(failpoints):
        found, expected, at = failpoint["id"], f"P{index}", f"/failpoints/{index}/id"
        if found in first:
            raise file.error(f"duplicate failpoint id {found!r} (first at /failpoints/{first[found]})", at)
        first[found] = index
        if index >= len(_FP1_PREFIXES):
            raise file.error(f"failpoint id {found!r} is past P{len(_FP1_PREFIXES) - 1}, FP-1's last boundary", at)
        if found != expected:
            raise file.error(
                f"failpoint id {found!r} where FP-1 has {expected!r}: the ids run P0, P1, ... in order, without gaps",
                at,
            )
    if len(failpoints) < len(_FP1_PREFIXES):
        missing, last = f"P{len(failpoints)}", f"P{len(_FP1_PREFIXES) - 1}"
        raise file.error(f"the catalog stops before {missing!r}: FP-1 names P0 to {last}", "/failpoints")


def _check_failpoint_prefixes(file: FixtureFile, failpoints: Sequence[Mapping[str, Any]]) -> None:
    """Each failpoint must leave the committed prefix FP-1 gives it, or its crash case checks the wrong decision."""
    for index, failpoint in enumerate(failpoints):
        found, expected = failpoint["committedPrefix"], _FP1_PREFIXES[index]
        if found != expected:
            raise file.error(
                f"failpoint {failpoint['id']!r} leaves the committed prefix {expected!r} (FP-1), not {found!r}",
                f"/failpoints/{index}/committedPrefix",
            )


def read_failpoints(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The catalog yields a decision case per prefix and a crash case per failpoint."""
    _check_failpoint_ids(file, data["failpoints"])
    _check_failpoint_prefixes(file, data["failpoints"])
    scenario = read_events(file, [data.get("envelope")], data["scenario"], "/scenario", None)
    prefixes = data["prefixes"]
    for name, prefix in prefixes.items():
        at = f"/prefixes/{name}"
        if prefix["length"] > len(scenario):
            raise file.error(
                f"length {prefix['length']} is longer than the scenario ({len(scenario)} events)", f"{at}/length"
            )
        events = scenario[: prefix["length"]]
        _check_references(file, f"prefix-{name}", events, prefix["expect"], f"{at}/expect")
        _check_consistency(file, f"prefix-{name}", "core", events, prefix["expect"], f"{at}/expect")
        _check_semantics(file, f"prefix-{name}", events, None, prefix["expect"], f"{at}/expect")
        yield DecisionCase(
            id=f"prefix-{name.replace('_', '-')}",
            description=f"The committed prefix {name} of the failpoint scenario.",
            clauses=tuple(prefix["clauses"]),
            profile="core",
            source=file.source(at),
            events=events,
            expect=prefix["expect"],
        )
    for index, failpoint in enumerate(data["failpoints"]):
        at = f"/failpoints/{index}"
        name = failpoint["committedPrefix"]
        if name not in prefixes:
            raise file.error(f"committedPrefix {name!r} is not defined under /prefixes", f"{at}/committedPrefix")
        yield CrashCase(
            id=f"crash-{failpoint['id'].lower()}",
            description=f"Crash at {failpoint['id']}: {failpoint['boundary']}.",
            clauses=tuple(failpoint["clauses"]),
            profile="core",
            source=file.source(at),
            failpoint=failpoint["id"],
            boundary=failpoint["boundary"],
            prefix_name=name,
            events=scenario[: prefixes[name]["length"]],
            expect=prefixes[name]["expect"],
        )


def _has_text(event: Mapping[str, Any]) -> bool:
    content = event.get("content")
    return isinstance(content, Mapping) and content.get("kind") == "text" and isinstance(content.get("text"), str)


def read_ledger_faults(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The cases of a ``phase0/ledger-faults`` file: bytes the kit damages, and what a read must report."""
    ledger = read_events(file, [data.get("envelope")], data["ledger"], "/ledger", None)
    for index, raw in file.good_cases(data):
        at = f"/cases/{index}"
        row = raw["fault"].get("row")
        if row is not None and not 1 <= row <= len(ledger):
            file.report(
                file.error(f"row {row} is outside the ledger's {len(ledger)} rows", f"{at}/fault/row", raw["id"])
            )
            continue
        if raw["fault"].get("damage") == "invalid-utf8-in-string" and not _has_text(ledger[row - 1]):
            message = f"row {row} holds no text content for the invalid-utf8-in-string damage"
            file.report(file.error(message, f"{at}/fault/row", raw["id"]))
            continue
        problems = ledger_problems(raw["fault"], len(ledger), raw["expect"])
        if problems:
            pointer, message = problems[0]
            file.report(file.error(message, at + pointer, raw["id"]))
            continue
        problem = _ledger_expectation_problem(raw, len(ledger))
        if problem is not None:
            message, pointer = problem
            file.report(file.error(message, f"{at}{pointer}", raw["id"]))
            continue
        yield LedgerFaultCase(
            id=raw["id"],
            description=raw["description"],
            clauses=tuple(raw["clauses"]),
            profile=raw["profile"],
            source=file.source(at),
            fault=raw["fault"],
            events=ledger,
            expect=raw["expect"],
            expect_strict=raw.get("expect_strict"),
        )


_APPENDING = ("append-other-run",)


def _without_reading(expectation: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in expectation.items() if key != "reading"}


def _ledger_expectation_problem(raw: Mapping[str, Any], rows: int) -> tuple[str, str] | None:
    """What makes a ledger-fault case's expectations unmeetable or inconsistent, with its pointer, or None."""
    expect, strict = raw["expect"], raw.get("expect_strict")
    alternatives = list(expect["alternatives"]) if "alternatives" in expect else [expect]
    where = [f"/expect/alternatives/{i}" for i in range(len(alternatives))] if "alternatives" in expect else ["/expect"]
    appends = bool(raw["fault"].get("appendAfter")) or raw["fault"]["kind"] in _APPENDING
    named = [alternative.get("reading") for alternative in alternatives]
    if len(set(named)) != len(named):
        return "two alternatives share a reading name", "/expect/alternatives"
    checked = [*zip(alternatives, where, strict=True), *([(strict, "/expect_strict")] if strict else [])]
    for expectation, pointer in checked:
        if "append" in expectation and not appends:
            return "'append' is for a fault that appends (appendAfter, append-other-run)", f"{pointer}/append"
        too_many = [row for row in expectation.get("rows", []) if row > rows]
        if expectation.get("committedRows", 0) > rows or too_many:
            return f"the ledger has only {rows} rows", pointer
    if strict is not None:
        if raw["profile"] != "core":
            return "only a core case has expect_strict: a strict case's expect is its strict one", "/expect_strict"
        if _without_reading(strict) not in [_without_reading(alternative) for alternative in alternatives]:
            return (
                "expect_strict must be one of the core alternatives: strict accepts a subset of what core accepts "
                "(spec 0.1)",
                "/expect_strict",
            )
    return None


def read_crash_schedule(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The cases of a ``phase0/crash-schedule`` file, each template checked to make valid events."""
    for index, raw in file.good_cases(data):
        at = f"/cases/{index}"
        # The template must make valid events once the kit gives it an id.
        template = {**raw["template"], "id": "row-00000"}
        envelopes = [data.get("envelope")]
        made = file.attempt(lambda: read_events(file, envelopes, [template], f"{at}/template", raw["id"]))  # noqa: B023
        if made is None:
            continue
        yield ScheduleCase(
            id=raw["id"],
            description=raw["description"],
            clauses=tuple(raw["clauses"]),
            profile=raw["profile"],
            source=file.source(at),
            template=merge([data.get("envelope")], raw["template"]),
        )
