"""The crash harness through the real protocol: the reference passes, and each broken adapter gets its verdict.

Every run here goes through the ``resumekit`` command in a subprocess with a timeout, so a runner
that hung on a misbehaving adapter would fail the test instead of hanging the suite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import schemas
from resumekit.conformance.phase0.crash import expected_torn_tail
from tests.support import gate_rows, python_command, run_resumekit


def resumekit(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    return run_resumekit(tmp_path / "report.json", *args)


def by_id(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {result["id"]: result for result in document["results"]}


def test_the_reference_survives_every_failpoint_fault_and_kill(tmp_path: Path) -> None:
    code, document, output = resumekit(
        tmp_path,
        "--adapter",
        "reference",
        "--kind",
        "crash",
        "--kind",
        "ledger-fault",
        "--kind",
        "schedule",
        "--kills",
        "25",
        "--seed",
        "7",
    )
    assert code == 3, output  # passed, as a subset run (not a certification)
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    results = by_id(document)
    assert {f"crash-p{n}" for n in range(12)} <= set(results)
    assert all(r["outcome"] == "passed" for r in results.values())
    assert results["crash-p3"]["faultModel"].startswith("process crash")
    assert "not power loss" in results["crash-p3"]["faultModel"]
    assert results["random-crash-schedule"]["message"].startswith("25 kills")
    assert "not power loss" in output


BROKEN = {
    # mode: (cases, outcome of the victims, victims, clause or message fragment)
    "ack-before-durable": (["crash-p1", "crash-p9"], "failed", ["crash-p1", "crash-p9"], "CRASH-1"),
    "finally-anyway": (["crash-p0", "crash-p5"], "failed", ["crash-p0", "crash-p5"], "CRASH-2"),
    "not-deterministic": (["prefix-*", "crash-p2"], "failed", ["prefix-after-function-call", "crash-p2"], "PURE-2"),
    "rewrites-ledger": (["crash-p6"], "failed", ["crash-p6"], "STORE-6"),
    # Issue 9, findings 2 and 3: changes that leave the bytes as they were, and the first read after reopening.
    "rewrites-same-bytes": (
        ["crash-p6", "corrupt-middle-row-zeros"],
        "failed",
        ["crash-p6", "corrupt-middle-row-zeros"],
        "STORE-6",
    ),
    "recreates-ledger": (["crash-p6"], "failed", ["crash-p6"], "STORE-6"),
    "touches-ledger": (["crash-p6"], "failed", ["crash-p6"], "STORE-6"),
    "creates-on-first-read": (["crash-p6"], "failed", ["crash-p6"], "STORE-6"),
    # Issue 9, finding 4: without an exit path that writes the marker, its absence after a kill proves nothing.
    "never-writes-marker": (
        ["crash-p0", "crash-p5", "random-crash-schedule"],
        "errored",
        ["crash-p0", "crash-p5", "random-crash-schedule"],
        "the exit path never wrote the marker, so a kill cannot be told from an orderly exit",
    ),
    "surfaces-torn-row": (["unterminated-complete-row"], "failed", ["unterminated-complete-row"], "STORE-4"),
    "hangs": (
        ["prefix-*"],
        "errored",
        ["prefix-after-function-response"],
        "got no response: no line on stdout within 2 s",
    ),
    "crashes-mid-run": (["prefix-*"], "errored", ["prefix-after-function-response"], "exited with 3"),
    "prints-garbage": (["prefix-*"], "errored", ["prefix-after-function-response"], "not a JSON line"),
}


@pytest.mark.parametrize("mode", sorted(BROKEN))
def test_a_broken_adapter_gets_its_verdict_and_the_run_goes_on(mode: str, tmp_path: Path) -> None:
    cases, outcome, victims, evidence = BROKEN[mode]
    selection = [arg for case in cases for arg in ("--only", case)]
    adapter = python_command("-m", "tests.broken.adapters", mode)
    code, document, output = resumekit(tmp_path, "--adapter", adapter, "--timeout", "2", *selection)
    assert code == 1, output
    results = by_id(document)
    for victim in victims:
        result = results[victim]
        assert result["outcome"] == outcome, result
        clauses = {m.get("clause") for m in result["mismatches"]}
        assert evidence in clauses or evidence in result.get("message", ""), result
        if outcome == "failed":
            assert evidence in result["clauses"], "the failing case cites the clause it caught"
    others = [r for r in results.values() if r["id"] not in victims]
    if outcome == "errored" and mode != "never-writes-marker":
        # The runner restarted the implementation and went on: every other case still passed.
        assert others and all(r["outcome"] == "passed" for r in others), others
    if mode == "crashes-mid-run":
        assert "giving up on this case" in results[victims[0]]["stderrTail"]


# The readings the source leaves open (spec 9.1): each broken store takes one reading too far. Per mode:
# the case, and its outcome under core and under strict.
READINGS = {
    "accepts-foreign-rows": ("first-row-of-another-session", ("passed", None), ("failed", "STORE-5"), "accepted"),
    "cuts-invalid-tail": ("invalid-tail-then-append", ("passed", None), ("failed", "STORE-9"), "cut"),
    # Neither core reading returns `{}` as an event: the torn one is missed under STORE-4 (TORN-1).
    "returns-unterminated-object": ("unterminated-non-event", ("failed", "STORE-4"), ("failed", "STORE-5"), None),
}
# `{}` among the events breaks the protocol schema first (an errored case); without message checks the
# read is judged. The same store reads a complete unterminated row as committed: a core reading it meets.
EXTRA = {"returns-unterminated-object": ("--no-validate-messages", "--only", "unterminated-complete-row")}


@pytest.mark.parametrize("mode", sorted(READINGS))
def test_a_store_that_takes_a_reading_too_far_fails_strict_and_core_where_it_breaks_torn_1(
    mode: str, tmp_path: Path
) -> None:
    case, core, strict, reading = READINGS[mode]
    adapter = python_command("-m", "tests.broken.adapters", mode)
    for profile, (outcome, clause) in (("core", core), ("strict", strict)):
        (tmp_path / profile).mkdir()
        code, document, output = resumekit(
            tmp_path / profile, "--adapter", adapter, "--profile", profile, "--only", case, *EXTRA.get(mode, ())
        )
        result = by_id(document)[case]
        assert result["outcome"] == outcome, (profile, result)
        assert result["expectation"] == profile, "each case gives strict its own reading"
        assert code == (1 if outcome == "failed" else 3), output
        if outcome == "failed":
            assert clause in {m.get("clause") for m in result["mismatches"]}, result
        else:
            assert result["readings"] == [reading], result  # the report names the reading met
        if mode in EXTRA:
            other = by_id(document)["unterminated-complete-row"]
            want = ("passed", ["committed"]) if profile == "core" else ("failed", None)
            assert (other["outcome"], other.get("readings")) == want, other


def test_a_failed_schedule_prints_its_seed_and_replay_command(tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "ack-before-durable")
    code, document, output = resumekit(
        tmp_path, "--adapter", adapter, "--kind", "schedule", "--kills", "5", "--seed", "42"
    )
    assert code == 1
    [result] = document["results"]
    assert result["outcome"] == "failed"
    assert document["seed"] == 42
    assert "--seed 42 --kills 5" in result["replay"]
    assert "replay with: resumekit run" in output


def test_unclaimed_capabilities_are_reported_as_not_claimed(tmp_path: Path) -> None:
    in_process = "python:resumekit.reference:build_resume_plan"
    code, document, output = resumekit(tmp_path, "--adapter", in_process, "--only", "crash-*")
    assert code == 1, output
    assert document["summary"] == {
        "passed": 0,
        "failed": 0,
        "errored": 0,
        "skipped": 0,
        "not_claimed": 12,
        "not_run": 0,
    }
    assert document["certified"] is False
    assert all("phase0.store" in r["message"] for r in document["results"])


def test_a_schema_breaking_answer_is_an_error_naming_the_pointer_by_default(tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "sloppy-messages")
    code, document, _ = resumekit(tmp_path, "--adapter", adapter, "--only", "crash-p0")
    assert code == 1
    [result] = document["results"]
    assert result["outcome"] == "errored"
    assert "breaks the protocol schema at /result/rows" in result["message"]
    assert result["transcript"], "the last messages exchanged are kept"
    assert document["messagesValidated"] is True
    # Without the schema check the wrong answer still fails the case, by its content, and the report says so.
    code, document, _ = resumekit(tmp_path, "--adapter", adapter, "--only", "crash-p0", "--no-validate-messages")
    [result] = document["results"]
    assert result["outcome"] == "failed"
    assert result["mismatches"][0]["clause"] == "STORE-1"
    assert document["messagesValidated"] is False
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None


def test_an_extra_field_in_a_result_errors_the_case_by_default(tmp_path: Path) -> None:
    # Issue 9, finding 5: a store.read result with a field of its own used to pass.
    adapter = python_command("-m", "tests.broken.adapters", "extra-field")
    selection = ("--only", "crash-p6", "--only", "corrupt-middle-row-zeros")
    code, document, _ = resumekit(tmp_path, "--adapter", adapter, *selection)
    assert code == 1
    for result in document["results"]:
        assert result["outcome"] == "errored", result
        assert "breaks the protocol schema at /result" in result["message"]
        assert "'cachedRows' was unexpected" in result["message"]


def test_a_p1_reply_that_breaks_its_schema_errors_the_scenario(tmp_path: Path) -> None:
    # Issue 19: the p1.* replies had schemas that no run checked, while the report said messages were.
    adapter = python_command("-m", "tests.broken.adapters", "p1-wait-extra-field")
    code, document, _ = resumekit(tmp_path, "--adapter", adapter, "--only", "p1-capture-completes")
    assert code == 1
    [result] = document["results"]
    assert result["outcome"] == "errored", result
    assert "'p1.worker.wait': the response breaks the protocol schema at /result" in result["message"], result
    assert "'debug' was unexpected" in result["message"]
    assert document["messagesValidated"] is True


def test_an_extra_field_in_the_hello_stops_the_run_before_any_case(tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "extra-hello-field")
    code, _, output = resumekit(tmp_path, "--adapter", adapter, "--only", "crash-p6")
    assert code == 2, output
    assert "'debug' was unexpected" in output


def test_a_torn_tail_is_checked_against_the_committed_bytes(tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "hides-torn-tail")
    code, document, output = resumekit(tmp_path, "--adapter", adapter, "--only", "torn-last-row-every-byte")
    assert code == 1, output
    [result] = document["results"]
    assert result["outcome"] == "failed"
    [first, *_] = result["mismatches"]
    assert first["clause"] == "STORE-4" and first["pointer"].startswith("/read/tornTail")
    assert first["actual"] is None and first["expected"]["length"] == 1 and first["expected"]["offset"] > 0


def test_expected_torn_tail_is_the_bytes_after_the_last_line_feed() -> None:
    assert expected_torn_tail(b"") is None
    assert expected_torn_tail(b"{}\n{}\n") is None
    assert expected_torn_tail(b"{}\n{") == {"offset": 3, "length": 1}
    assert expected_torn_tail(b"{") == {"offset": 0, "length": 1}


def test_every_message_of_a_full_reference_run_matches_its_schema(tmp_path: Path) -> None:
    phase0 = ("--kind", "decision", "--kind", "crash", "--kind", "ledger-fault", "--kind", "schedule")
    code, document, output = resumekit(
        tmp_path, "--adapter", "reference", "--validate-messages", "--kills", "5", *phase0
    )
    assert code == 3, output  # passed, as a subset run (not a certification)
    assert document["summary"]["passed"] == len(document["results"]) > 100


def test_every_p1_message_of_the_reference_matches_its_schema(tmp_path: Path) -> None:
    # One scenario of each kind of step the P1 harness takes: start, wait, kill, stop, continue, faults.
    only = [
        "p1-orderly-stop-mid-task-then-resume",
        "p1-lease-renewed-across-slow-steps",
        "p1-crash-commit-after-commit-done-row",
        "p1-crash-capture-server-result-stored",
    ]
    selection = [arg for case in only for arg in ("--only", case)]
    code, document, output = resumekit(tmp_path, "--adapter", "reference", "--validate-messages", *selection)
    assert code == 3, output  # passed, as a subset run (not a certification)
    assert document["summary"]["passed"] == len(document["results"]) == len(only)
    assert set(gate_rows(document)) >= {"CRASH_RECOVERY_CONVERGENCE", "LEASE_RENEWAL_RECOVERY"}
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None


@pytest.mark.parametrize("kind", ["crash-p0", "random-crash-schedule"])
def test_the_kit_refuses_to_kill_itself_when_an_adapter_names_its_pid(kind: str, tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "names-the-kits-pid")
    code, document, output = resumekit(tmp_path, "--adapter", adapter, "--only", kind, "--kills", "3")
    assert code == 1, output
    [result] = document["results"]
    assert result["outcome"] == "failed"
    assert "which the kit will not kill" in result["message"]
