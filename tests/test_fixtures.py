"""The loader turns golden files into cases, and every broken file into an error that says where."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from resumekit.conformance import _yaml
from resumekit.conformance.fixtures import FixtureError, load_file, load_suite
from resumekit.conformance.phase0.cases import DecisionCase

GOOD = """
schema_version: 1
kind: phase0/decisions
envelope: {invocationId: i, runId: r, sessionId: s, turnId: t, ts: 1, partial: false}
cases:
  - id: one-user-message
    description: A single user message is safe to replay.
    clauses: [DEC-1]
    profile: core
    events:
      - {id: e1, role: user, author: user, content: {kind: text, text: yes}}
    expect:
      disposition: safe_replay
      requiresVerification: false
      sourceRuntimeEventHighWater: 1
      rejectionReasons: []
      operations: []
      diagnostics: []
      replay: [e1]
"""

Write = Callable[[str, str], Path]


def test_a_good_file_loads_with_merged_envelope_and_lines(write_fixture: Write) -> None:
    path = write_fixture("a.yaml", GOOD)
    [case] = load_file(path, path.parent)
    assert isinstance(case, DecisionCase)
    assert case.id == "one-user-message"
    assert case.source.file == "a.yaml"
    assert case.source.line == 5
    assert case.events[0]["runId"] == "r"
    assert case.events[0]["partial"] is False


def test_yaml_1_1_booleans_and_dates_stay_strings() -> None:
    document = _yaml.load("a: yes\nb: on\nc: 2026-01-01\nd: true\n")
    assert document.data == {"a": "yes", "b": "on", "c": "2026-01-01", "d": True}


def test_malformed_yaml_names_file_and_line(write_fixture: Write) -> None:
    path = write_fixture("bad.yaml", "schema_version: 1\ncases: [\n  {id: x\n")
    with pytest.raises(FixtureError) as caught:
        load_file(path, path.parent)
    assert caught.value.file == "bad.yaml"
    assert caught.value.line is not None
    assert str(caught.value).startswith("bad.yaml:")
    assert "not valid YAML" in str(caught.value)


def test_duplicate_keys_are_refused(write_fixture: Write) -> None:
    path = write_fixture("dup.yaml", GOOD.replace("    profile: core\n", "    profile: core\n    profile: strict\n"))
    with pytest.raises(FixtureError, match=r"duplicate key 'profile'") as caught:
        load_file(path, path.parent)
    assert caught.value.line == 9


def test_unknown_schema_version_is_refused_clearly(write_fixture: Write) -> None:
    path = write_fixture("v.yaml", GOOD.replace("schema_version: 1", "schema_version: 7"))
    with pytest.raises(FixtureError, match=r"schema_version 7 is not one this resumekit knows") as caught:
        load_file(path, path.parent)
    assert caught.value.pointer == "/schema_version"
    assert caught.value.line == 1


def test_schema_violation_names_case_line_and_pointer(write_fixture: Write) -> None:
    path = write_fixture("s.yaml", GOOD.replace("disposition: safe_replay", "disposition: maybe"))
    with pytest.raises(FixtureError) as caught:
        load_file(path, path.parent)
    error = caught.value
    assert error.case_id == "one-user-message"
    assert error.pointer == "/cases/0/expect/disposition"
    assert error.line == 12
    assert "'maybe'" in str(error)
    assert str(error).startswith("s.yaml:12: case 'one-user-message': at /cases/0/expect/disposition:")


def test_an_event_invalid_after_the_merge_is_located(write_fixture: Write) -> None:
    path = write_fixture("e.yaml", GOOD.replace("role: user, author: user", "role: robot, author: user"))
    with pytest.raises(FixtureError, match="not a valid RuntimeEvent") as caught:
        load_file(path, path.parent)
    assert caught.value.pointer == "/cases/0/events/0/role"
    assert caught.value.line == 10


def test_an_expectation_naming_a_missing_event_is_refused(write_fixture: Write) -> None:
    path = write_fixture("r.yaml", GOOD.replace("replay: [e1]", "replay: [e9]"))
    with pytest.raises(FixtureError, match="names event 'e9'") as caught:
        load_file(path, path.parent)
    assert caught.value.pointer == "/cases/0/expect/replay/0"


def test_merge_keys_are_refused(write_fixture: Write) -> None:
    text = GOOD.replace("    profile: core\n", "    profile: core\n    <<: {x: 1}\n")
    path = write_fixture("m.yaml", text)
    with pytest.raises(FixtureError, match="merge keys"):
        load_file(path, path.parent)


def test_duplicate_ids_across_files_are_refused(write_fixture: Write) -> None:
    first = write_fixture("one.yaml", GOOD)
    write_fixture("two.yaml", GOOD)
    with pytest.raises(FixtureError, match=r"duplicate case id \(first defined at one.yaml:5\)") as caught:
        load_suite(first.parent)
    assert caught.value.file == "two.yaml"


def test_a_non_mapping_file_is_refused(write_fixture: Write) -> None:
    path = write_fixture("list.yaml", "- 1\n- 2\n")
    with pytest.raises(FixtureError, match="a fixture file is a YAML mapping, not list"):
        load_file(path, path.parent)


def test_the_bundled_suite_is_large_unique_and_covers_every_clause() -> None:
    from resumekit.conformance import contracts
    from resumekit.conformance._cmd_golden import _spec_clauses

    suite = load_suite()
    decisions = [case for case in suite.cases if case.kind == "decision"]
    assert len(decisions) >= 60
    assert len([case for case in suite.cases if case.kind == "p1"]) >= 80
    clauses = _spec_clauses()
    assert len(clauses) >= 150
    binding = _spec_clauses(kit_side=False)
    uncited = [clause for clause in binding if clause not in suite.clauses and clause not in contracts.kit_clauses()]
    # Every clause that binds an implementation is cited, except the documented ones, and those exactly.
    assert sorted(uncited) == sorted(contracts.not_yet_covered())
    unknown = sorted(set(suite.clauses) - set(clauses))
    assert unknown == [], "fixtures cite clauses the spec does not define"


@pytest.mark.parametrize(
    ("change", "pointer", "fragment"),
    [
        (("requiresVerification: false", "requiresVerification: true"), "requiresVerification", "PLAN-6"),
        (("disposition: safe_replay", "disposition: blocked"), "disposition", "must be safe_replay"),
        (("sourceRuntimeEventHighWater: 1", "sourceRuntimeEventHighWater: 2"), "sourceRuntimeEventHighWater", "PLAN-1"),
        (("diagnostics: []", "diagnostics: [{code: duplicate_event_id, eventId: e1}]"), "diagnostics", "strict codes"),
        (
            (
                "rejectionReasons: []\n      operations",
                "rejectionReasons: [ledger_integrity_violation]\n      operations",
            ),
            "rejectionReasons",
            "core expectation",
        ),
    ],
)
def test_an_expectation_that_contradicts_the_spec_is_refused(
    write_fixture: Write, change: tuple[str, str], pointer: str, fragment: str
) -> None:
    text = GOOD.replace(*change)
    if "ledger_integrity_violation" in text:  # a blocked plan, or PLAN-7 would object first
        text = text.replace("disposition: safe_replay", "disposition: blocked")
    path = write_fixture("c.yaml", text)
    with pytest.raises(FixtureError, match=fragment) as caught:
        load_file(path, path.parent)
    assert caught.value.pointer == f"/cases/0/expect/{pointer}"
    assert caught.value.case_id == "one-user-message"


STRICT_OF_GOOD = """
    expect_strict:
      disposition: blocked
      requiresVerification: false
      sourceRuntimeEventHighWater: 2
      rejectionReasons: [ledger_integrity_violation]
      operations: []
      diagnostics: [{code: duplicate_event_id, eventId: e1}]
      replay: [e1, e1]
