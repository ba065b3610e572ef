"""Golden fixture files become frozen cases, or a clear error naming file, case, line and pointer."""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import gc
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from resumekit.conformance import _cache, _yaml, schemas
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.canonical import same_json
from resumekit.conformance.cases import Case, Event
from resumekit.conformance.p1.cases import MatrixCase, ScenarioCase, SoakCase
from resumekit.conformance.p1.gates import scenario_clauses
from resumekit.conformance.phase0.cases import CrashCase, DecisionCase, LedgerFaultCase, ScheduleCase
from resumekit.conformance.phase0.plan_checks import expected_operations
from resumekit.conformance.results import Source

SUPPORTED_SCHEMA_VERSIONS = (1,)

# Each fixture file says its kind; the kind names the schema that file must satisfy.
FILE_SCHEMAS = {
    "phase0/decisions": schemas.DECISIONS_FILE,
    "phase0/failpoints": schemas.FAILPOINTS_FILE,
    "phase0/ledger-faults": schemas.LEDGER_FAULTS_FILE,
    "phase0/crash-schedule": schemas.CRASH_SCHEDULE_FILE,
    "p1/scenarios": schemas.P1_SCENARIOS_FILE,
    "p1/failpoints": schemas.P1_FAILPOINTS_FILE,
    "p1/crash-matrix": schemas.P1_CRASH_MATRIX_FILE,
    "p1/soak": schemas.P1_SOAK_FILE,
}

KIND_ORDER = ("decision", "crash", "ledger-fault", "schedule", "p1", "p1-campaign")
# Kinds that run only when asked for by name (--kind): campaigns of hundreds of worker runs, too long
# for every certification run; a run without them is a certification of everything else.
OPT_IN_KINDS = ("p1-campaign",)


class FixtureError(Exception):
    """A fixture file that cannot be used: unreadable, not YAML, or breaking its schema."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        line: int | None = None,
        case_id: str | None = None,
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file, self.message, self.line, self.case_id, self.pointer = file, message, line, case_id, pointer

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        parts = [where]
        if self.case_id:
            parts.append(f"case {self.case_id!r}")
        if self.pointer is not None:
            parts.append(f"at {self.pointer or '/'}")
        return f"{': '.join(parts)}: {self.message}"


@dataclass(frozen=True, slots=True)
class Suite:
    """Every case of the golden directory, in file order."""

    cases: tuple[Case, ...]
    root: Path
    digest: str = ""  # sha256 over every fixture file's path and bytes: which golden set a run used

    def select(
        self, profile: str = "strict", only: Sequence[str] = (), kinds: Iterable[str] | None = None
    ) -> list[Case]:
        """The cases to run for *profile*, limited to ids matching any glob of *only*."""
        wanted = set(kinds) if kinds is not None else None
        chosen = [
            case
            for case in self.cases
            if case.runs_in(profile)
            and (case.kind in wanted if wanted is not None else case.kind not in OPT_IN_KINDS)
            and (not only or any(fnmatch.fnmatchcase(case.id, pattern) for pattern in only))
        ]
        # Quick decisions first, the slow crash kinds last, each kind in file order.
        return sorted(chosen, key=lambda case: KIND_ORDER.index(case.kind))

    @property
    def clauses(self) -> dict[str, list[str]]:
        """Clause id -> the ids of the cases that cite it."""
        cited: dict[str, list[str]] = {}
        for case in self.cases:
            for clause in case.clauses:
                cited.setdefault(clause, []).append(case.id)
        return cited


def _ancestors(pointer: str) -> Iterator[str]:
    while pointer:
        pointer = pointer.rsplit("/", 1)[0]
        yield pointer


class _Reported:
    """JSON pointers already reported, asked in time linear in a pointer's depth, not in their number."""

    def __init__(self) -> None:
        self.pointers: set[str] = set()
        self.enclosing: set[str] = set()

    def add(self, pointer: str) -> None:
        self.pointers.add(pointer)
        self.enclosing.update(_ancestors(pointer))

    def related(self, pointer: str) -> bool:
        """Whether *pointer* is a reported one, encloses one, or lies inside one."""
        if pointer in self.pointers or pointer in self.enclosing:
            return True
        return any(ancestor in self.pointers for ancestor in _ancestors(pointer))


class _Abandon(Exception):
    """The rest of a file cannot be read; its problems are recorded already."""


