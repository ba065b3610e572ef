"""Golden fixture files become frozen cases, or a clear error naming file, case, line and pointer."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from resumekit.conformance import _yaml, schemas
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.canonical import same_json
from resumekit.conformance.p1.gates import scenario_clauses
from resumekit.conformance.phase0.check import expected_operations
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

Event = dict[str, Any]
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """What every golden case has: an id, the clauses it checks, its profile and where it is written."""

    id: str
    description: str
    clauses: tuple[str, ...]
    profile: str
    source: Source

    kind = "case"

    def runs_in(self, profile: str) -> bool:
        """Strict is a superset of core: a core case runs in both profiles."""
        return self.profile == "core" or profile == "strict"


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionCase(Case):
    """A committed prefix and the plan the spec demands for it."""

    events: tuple[Event, ...]
    expect: Mapping[str, Any]
    expect_strict: Mapping[str, Any] | None = None
    expected_high_water: int | None = None
    line_of: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    kind = "decision"

    def expectation_profile(self, profile: str) -> str:
        """Whose expectation a run in *profile* compares against: ``"strict"`` only where the case has one."""
        return "strict" if profile == "strict" and self.expect_strict is not None else self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """The plan a run in *profile* must produce: ``expect_strict`` under strict where given, else ``expect``."""
        if self.expectation_profile(profile) == "strict" and self.expect_strict is not None:
            return self.expect_strict
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashCase(Case):
    """A failpoint: append its committed prefix, kill the writer, reopen, and decide."""

    failpoint: str
    boundary: str
    prefix_name: str
    events: tuple[Event, ...]
    expect: Mapping[str, Any]

    kind = "crash"

    def expectation_profile(self, profile: str) -> str:
        """The failpoint prefixes have one expectation for both profiles."""
        return self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """The plan a run in *profile* must produce after the crash (the same in both profiles)."""
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerFaultCase(Case):
    """Bytes the kit damages in a ledger file, and what a read must then report."""

    fault: Mapping[str, Any]
    events: tuple[Event, ...]
    expect: Mapping[str, Any]

    kind = "ledger-fault"

    def expectation_profile(self, profile: str) -> str:
        """Ledger-fault cases have one expectation for both profiles (so far)."""
        return self.profile

    def expectation_for(self, profile: str) -> Mapping[str, Any]:
        """What a read in *profile* must report (the same in both profiles, so far)."""
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCase(Case):
    """A long append stream whose writer the kit kills at seeded random moments."""

    template: Mapping[str, Any]

    kind = "schedule"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioCase(Case):
    """A P1 scenario: origins, tasks, scripted faults, the kit's steps, and what each task converges to."""

    gates: tuple[str, ...]
    repositories: Mapping[str, Any]
    tasks: Mapping[str, Mapping[str, Any]]
    issue: tuple[str, ...]
    faults: tuple[Mapping[str, Any], ...]
    steps: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Mapping[str, Any]]
    ttl_ms: int = 30_000

    kind = "p1"


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixCase(ScenarioCase):
    """An exhaustive crash matrix (p1.md FPT-5): one task, killed at every failpoint site it reaches in turn.

    Each visited point is a run of its own in a fresh world; the case passes when every run converged.
    """

    task: str
    crashes: int
    first: tuple[str, ...] = ()
    kit_points: tuple[str, ...] = ()
    limit: int = 200

    kind = "p1-campaign"


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakCase(ScenarioCase):
    """A seeded random soak: many tasks at once, the worker killed at random points and the control plane
    answering with random faults, then every task must converge (FPT-4)."""

    seed: int
    rounds: int
    faults_per_round: int
    max_hit: int
    budget: float

    kind = "p1-campaign"


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


def _related(one: str, two: str) -> bool:
    """Whether one JSON pointer is the other or encloses it."""
    return one == two or one.startswith(two + "/") or two.startswith(one + "/")


class _Abandon(Exception):
    """The rest of a file cannot be read; its problems are recorded already."""


def _merge(envelopes: Sequence[Mapping[str, Any] | None], template: Mapping[str, Any]) -> Event:
    event: Event = {}
    for envelope in envelopes:
        event.update(envelope or {})
    event.update(template)
    return event


_T = TypeVar("_T")


