"""Reading P1's golden files: scenarios, the failpoint catalog, crash matrices and soaks.

Beyond its schema, each file is checked for names that must agree (tasks, repositories, the kit's commits,
control-plane faults), so that a typo is a fixture error naming its line, not a failure of the worker.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from resumekit.conformance import schemas
from resumekit.conformance.cases import Case
from resumekit.conformance.fixtures import FixtureFile
from resumekit.conformance.p1.cases import MatrixCase, ScenarioCase, SoakCase
from resumekit.conformance.p1.gates import scenario_clauses


def _declared(file: FixtureFile, raw: Mapping[str, Any], at: str) -> dict[str, Any]:
    """The fields every P1 case declares for itself in its file: id, description, clauses, profile, gates."""
    return {
        "id": raw["id"],
        "description": raw["description"],
        "clauses": scenario_clauses(raw["clauses"], raw["gates"]),
        "cites": tuple(raw["clauses"]),
        "profile": raw["profile"],
        "source": file.source(at),
        "gates": tuple(raw["gates"]),
    }


def _check_task_names(
    file: FixtureFile, data: Mapping[str, Any], case_id: str, named: Sequence[tuple[str, str]]
) -> None:
    for pointer, name in named:
        if name not in data["tasks"]:
            raise file.error(f"names task {name!r}, which the file's tasks do not define", pointer, case_id)
        if pointer.endswith("/tasks") or "/issue/" in pointer:
            repository = data["tasks"][name]["repository"]
            if repository not in data["repositories"]:
                message = f"task {name!r} names repository {repository!r}, which is not defined"
                raise file.error(message, pointer, case_id)


_PLACEHOLDER_OID = "0" * 39 + "1"


def _check_p1_templates(file: FixtureFile, data: Mapping[str, Any]) -> None:
    """Each task template, filled as the kit fills it, must be a task the control plane may serve (TASK-1)."""
    for name, template in data["tasks"].items():
        repository = data["repositories"].get(template["repository"])
        if repository is None:
            raise file.error(
                f"names repository {template['repository']!r}, which is not defined", f"/tasks/{name}/repository"
            )
        task = {
            "attempt": 1,
            "base_oid": _PLACEHOLDER_OID,
            "expected_branch_oid": _PLACEHOLDER_OID,
            "target_branch": repository["branch"],
            "payload": {},
            "origin_url": "file:///origin.git",
            **template,
        }
        violation = schemas.first_violation(schemas.P1_TASK, task, exact_integers=True)
        if violation is not None:
            raise file.error(f"is not a valid task: {violation.message}", f"/tasks/{name}{violation.pointer}")


def _check_commit_names(
    file: FixtureFile, data: Mapping[str, Any], reissue: Mapping[str, Any], at: str, case_id: str
) -> None:
    """A re-issue may name the kit's commits as @base or @later; @later needs the repository's later files."""
    changes = reissue.get("changes", {})
    repository = changes.get("repository", data["tasks"][reissue["task"]]["repository"])
    if repository not in data["repositories"]:
        raise file.error(f"names repository {repository!r}, which is not defined", f"{at}/changes/repository", case_id)
    for key, value in changes.items():
        if not (isinstance(value, str) and value.startswith("@")):
            continue
        if value not in ("@base", "@later"):
            raise file.error(f"{value!r} is not a commit the kit makes (@base, @later)", f"{at}/changes/{key}", case_id)
        if value == "@later" and "later" not in data["repositories"][repository]:
            message = f"'@later' needs 'later' files in repository {repository!r}"
            raise file.error(message, f"{at}/changes/{key}", case_id)


def _check_faults(file: FixtureFile, faults: Sequence[tuple[str, Mapping[str, Any]]], case_id: str) -> None:
    from resumekit.conformance.p1.control_plane.faults import FaultError
    from resumekit.conformance.p1.control_plane.kit import fault_from_mapping

    for pointer, fault in faults:
        try:
            fault_from_mapping(fault)
        except (FaultError, TypeError, ValueError) as error:
            raise file.error(f"is not a control-plane fault: {error}", pointer, case_id) from None


def read_scenarios(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The scenarios of a ``p1/scenarios`` file, every task, repository, commit and fault they name checked."""
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["scenarios"]):
        at = f"/scenarios/{index}"
        named = [(f"{at}/issue/{i}", name) for i, name in enumerate(raw["issue"])]
        named += [(f"{at}/expect", name) for name in raw["expect"]]
        for i, step in enumerate(raw["steps"]):
            for key in ("issue",):
                if key in step:
                    named.append((f"{at}/steps/{i}/{key}", step[key]))
            for key in ("reissue", "state", "damage_cache"):
                if key in step:
                    named.append((f"{at}/steps/{i}/{key}/task", step[key]["task"]))
        _check_task_names(file, data, raw["id"], named)
        for i, step in enumerate(raw["steps"]):
            if "reissue" in step:
                _check_commit_names(file, data, step["reissue"], f"{at}/steps/{i}/reissue", raw["id"])
        faults = [(f"{at}/faults/{i}", fault) for i, fault in enumerate(raw.get("faults", ()))]
        faults += [(f"{at}/steps/{i}/fault", step["fault"]) for i, step in enumerate(raw["steps"]) if "fault" in step]
        _check_faults(file, faults, raw["id"])
        yield ScenarioCase(
            **_declared(file, raw, at),
            repositories=data["repositories"],
            tasks=data["tasks"],
            issue=tuple(raw["issue"]),
            faults=tuple(raw.get("faults", ())),
            steps=tuple(raw["steps"]),
            expect=raw["expect"],
            ttl_ms=raw.get("ttl_ms", 30_000),
        )


