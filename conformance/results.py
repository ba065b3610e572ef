"""The one result model every reporter reads."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Outcome(str, enum.Enum):
    """How one case ended."""

    PASSED = "passed"
    FAILED = "failed"  # the implementation answered, and the answer breaks the spec
    ERRORED = "errored"  # no usable answer: it raised, crashed, hung, or broke the protocol
    SKIPPED = "skipped"  # the implementation declined the case, with a reason
    NOT_CLAIMED = "not_claimed"  # the case needs a capability or profile the implementation does not claim


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One normative field whose actual value differs from the expected one."""

    pointer: str
    expected: Any
    actual: Any
    clause: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"pointer": self.pointer, "expected": self.expected, "actual": self.actual}
        if self.clause:
            data["clause"] = self.clause
        if self.note:
            data["note"] = self.note
        return data


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

    @property
    def ok(self) -> bool:
        """Whether the case counts towards certification (passed), as opposed to anything else."""
        return self.outcome is Outcome.PASSED

    def to_dict(self) -> dict[str, Any]:
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
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        if self.transcript:
            data["transcript"] = list(self.transcript)
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
    gates: tuple[Mapping[str, Any], ...] = ()  # the P1 gate table, when P1 scenarios were selected
    messages_validated: bool = True  # False under --no-validate-messages: schema-breaking messages went unseen

    @property
    def counts(self) -> dict[str, int]:
        """How many results have each outcome, every outcome listed."""
        counted = Counter(result.outcome for result in self.results)
        return {outcome.value: counted.get(outcome, 0) for outcome in Outcome}

    @property
    def certified(self) -> bool:
        """True when some case passed and every case the implementation claims passed.

        Cases of capabilities it does not claim are reported, and neither pass nor fail it: it is
        certified for what it claims, and the report says what that is.
        """
        claimed = [r for r in self.results if r.outcome is not Outcome.NOT_CLAIMED]
        return bool(claimed) and all(result.ok for result in claimed)

    @property
    def fault_models(self) -> tuple[str, ...]:
        """The distinct fault models the run exercised."""
        return tuple(sorted({r.fault_model for r in self.results if r.fault_model}))


def summarize(results: Iterable[CaseResult]) -> dict[str, int]:
    """Count outcomes of *results*."""
    counted = Counter(result.outcome.value for result in results)
    return {outcome.value: counted.get(outcome.value, 0) for outcome in Outcome}