class _File:
    """One fixture file being read: its document and how to point into it.

    With a *problems* list the file is read to the end: each case that breaks a rule is recorded there
    and left out, and the other cases still load (``resumekit validate`` names every problem at once).
    Without one, the first problem raises.
    """

    def __init__(self, path: Path, root: Path, problems: list[FixtureError] | None = None) -> None:
        self.path = path
        self.problems = problems
        self.bad_cases: set[int] = set()
        try:
            self.name = path.relative_to(root).as_posix()
        except ValueError:
            self.name = path.as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise FixtureError(self.name, f"cannot be read: {error}") from None
        try:
            self.document = _yaml.load(text)
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
        if version not in SUPPORTED_SCHEMA_VERSIONS:
            raise self.error(
                f"schema_version {version!r} is not one this resumekit knows "
                f"(it reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}); upgrade resumekit or fix the file",
                "/schema_version",
            )
        kind = data.get("kind")
        if kind not in FILE_SCHEMAS:
            raise self.error(f"kind {kind!r} is not one of {sorted(FILE_SCHEMAS)}", "/kind")
        if self.problems is None:
            violation = schemas.first_violation(FILE_SCHEMAS[kind], data)
            if violation is not None:
                raise self.error(violation.message, violation.pointer, self.case_id_at(violation.pointer))
            return data
        found: list[FixtureError] = []
        for violation in schemas.violations(FILE_SCHEMAS[kind], data):
            # One problem, one report: an enclosing oneOf repeats the error best_match already gave.
            if any(_related(violation.pointer, error.pointer or "") for error in found):
                continue
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
            violation = schemas.first_violation(schemas.RUNTIME_EVENT, event)
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
    _check_references(file, raw["id"], events, raw["expect"], f"{at}/expect")
    _check_consistency(file, raw["id"], raw["profile"], events, raw["expect"], f"{at}/expect")
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
    prefix = f"{at}/"
    return DecisionCase(
        id=raw["id"],
        description=raw["description"],
        clauses=tuple(raw["clauses"]),
        profile=raw["profile"],
        source=file.source(at),
        events=events,
        expect=raw["expect"],
        expect_strict=strict,
        expected_high_water=raw.get("expectedHighWater"),
        line_of={p[len(prefix) :]: line for p, line in file.document.lines.items() if p.startswith(prefix)},
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
        yield LedgerFaultCase(
            id=raw["id"],
            description=raw["description"],
            clauses=tuple(raw["clauses"]),
            profile=raw["profile"],
            source=file.source(at),
            fault=raw["fault"],
            events=ledger,
            expect=raw["expect"],
        )


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
        violation = schemas.first_violation(schemas.P1_TASK, task)
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
    from resumekit.conformance.p1.faults import FaultError, fault_from_mapping

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
            id=raw["id"],
            description=raw["description"],
            clauses=scenario_clauses(raw["clauses"], raw["gates"]),
            profile=raw["profile"],
            source=file.source(at),
            gates=tuple(raw["gates"]),
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
        name = raw["task"]
        outcome: dict[str, Any] = {"final": "result_submitted", "state": "VERIFYING", "stored": True}
        if data["tasks"][name]["kind"] == "commit":
            outcome["pushes"] = 1
        yield MatrixCase(
            id=raw["id"],
            description=raw["description"],
            clauses=scenario_clauses(raw["clauses"], raw["gates"]),
            profile=raw["profile"],
            source=file.source(at),
            gates=tuple(raw["gates"]),
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
            id=raw["id"],
            description=raw["description"],
            clauses=scenario_clauses(raw["clauses"], raw["gates"]),
            profile=raw["profile"],
            source=file.source(at),
            gates=tuple(raw["gates"]),
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


def load_file(path: Path, root: Path | None = None, problems: list[FixtureError] | None = None) -> list[Case]:
    """Every case of one fixture file, or FixtureError.

    With *problems*, every problem found is appended to it instead, and the cases without one are returned.
    """
    try:
        file = _File(path, root or path.parent, problems)
        data = file.validated()
        return list(_READERS[data["kind"]](file, data))
    except _Abandon:
        return []
    except FixtureError as error:
        if problems is None:
            raise
        problems.append(error)
        return []


def fixture_files(root: Path) -> list[Path]:
    """The fixture files below *root*, in a stable order on every OS."""
    return sorted(
        (p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()), key=lambda p: p.as_posix()
    )


def load_suite(root: Path | None = None) -> Suite:
    """Every case below *root* (the bundled golden directory by default); ids are unique across files."""
    root = root or golden_dir()
    cases: list[Case] = []
    seen: dict[str, Source] = {}
    digest = hashlib.sha256()
    for path in fixture_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        for case in load_file(path, root):
            if case.id in seen:
                raise FixtureError(
                    case.source.file,
                    f"duplicate case id (first defined at {seen[case.id]})",
                    line=case.source.line,
                    case_id=case.id,
                )
            seen[case.id] = case.source
            cases.append(case)
    return Suite(tuple(cases), root, digest.hexdigest())
