"""A few fast cases of each kind of the hostile-input campaign (``tests/fuzz``, the ``fuzz`` nox session).

The campaign draws thousands of inputs; these replay a handful of fixed ones through the same code:
mutated golden trees through ``validate`` and a decision ``run`` in process, misbehaving adapters through
the ``resumekit`` command, the reference store through the adapter protocol, and two hostile P1 workers
through a one-scenario ``resumekit run --kind p1``.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fuzz import behaviours, guards, mutations, p1, store, worker
from tests.fuzz.campaign import (
    BAD,
    Tally,
    classify_fixture,
    classify_p1,
    classify_run,
    kit_traceback,
    p1_clauses_named,
)
from tests.fuzz.parts import Context, _guards_after, run_behaviour

POSIX = pytest.mark.skipif(sys.platform == "win32", reason="the campaign's guards use POSIX calls")


def fixture_outcome(tmp_path: Path, mutation: mutations.Mutation) -> tuple[str, str]:
    tree = tmp_path / "tree"
    mutation.write(tree)
    before = guards.tree_digest(tree)
    files = [str(tree / name) for name, _ in mutation.specials]
    result = worker.job({"tree": str(tree), "report": str(tmp_path / "report.json"), "files": files})
    assert guards.tree_digest(tree) == before, "the kit changed the golden tree it read"
    names = sorted({Path(n).name for n in mutation.files} | {Path(n).name for n, _ in mutation.specials})
    return classify_fixture(result, names)


def structured(target: str, change: Any) -> mutations.Mutation:
    data = yaml.safe_load((mutations.GOLDEN / target).read_bytes())
    change(data)
    return mutations.Mutation("test", target, {target: mutations._dump(data)})


# -- mutated golden trees ------------------------------------------------------------------------


def test_an_unknown_clause_id_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    mutation = structured(mutations.COMPANION, lambda data: data["cases"][0]["clauses"].append("XYZ-99"))
    category, reason = fixture_outcome(tmp_path, mutation)
    assert category == "clear error", reason
    assert "purity.yaml" in reason


def test_the_same_ids_in_two_files_are_a_clear_error(tmp_path: Path) -> None:
    mutation = mutations.tree(FixedDraw(["copy"]), "phase0/decisions/offset.yaml", b"")
    mutation.files["phase0/decisions/offset.yaml"] = (mutations.GOLDEN / "phase0/decisions/offset.yaml").read_bytes()
    mutation.files["phase0/decisions/copy-of-offset.yaml"] = mutation.files["phase0/decisions/offset.yaml"]
    category, reason = fixture_outcome(tmp_path, mutation)
    assert category == "clear error", reason


@pytest.mark.parametrize(
    ("operator", "seed"),
    [("byte-flip", 1), ("duplicate-lines", 4), ("type-swap", 5)],
)
def test_a_mutated_tree_gets_no_traceback_hang_or_wrong_acceptance(operator: str, seed: int, tmp_path: Path) -> None:
    mutation = mutations.mutate(mutations.RandomDraw(seed), "phase0/decisions/offset.yaml", operator)
    category, reason = fixture_outcome(tmp_path, mutation)
    assert category not in BAD, f"{mutation.detail}: {reason}"


class FixedDraw:
    """Draws the given choices in order, and the lowest integer."""

    def __init__(self, choices: list[Any]) -> None:
        self.choices = list(choices)

    def integer(self, low: int, high: int) -> int:
        return low

    def choice(self, options: Any) -> Any:
        return self.choices.pop(0) if self.choices else options[0]


# -- the classification itself ----------------------------------------------------------------------


def test_a_traceback_quoted_from_an_adapters_stderr_is_not_the_kits() -> None:
    quoted = "  stderr (last lines):\n    Traceback (most recent call last):\n    ValueError: x\n"
    assert not kit_traceback(quoted)
    assert kit_traceback("Traceback (most recent call last):\n  File x\nKeyError: 1\n")


def test_a_run_is_judged_by_its_exit_code_and_reasons() -> None:
    failed = {"results": [{"id": "c", "outcome": "errored", "message": "no line on stdout within 2 s"}]}
    assert classify_run(1, "", failed, "refuse", "no line")[0] == "clear error"
    assert classify_run(1, "", failed, "refuse", "something else")[0] == "unclear error"
    assert classify_run(3, "", {}, "refuse")[0] == "accepted wrongly"
    assert classify_run(3, "", {}, "pass")[0] == "accepted correctly"
    assert classify_run(None, "", {}, "refuse")[0] == "hang"
    assert classify_run(-9, "", {}, "refuse")[0] == "traceback"


# -- misbehaving adapters -----------------------------------------------------------------------------


@pytest.fixture
def context(tmp_path: Path) -> Iterator[Context]:
    context = Context(tmp_path / "work")
    yield context
    context.decoy.close()


FAST = {b.name: b for b in behaviours.BEHAVIOURS}


@POSIX
@pytest.mark.parametrize(
    "name", ["reply: huge-int", "crash.arm names pid true"]
)
def test_a_misbehaving_adapter_gets_a_clear_error_and_leaves_nothing_behind(name: str, context: Context) -> None:
    folder = context.work / "adapter"
    outcome = run_behaviour(context, FAST[name], folder, guard=120)
    assert outcome["category"] == "clear error", outcome["reason"]
    assert context.outside_writes() == 0
    assert context.decoy.check(), "the decoy process was killed"
    assert guards.reap_orphans(context.tag) == []
    assert guards.scratch_left(folder / "tmp") == []


# -- the reference store ------------------------------------------------------------------------------


STORE_TRIES = {t.name: t for t in store.tries(0, (1,))}


@pytest.mark.parametrize(
    "name", ["session id '../escape'", "run id 'nul\\x00x'", "a row of 1048576 bytes", "an event with NaN"]
)
def test_the_reference_store_refuses_or_keeps_what_it_is_sent(name: str, context: Context, tmp_path: Path) -> None:
    workspace, cwd = tmp_path / "ws", tmp_path / "cwd"
    workspace.mkdir()
    cwd.mkdir()
    adapter = store.Adapter(cwd, context.env(tmp_path / "tmp"), context.decoy_tree)
    try:
        category, reason = STORE_TRIES[name].run(adapter, workspace)
    finally:
        adapter.close()
    assert category in ("clear error", "accepted correctly"), reason
    assert not any(cwd.iterdir())
    assert context.outside_writes() == 0


# -- hostile P1 workers -------------------------------------------------------------------------------


P1_ATTACKS = {a.name: a for a in p1.ATTACKS}


@POSIX
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("name", "clause"),
    # the last: reports forged on the kit's own paths with the secret the worker read in the origin's policy
    [("journal-fifo", "JNL-1"), ("cache-link-to-dev-zero", "CACHE-1"), ("ref-written-then-reported", "COMMIT-3")],
)
def test_a_hostile_p1_worker_fails_its_case_naming_the_clause(name: str, clause: str, context: Context) -> None:
    folder = context.work / "p1"
    outcome = p1.run_attack(context, P1_ATTACKS[name], folder, guard=120)
    assert outcome["category"] == "clear error", outcome["reason"]
    assert outcome["reason"].startswith(f"{clause}: ")
    assert clause in outcome["named"]
    assert context.outside_writes() == 0
    assert guards.reap_orphans(context.tag) == []
    assert guards.scratch_left(folder / "tmp") == []


@POSIX
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    "name", ["workspace-root-swapped-at-the-kill", "state-swapped-at-the-kill", "link-at-the-next-journal-log"]
)
def test_the_kit_writes_nothing_through_a_link_a_hostile_p1_worker_put_in_its_way(name: str, context: Context) -> None:
    folder = context.work / "p1"
    outcome = p1.run_attack(context, P1_ATTACKS[name], folder, guard=120)
    assert outcome["category"] == "accepted correctly", outcome["reason"]
    assert context.outside_writes() == 0
    assert guards.tmpdir_changed(folder / "tmp") is None
    assert guards.reap_orphans(context.tag) == []
    assert guards.scratch_left(folder / "tmp") == []


@POSIX
def test_a_changed_mode_of_a_tries_tmpdir_counts_as_a_write_outside(context: Context, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    context.env(scratch)
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o1777  # the system's /tmp mode: everyone's, sticky
    tally = Tally("p1")
    _guards_after(context, tally, scratch, "untouched")
    assert tally.outside_writes == 0
    os.chmod(scratch, 0o700)  # what the kit's removal did to the folder above its scratch
    _guards_after(context, tally, scratch, "chmod")
    assert tally.outside_writes == 1
    assert tally.findings[-1]["reason"] == "TMPDIR's mode changed: 1777 -> 700 (sticky bit dropped)"
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o1777, "reset for the next try"


def test_a_p1_refusal_is_clear_only_when_a_failed_case_names_the_clause() -> None:
    def report(outcome: str, clause: str) -> dict[str, Any]:
        mismatch = {"pointer": "/journal", "clause": clause, "actual": "a FIFO", "note": ""}
        return {"results": [{"id": "c", "outcome": outcome, "message": "not idle", "mismatches": [mismatch]}]}

    assert classify_p1(1, "", report("failed", "JNL-1"), "refuse", ("JNL-1",))[0] == "clear error"
    assert classify_p1(1, "", report("failed", "SUB-1"), "refuse", ("JNL-1",))[0] == "unclear error"
    assert classify_p1(1, "", report("errored", "JNL-1"), "refuse", ("JNL-1",))[0] == "unclear error"
    assert classify_p1(3, "", report("passed", ""), "refuse", ("JNL-1",))[0] == "accepted wrongly"
    assert classify_p1(3, "", report("passed", ""), "pass", ())[0] == "accepted correctly"
    assert classify_p1(None, "", {}, "refuse", ("JNL-1",))[0] == "hang"
    assert p1_clauses_named(report("failed", "JNL-1")) == ["JNL-1"]