# The gates every derived crash scenario exercises (docs/spec/p1.md, GATE-2, GATE-4, GATE-5).
_CRASH_GATES = ("RESUME_FROM_CHECKPOINT", "CRASH_RECOVERY_CONVERGENCE", "WORKER_RESTART_RESUME")


def read_failpoints(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """The catalog yields one crash scenario per failpoint and task that reaches it (FPT-4)."""
    _check_p1_templates(file, data)
    for group in ("worker", "kit"):
        for index, point in enumerate(data[group]):
            at = f"/{group}/{index}"
            _check_task_names(file, data, point["name"], [(f"{at}/tasks", name) for name in point["tasks"]])
            for name in point["tasks"]:
                steps: list[dict[str, Any]] = []
                if point.get("plant_stale_workspace"):
                    steps.append({"plant": {"name": "task-stale-0"}})
                if group == "worker":
                    faults: tuple[Mapping[str, Any], ...] = ()
                    steps += [{"start": {"failpoint": {"name": point["name"], "hit": 1}}}, {"wait": "blocked"}]
                    steps.append({"kill": {}})
                else:
                    faults = ({"fault": "KillPoint", "name": point["name"]},)
                    steps += [{"start": {}}, {"wait": "killed"}]
                if point.get("expire_lease"):
                    steps.append({"clock": 30_001})
                steps += [{"start": {}}, {"wait": "idle"}]
                task = data["tasks"][name]
                outcome: dict[str, Any] = {"final": "result_submitted", "state": "VERIFYING", "stored": True}
                if task["kind"] == "commit":
                    outcome["pushes"] = 1
                yield ScenarioCase(
                    id=f"p1-crash-{name}-{point['name'].replace('_', '-')}",
                    description=f"Kill the worker at {point['name']} ({point['site']}) during the {name} task.",
                    clauses=scenario_clauses(point["clauses"], _CRASH_GATES),
                    cites=tuple(point["clauses"]),
                    profile="core",
                    source=file.source(at),
                    gates=_CRASH_GATES,
                    repositories=data["repositories"],
                    tasks=data["tasks"],
                    issue=(name,),
                    faults=faults,
                    steps=tuple(steps),
                    expect={name: outcome},
                )


def read_crash_matrix(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """One campaign case per matrix; its runs are found by the loop, not listed (FPT-5)."""
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["matrices"]):
        at = f"/matrices/{index}"
        _check_task_names(file, data, raw["id"], [(f"{at}/task", raw["task"])])
        if raw.get("first") and raw["crashes"] != 2:
            message = "'first' names the first crash of a two-crash matrix; set crashes: 2"
            raise file.error(message, f"{at}/first", raw["id"])
        if raw.get("tear") and (raw["crashes"] != 1 or raw.get("kit_points")):
            message = "a tear sweep kills once per run, at its own failpoint; set crashes: 1 and no kit_points"
            raise file.error(message, f"{at}/tear", raw["id"])
        name = raw["task"]
        outcome: dict[str, Any] = {"final": "result_submitted", "state": "VERIFYING", "stored": True}
        if data["tasks"][name]["kind"] == "commit":
            outcome["pushes"] = 1
        yield MatrixCase(
            **_declared(file, raw, at),
            repositories=data["repositories"],
            tasks=data["tasks"],
            issue=(name,),
            faults=(),
            steps=(),
            expect={name: outcome},
            task=name,
            crashes=raw["crashes"],
            first=tuple(raw.get("first", ())),
            kit_points=tuple(raw.get("kit_points", ())),
            limit=raw.get("limit", 200),
            tear=raw.get("tear"),
        )


def read_soak(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
    """One campaign case per soak; its K tasks are copies of the two templates, each commit task on a
    branch of its own so that their governed commits never meet."""
    _check_p1_templates(file, data)
    for index, raw in enumerate(data["soaks"]):
        at = f"/soaks/{index}"
        _check_task_names(file, data, raw["id"], [(f"{at}/templates/{i}", n) for i, n in enumerate(raw["templates"])])
        repositories = copy.deepcopy(data["repositories"])
        tasks: dict[str, dict[str, Any]] = {}
        expect: dict[str, dict[str, Any]] = {}
        for number in range(1, raw["tasks"] + 1):
            template_name = raw["templates"][(number - 1) % len(raw["templates"])]
            template = data["tasks"][template_name]
            name = f"{template_name}-{number:02d}"
            suffix = f"-{number:02d}"
            task = dict(template, task_id=template["task_id"] + suffix, job_id=template["job_id"] + suffix)
            outcome: dict[str, Any] = {"final": "result_submitted", "stored": True}
            if template["kind"] == "commit":
                branch = f"soak-{number:02d}"
                repository = repositories[template["repository"]]
                repository["branches"] = [*repository.get("branches", ()), branch]
                task["target_branch"] = branch
                outcome["pushes"] = 1
            tasks[name], expect[name] = task, outcome
        yield SoakCase(
            **_declared(file, raw, at),
            repositories=repositories,
            tasks=tasks,
            issue=tuple(tasks),
            faults=(),
            steps=(),
            expect=expect,
            seed=raw["seed"],
            rounds=raw["rounds"],
            faults_per_round=raw["faults_per_round"],
            max_hit=raw["max_hit"],
            budget=float(raw.get("budget_s", 600)),
        )
