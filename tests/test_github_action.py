"""The GitHub action (action.yml) and the reusable workflow (.github/workflows/certify.yml), checked offline.

GitHub never runs here, so the steps' logic lives in ``resumekit.conformance.github_action`` and runs in
these tests as a step would: inputs in the environment, outputs in a ``GITHUB_OUTPUT`` file, the summary in a
``GITHUB_STEP_SUMMARY`` file. The YAML is checked for what ties it to that module: every local path it uses
exists, every input it reads is declared, every variable the module reads is set by the step that calls it.
The schema and zizmor checks of the YAML are the ``lint`` session's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from resumekit.conformance import github_action
from tests.support import ROOT

PROJECTION_ONLY = "python:tests.core_only:core_only"
BROKEN = "python:tests.broken.decisions:error_counts_as_success"
ACTION = ROOT / "action.yml"
WORKFLOWS = ROOT / ".github" / "workflows"


def _step(command: str, tmp_path: Path, **inputs: str) -> tuple[int, dict[str, str], str]:
    """Run one step's command as the runner would: its exit status, its outputs and its step summary."""
    outputs, summary = tmp_path / "github-output", tmp_path / "step-summary.md"
    env = {"GITHUB_OUTPUT": str(outputs), "GITHUB_STEP_SUMMARY": str(summary), **inputs}
    cwd = Path.cwd()
    os.chdir(ROOT)  # the adapter `python:tests...` is imported from the checkout, as a caller's would be
    try:
        code = github_action.main([command], env)
    finally:
        os.chdir(cwd)
    found = (
        dict(line.split("=", 1) for line in outputs.read_text(encoding="utf-8").splitlines())
        if outputs.exists()
        else {}
    )
    return code, found, summary.read_text(encoding="utf-8") if summary.exists() else ""


def test_plan_gives_one_seed_for_every_shard_and_refuses_a_count_out_of_range() -> None:
    assert github_action.plan({"RESUMEKIT_SHARDS": "3", "GITHUB_RUN_ID": "4711"}) == {
        "shards": "[1,2,3]",
        "seed": "4711",
    }
    assert github_action.plan({"RESUMEKIT_SHARDS": "1", "RESUMEKIT_SEED": "9"}) == {"shards": "[1]", "seed": "9"}
    assert github_action.plan({})["seed"].isdigit()
    for bad in ("0", "65", "two", "-1"):
        with pytest.raises(github_action.InputError, match=re.escape(repr(bad))):
            github_action.plan({"RESUMEKIT_SHARDS": bad})


def test_the_inputs_become_the_run_arguments_and_bad_ones_are_named(tmp_path: Path) -> None:
    env = {"RESUMEKIT_ADAPTER": "node adapter.mjs", "RESUMEKIT_SHARD": "2/3", "RESUMEKIT_SEED": "7"}
    args = github_action.run_arguments(env | {"RESUMEKIT_ARGS": "--jobs 2 --timeout '20'"}, tmp_path)
    assert args[:5] == ["run", "--adapter", "node adapter.mjs", "--profile", "strict"]
    assert args[5:9] == ["--shard", "2/3", "--seed", "7"] and args[-4:] == ["--jobs", "2", "--timeout", "20"]
    assert "--summary-md" not in args  # no step summary outside GitHub
    assert github_action.artifact_name(env) == "resumekit-report-shard-2-of-3"
    assert github_action.artifact_name({"RESUMEKIT_SHARD": "1/1"}) == "resumekit-report-shard-1-of-1"
    assert "--shard" not in github_action.run_arguments(env | {"RESUMEKIT_SHARD": "1/1"}, tmp_path)
    refused = [
        ({}, "'adapter' is empty"),
        (env | {"RESUMEKIT_SHARD": "4/3"}, "'4/3'"),
        (env | {"RESUMEKIT_SHARD": "1-3"}, "'1-3'"),
        (env | {"RESUMEKIT_SEED": ""}, "needs the seed"),
        (env | {"RESUMEKIT_ARGS": "--only 'p1"}, "cannot be split"),
    ]
    for bad, message in refused:
        with pytest.raises(github_action.InputError, match=re.escape(message)):
            github_action.run_arguments(bad, tmp_path)


