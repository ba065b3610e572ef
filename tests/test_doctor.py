"""``resumekit doctor`` tells a working adapter from a broken one before a full run."""

from __future__ import annotations

import io

import pytest

from resumekit.conformance.doctor import diagnose
from tests.support import NODE, python_command


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
    assert "store round trip" not in text


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
