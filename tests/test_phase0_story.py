"""A Phase 0 crash, ledger-fault or schedule case that fails carries its story, recorded as a P1 scenario's is:
each process started, each command and what it answered (every append and its acknowledgement, every reopen
and what it read), each kill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import python_command, run_resumekit


def _story(report: Path, mode: str, case: str, *extra: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    adapter = python_command("-m", "tests.broken.adapters", mode)
    _, document, _ = run_resumekit(report, "--adapter", adapter, "--only", case, *extra)
    (result,) = document["results"]
    return result, [(event["actor"], event["kind"]) for event in result.get("history", ())]


def test_a_crash_case_that_fails_tells_the_appends_the_kill_and_the_reopen(tmp_path: Path) -> None:
    result, story = _story(tmp_path / "r.json", "finally-anyway", "crash-p3")
    assert result["outcome"] == "failed" and [m["clause"] for m in result["mismatches"]] == ["CRASH-2"]
    assert story[0] == ("impl", "started")
    appends = [event for event in result["history"] if event["kind"] == "phase0.store.append"]
    assert appends and all(event["data"]["outcome"] == "result" for event in appends)
    assert ("kit", "killed") in story
    assert story.index(("kit", "killed")) > story.index(("impl", "phase0.store.append"))


def test_a_ledger_fault_case_that_fails_tells_what_the_reopen_read(tmp_path: Path) -> None:
    result, story = _story(tmp_path / "r.json", "surfaces-torn-row", "unterminated-complete-row")
    assert result["outcome"] == "failed" and ("impl", "started") in story
    reads = [event for event in result["history"] if event["kind"] == "phase0.store.read"]
    assert reads and "answer" in reads[-1]["data"]


def test_a_passed_case_carries_no_story(tmp_path: Path) -> None:
    _, document, _ = run_resumekit(tmp_path / "r.json", "--adapter", "reference", "--only", "crash-p3")
    (result,) = document["results"]
    assert result["outcome"] == "passed" and "history" not in result


def test_a_schedule_stream_that_fails_tells_its_kills(tmp_path: Path) -> None:
    result, story = _story(tmp_path / "r.json", "finally-anyway", "random-crash-schedule", "--kills", "3")
    assert result["outcome"] == "failed" and "CRASH-2" in [m["clause"] for m in result["mismatches"]]
    assert ("kit", "kill-armed") in story and ("impl", "phase0.store.append") in story