"""


def _two_expectations(strict: str = STRICT_OF_GOOD) -> str:
    text = GOOD.replace(
        "      - {id: e1, role: user, author: user, content: {kind: text, text: yes}}\n",
        "      - {id: e1, role: user, author: user, content: {kind: text, text: yes}}\n" * 2,
    )
    text = text.replace("sourceRuntimeEventHighWater: 1", "sourceRuntimeEventHighWater: 2").replace(
        "replay: [e1]", "replay: [e1, e1]"
    )
    return text + strict.lstrip("\n")


def test_a_core_case_may_carry_a_strict_expectation(write_fixture: Write) -> None:
    path = write_fixture("two.yaml", _two_expectations())
    [case] = load_file(path, path.parent)
    assert isinstance(case, DecisionCase)
    assert case.expectation_for("core")["disposition"] == "safe_replay"
    assert case.expectation_for("strict")["disposition"] == "blocked"
    assert (case.expectation_profile("core"), case.expectation_profile("strict")) == ("core", "strict")


@pytest.mark.parametrize(
    ("change", "pointer", "fragment"),
    [
        (("replay: [e1, e1]\n", "replay: [e1]\n"), "replay", "strict rules change neither"),
        (("[{code: duplicate_event_id, eventId: e1}]", "[]"), "", "adds no strict diagnostic"),
        (
            (
                "[{code: duplicate_event_id, eventId: e1}]",
                "[{code: pending_tool_result, eventId: e1}, {code: duplicate_event_id, eventId: e1}]",
            ),
            "diagnostics",
            "strict codes only",
        ),
        (
            (
                "rejectionReasons: [ledger_integrity_violation]",
                "rejectionReasons: [dangling_tool_state, ledger_integrity_violation]",
            ),
            "rejectionReasons",
            "STRICT-7",
        ),
        (("disposition: blocked", "disposition: safe_replay"), "disposition", "PLAN-7"),
    ],
)
def test_a_strict_expectation_must_extend_the_core_one(
    write_fixture: Write, change: tuple[str, str], pointer: str, fragment: str
) -> None:
    path = write_fixture("bad-strict.yaml", _two_expectations(STRICT_OF_GOOD.replace(*change)))
    with pytest.raises(FixtureError, match=fragment) as caught:
        load_file(path, path.parent)
    assert caught.value.pointer == "/cases/0/expect_strict" + (f"/{pointer}" if pointer else "")


def test_only_a_core_case_has_a_strict_expectation(write_fixture: Write) -> None:
    text = _two_expectations().replace("profile: core", "profile: strict")
    path = write_fixture("s.yaml", text)
    with pytest.raises(FixtureError, match="only a core case has expect_strict"):
        load_file(path, path.parent)


def test_a_loader_collecting_problems_reads_on_past_the_first(write_fixture: Write) -> None:
    second = GOOD.split("cases:\n")[1].replace("one-user-message", "two").replace("replay: [e1]", "replay: [e9]")
    text = GOOD.replace("disposition: safe_replay", "disposition: maybe") + second
    path = write_fixture("many.yaml", text)
    problems: list[FixtureError] = []
    assert load_file(path, path.parent, problems) == []
    assert [(p.case_id, p.pointer) for p in problems] == [
        ("one-user-message", "/cases/0/expect/disposition"),
        ("two", "/cases/1/expect/replay/0"),
    ]


@pytest.mark.parametrize(
    ("file", "change", "fragment"),
    [
        (
            "p1/scenarios/submission.yaml",
            ("{fault: Answer, on: result, status: 503, effect: false}", "{fault: Answr, on: result}"),
            "unknown fault 'Answr'",
        ),
        (
            "p1/scenarios/leases.yaml",
            ("{fault: Fence, task_id: t-commit}", "{fault: Fence, task_id: t-commit, generation: 0}"),
            "Fence.generation must be an integer >= 1",
        ),
        (
            "p1/scenarios/basics.yaml",
            ("execution_digest: d-capture-1", 'execution_digest: "bad digest!"'),
            "/tasks/capture/execution_digest",
        ),
        ("p1/scenarios/scope.yaml", ("issue: [capture]", "issue: [capture-typo]"), "names task 'capture-typo'"),
        (
            "p1/scenarios/scope.yaml",
            ('changes: {base_oid: "@later"}', 'changes: {base_oid: "@earlier"}'),
            "is not a commit the kit makes",
        ),
    ],
)
def test_a_broken_p1_scenario_file_is_refused_with_its_line_and_pointer(
    golden_copy: Path, file: str, change: tuple[str, str], fragment: str
) -> None:
    path = golden_copy / file
    text = path.read_text(encoding="utf-8")
    assert change[0] in text
    path.write_text(text.replace(change[0], change[1], 1), encoding="utf-8")
    with pytest.raises(FixtureError) as caught:
        load_file(path, golden_copy)
    assert fragment in str(caught.value)
    assert caught.value.line is not None and caught.value.file == file


def test_the_failpoint_catalog_yields_a_crash_scenario_per_failpoint_and_task() -> None:
    from resumekit.conformance.p1.cases import ScenarioCase

    suite = load_suite()
    crashes = [case for case in suite.cases if isinstance(case, ScenarioCase) and case.id.startswith("p1-crash-")]
    names = {case.id for case in crashes}
    # Every row site of both task kinds, the kind-specific ones for one kind only, and the kit's kill points.
    assert "p1-crash-capture-before-claimed-row" in names and "p1-crash-commit-before-claimed-row" in names
    assert "p1-crash-capture-after-source-capture-done-cache" in names
    assert "p1-crash-commit-after-source-capture-done-cache" not in names
    assert "p1-crash-commit-origin-ref-updated" in names
    assert len(crashes) == 63
    for case in crashes:
        assert case.profile == "core"
        assert {"CRASH_RECOVERY_CONVERGENCE", "RESUME_FROM_CHECKPOINT"} <= set(case.gates)
        (outcome,) = case.expect.values()
        assert outcome["final"] == "result_submitted" and outcome["stored"] is True


# --------------------------------------------------------------------------------------------
# Ledger-fault readings: core alternatives and the strict one among them (spec 9.1)
# --------------------------------------------------------------------------------------------

LEDGER = """
schema_version: 1
kind: phase0/ledger-faults
envelope: {invocationId: i, runId: r, sessionId: s, turnId: t, ts: 1, partial: false}
ledger:
  - {id: e1, role: user, author: user, content: {kind: text, text: one}}
  - {id: e2, role: user, author: user, content: {kind: text, text: two}}
