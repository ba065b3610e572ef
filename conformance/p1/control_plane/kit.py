"""The kit's own operations on the control plane (docs/spec/p1-control-plane.md CP-6, CP-21), pure.

Issue, re-issue, set a state, script a fault: each changes the ``State`` and writes what it did to the
``Log`` it is given, which the shell then makes durable; a request it cannot do raises ``KitError`` (the
scenario is wrong). Moving the clock is ``lifecycle.move_clock``, which a scripted fault drives too. The
faults a scenario's script can name are ``FAULT_TYPES``, and ``fault_from_mapping`` reads one as the
scenario writes it (a ``FaultError`` when it cannot).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.control_plane.claim_faults import (
    ConflictingIdentity,
    DuplicateDelivery,
    ReplayAttempt,
    ServeStale,
)
from resumekit.conformance.p1.control_plane.faults import (
    Answer,
    Conflict409,
    Delay,
    DelayVisibility,
    Drop,
    FaultError,
    Fence,
    KillPoint,
    MoveBranch,
    MoveClock,
    SecondLease,
    fault_to_mapping,
)
from resumekit.conformance.p1.control_plane.lifecycle import check_task, issue_next, set_task_state
from resumekit.conformance.p1.control_plane.state import (
    KIT_STATES,
    REISSUE_FIELDS,
    BranchMove,
    Fault,
    Heads,
    KitError,
    Log,
    Pending,
    State,
    TaskRec,
    kit_task,
)


def kit_issue(state: State, log: Log, task: Mapping[str, Any]) -> None:
    """Issue a task's first official attempt (QUEUED); ``origin_url`` defaults to the repository's origin."""
    served = copy.deepcopy(dict(task))
    served.setdefault("attempt", 1)
    if served["attempt"] != 1:
        raise KitError("issue() starts a task at attempt 1; use reissue() for later attempts")
    if "origin_url" not in served:
        repository = served.get("repository")
        if repository not in state.origins:
            raise KitError(f"no origin for repository {repository!r}; call add_origin first")
        served["origin_url"] = state.origins[repository]
    task_id = served.get("task_id")
    if task_id in state.tasks:
        raise KitError(f"task {task_id!r} is already issued; use reissue()")
    check_task(state, served, [])
    state.tasks[served["task_id"]] = TaskRec(attempts=[served], state="QUEUED")
    state.issue_order.append((served["task_id"], 1))
    log.add("attempt_issued", task_id=served["task_id"], attempt=1, task=copy.deepcopy(served), cause="kit")
    log.add("task_state", task_id=served["task_id"], attempt=1, **{"from": None}, to="QUEUED", cause="kit")


def kit_reissue(state: State, log: Log, task_id: str, changes: Mapping[str, Any]) -> None:
    """Issue the next official attempt, with identity fields changed as given (CP-6)."""
    rec = kit_task(state, task_id)
    unknown = sorted(set(changes) - REISSUE_FIELDS)
    if unknown:
        raise KitError(f"reissue cannot change {', '.join(unknown)}")
    if rec.stored is not None:
        raise KitError(f"task {task_id!r} has a stored result; no later attempt is issued (CP-10)")
    changes = dict(changes)
    if "repository" in changes and "origin_url" not in changes and changes["repository"] in state.origins:
        changes["origin_url"] = state.origins[changes["repository"]]
    issue_next(state, log, task_id, changes, "kit")


def kit_set_state(state: State, log: Log, task_id: str, to: str) -> None:
    """Kit only: VERIFYING to SUCCEEDED or FAILED, or an operator's FAILED or RECONCILIATION_REQUIRED."""
    rec = kit_task(state, task_id)
    if to not in KIT_STATES:
        raise KitError(f"set_state takes one of {', '.join(KIT_STATES)}; QUEUED comes with reissue()")
    if to in ("VERIFYING", "SUCCEEDED") and rec.stored is None:
        raise KitError(f"task {task_id!r} has no stored result and cannot be {to}")
    set_task_state(state, log, task_id, to, "kit")


def kit_script(state: State, log: Log, fault: Fault, heads: Heads) -> BranchMove | None:
    """Script one fault: one that waits for a request joins the queue; the others act now. What it returns is
    a branch the shell must move now (the core touches no origin), a move it logs as ``branch_moved``."""
    log.add("fault_scripted", fault=fault_to_mapping(fault))
    if fault.waits_for_request():
        state.faults.append(Pending(fault))
        return None
    fault.act(state, log, heads)
    return fault.branch_move()


# Every fault a scenario can name, by its name: a new fault is its class and its entry here.
FAULT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Answer,
        Drop,
        Delay,
        Conflict409,
        DelayVisibility,
        KillPoint,
        DuplicateDelivery,
        ServeStale,
        ReplayAttempt,
        ConflictingIdentity,
        SecondLease,
        Fence,
        MoveBranch,
        MoveClock,
    )
}


def fault_from_mapping(data: Mapping[str, Any]) -> Fault:
    """Build a fault from ``{"fault": NAME, field: value, ...}``; unknown names and fields are errors."""
    if not isinstance(data, Mapping):
        raise FaultError(f"a fault is a mapping, not {type(data).__name__}")
    name = data.get("fault")
    if not isinstance(name, str) or name not in FAULT_TYPES:
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULT_TYPES))}")
    cls = FAULT_TYPES[name]
    fields = {field.name: field for field in dataclasses.fields(cls)}
    values = {key: value for key, value in data.items() if key != "fault"}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise FaultError(f"{name} has no field {', '.join(map(repr, unknown))}; fields: {', '.join(fields)}")
    missing = sorted(
        key
        for key, field in fields.items()
        if key not in values
        and field.default is dataclasses.MISSING
        and field.default_factory is dataclasses.MISSING
    )
    if missing:
        raise FaultError(f"{name} needs {', '.join(map(repr, missing))}")
    for key, value in values.items():
        if key in ("effect",) and not isinstance(value, bool):
            raise FaultError(f"{name}.{key} must be true or false, not {value!r}")
        strings = ("task_id", "job_id", "repository", "branch", "oid", "name", "state", "worker")
        if key in strings and not isinstance(value, str) and not (value is None and fields[key].default is None):
            raise FaultError(f"{name}.{key} must be a string, not {value!r}")
    fault: Fault = cls(**values)
    return fault