def test_a_bad_input_exits_2_with_its_reason_and_no_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, outputs, _ = _step("certify", tmp_path, RESUMEKIT_OUT=str(tmp_path / "out"))
    assert code == 2 and outputs == {}
    assert "the input 'adapter' is empty" in capsys.readouterr().err
    assert github_action.main(["nonsense"], {}) == 2


def test_three_shards_merge_into_a_certification_with_its_scope(tmp_path: Path) -> None:
    seed = github_action.plan({"RESUMEKIT_SHARDS": "3"})["seed"]
    for k in (1, 2, 3):
        shard = tmp_path / f"shard-{k}"
        code, outputs, summary = _step(
            "certify", shard, RESUMEKIT_ADAPTER=PROJECTION_ONLY, RESUMEKIT_PROFILE="core",
            RESUMEKIT_SHARD=f"{k}/3", RESUMEKIT_SEED=seed, RESUMEKIT_OUT=str(tmp_path / "shards" / str(k)),
        )  # fmt: skip
        # A passing shard is a subset run (exit 3), and the step passes: only the merge certifies.
        assert (code, outputs["exit-code"], outputs["ok"], outputs["certified"]) == (0, "3", "true", "false"), outputs
        assert outputs["verdict"].startswith(f"SHARD {k}/3 PASSED") and outputs["artifact"].endswith(f"-{k}-of-3")
        assert "SHARD" in summary or "shard" in summary
        assert {p.name for p in Path(outputs["report"]).parent.iterdir()} >= {"report.json", "junit.xml", "badge.json"}
    code, outputs, summary = _step(
        "merge", tmp_path / "merge", RESUMEKIT_REPORTS=str(tmp_path / "shards"), RESUMEKIT_OUT=str(tmp_path / "merged")
    )
    assert (code, outputs["exit-code"], outputs["certified"], outputs["ok"]) == (0, "0", "true", "true"), outputs
    assert outputs["verdict"].startswith("CERTIFIED: core, Phase 0 projection only: ")
    assert "Phase 0 projection only" in summary
    assert (tmp_path / "merged" / "report.html").is_file() and (tmp_path / "merged" / "junit.xml").is_file()


def test_a_failing_run_fails_the_step_and_still_outputs_its_verdict(tmp_path: Path) -> None:
    code, outputs, _ = _step(
        "certify", tmp_path, RESUMEKIT_ADAPTER=BROKEN, RESUMEKIT_PROFILE="core", RESUMEKIT_OUT=str(tmp_path / "out")
    )
    assert (code, outputs["exit-code"], outputs["certified"], outputs["ok"]) == (1, "1", "false", "false"), outputs
    assert outputs["verdict"].startswith("NOT CERTIFIED: ") and Path(outputs["report"]).is_file()
    # The merge of that one whole run re-renders it, and fails as it did.
    code, merged, _ = _step(
        "merge", tmp_path / "m", RESUMEKIT_REPORTS=str(tmp_path / "out"), RESUMEKIT_OUT=str(tmp_path / "mo")
    )
    assert (code, merged["certified"], merged["ok"]) == (1, "false", "false"), merged


def test_a_subset_run_is_no_pass_of_the_action(tmp_path: Path) -> None:
    code, outputs, _ = _step(
        "certify", tmp_path, RESUMEKIT_ADAPTER=PROJECTION_ONLY, RESUMEKIT_PROFILE="core",
        RESUMEKIT_ARGS="--only offset-*", RESUMEKIT_OUT=str(tmp_path / "out"),
    )  # fmt: skip
    assert (code, outputs["exit-code"], outputs["ok"]) == (1, "3", "false"), outputs


