"""The project's own tests, which run beside the golden cases."""

from __future__ import annotations

from my_runtime import build_resume_plan


def test_an_empty_ledger_has_a_plan() -> None:
    assert isinstance(build_resume_plan([]), dict)
