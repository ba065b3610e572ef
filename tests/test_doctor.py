"""``resumekit doctor`` tells a working adapter from a broken one before a full run."""

from __future__ import annotations

import io

import pytest

from resumekit.conformance.doctor import diagnose
from resumekit.conformance.results import CaseResult, Outcome
from tests.support import NODE, ROOT, node_adapter_command, python_command


def _doctor(adapter: str) -> tuple[int, str]:
    out = io.StringIO()
    code = diagnose(adapter, timeout=10.0, write=out.write)
    return code, out.getvalue()


def test_the_reference_passes_every_check() -> None:
    code, text = _doctor("reference")
    assert code == 0, text
    for fragment in (
        "start and hello",
        "plan for 'prefix-before-function-call': passed",
        "stdout carries protocol lines only",
        "restarted as pid",
        "store round trip",
        "crash.arm reports pid",
        "the hello matches its schema",
        "no stray stdout after the store round trip",
        "an orderly exit (stop, end of stdin) after crash.arm writes the marker",
        "P1 scenario 'p1-killed-while-idle-restarts-and-stops-in-order' (core): start, wait idle, kill, "
        "start again after the kill, wait idle, stop, then the journal settings and the verdict: passed",
    ):
        assert fragment in text
    assert "[FAIL]" not in text


def test_an_adapter_that_does_not_start_fails_with_the_reason() -> None:
    code, text = _doctor(python_command("-c", "import sys; sys.exit('no runtime here')"))
    assert code == 1
    assert "[FAIL] start and hello" in text
    assert "no runtime here" in text


def test_an_adapter_that_prints_to_stdout_fails_the_handshake_with_what_it_printed() -> None:
    code, text = _doctor(python_command("-m", "tests.broken.adapters", "chatty-hello"))
    assert code == 1
    assert "[FAIL] start and hello" in text
    assert "not a JSON line" in text and "runtime starting up" in text


def test_an_in_process_attribute_that_is_no_projection_fails() -> None:
    code, text = _doctor("python:tests.broken.decisions:BROKEN")
    assert code == 1
    assert "[FAIL]" in text


@pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")
def test_a_projection_only_adapter_is_checked_for_what_it_claims() -> None:
    code, text = _doctor(f"{NODE} tests/node_impl/adapter.mjs")
    assert code == 0, text
    assert "claims phase0.projection;" in text
    assert "store round trip" not in text and "P1" not in text


# -- issue 9, finding 8 ----------------------------------------------------------------------------


def _broken(mode: str) -> str:
    return python_command("-m", "tests.broken.adapters", mode)


def test_a_failed_plan_says_why() -> None:
    code, text = _doctor(_broken("not-deterministic"))
    assert code == 1
    [line] = [line for line in text.splitlines() if line.startswith("[FAIL] plan for")]
    assert "computedAtNs" in line, line


def test_stray_stdout_after_an_exchange_fails() -> None:
    code, text = _doctor(_broken("late-stray-output"))
    assert code == 1
    assert "[FAIL] stray stdout after the store round trip" in text and "DEBUG read done" in text


def test_a_hello_that_breaks_its_schema_fails_with_the_field() -> None:
    code, text = _doctor(_broken("extra-hello-field"))
    assert code == 1
    assert "[FAIL] start and hello" in text and "'debug' was unexpected" in text


def test_an_exit_path_that_never_writes_the_marker_fails() -> None:
    code, text = _doctor(_broken("never-writes-marker"))
    assert code == 1
    assert "[FAIL] the exit path never wrote the marker, so a kill cannot be told from an orderly exit" in text
    assert "'stop'" in text


# -- issue 39: a P1 adapter runs one small golden scenario through the real harness -----------------------


def _p1_only(mode: str) -> str:
    return python_command("-m", "tests.broken.p1_adapters", mode)


def test_a_sound_p1_only_adapter_passes_the_p1_scenario() -> None:
    code, text = _doctor(_p1_only("p1-only"))
    assert code == 0, text
    assert "claims p1.worker, p1.journal;" in text
    assert "[ok] P1 scenario 'p1-killed-while-idle-restarts-and-stops-in-order' (core)" in text
    assert text.endswith("all checks passed\n")