def _merge(envelopes: Sequence[Mapping[str, Any] | None], template: Mapping[str, Any]) -> Event:
    event: Event = {}
    for envelope in envelopes:
        event.update(envelope or {})
    event.update(template)
    return event


_T = TypeVar("_T")


def _name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _read(path: Path, name: str) -> bytes:
    """The bytes of a fixture file: a regular file of at most ``_yaml.MAX_BYTES`` (a FIFO would block)."""
    try:
        return _yaml.read(path)
    except OSError as error:
        raise FixtureError(name, f"cannot be read: {error.strerror or error}") from None


class _File:
    """One fixture file being read: its document and how to point into it.

    With a *problems* list the file is read to the end: each case that breaks a rule is recorded there
    and left out, and the other cases still load (``resumekit validate`` names every problem at once).
    Without one, the first problem raises.
    """

    def __init__(
        self, path: Path, root: Path, problems: list[FixtureError] | None = None, raw: bytes | None = None
    ) -> None:
        self.path = path
        self.problems = problems
        self.bad_cases: set[int] = set()
        self.name = _name(path, root)
        if raw is None:
            raw = _read(path, self.name)
        try:
            self.document = _yaml.load(_yaml.decode(raw))
        except _yaml.YamlError as error:
            raise FixtureError(self.name, error.message, line=error.line) from None

    def error(self, message: str, pointer: str, case_id: str | None = None) -> FixtureError:
        return FixtureError(self.name, message, line=self.document.line_of(pointer), case_id=case_id, pointer=pointer)

    def source(self, pointer: str) -> Source:
        return Source(self.name, self.document.line_of(pointer))

    def case_id_at(self, pointer: str) -> str | None:
        data = self.document.data
        parts = pointer.split("/")
        if len(parts) >= 3 and parts[1] == "cases" and parts[2].isdigit():
            cases = data.get("cases") if isinstance(data, dict) else None
            if isinstance(cases, list) and int(parts[2]) < len(cases) and isinstance(cases[int(parts[2])], dict):
                found = cases[int(parts[2])].get("id")
                return found if isinstance(found, str) else None
        return None

    def validated(self) -> dict[str, Any]:
        data = self.document.data
        if not isinstance(data, dict):
            raise self.error(f"a fixture file is a YAML mapping, not {type(data).__name__}", "")
        version = data.get("schema_version")
        if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:
            raise self.error(
                f"schema_version {version!r} is not one this resumekit knows "
                f"(it reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}); upgrade resumekit or fix the file",
                "/schema_version",
            )
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in FILE_SCHEMAS:
            raise self.error(f"kind {kind!r} is not one of {sorted(FILE_SCHEMAS)}", "/kind")
        if self.problems is None:
            violation = schemas.first_violation(FILE_SCHEMAS[kind], data, exact_integers=True)
            if violation is not None:
                raise self.error(violation.message, violation.pointer, self.case_id_at(violation.pointer))
            return data
        found: list[FixtureError] = []
        reported = _Reported()
        for violation in schemas.violations(FILE_SCHEMAS[kind], data, exact_integers=True):
            # One problem, one report: an enclosing oneOf repeats the error best_match already gave.
            if reported.related(violation.pointer):
                continue
            reported.add(violation.pointer)
            found.append(self.error(violation.message, violation.pointer, self.case_id_at(violation.pointer)))
        self.problems.extend(found)
        for error in found:
            parts = (error.pointer or "").split("/")
            if len(parts) >= 3 and parts[1] == "cases" and parts[2].isdigit():
                self.bad_cases.add(int(parts[2]))
            else:  # outside any case: nothing in the file can be trusted
                raise _Abandon
        return data

    def good_cases(self, data: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The file's cases with their indexes, less those that broke the schema."""
        for index, raw in enumerate(data["cases"]):
            if index not in self.bad_cases:
                yield index, raw

    def report(self, error: FixtureError) -> None:
        """Raise *error*, or record it if problems are being collected."""
        if self.problems is None:
            raise error
        self.problems.append(error)

    def attempt(self, build: Callable[[], _T]) -> _T | None:
        """*build*'s value; when it raises FixtureError, None if problems are being collected."""
        try:
            return build()
        except FixtureError as error:
            if self.problems is None:
                raise
            self.problems.append(error)
            return None

    def events(
        self, envelopes: Sequence[Mapping[str, Any] | None], templates: list[Any], at: str, case_id: str | None
    ) -> tuple[Event, ...]:
        events = []
        for index, template in enumerate(templates):
            event = _merge(envelopes, template)
            violation = schemas.first_violation(schemas.RUNTIME_EVENT, event, exact_integers=True)
            if violation is not None:
                where = f"{at}/{index}{violation.pointer}"
                raise self.error(f"event is not a valid RuntimeEvent: {violation.message}", where, case_id)
            events.append(event)
        return tuple(events)


def _check_references(file: _File, case_id: str, events: Sequence[Event], expect: Mapping[str, Any], at: str) -> None:
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
    file: _File, case_id: str, profile: str, events: Sequence[Event], expect: Mapping[str, Any], at: str
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


def _raise_first(file: _File, problems: list[Problem], at: str, case_id: str | None) -> None:
    if problems:
        pointer, message = problems[0]
        raise file.error(message, at + pointer, case_id)


def _check_semantics(
    file: _File, case_id: str, events: Sequence[Event], high_water: int | None, expect: Mapping[str, Any], at: str
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
    file: _File, case_id: str, events: Sequence[Event], core: Mapping[str, Any], strict: Mapping[str, Any], at: str
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


def _decision(file: _File, data: dict[str, Any], index: int, raw: dict[str, Any]) -> DecisionCase:
    at = f"/cases/{index}"
    events = file.events([data.get("envelope"), raw.get("envelope")], raw["events"], f"{at}/events", raw["id"])
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


def _decisions(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    for index, raw in file.good_cases(data):
        case = file.attempt(lambda: _decision(file, data, index, raw))  # noqa: B023 (called at once)
        if case is not None:
            yield case


def _failpoints(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    """The catalog yields a decision case per prefix and a crash case per failpoint."""
    scenario = file.events([data.get("envelope")], data["scenario"], "/scenario", None)
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


def _ledger_faults(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    ledger = file.events([data.get("envelope")], data["ledger"], "/ledger", None)
    for index, raw in file.good_cases(data):
        at = f"/cases/{index}"
        row = raw["fault"].get("row")
        if row is not None and not 1 <= row <= len(ledger):
            file.report(
                file.error(f"row {row} is outside the ledger's {len(ledger)} rows", f"{at}/fault/row", raw["id"])
            )
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


def _crash_schedule(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    for index, raw in file.good_cases(data):
        at = f"/cases/{index}"
        # The template must make valid events once the kit gives it an id.
        template = {**raw["template"], "id": "row-00000"}
        if file.attempt(lambda: file.events([data.get("envelope")], [template], f"{at}/template", raw["id"])) is None:  # noqa: B023
            continue
        yield ScheduleCase(
            id=raw["id"],
            description=raw["description"],
            clauses=tuple(raw["clauses"]),
            profile=raw["profile"],
            source=file.source(at),
            template=_merge([data.get("envelope")], raw["template"]),
        )


def _declared(file: _File, raw: Mapping[str, Any], at: str) -> dict[str, Any]:
    """The fields every P1 case declares for itself in its file: id, description, clauses, profile, gates."""
    return {
        "id": raw["id"],
        "description": raw["description"],
        "clauses": scenario_clauses(raw["clauses"], raw["gates"]),
        "profile": raw["profile"],
        "source": file.source(at),
        "gates": tuple(raw["gates"]),
    }


def _check_task_names(file: _File, data: Mapping[str, Any], case_id: str, named: Sequence[tuple[str, str]]) -> None:
    for pointer, name in named:
        if name not in data["tasks"]:
            raise file.error(f"names task {name!r}, which the file's tasks do not define", pointer, case_id)
        if pointer.endswith("/tasks") or "/issue/" in pointer:
            repository = data["tasks"][name]["repository"]
            if repository not in data["repositories"]:
                message = f"task {name!r} names repository {repository!r}, which is not defined"
                raise file.error(message, pointer, case_id)


_PLACEHOLDER_OID = "0" * 39 + "1"


def _check_p1_templates(file: _File, data: Mapping[str, Any]) -> None:
    """Each task template, filled as the kit fills it, must be a task the control plane may serve (TASK-1)."""
    for name, template in data["tasks"].items():
        repository = data["repositories"].get(template["repository"])
        if repository is None:
            raise file.error(
                f"names repository {template['repository']!r}, which is not defined", f"/tasks/{name}/repository"
            )
        task = {
            "attempt": 1,
            "base_oid": _PLACEHOLDER_OID,
            "expected_branch_oid": _PLACEHOLDER_OID,
            "target_branch": repository["branch"],
            "payload": {},
            "origin_url": "file:///origin.git",
            **template,
        }
        violation = schemas.first_violation(schemas.P1_TASK, task, exact_integers=True)
        if violation is not None:
            raise file.error(f"is not a valid task: {violation.message}", f"/tasks/{name}{violation.pointer}")


def _check_commit_names(
    file: _File, data: Mapping[str, Any], reissue: Mapping[str, Any], at: str, case_id: str
) -> None:
    """A re-issue may name the kit's commits as @base or @later; @later needs the repository's later files."""
    changes = reissue.get("changes", {})
    repository = changes.get("repository", data["tasks"][reissue["task"]]["repository"])
    if repository not in data["repositories"]:
        raise file.error(f"names repository {repository!r}, which is not defined", f"{at}/changes/repository", case_id)
    for key, value in changes.items():
        if not (isinstance(value, str) and value.startswith("@")):
            continue
        if value not in ("@base", "@later"):
            raise file.error(f"{value!r} is not a commit the kit makes (@base, @later)", f"{at}/changes/{key}", case_id)
        if value == "@later" and "later" not in data["repositories"][repository]:
            message = f"'@later' needs 'later' files in repository {repository!r}"
            raise file.error(message, f"{at}/changes/{key}", case_id)


def _check_faults(file: _File, faults: Sequence[tuple[str, Mapping[str, Any]]], case_id: str) -> None:
    from resumekit.conformance.p1.cp_faults import FaultError, fault_from_mapping

    for pointer, fault in faults:
        try:
            fault_from_mapping(fault)
        except (FaultError, TypeError, ValueError) as error:
            raise file.error(f"is not a control-plane fault: {error}", pointer, case_id) from None


def _p1_scenarios(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["scenarios"]):
        at = f"/scenarios/{index}"
        named = [(f"{at}/issue/{i}", name) for i, name in enumerate(raw["issue"])]
        named += [(f"{at}/expect", name) for name in raw["expect"]]
        for i, step in enumerate(raw["steps"]):
            for key in ("issue",):
                if key in step:
                    named.append((f"{at}/steps/{i}/{key}", step[key]))
            for key in ("reissue", "state", "damage_cache"):
                if key in step:
                    named.append((f"{at}/steps/{i}/{key}/task", step[key]["task"]))
        _check_task_names(file, data, raw["id"], named)
        for i, step in enumerate(raw["steps"]):
            if "reissue" in step:
                _check_commit_names(file, data, step["reissue"], f"{at}/steps/{i}/reissue", raw["id"])
        faults = [(f"{at}/faults/{i}", fault) for i, fault in enumerate(raw.get("faults", ()))]
        faults += [(f"{at}/steps/{i}/fault", step["fault"]) for i, step in enumerate(raw["steps"]) if "fault" in step]
        _check_faults(file, faults, raw["id"])
        yield ScenarioCase(
            **_declared(file, raw, at),
            repositories=data["repositories"],
            tasks=data["tasks"],
            issue=tuple(raw["issue"]),
            faults=tuple(raw.get("faults", ())),
            steps=tuple(raw["steps"]),
            expect=raw["expect"],
            ttl_ms=raw.get("ttl_ms", 30_000),
        )


# The gates every derived crash scenario exercises (docs/spec/p1.md, GATE-2, GATE-4, GATE-5).
_CRASH_GATES = ("RESUME_FROM_CHECKPOINT", "CRASH_RECOVERY_CONVERGENCE", "WORKER_RESTART_RESUME")


def _p1_failpoints(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    """The catalog yields one crash scenario per failpoint and task that reaches it (FPT-4)."""
    _check_p1_templates(file, data)
    for group in ("worker", "kit"):
        for index, point in enumerate(data[group]):
            at = f"/{group}/{index}"
            _check_task_names(file, data, point["name"], [(f"{at}/tasks", name) for name in point["tasks"]])
            for name in point["tasks"]:
                steps: list[dict[str, Any]] = []
                if point.get("plant_stale_workspace"):
                    steps.append({"plant": {"name": "task-stale-0"}})
                if group == "worker":
                    faults: tuple[Mapping[str, Any], ...] = ()
                    steps += [{"start": {"failpoint": {"name": point["name"], "hit": 1}}}, {"wait": "blocked"}]
                    steps.append({"kill": {}})
                else:
                    faults = ({"fault": "KillPoint", "name": point["name"]},)
                    steps += [{"start": {}}, {"wait": "killed"}]
                if point.get("expire_lease"):
                    steps.append({"clock": 30_001})
                steps += [{"start": {}}, {"wait": "idle"}]
                task = data["tasks"][name]
                outcome: dict[str, Any] = {"final": "result_submitted", "state": "VERIFYING", "stored": True}
                if task["kind"] == "commit":
                    outcome["pushes"] = 1
                yield ScenarioCase(
                    id=f"p1-crash-{name}-{point['name'].replace('_', '-')}",
                    description=f"Kill the worker at {point['name']} ({point['site']}) during the {name} task.",
                    clauses=scenario_clauses(point["clauses"], _CRASH_GATES),
                    profile="core",
                    source=file.source(at),
                    gates=_CRASH_GATES,
                    repositories=data["repositories"],
                    tasks=data["tasks"],
                    issue=(name,),
                    faults=faults,
                    steps=tuple(steps),
                    expect={name: outcome},
                )


def _p1_crash_matrix(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    """One campaign case per matrix; its runs are found by the loop, not listed (FPT-5)."""
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["matrices"]):
        at = f"/matrices/{index}"
        _check_task_names(file, data, raw["id"], [(f"{at}/task", raw["task"])])
        if raw.get("first") and raw["crashes"] != 2:
            message = "'first' names the first crash of a two-crash matrix; set crashes: 2"
            raise file.error(message, f"{at}/first", raw["id"])
        if raw.get("tear") and (raw["crashes"] != 1 or raw.get("kit_points")):
            message = "a tear sweep kills once per run, at its own failpoint; set crashes: 1 and no kit_points"
            raise file.error(message, f"{at}/tear", raw["id"])
        name = raw["task"]
        outcome: dict[str, Any] = {"final": "result_submitted", "state": "VERIFYING", "stored": True}
        if data["tasks"][name]["kind"] == "commit":
            outcome["pushes"] = 1
        yield MatrixCase(
            **_declared(file, raw, at),
            repositories=data["repositories"],
            tasks=data["tasks"],
            issue=(name,),
            faults=(),
            steps=(),
            expect={name: outcome},
            task=name,
            crashes=raw["crashes"],
            first=tuple(raw.get("first", ())),
            kit_points=tuple(raw.get("kit_points", ())),
            limit=raw.get("limit", 200),
            tear=raw.get("tear"),
        )


def _p1_soak(file: _File, data: dict[str, Any]) -> Iterator[Case]:
    """One campaign case per soak; its K tasks are copies of the two templates, each commit task on a
    branch of its own so that their governed commits never meet."""
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["soaks"]):
        at = f"/soaks/{index}"
        _check_task_names(file, data, raw["id"], [(f"{at}/templates/{i}", n) for i, n in enumerate(raw["templates"])])
        repositories = copy.deepcopy(data["repositories"])
        tasks: dict[str, dict[str, Any]] = {}
        expect: dict[str, dict[str, Any]] = {}
        for number in range(1, raw["tasks"] + 1):
            template_name = raw["templates"][(number - 1) % len(raw["templates"])]
            template = data["tasks"][template_name]
            name = f"{template_name}-{number:02d}"
            suffix = f"-{number:02d}"
            task = dict(template, task_id=template["task_id"] + suffix, job_id=template["job_id"] + suffix)
            outcome: dict[str, Any] = {"final": "result_submitted", "stored": True}
            if template["kind"] == "commit":
                branch = f"soak-{number:02d}"
                repository = repositories[template["repository"]]
                repository["branches"] = [*repository.get("branches", ()), branch]
                task["target_branch"] = branch
                outcome["pushes"] = 1
            tasks[name], expect[name] = task, outcome
        yield SoakCase(
            **_declared(file, raw, at),
            repositories=repositories,
            tasks=tasks,
            issue=tuple(tasks),
            faults=(),
            steps=(),
            expect=expect,
            seed=raw["seed"],
            rounds=raw["rounds"],
            faults_per_round=raw["faults_per_round"],
            max_hit=raw["max_hit"],
            budget=float(raw.get("budget_s", 600)),
        )


_READERS = {
    "phase0/decisions": _decisions,
    "phase0/failpoints": _failpoints,
    "phase0/ledger-faults": _ledger_faults,
    "phase0/crash-schedule": _crash_schedule,
    "p1/scenarios": _p1_scenarios,
    "p1/failpoints": _p1_failpoints,
    "p1/crash-matrix": _p1_crash_matrix,
    "p1/soak": _p1_soak,
}


def load_file(
    path: Path, root: Path | None = None, problems: list[FixtureError] | None = None, raw: bytes | None = None
) -> list[Case]:
    """Every case of one fixture file, or FixtureError.

    With *problems*, every problem found is appended to it instead, and the cases without one are returned.
    *raw* is the file's bytes when the caller has read them already.
    """
    # A file of many cases makes millions of small objects and no cycles: the collector's full passes over
    # them would make loading grow faster than the file.
    collecting = gc.isenabled()
    gc.disable()
    try:
        file = _File(path, root or path.parent, problems, raw)
        data = file.validated()
        return list(_READERS[data["kind"]](file, data))
    except _Abandon:
        return []
    except FixtureError as error:
        if problems is None:
            raise
        problems.append(error)
        return []
    finally:
        if collecting:
            gc.enable()


def fixture_files(root: Path) -> list[Path]:
    """The fixture files below *root*, in a stable order on every OS; FileNotFoundError if it is no folder."""
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise FileNotFoundError(f"the golden folder {root} {what}")
    return sorted(
        (p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()), key=lambda p: p.as_posix()
    )


def load_suite(root: Path | None = None, *, cache: bool = True) -> Suite:
    """Every case below *root* (the bundled golden directory by default); ids are unique across files.

    With *cache*, a golden set validated before is read back from the user's cache when every byte it was
    built from is the same (``_cache``); otherwise each file is parsed and checked, and the result cached.
    """
    root = root or golden_dir()
    files = [(path, _name(path, root)) for path in fixture_files(root)]
    contents = [_read(path, name) for path, name in files]
    digest = hashlib.sha256()
    for (_, name), raw in zip(files, contents, strict=True):
        digest.update(name.encode() + b"\0" + raw + b"\0")
    key = _cache.key(digest.hexdigest()) if cache else None
    if key is not None:
        cached = _cache.load(root, key)
        if cached is not None:
            try:
                return Suite(_decode_cases(cached), root, digest.hexdigest())
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a cache from elsewhere or damaged: read the files
    cases: list[Case] = []
    seen: dict[str, Source] = {}
    for (path, _), raw in zip(files, contents, strict=True):
        for case in load_file(path, root, raw=raw):
            if case.id in seen:
                raise FixtureError(
                    case.source.file,
                    f"duplicate case id (first defined at {seen[case.id]})",
                    line=case.source.line,
                    case_id=case.id,
                )
            seen[case.id] = case.source
            cases.append(case)
    if key is not None:
        _cache.store(root, key, _encode_cases(cases))
    return Suite(tuple(cases), root, digest.hexdigest())


# Keyed by class name, not by kind: one kind (p1-campaign) has two classes.
_CASE_TYPES: dict[str, type[Case]] = {
    cls.__name__: cls
    for cls in (DecisionCase, CrashCase, LedgerFaultCase, ScheduleCase, ScenarioCase, MatrixCase, SoakCase)
}


def _encode_cases(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Cases as JSON values: each field by name, the source as [file, line], the kind to rebuild it."""
    encoded = []
    for case in cases:
        item: dict[str, Any] = {"kind": type(case).__name__}
        for spec in dataclasses.fields(case):
            value = getattr(case, spec.name)
            item[spec.name] = [value.file, value.line] if isinstance(value, Source) else value
        encoded.append(item)
    return encoded


def _decode_cases(encoded: Any) -> tuple[Case, ...]:
    """The cases of ``_encode_cases``; KeyError, TypeError or ValueError when *encoded* is not its output."""
    shapes = {kind: _shape(cls) for kind, cls in _CASE_TYPES.items()}
    cases = []
    for item in encoded:
        kind = item["kind"]
        names, tuples = shapes[kind]
        if item.keys() != names:
            raise ValueError("the cached case's fields are not this kit's")
        values = {name: item[name] for name in names if name != "kind"}
        for name in tuples:
            values[name] = tuple(values[name])
        file, line = values["source"]
        values["source"] = Source(file, line)
        cases.append(_CASE_TYPES[kind](**values))
    return tuple(cases)


def _shape(cls: type[Case]) -> tuple[set[str], list[str]]:
    """A case class's encoded keys, and its fields held as tuples."""
    specs = dataclasses.fields(cls)
    return {"kind", *(spec.name for spec in specs)}, [spec.name for spec in specs if str(spec.type).startswith("tuple")]
