"""Each deliberately broken P1 worker (tests/broken/workers/) fails the gate its bug breaks, and only
the gates its bug touches: those of the clauses it breaks and every gate a scenario that caught it names.

Each bug runs only the scenarios it must fail, plus the first scenario of the compact selection it must pass
(a bug caught everywhere has none), through the ``resumekit`` command in a subprocess with a timeout, so the
module grows by two or three scenario runs with each new worker. The runs go two at a time in one
module-scoped fixture. The bugs that only make
a campaign vacuous (``CAMPAIGN_BUGS``) each run the smallest crash matrix and a small soak instead, and a
reference that does not claim p1.journal runs one scenario: none of them may leave a gate passed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from resumekit.conformance._resources import golden_dir
from resumekit.conformance.fixtures import load_suite
from resumekit.conformance.p1.checks import rules
from resumekit.conformance.p1.gates import GATES
from tests.broken.workers import BUGS, CAMPAIGN_BUGS, VACUOUS_BUGS
from tests.support import gate_rows, python_command, run_resumekit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GUARD = 300  # seconds: far above an honest run of the selection, only there to turn a hang into a failure

# One or two scenarios per gate, which together name all nine: a bug passes the first of them it must not fail.
SELECTION = (
    "p1-capture-completes",  # CHECKPOINT_DURABLE_WRITE, RESULT_SUBMISSION_REPLAY_SAFE
    "p1-commit-completes",  # CHECKPOINT_DURABLE_WRITE, RETRY_IDEMPOTENT..., LEASE_RENEWAL_RECOVERY
    "p1-orderly-stop-mid-task-then-resume",  # WORKER_RESTART_RESUME
    "p1-kill-after-pending-resends-the-same-key",  # RESULT_SUBMISSION..., WORKER_RESTART..., CRASH_RECOVERY...
    "p1-restart-at-commit-done-pushes-nothing-again",  # RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT
    "p1-cleanup-never-follows-a-task-link",  # WORKSPACE_CLEANUP_RECOVERY
    "p1-replay-ignores-a-tampered-old-workspace",  # WORKSPACE_CLEANUP_RECOVERY, RESUME_FROM_CHECKPOINT
    "p1-lease-expired-before-submission-abandons-the-attempt",  # LEASE_RENEWAL..., CRASH_RECOVERY...
    "p1-scope-generation-differs-reuses-nothing",  # CHECKPOINT_SCOPE_ISOLATION
    "p1-409-other-body-is-a-hard-failure",  # RESULT_SUBMISSION_REPLAY_SAFE
)

EVERY_GATE = frozenset(GATES)
# Where a bug caught on every scenario is run: the scenarios of the two task kinds (a bug that fails both is
# taken for one caught everywhere, which has no scenario to pass).
EVERYWHERE = frozenset({"p1-capture-completes", "p1-commit-completes"})

# bug -> (the gates its clauses fail, the scenarios that must fail, clauses of which each failing scenario cites one)
# A bug runs its scenarios and the first of SELECTION it must pass; they may be any golden scenarios.
EXPECTED: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    # A failed check counts against the gates whose clauses include it (spec section 17); the comments say
    # which clause brings in each gate beyond the bug's own. A failed scenario also fails every gate it names
    # (from its golden file, added by the test).
    # SUB-1 is checked on every submission, so every scenario fails; SUB-1 belongs to CHECKPOINT_DURABLE_WRITE
    # and RESULT_SUBMISSION_REPLAY_SAFE. Submitting first, it also submits once after its lease was lost (LEASE-4).
    "submits-before-pending": (
        frozenset({"CHECKPOINT_DURABLE_WRITE", "RESULT_SUBMISSION_REPLAY_SAFE", "LEASE_RENEWAL_RECOVERY"}),
        EVERYWHERE | {"p1-lease-expired-before-submission-abandons-the-attempt"},
        frozenset({"SUB-1", "LEASE-4"}),
    ),
    # The new key breaks KEY-2 (four gates list it). Its result_pending row was durable, under the old key, so
    # the submission is no SUB-1 failure (and CHECKPOINT_DURABLE_WRITE, SUB-1's gate, stays passed).
    "new-key-on-restart": (
        frozenset(
            {
                "RESULT_SUBMISSION_REPLAY_SAFE",
                "WORKER_RESTART_RESUME",
                "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT",
                "CHECKPOINT_SCOPE_ISOLATION",
            }
        ),
        frozenset({"p1-kill-after-pending-resends-the-same-key"}),
        frozenset({"KEY-1", "KEY-2"}),
    ),
    # result_submitted rests on a 409 whose stored result is another body: no exact match (SUB-5). The control
    # plane does not hold the row's result either (SUB-7, also a clause of CRASH_RECOVERY_CONVERGENCE and
    # LEASE_RENEWAL_RECOVERY).
    "accepts-any-409": (
        frozenset({"RESULT_SUBMISSION_REPLAY_SAFE", "CRASH_RECOVERY_CONVERGENCE", "LEASE_RENEWAL_RECOVERY"}),
        frozenset({"p1-409-other-body-is-a-hard-failure"}),
        frozenset({"SUB-5"}),
    ),
    "reuses-across-generations": (
        frozenset({"CHECKPOINT_SCOPE_ISOLATION"}),
        frozenset({"p1-scope-generation-differs-reuses-nothing"}),
        frozenset({"SCOPE-4"}),
    ),
    # The second push comes while commit_done is the latest row, which COMMIT-2's moment check also catches; the
    # restarted process sends it with no read of the branch's leases, which strict's COMMIT-6 names.
    "recommits-after-commit-done": (
        frozenset({"RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT", "CHECKPOINT_DURABLE_WRITE", "LEASE_RENEWAL_RECOVERY"}),
        frozenset({"p1-restart-at-commit-done-pushes-nothing-again"}),
        frozenset({"COMMIT-3"}),
    ),
    # The decoy behind the link changes; the kit's decoy check cites CLEAN-2 (nothing outside the root touched).
    "follows-links-in-cleanup": (
        frozenset({"WORKSPACE_CLEANUP_RECOVERY"}),
        frozenset({"p1-cleanup-never-follows-a-task-link"}),
        frozenset({"CLEAN-4", "CLEAN-2"}),
    ),
    # JNL-5 is attested and checked on every scenario; it belongs to CHECKPOINT_DURABLE_WRITE and
    # WORKER_RESTART_RESUME (the new process's connections).
    "synchronous-normal": (
        frozenset({"CHECKPOINT_DURABLE_WRITE", "WORKER_RESTART_RESUME"}),
        EVERYWHERE,
        frozenset({"JNL-5"}),
    ),
    # Keeping the old workspace fails CLEAN-1 at the first request of a restart; the replay scenario's own
    # expectations (a result from a clean workspace) count against both gates it names.
    "resumes-in-old-workspace": (
        frozenset({"WORKSPACE_CLEANUP_RECOVERY", "RESUME_FROM_CHECKPOINT"}),
        frozenset({"p1-replay-ignores-a-tampered-old-workspace", "p1-orderly-stop-mid-task-then-resume"}),
        frozenset({"RESUME-3", "CLEAN-1"}),
    ),
    "ignores-lost-lease": (
        frozenset({"LEASE_RENEWAL_RECOVERY"}),
        frozenset(
            {
                "p1-lease-expired-before-submission-abandons-the-attempt",
                "p1-scope-generation-differs-reuses-nothing",
            }
        ),
        frozenset({"LEASE-4"}),
    ),
    # The answer to p1.journal.settings lists no connection while the journal log lists one: the contradiction fails
    # ADP-3 (CHECKPOINT_DURABLE_WRITE's) in every scenario, each of which asks once the last step is done.
    "hides-its-connections": (frozenset({"CHECKPOINT_DURABLE_WRITE"}), EVERYWHERE, frozenset({"ADP-3"})),
    # Stories that pass and are false, caught in the two scenarios of the selection with a commit task. A commit of
    # another tree landed where C should: TASK-4 (RESUME_FROM_CHECKPOINT's and RETRY_IDEMPOTENT...'s).
    "lands-another-tree": (
        frozenset({"RESUME_FROM_CHECKPOINT", "RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT"}),
        frozenset({"p1-commit-completes", "p1-restart-at-commit-done-pushes-nothing-again"}),
        frozenset({"TASK-4"}),
    ),
    # result_pending with no receipt confirmed before it: COMMIT-4 (CRASH_RECOVERY_... and LEASE_RENEWAL_...'s).
    "converges-without-the-receipt": (
        frozenset({"CRASH_RECOVERY_CONVERGENCE", "LEASE_RENEWAL_RECOVERY"}),
        frozenset({"p1-commit-completes", "p1-restart-at-commit-done-pushes-nothing-again"}),
        frozenset({"COMMIT-4"}),
    ),
    # A reset behind the hook, reported on the kit's own path with the secret: no landed push bears it out (COMMIT-3).
    "forges-the-ref-report": (
        frozenset({"RETRY_IDEMPOTENT_NO_DUPLICATE_SIDE_EFFECT"}),
        frozenset({"p1-commit-completes", "p1-restart-at-commit-done-pushes-nothing-again"}),
        frozenset({"COMMIT-3"}),
    ),
}
if "leaves-a-daemon" in BUGS:  # Linux only: elsewhere the kit cannot look for what escaped the adapter's tree
    # Every startup leaves a daemon outside the adapter's session: after each scenario the kit finds it by the
    # case's marker, names it (WRK-5, a strict clause of WORKER_RESTART_RESUME) and kills it.
    EXPECTED["leaves-a-daemon"] = (frozenset({"WORKER_RESTART_RESUME"}), EVERYWHERE, frozenset({"WRK-5"}))


# Every check a P1 mismatch may name: the rules of the table, the campaigns' checks, the table's own.
CHECKS = frozenset(name for name, _, _ in rules.listing())


def _named_by_registered_checks(document: dict[str, Any]) -> None:
    """Every mismatch of every result names the check that made it, one the table or the campaigns list."""
    named = [(result["id"], mismatch.get("check")) for result in document["results"] for mismatch in
             result.get("mismatches", ())]
    assert all(check in CHECKS for _, check in named), [pair for pair in named if pair[1] not in CHECKS]


# The gates each P1 scenario names in its golden file.
_GATES_OF = {case.id: frozenset(case.counts_toward) for case in load_suite().cases if case.kind == "p1"}


def passing(bug: str) -> tuple[str, ...]:
    """The scenario *bug* must pass: the first of the selection it is not expected to fail; none for a bug
    caught everywhere, which fails the scenarios of both task kinds (EVERYWHERE)."""
    failing = EXPECTED[bug][1]
    if failing >= EVERYWHERE:
        return ()
    return tuple(scenario for scenario in SELECTION if scenario not in failing)[:1]


def selection(bug: str) -> tuple[str, ...]:
    """What *bug* runs: the scenarios it must fail, then the one it must pass."""
    return (*sorted(EXPECTED[bug][1]), *passing(bug))


def _run(bug: str, report: Path) -> tuple[int, dict[str, Any], str]:
    selection_args = [arg for scenario in selection(bug) for arg in ("--only", scenario)]
    adapter = python_command("-m", "tests.broken.workers", bug)
    return run_resumekit(report, "--kind", "p1", "--adapter", adapter, *selection_args, guard=GUARD)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, dict[str, Any], str]]]:
    folder = tmp_path_factory.mktemp("broken-workers")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {bug: pool.submit(_run, bug, folder / f"{bug}.json") for bug in BUGS}
        yield {bug: future.result() for bug, future in futures.items()}


def test_every_bug_has_an_expectation_and_the_selection_names_every_gate() -> None:
    assert set(EXPECTED) == set(BUGS) and len(BUGS) >= 9
    assert set(SELECTION) <= set(_GATES_OF) and frozenset().union(*(_GATES_OF[s] for s in SELECTION)) == EVERY_GATE
    assert all(scenarios <= set(_GATES_OF) for _, scenarios, _ in EXPECTED.values())


def test_a_bug_runs_the_scenarios_it_must_fail_and_one_it_must_pass() -> None:
    assert selection("new-key-on-restart") == ("p1-kill-after-pending-resends-the-same-key", "p1-capture-completes")
    assert selection("hides-its-connections") == tuple(sorted(EVERYWHERE))  # caught everywhere: nothing to pass
    assert passing("submits-before-pending") == ()
    assert all(len(selection(bug)) <= len(EXPECTED[bug][1]) + 1 for bug in EXPECTED)


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_a_broken_worker_fails_the_gates_its_bug_breaks(
    bug: str, runs: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    by_clause, scenarios, clauses = EXPECTED[bug]
    gates = by_clause.union(*(_GATES_OF[case] for case in scenarios))
    code, document, output = runs[bug]
    assert code == 1, output  # not certified
    verdicts = {name: row["verdict"] for name, row in gate_rows(document).items()}
    assert set(verdicts) == EVERY_GATE
    assert {gate for gate, verdict in verdicts.items() if verdict == "failed"} == gates, verdicts
    # The gates of the scenario it passes pass, unless its bug fails them elsewhere; no gate passes untried.
    tried = frozenset().union(*(_GATES_OF[case] for case in passing(bug)))
    assert all(verdicts[gate] == "passed" for gate in tried - gates), verdicts
    assert all(verdicts[gate] == "not run" for gate in EVERY_GATE - gates - tried), verdicts
    results = {result["id"]: result for result in document["results"]}
    assert set(results) == set(selection(bug))
    failing = {case for case, result in results.items() if result["outcome"] != "passed"}
    assert failing == scenarios, {case: results[case]["mismatches"] for case in failing}
    _named_by_registered_checks(document)
    for case in failing:
        result = results[case]
        assert result["outcome"] == "failed", result
        cited = {mismatch.get("clause") for mismatch in result["mismatches"]}
        assert cited & clauses, (case, cited)


# The smallest crash matrix, and a soak cut to two tasks and three rounds (a copy of golden/p1/soak.yaml).
MATRIX = "p1-matrix-capture"
SOAK = "p1-soak-20-tasks"


def _small_soak(folder: Path) -> Path:
    source = yaml.safe_load((golden_dir() / "p1" / "soak.yaml").read_text(encoding="utf-8"))
    (soak,) = source["soaks"]
    assert soak["id"] == SOAK
    source["soaks"] = [dict(soak, tasks=2, rounds=3)]
    root = folder / "golden"
    (root / "p1").mkdir(parents=True)
    (root / "p1" / "soak.yaml").write_text(yaml.safe_dump(source, sort_keys=False), encoding="utf-8")
    return root


def _no_gate_passed(document: dict[str, Any], failed: frozenset[str]) -> None:
    verdicts = {name: row["verdict"] for name, row in gate_rows(document).items()}
    assert set(verdicts) == EVERY_GATE, verdicts
    assert {gate for gate, verdict in verdicts.items() if verdict == "failed"} == failed, verdicts
    assert "passed" not in verdicts.values(), verdicts


@pytest.mark.parametrize("bug", sorted(CAMPAIGN_BUGS))
def test_a_worker_that_never_blocks_at_the_any_failpoint_fails_the_crash_matrix(bug: str, tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.workers", bug)
    code, document, output = run_resumekit(
        tmp_path / "matrix.json", "--adapter", adapter, "--kind", "p1-campaign", "--only", MATRIX, guard=GUARD
    )
    assert code == 1, output  # failed, where it used to pass, its three kit-side kill points counted as visited
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    assert "never blocked at any failpoint site it was armed at" in result["message"], result["message"]
    assert [mismatch.get("clause") for mismatch in result["mismatches"]] == ["FPT-5"], result
    _named_by_registered_checks(document)
    _no_gate_passed(document, frozenset(result["countsToward"]))


@pytest.mark.parametrize("bug", sorted(CAMPAIGN_BUGS))
def test_a_soak_whose_worker_never_blocks_at_a_failpoint_fails(bug: str, tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.workers", bug)
    golden = _small_soak(tmp_path)
    code, document, output = run_resumekit(
        tmp_path / "soak.json", "--adapter", adapter, "--golden", str(golden), "--kind", "p1-campaign", guard=GUARD
    )
    assert code == 1, output
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    assert "no worker kill was at a failpoint" in result["message"], result["message"]
    assert "FPT-5" in {mismatch.get("clause") for mismatch in result["mismatches"]}, result
    _named_by_registered_checks(document)
    _no_gate_passed(document, frozenset(result["countsToward"]))


def test_the_reference_passes_the_small_soak_with_its_kills_at_failpoints(tmp_path: Path) -> None:
    golden = _small_soak(tmp_path)
    code, document, output = run_resumekit(
        tmp_path / "soak.json", "--adapter", "reference", "--golden", str(golden), "--kind", "p1-campaign", guard=GUARD
    )
    assert code == 3, output  # a passed subset run
    (result,) = document["results"]
    assert result["outcome"] == "passed", result
    kills = result["message"].split(" worker kills (")[1].split(" at a failpoint")[0]
    assert int(kills) >= 1, result["message"]


def test_a_worker_that_does_not_claim_p1_journal_leaves_no_gate_passed(tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.adapters", "no-journal-claim")
    code, document, output = run_resumekit(
        tmp_path / "r.json", "--adapter", adapter, "--kind", "p1", "--only", "p1-capture-completes", guard=GUARD
    )
    assert code == 1, output
    assert "p1.journal" not in document["implementation"]["capabilities"]
    (result,) = document["results"]
    assert result["outcome"] == "failed", result
    assert "ADP-1" in {mismatch.get("clause") for mismatch in result["mismatches"]}, result
    _named_by_registered_checks(document)
    # ADP-1 is a clause of no gate: the scenario's own gates fail all the same, the others did not run.
    _no_gate_passed(document, frozenset(result["countsToward"]))


# Scenarios where a worker that never claims once said idle and the kit waited the whole budget for a claim.
UNCLAIMED_WAITS = ("p1-409-without-stored-result-is-a-hard-failure", "p1-submit-dropped-answer-replays")


@pytest.mark.parametrize("bug", sorted(VACUOUS_BUGS))
def test_a_worker_that_does_nothing_passes_no_scenario_and_no_gate(bug: str, tmp_path: Path) -> None:
    adapter = python_command("-m", "tests.broken.workers", bug)
    only = [arg for case in (*SELECTION, *UNCLAIMED_WAITS) for arg in ("--only", case)]
    code, document, output = run_resumekit(
        tmp_path / "r.json", "--adapter", adapter, "--kind", "p1", "--jobs", "2", *only, guard=GUARD
    )
    assert code == 1, output
    outcomes = {result["id"]: result["outcome"] for result in document["results"]}
    assert len(outcomes) == len(SELECTION) + len(UNCLAIMED_WAITS), outcomes
    assert "passed" not in outcomes.values(), outcomes
    # Idle with no claim since the kit's last change is the worker's failure (WRK-3), not the kit's error.
    for result in document["results"]:
        if result["id"] in UNCLAIMED_WAITS and bug == "never-claims":
            assert result["outcome"] == "failed", result
            assert "WRK-3" in {mismatch.get("clause") for mismatch in result["mismatches"]}, result
    _named_by_registered_checks(document)
    _no_gate_passed(document, EVERY_GATE)