@pytest.mark.parametrize(
    ("mode", "step", "command"),
    [
        ("cannot-start", "P1 step 1 of 6: start: errored", "p1.worker.start"),
        ("cannot-wait", "P1 step 2 of 6: wait idle: errored", "p1.worker.wait"),
        ("cannot-restart", "P1 step 4 of 6: start again after the kill: errored", "p1.worker.start"),
        ("cannot-stop", "P1 step 6 of 6: stop: errored", "p1.worker.stop"),
        ("no-settings", "P1 step 6 of 6: stop: errored", "p1.journal.settings"),
    ],
)
def test_a_p1_only_adapter_that_cannot_take_a_step_fails_naming_it(mode: str, step: str, command: str) -> None:
    code, text = _doctor(_p1_only(mode))
    assert code == 1, text
    [failed] = [line for line in text.splitlines() if line.startswith("[FAIL]")]
    assert failed.startswith(f"[FAIL] {step}: {command}: "), failed
    number = int(step.split()[2])
    for earlier in range(1, number):  # every step before it is told as taken
        assert f"[ok] P1 step {earlier} of 6: " in text
    assert "all checks passed" not in text and text.endswith("1 check(s) failed\n")


def test_a_worker_whose_steps_all_go_through_fails_on_the_verdict_with_its_clause() -> None:
    code, text = _doctor(python_command("-m", "tests.broken.workers", "synchronous-normal"))
    assert code == 1, text
    assert "[ok] P1 step 6 of 6: stop" in text
    [failed] = [line for line in text.splitlines() if line.startswith("[FAIL]")]
    assert failed.startswith("[FAIL] P1 verdict after the 6 steps of 'p1-killed-while-idle-restarts-and-stops-in-order'"
                             ": failed: ")
    assert "JNL-5 journal.settings: a journal connection is not synchronous=FULL" in failed


@pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")
@pytest.mark.skipif(
    not (ROOT / "tests" / "node_worker" / "node_modules").is_dir(),
    reason="the Node worker's dependencies are not installed (run `npm ci --prefix tests/node_worker`)",
)
def test_the_node_p1_worker_passes() -> None:
    code, text = _doctor(node_adapter_command())
    assert code == 0, text
    assert "[ok] P1 scenario 'p1-killed-while-idle-restarts-and-stops-in-order' (core)" in text


def _history(*steps: int, cut: bool = False) -> tuple[dict[str, object], ...]:
    events: list[dict[str, object]] = [
        {"seq": i, "atMs": 0.0, "actor": "kit", "kind": "step", "data": {"index": n}} for i, n in enumerate(steps)
    ]
    if cut:
        events.append({"seq": len(events), "atMs": 0.0, "actor": "kit", "kind": "history-cut", "data": {}})
    return tuple(events)


def _told(outcome: Outcome, history: tuple[dict[str, object], ...], message: str = "the reason") -> str:
    from resumekit.conformance import _doctor_p1

    steps = ({"start": {}}, {"wait": "idle"}, {"kill": {}}, {"start": {}}, {"wait": "idle"}, {"stop": {}})
    result = CaseResult(_doctor_p1.SCENARIO, "p1", outcome, message=message, history=history)
    return "\n".join(f"{'ok' if ok else 'FAIL'} {text}" for ok, text in _doctor_p1.told(result, steps, 1.0))


def test_a_story_that_is_cut_after_its_last_step_shown_says_a_later_step_may_have_failed() -> None:
    assert _told(Outcome.ERRORED, _history(0, 1)).endswith("FAIL P1 step 2 of 6: wait idle: errored: the reason")
    cut = _told(Outcome.FAILED, _history(0, 1, cut=True))
    assert "FAIL P1 step 2 of 6: wait idle or a later one (the story the kit kept is cut after it): failed" in cut
    assert "before its first step: the reason" in _told(Outcome.ERRORED, ())
    assert "at a step its kept story does not show" in _told(Outcome.ERRORED, _history(cut=True))


def test_a_declined_scenario_is_no_pass() -> None:
    text = _told(Outcome.SKIPPED, (), "p1.worker.start: declined")
    scenario = "'p1-killed-while-idle-restarts-and-stops-in-order'"
    assert text == f"FAIL P1 scenario {scenario}: skipped: p1.worker.start: declined"


def test_a_step_the_rules_fail_as_it_is_taken_is_named_with_its_clause() -> None:
    code, text = _doctor(python_command("-m", "tests.fuzz.p1_workers", "exits-non-zero-when-stopped"))
    assert code == 1, text
    [failed] = [line for line in text.splitlines() if line.startswith("[FAIL]")]
    said = "an orderly stop did not exit 0; RESUME-5 resume.orderly_stops"
    assert failed == f"[FAIL] P1 step 6 of 6: stop: failed: {said}", text
