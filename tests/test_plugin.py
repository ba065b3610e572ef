"""The pytest plugin: golden cases as items named by fixture id, failures pointing at YAML lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "python:resumekit.reference:build_resume_plan"


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def go(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)

    return go


def test_inert_without_its_option(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "golden" not in result.stdout.str()


def test_items_are_named_by_fixture_id(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--resumekit", "--collect-only", "-q")
    output = result.stdout.str()
    assert "failpoints.yaml::prefix-after-function-call" in output
    assert "failpoints.yaml::crash-p11" in output


def test_the_reference_passes_and_unclaimed_cases_are_skipped_not_passed(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--resumekit-adapter", REFERENCE, "-k", "prefix or crash-p1", "-rs")
    result.assert_outcomes(passed=4, skipped=3)
    result.stdout.fnmatch_lines(["*not claimed*phase0.store*"])


def test_a_failure_points_at_the_yaml_line_and_clause(run) -> None:  # type: ignore[no-untyped-def]
    adapter = "python:tests.broken.decisions:dangling_calls_replayed"
    result = run("--resumekit-adapter", adapter, "-k", "prefix-after-function-call")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*failpoints.yaml:26: golden case 'prefix-after-function-call'*",
            "*/replayRuntimeEvents ?PLAN-9?*",
            '*expected: ?"evt-user"?*',
        ]
    )


def test_a_broken_fixture_is_a_collection_error_with_its_location(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "bad.yaml").write_text("schema_version: 1\nkind: phase0/decisions\ncases: nope\n", encoding="utf-8")
    monkeypatch.setenv("RESUMEKIT_GOLDEN", str(golden))
    result = run("--resumekit")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*invalid resumekit fixture: bad.yaml:3: at /cases: 'nope' is not of type 'array'*"])
    assert "Traceback" not in result.stdout.str()


def test_crash_cases_run_through_a_process_adapter_with_a_seeded_schedule(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        "--resumekit-adapter",
        "reference",
        "--resumekit-seed",
        "5",
        "--resumekit-kills",
        "3",
        "-k",
        "crash-p4 or random-crash-schedule or corrupt-first-row",
        "-v",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*crash schedule seed 5*", "*crash-schedule.yaml::random-crash-schedule PASSED*"])


def test_under_xdist_every_golden_item_runs_once_with_one_seed(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("xdist")
    select = ("-k", "prefix or crash-p or corrupt-first-row or random-crash-schedule")
    collected = run("--resumekit-adapter", "reference", *select, "--collect-only", "-q")
    expected = sorted(line for line in collected.stdout.lines if "::" in line)
    assert len(expected) > 10, collected.stdout.str()
    junit = tmp_path / "junit.xml"
    result = run(
        "--resumekit-adapter", "reference", "--resumekit-kills", "4", *select,
        "-p", "xdist", "-n", "2", "-rA", f"--junitxml={junit}",
    )  # fmt: skip
    result.assert_outcomes(passed=len(expected))
    ran = sorted(line.split(" ", 1)[1] for line in result.stdout.lines if line.startswith("PASSED "))
    assert ran == expected, "every golden item ran exactly once"
    # The controller gathered every worker's results into one verdict.
    assert _verdict_line(result).startswith(
        f"SUBSET: selected cases passed (not a certification): {len(expected)} passed"
    )
    import xml.etree.ElementTree as ElementTree

    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert sorted(case.get("name", "") for case in cases) == sorted(line.split("::")[-1] for line in expected)
    # The schedule ran on a worker with the seed the controller chose and printed, not one of its own.
    [header] = [line for line in result.stdout.lines if "crash schedule seed" in line]
    [schedule] = [case for case in cases if case.get("name") == "random-crash-schedule"]
    used = [prop.get("value") for prop in schedule.iter("property") if prop.get("name") == "seed"]
    assert used == [header.rsplit("seed ", 1)[1].strip()], (header, used)


def test_a_p1_scenario_runs_through_a_process_adapter(run) -> None:  # type: ignore[no-untyped-def]
    # Issue 21, item 1: the plugin had runners for the Phase 0 process kinds only, so P1 was always skipped.
    result = run("--resumekit-adapter", "reference", "-k", "p1-capture-completes", "-rs")
    result.assert_outcomes(passed=1)


def test_the_campaigns_are_collected_only_when_their_kind_is_named(run) -> None:  # type: ignore[no-untyped-def]
    default = run("--resumekit-adapter", "reference", "--collect-only", "-q").stdout.str()
    assert "p1-soak-20-tasks" not in default and "p1-capture-completes" in default
    named = run("--resumekit-adapter", "reference", "--resumekit-kind", "p1-campaign", "--collect-only", "-q")
    assert "p1-soak-20-tasks" in named.stdout.str() and "p1-capture-completes" not in named.stdout.str()


def _verdict_line(result: pytest.RunResult) -> str:
    [line] = [line for line in result.stdout.lines if line.startswith(("CERTIFIED", "NOT CERTIFIED", "SUBSET"))]
    return line


def test_the_session_ends_with_the_verdict_line_of_run(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--resumekit-adapter", REFERENCE, "-k", "prefix or crash-p1")
    assert result.ret == pytest.ExitCode.OK
    line = _verdict_line(result)
    assert line.startswith("SUBSET: selected cases passed (not a certification): 4 passed,"), line
    assert "3 not claimed" in line, line
    result.stdout.fnmatch_lines(["*pytest ran 7 of the * selected cases (* left out by -k, -m, node ids*"])


def test_certify_fails_a_session_narrowed_by_k(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--resumekit-adapter", REFERENCE, "-k", "prefix", "--resumekit-certify")
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SUBSET: *", "*--resumekit-certify: the session fails, as the run is not a cert*"])


def test_certify_passes_an_in_process_runtime_for_what_it_claims(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    saved = tmp_path / "report.json"
    result = run("--resumekit-adapter", REFERENCE, "--resumekit-certify", f"--resumekit-report-json={saved}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert _verdict_line(result).startswith("CERTIFIED: strict"), _verdict_line(result)
    import json

    from resumekit.conformance import report, schemas

    document = json.loads(saved.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.BASE + "report/run-report.json", document) is None
    finished = report.from_json(document)
    assert finished.certified and finished.counts["passed"] == sum(1 for r in finished.results if r.kind == "decision")


def test_a_declined_case_never_passes_and_fails_under_certify(run) -> None:  # type: ignore[no-untyped-def]
    from tests.support import python_command

    adapter = python_command("-m", "tests.broken.adapters", "declines")
    select = ("-k", "prefix-after-function", "-rs")
    lenient = run("--resumekit-adapter", adapter, *select)
    lenient.assert_outcomes(passed=1, skipped=1)
    lenient.stdout.fnmatch_lines(["*skipped, which counts against certification: declined on purpose*"])
    assert _verdict_line(lenient).startswith("SUBSET: selected cases did not all pass"), _verdict_line(lenient)
    strict = run("--resumekit-adapter", adapter, *select, "--resumekit-certify")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["*SKIPPED prefix-after-function-response*", "*declined on purpose*"])
    assert strict.ret == pytest.ExitCode.TESTS_FAILED


def test_node_ids_name_the_golden_set_wherever_the_kit_is_installed(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    import shutil
    import xml.etree.ElementTree as ElementTree

    from resumekit.conformance._resources import golden_dir

    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "resumekit" / "_data" / "golden"
    shutil.copytree(golden_dir(), installed)
    monkeypatch.setenv("RESUMEKIT_GOLDEN", str(installed))
    listed = run("--resumekit-adapter", REFERENCE, "--collect-only", "-q").stdout.lines
    ids = [line for line in listed if "::" in line]
    assert len(ids) > 300 and all(line.startswith("golden/") for line in ids), ids[:3]
    assert "golden/phase0/decisions/offset.yaml::offset-above-with-name-mismatch" in ids
    junit = tmp_path / "junit.xml"
    select = ("-k", "offset-above-with-name-mismatch or crash-p4")
    ran = run("--resumekit-adapter", "reference", *select, f"--junitxml={junit}", "-o", "junit_family=xunit1", "-v")
    ran.stdout.fnmatch_lines(["golden/phase0/failpoints.yaml::crash-p4 PASSED*"])
    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    offset = cases["offset-above-with-name-mismatch"]
    assert offset.get("classname") == "golden.phase0.decisions.offset.yaml"
    assert offset.get("file") == "golden/phase0/decisions/offset.yaml"
    assert "site-packages" not in junit.read_text(encoding="utf-8").replace(str(installed), "")


def test_a_node_id_as_printed_selects_its_case(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--resumekit-adapter", REFERENCE, "golden/phase0/failpoints.yaml::prefix-after-function-call", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["golden/phase0/failpoints.yaml::prefix-after-function-call PASSED*"])


def test_a_module_level_profiles_narrows_the_claim_and_core_is_compared(run) -> None:  # type: ignore[no-untyped-def]
    # Issue 21, item 5: `profiles = ("core",)` on the module was ignored, so strict cases failed by the dozen.
    result = run("--resumekit-adapter", "python:tests.core_only_module:build_resume_plan", "--resumekit-certify")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    line = _verdict_line(result)
    assert line.startswith("CERTIFIED: core (strict not claimed)") and " 0 failed" in line, line