def test_merge_with_no_reports_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, outputs, _ = _step("merge", tmp_path, RESUMEKIT_REPORTS=str(tmp_path / "none"))
    assert code == 2 and outputs == {} and "no shard reports" in capsys.readouterr().err


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _steps(document: Any) -> list[dict[str, Any]]:
    if "runs" in document:
        return list(document["runs"]["steps"])
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def _documents() -> dict[str, Any]:
    paths = [ACTION, *sorted(WORKFLOWS.glob("*.yml")), *sorted((ROOT / ".github" / "actions").rglob("action.yml"))]
    return {path.relative_to(ROOT).as_posix(): _yaml(path) for path in paths}


def _local(target: str) -> Path | None:
    """The file a local ``uses:`` names (``$/`` is the running commit of this repository, ``./`` the checkout)."""
    for prefix in ("$/", "./"):
        if target.startswith(prefix):
            path = ROOT / target[len(prefix) :]
            return path if path.is_file() else path / "action.yml"
    return None


def _uses(document: Any) -> list[tuple[str, dict[str, Any]]]:
    jobs = document.get("jobs", {}).values() if isinstance(document.get("jobs"), dict) else []
    found = [(step["uses"], step.get("with", {})) for step in _steps(document) if "uses" in step]
    return found + [(job["uses"], job.get("with", {})) for job in jobs if "uses" in job]


def test_every_action_and_workflow_used_is_pinned_or_local_and_exists() -> None:
    for name, document in _documents().items():
        for target, _ in _uses(document):
            local = _local(target)
            remote = re.fullmatch(r"[\w.-]+/[\w./-]+@[\w.-]+", target)
            assert remote or local, f"{name}: {target!r} is neither owner/repo@ref nor a local path"
            assert local is None or local.is_file(), f"{name}: {target!r} does not exist ({local})"


def test_no_self_repository_use_is_bare() -> None:
    """GitHub's runner trims the slashes after ``$/`` and refuses the empty path left: the root is ``$/./``."""
    for name, document in _documents().items():
        for target, _ in _uses(document):
            if target.startswith("$/"):
                path = target[2:].strip("/")
                assert path, f"{name}: {target!r} names no path; write the repository's root as '$/./'"


def test_every_local_use_passes_only_inputs_it_declares_and_every_required_one() -> None:
    for name, document in _documents().items():
        for target, given in _uses(document):
            local = _local(target)
            if local is None:
                continue
            called = _yaml(local)
            declared = called["inputs"] if "runs" in called else called[True]["workflow_call"]["inputs"]  # `on:`
            unknown = sorted(set(given) - set(declared))
            assert not unknown, f"{name}: {target!r} is given inputs it does not declare: {unknown}"
            missing = sorted(key for key, spec in declared.items() if spec.get("required") and key not in given)
            assert not missing, f"{name}: {target!r} lacks its required inputs {missing}"


def test_the_action_reads_only_declared_inputs_and_sets_every_variable_the_module_reads() -> None:
    module = (ROOT / "conformance" / "github_action.py").read_text(encoding="utf-8")
    read = set(re.findall(r'"(RESUMEKIT_\w+)"', module))
    for name in ("action.yml", ".github/workflows/certify.yml"):
        document = _documents()[name]
        declared = document["inputs"] if "runs" in document else document[True]["workflow_call"]["inputs"]
        for used in set(re.findall(r"inputs\.([\w-]+)", (ROOT / name).read_text(encoding="utf-8"))):
            assert used in declared, f"{name} reads inputs.{used}, which it does not declare"
        for step in _steps(document):
            assert "${{" not in step.get("run", ""), f"{name}: an expression in a run script can inject a command"
    (step,) = (step for step in _steps(_documents()["action.yml"]) if "github_action" in step.get("run", ""))
    assert set(step["env"]) >= read, f"the action does not set {sorted(read - set(step['env']))}"
    assert {v for v in step["env"] if v.startswith("RESUMEKIT_")} <= read | {"RESUMEKIT_COMMAND"}
    for command in ("certify", "plan", "merge"):  # the values the input `command` documents
        assert f'"{command}"' in _documents()["action.yml"]["inputs"]["command"]["description"]
        assert f'"{command}"' in module