cases:
  - id: a-tail
    description: A tail read either way in core.
    clauses: [STORE-9]
    profile: core
    fault: {kind: tail, tail: invalid-prefix, appendAfter: true}
    expect:
      alternatives:
        - {reading: refused, append: refused, status: corrupt, line: 2}
        - {reading: cut, status: ok, committedRows: 1}
    expect_strict: {append: refused, status: corrupt, line: 2}
"""


def test_a_ledger_fault_case_carries_its_core_alternatives_and_strict_reading(write_fixture: Write) -> None:
    path = write_fixture("l.yaml", LEDGER)
    [case] = load_file(path, path.parent)
    assert [r["reading"] for r in case.readings_for("core")] == ["refused", "cut"]  # type: ignore[attr-defined]
    assert case.readings_for("strict") == ({"append": "refused", "status": "corrupt", "line": 2},)  # type: ignore[attr-defined]
    assert case.expectation_profile("strict") == "strict" and case.expectation_profile("core") == "core"


@pytest.mark.parametrize(
    ("change", "replacement", "refusal"),
    [
        ("    expect_strict: {append: refused, status: corrupt, line: 2}\n",
         "    expect_strict: {status: ok, committedRows: 2}\n", "one of the core alternatives"),
        ("        - {reading: cut, status: ok, committedRows: 1}\n",
         "        - {reading: refused, status: ok, committedRows: 1}\n", "share a reading"),
        ("        - {reading: cut, status: ok, committedRows: 1}\n",
         "        - {reading: cut, status: ok, rows: [1, 3]}\n", "only 2 rows"),
        ("    fault: {kind: tail, tail: invalid-prefix, appendAfter: true}\n",
         "    fault: {kind: tail, tail: invalid-prefix}\n", "'append' is for a fault"),
    ],
    ids=["strict-not-among-core", "reading-names-twice", "row-beyond-ledger", "append-without-appending"],
)
def test_inconsistent_readings_are_refused_naming_the_case(
    write_fixture: Write, change: str, replacement: str, refusal: str
) -> None:
    assert change in LEDGER
    path = write_fixture("l.yaml", LEDGER.replace(change, replacement))
    with pytest.raises(FixtureError) as caught:
        load_file(path, path.parent)
    assert caught.value.case_id == "a-tail"
    assert refusal in str(caught.value)


def test_an_alternative_needs_a_reading_name(write_fixture: Write) -> None:
    path = write_fixture("l.yaml", LEDGER.replace("{reading: cut, ", "{"))
    with pytest.raises(FixtureError) as caught:
        load_file(path, path.parent)
    assert "reading" in str(caught.value)
