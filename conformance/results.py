"""The one result model every reporter reads."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from resumekit.conformance._defaults import DEFAULT_KILLS


class Outcome(str, enum.Enum):
    """How one case ended."""

    PASSED = "passed"
    FAILED = "failed"  # the implementation answered, and the answer breaks the spec
    ERRORED = "errored"  # no usable answer: it raised, crashed, hung, or broke the protocol
    SKIPPED = "skipped"  # the implementation declined the case, with a reason
    NOT_CLAIMED = "not_claimed"  # the case needs a capability or profile the implementation does not claim
    NOT_RUN = "not_run"  # the kit cannot run the case on this machine (say, no FUSE for power loss), with why


# The outcomes that count against certification.
# A case the kit could not run is no pass: a run that asked for it certifies nothing it did not test.
BAD = frozenset({Outcome.FAILED, Outcome.ERRORED, Outcome.SKIPPED, Outcome.NOT_RUN})


@dataclass(frozen=True, slots=True)
class Selection:
    """What a run was asked to cover: every option that narrows or shapes it, as given."""

    profile: str = "strict"
    only: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    kills: int = DEFAULT_KILLS
    timeout: float | None = None
    seed: int | None = None
    golden: str = "bundled"  # or the directory given with --golden
    expectations: str | None = None  # the --expect file, as given
    expectations_digest: str | None = None  # sha256 of its bytes
    fault_model: str = "process-crash"  # or "power-loss": the crash kinds under simulated power cuts
    # What else narrowed the run, in words (the pytest plugin: cases a -k, -m or node id left out).
    narrowed_by: tuple[str, ...] = ()

    def subset_reasons(self) -> tuple[str, ...]:
        """Why a run of this selection is not a certification; empty when it is one."""
        reasons = []
        if self.only:
            reasons.append("--only " + " ".join(self.only))
        if self.kinds:
            reasons.append("--kind " + " ".join(self.kinds))
        if self.kills < DEFAULT_KILLS:
            reasons.append(f"--kills {self.kills} (a certification kills at least {DEFAULT_KILLS} times)")
        if self.golden != "bundled":
            reasons.append("--golden: not the bundled golden set")
        return (*reasons, *self.narrowed_by)

    def describe(self, compared: str | None = None) -> str:
        """The selection in one line, for the header and the summary.

        *compared* is the profile answers were compared in, when it is known: a run that asked for strict of
        an implementation that claims only core is a core run, and the line says so.
        """
        parts = [f"profile {self.profile}"]
        if compared is not None and compared != self.profile:
            parts = [f"profile {compared} ({self.profile} asked for, not claimed)"]
        parts.append(f"--only {' '.join(self.only)}" if self.only else "every case")
        if self.kinds:
            parts.append(f"--kind {' '.join(self.kinds)}")
        parts.append(f"kills {self.kills}")
        if self.fault_model != "process-crash":
            parts.append(f"fault model {self.fault_model}")
        if self.timeout is not None:
            parts.append(f"timeout {self.timeout:g} s")
        if self.golden != "bundled":
            parts.append(f"golden {self.golden}")
        if self.expectations:
            parts.append(f"expectations {self.expectations}")
        parts.extend(self.narrowed_by)
        return ", ".join(parts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Selection:
        """The selection back from a report's ``selection`` member."""
        return cls(
            profile=data["profile"],
            only=tuple(data["only"]),
            kinds=tuple(data["kinds"]),
            kills=data["kills"],
            timeout=data.get("timeoutSeconds"),
            seed=data.get("seed"),
            golden=data.get("golden", "bundled"),
            expectations=data.get("expectations"),
            expectations_digest=data.get("expectationsDigest"),
            fault_model=data.get("faultModel", "process-crash"),
            narrowed_by=tuple(data.get("narrowedBy", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        """The selection as the JSON report keeps it."""
        return {
            "profile": self.profile,
            "only": list(self.only),
            "kinds": list(self.kinds),
            "kills": self.kills,
            "timeoutSeconds": self.timeout,
            "seed": self.seed,
            "golden": self.golden,
            "expectations": self.expectations,
            "expectationsDigest": self.expectations_digest,
            "faultModel": self.fault_model,
            **({"narrowedBy": list(self.narrowed_by)} if self.narrowed_by else {}),
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a run may claim, and nothing more: a certification, a subset run, or an interrupted one."""

    scope: str  # "certification", "subset" or "interrupted"
    certified: bool
    passed: bool  # every claimed case is acceptable and at least one passed
    profile: str | None  # the certified profile, when certified
    reasons: tuple[str, ...]  # why it is not a certification (subset, interrupted) or not certified
    known_failures: tuple[str, ...] = ()  # ids of expected failures that failed
    unexpected_passes: tuple[str, ...] = ()  # ids of expected failures that passed
    not_claimed_profile: str | None = None  # the profile asked for that the implementation does not claim
    # The claimed capabilities in words ("Phase 0 projection"), when some case was not claimed for want of one.
    claimed_only: str = ""

    @property
    def scope_text(self) -> str:
        """What is certified, in words: ``strict``, ``core (strict not claimed)``, ``core, Phase 0 projection only``."""
        text = self.profile_text
        return f"{text}, {self.claimed_only} only" if text and self.claimed_only else text

    @property
    def profile_text(self) -> str:
        """The certified profile in words: ``core (strict not claimed)``, ``strict``."""
        if self.profile is None:
            return ""
        if self.not_claimed_profile:
            return f"{self.profile} ({self.not_claimed_profile} not claimed)"
        return self.profile

    @property
    def headline(self) -> str:
        """The verdict's first words: ``CERTIFIED: core``, ``SUBSET``, ``NOT CERTIFIED`` ..."""
        if self.scope == "interrupted":
            return "INTERRUPTED (not a certification)"
        if self.scope == "subset":
            state = "selected cases passed" if self.passed else "selected cases did not all pass"
            return f"SUBSET: {state} (not a certification)"
        if not self.certified:
            return "NOT CERTIFIED"
        if self.known_failures:
            return f"CERTIFIED WITH {len(self.known_failures)} KNOWN FAILURE(S): {self.scope_text}"
        return f"CERTIFIED: {self.scope_text}"

    @property
    def status(self) -> str:
        """One word for machines: certified, not-certified, subset-passed, subset-failed, interrupted."""
        if self.scope == "interrupted":
            return "interrupted"
        if self.scope == "subset":
            return "subset-passed" if self.passed else "subset-failed"
        return "certified" if self.certified else "not-certified"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as the JSON report keeps it."""
        return {
            "status": self.status,
            "headline": self.headline,
            "scope": self.scope,
            "profile": self.profile,
            "reasons": list(self.reasons),
            "knownFailures": list(self.known_failures),
            "unexpectedPasses": list(self.unexpected_passes),
            **({"claimedOnly": self.claimed_only} if self.claimed_only else {}),
        }


# What each grade of a failed plan means (docs/spec/phase0.md, GRADE-1), worst first, for the reports.
GRADE_MEANINGS = {
    "unsafe": "it replays what must be blocked, or skips a verification the contract requires",
    "over-cautious": "it blocks or asks for a verification where the contract replays",
    "detail": "neither less nor more cautious than the contract: reasons, diagnostics or other fields differ",
}


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One normative field whose actual value differs from the expected one."""

    pointer: str
    expected: Any
    actual: Any
    clause: str | None = None
    note: str | None = None
    check: str | None = None  # the name of the check that made it (P1)
    event: int | None = None  # the ``seq`` of the event of the case's history it was seen at

    def to_dict(self) -> dict[str, Any]:
        """The mismatch as the JSON report keeps it."""
        data: dict[str, Any] = {"pointer": self.pointer, "expected": self.expected, "actual": self.actual}
        if self.clause:
            data["clause"] = self.clause
        if self.note:
            data["note"] = self.note
        if self.check:
            data["check"] = self.check
        if self.event is not None:
            data["event"] = self.event
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Mismatch:
        """The mismatch of ``to_dict``."""
        return cls(
            data["pointer"],
            data["expected"],
            data["actual"],
            data.get("clause"),
            data.get("note"),
            data.get("check"),
            data.get("event"),
        )


@dataclass(frozen=True, slots=True)
class Source:
    """Where a case is written: a file below the golden root and a 1-based line."""

    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The verdict on one case."""

    case_id: str
    kind: str
    outcome: Outcome
    clauses: tuple[str, ...] = ()
    profile: str = "core"
    source: Source | None = None
    duration: float = 0.0
    mismatches: tuple[Mismatch, ...] = ()
    message: str | None = None
    fault_model: str | None = None
    stderr_tail: str | None = None
    transcript: tuple[str, ...] = ()
    replay: str | None = None
    expectation: str | None = None  # the profile whose expectation was compared (a case may carry one per profile)
    known_failure: str | None = None  # the reason an expectations file (--expect) gives for this case failing
    counts_toward: tuple[str, ...] = ()  # the rows of its contract's summary table (P1: the gates of a scenario)
    readings: tuple[str, ...] = ()  # the alternative readings of a case the answers met (core alternatives)
    attested: tuple[str, ...] = ()  # what of its evidence the kit took on the implementation's word
    # The story of a failed or errored case, as the report keeps it: event dicts (``history.for_report``).
    history: tuple[Mapping[str, Any], ...] = ()
    # How a failed plan departs from the expected one (unsafe, over-cautious or detail; phase0/grades.py);
    # None for a case that compared no plan, or did not fail.
    grade: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the case counts towards certification (passed), as opposed to anything else."""
        return self.outcome is Outcome.PASSED

    @property
    def expected_failure(self) -> bool:
        """A case listed as a known failure that did fail (or err, or was skipped): it does not fail the run."""
        return self.known_failure is not None and self.outcome in BAD

    @property
    def unexpected_pass(self) -> bool:
        """A case listed as a known failure that passed: the expectations file is stale, and the run fails."""
        return self.known_failure is not None and self.outcome is Outcome.PASSED

    @property
    def acceptable(self) -> bool:
        """Whether this result leaves a run green: a pass not expected to fail, or an expected failure."""
        if self.known_failure is not None:
            return self.expected_failure
        return self.outcome in (Outcome.PASSED, Outcome.NOT_CLAIMED)

    def to_dict(self) -> dict[str, Any]:
        """The result as the JSON report keeps it (optional fields only when set)."""
        data: dict[str, Any] = {
            "id": self.case_id,
            "kind": self.kind,
            "outcome": self.outcome.value,
            "clauses": list(self.clauses),
            "profile": self.profile,
            "durationSeconds": round(self.duration, 6),
            "mismatches": [m.to_dict() for m in self.mismatches],
        }
        if self.source is not None:
            data["file"] = self.source.file
            if self.source.line is not None:
                data["line"] = self.source.line
        optional = {
            "message": self.message,
            "faultModel": self.fault_model,
            "stderrTail": self.stderr_tail,
            "replay": self.replay,
            "expectation": self.expectation,
            "grade": self.grade,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        if self.transcript:
            data["transcript"] = list(self.transcript)
        if self.known_failure is not None:
            verdict = "expected failure" if self.expected_failure else "unexpected pass"
            data["knownFailure"] = {"reason": self.known_failure, "verdict": verdict}
        if self.counts_toward:
            data["countsToward"] = list(self.counts_toward)
        if self.readings:
            data["readings"] = list(self.readings)
        if self.attested:
            data["attested"] = list(self.attested)
        if self.history:
            data["history"] = [dict(event) for event in self.history]
        return data


@dataclass(frozen=True, slots=True)
class Implementation:
    """Who was certified, as the implementation described itself."""

    name: str
    version: str
    language: str
    homepage: str = ""
    capabilities: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ("core",)
    adapter: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The implementation as the JSON report keeps it."""
        return {
            "name": self.name,
            "version": self.version,
            "language": self.language,
            "homepage": self.homepage,
            "capabilities": list(self.capabilities),
            "profiles": list(self.profiles),
            "adapter": self.adapter,
        }


@dataclass(frozen=True, slots=True)
class Shard:
    """Which part of a selection a run ran: shard *index* (1-based) of *count*.

    *selection* is every selected case id in the order the unsharded run would run them, so that
    ``resumekit merge`` can tell a gap or an overlap and put the merged results in that order; *seed*
    is the crash schedule's seed, which every shard must share whether or not it ran the schedule.
    """

    index: int
    count: int
    selection: tuple[str, ...]
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The shard as the JSON report keeps it."""
        return {"index": self.index, "count": self.count, "seed": self.seed, "selection": list(self.selection)}


@dataclass(frozen=True, slots=True)
class Summary:
    """How a contract's own summary table is titled: its rows come from the contract (``Contract.summarize``).

    Every row is a mapping with ``name``, ``verdict`` (``passed``, ``failed``, ``not run`` or ``not claimed``),
    ``cases`` (how many cases count towards it), ``passed``, ``failed`` (the ids of the cases that count
    against it, which need not be among ``cases``), ``notRun``, ``clauses`` and ``attested`` (what of its
    evidence the kit takes on the implementation's word, or ``""``); optionally ``failedBy``, why each case
    of ``failed`` counts (``_summary_rows`` tells it).
    """

    key: str  # a word for the table: the JUnit suite's and the HTML anchor's name ("gates")
    title: str  # "P1 gates"
    row_label: str  # "P1 gate"
    case_label: str = "cases"  # what the counted cases are called in prose ("scenarios")


@dataclass(frozen=True, slots=True)
class SummaryTable:
    """One contract's summary table in a run: its rows, and how they are titled."""

    contract: str
    summary: Summary
    rows: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The table as the JSON report keeps it."""
        summary = self.summary
        return {
            "contract": self.contract,
            "key": summary.key,
            "title": summary.title,
            "rowLabel": summary.row_label,
            "caseLabel": summary.case_label,
            "rows": [dict(row) for row in self.rows],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryTable:
        """The table of ``to_dict``."""
        summary = Summary(data["key"], data["title"], data["rowLabel"], data["caseLabel"])
        return cls(data["contract"], summary, tuple(dict(row) for row in data["rows"]))


@dataclass(frozen=True, slots=True)
class Run:
    """A finished run: what ran, against whom, and every verdict."""

    implementation: Implementation
    profile: str
    results: tuple[CaseResult, ...]
    started: str
    finished: str
    duration: float
    platform: Mapping[str, str] = field(default_factory=dict)
    kit_version: str = ""
    seed: int | None = None
    golden_digest: str = ""
    summaries: tuple[SummaryTable, ...] = ()  # each contract's own table (P1: the gates), when it was selected
    selection: Selection | None = None  # what was asked for; None when a caller ran cases of its own choosing
    interrupted: bool = False  # stopped (Ctrl-C) before every selected case ran
    selected: int = 0  # how many cases were selected, finished or not
    golden_root: str = ""  # the golden directory the cases were read from, for locations people can open
    jobs: int = 1  # cases run at once
    shard: Shard | None = None  # set when the run is one shard of a selection
    messages_validated: bool = True  # False under --no-validate-messages: schema-breaking messages went unseen

    @property
    def counts(self) -> dict[str, int]:
        """How many results have each outcome, every outcome listed."""
        counted = Counter(result.outcome for result in self.results)
        return {outcome.value: counted.get(outcome, 0) for outcome in Outcome}

    @property
    def grades(self) -> dict[str, int]:
        """How many failed results have each grade (phase0/grades.py), and how many none (``ungraded``)."""
        counted = Counter(result.grade or "ungraded" for result in self.results if result.outcome is Outcome.FAILED)
        return {name: counted.get(name, 0) for name in (*GRADE_MEANINGS, "ungraded")}

    @property
    def certified(self) -> bool:
        """True only for a certification in which some case passed and every claimed case is acceptable.

        Cases of capabilities it does not claim are reported, and neither pass nor fail it: it is
        certified for what it claims, and the report says what that is. A subset run (``--only``,
        ``--kind``, fewer kills) or an interrupted one is never certified.
        """
        return self.verdict.certified

    @property
    def verdict(self) -> Verdict:
        """The verdict this run supports, and no more."""
        claimed = [r for r in self.results if r.outcome is not Outcome.NOT_CLAIMED]
        passed = any(r.ok and r.known_failure is None for r in claimed) and all(r.acceptable for r in claimed)
        known = tuple(r.case_id for r in self.results if r.expected_failure)
        unexpected = tuple(r.case_id for r in self.results if r.unexpected_pass)
        selection = self.selection
        asked = selection.profile if selection is not None else self.profile
        missing = asked if asked != self.profile else None
        if self.interrupted:
            scope = "interrupted"
            reasons: tuple[str, ...] = (f"interrupted after {len(self.results)} of {self.selected} case(s)",)
        else:
            reasons = selection.subset_reasons() if selection is not None else ()
            if self.shard is not None:  # one shard certifies nothing alone: `resumekit merge` gives the verdict
                shard = self.shard
                reasons = (*reasons, f"--shard {shard.index}/{shard.count}: merge every shard for the verdict")
            scope = "subset" if reasons else "certification"
        if scope == "certification" and not passed:
            reasons = _failing_reasons(claimed)
        certified = scope == "certification" and passed
        return Verdict(
            scope=scope,
            certified=certified,
            passed=passed,
            profile=self.profile if certified else None,
            reasons=reasons,
            known_failures=known,
            unexpected_passes=unexpected,
            not_claimed_profile=missing,
            claimed_only=claimed_only(self) if certified else "",
        )

    @property
    def fault_models(self) -> tuple[str, ...]:
        """The distinct fault models the run exercised."""
        return tuple(sorted({r.fault_model for r in self.results if r.fault_model}))


def claimed_only(run: Run) -> str:
    """The implementation's capabilities in words, when a case of a profile it claims was not claimed; else ``""``.

    A run of every case certifies only what the implementation claims; the verdict says so when that is less
    than the selection: ``Phase 0 projection``, ``Phase 0 projection, store; P1 worker``.
    """
    info = run.implementation
    if not any(r.outcome is Outcome.NOT_CLAIMED and r.profile in info.profiles for r in run.results):
        return ""
    return capability_words(info.capabilities)


# Each registered contract's title by its name, kept by the registry (``contracts``), which imports this
# module: the rules here read it without importing the registry and its plug-in discovery.
_CONTRACT_TITLES: dict[str, str] = {}


def name_contract(name: str, title: str | None) -> None:
    """Record (or, with *title* None, forget) the title capabilities of contract *name* are grouped under."""
    if title is None:
        _CONTRACT_TITLES.pop(name, None)
    else:
        _CONTRACT_TITLES[name] = title


def capability_words(capabilities: tuple[str, ...]) -> str:
    """Capabilities grouped by contract, in words: ``phase0.projection, phase0.store`` is ``Phase 0 projection,
    store``; a capability of no registered contract stays as it is."""
    titles = _CONTRACT_TITLES
    groups: dict[str, list[str]] = {}
    for capability in capabilities:
        prefix, _, rest = capability.partition(".")
        title = titles.get(prefix)
        if title is None or not rest:
            groups.setdefault(capability, [])
        else:
            groups.setdefault(title, []).append(rest.replace("-", " "))
    return "; ".join(f"{title} {', '.join(rests)}" if rests else title for title, rests in groups.items()) or "nothing"


def _failing_reasons(claimed: list[CaseResult]) -> tuple[str, ...]:
    if not claimed:
        return ("no claimed case ran",)
    reasons = []
    bad = [r for r in claimed if r.outcome in BAD and r.known_failure is None]
    not_run = [r for r in bad if r.outcome is Outcome.NOT_RUN]
    if len(bad) > len(not_run):
        reasons.append(f"{len(bad) - len(not_run)} claimed case(s) did not pass")
    if not_run:
        reasons.append(f"{len(not_run)} case(s) not run on this machine: {not_run[0].message}")
    unexpected = [r for r in claimed if r.unexpected_pass]
    if unexpected:
        reasons.append(f"{len(unexpected)} expected failure(s) passed: take them off the expectations file")
    if not any(r.ok and r.known_failure is None for r in claimed):
        reasons.append("no claimed case passed")
    return tuple(reasons)
