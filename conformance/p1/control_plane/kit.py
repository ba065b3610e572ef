"""The kit's own operations on the control plane (docs/spec/p1-control-plane.md CP-6, CP-21), pure.

Issue, re-issue, set a state, script a fault: each changes the ``State`` and writes what it did to the
``Log`` it is given, which the shell then makes durable; a request it cannot do raises ``KitError`` (the
scenario is wrong). Moving the clock is ``lifecycle.move_clock``, which a scripted fault drives too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.control_plane import faults as F
from resumekit.conformance.p1.control_plane.lifecycle import check_task, grant, issue_next, move_clock, set_task_state
from resumekit.conformance.p1.control_plane.state import (
    KIT_STATES,
    REISSUE_FIELDS,
    Heads,
    KitError,
    Log,
    Pending,
    State,
    TaskRec,
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
    rec = _kit_task(state, task_id)
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
    rec = _kit_task(state, task_id)
    if to not in KIT_STATES:
        raise KitError(f"set_state takes one of {', '.join(KIT_STATES)}; QUEUED comes with reissue()")
    if to in ("VERIFYING", "SUCCEEDED") and rec.stored is None:
        raise KitError(f"task {task_id!r} has no stored result and cannot be {to}")
    set_task_state(state, log, task_id, to, "kit")


def kit_script(state: State, log: Log, fault: F.Fault, heads: Heads) -> None:
    """Script one fault: a waiting one joins the queue; the others act now."""
    log.add("fault_scripted", fault=F.fault_to_mapping(fault))
    if F.waits_for_request(fault):
        state.faults.append(Pending(fault))
        return
    if isinstance(fault, F.DelayVisibility):
        state.visibility_delay[fault.job_id] = fault.polls
    elif isinstance(fault, (F.SecondLease, F.Fence)):
        rec = _kit_task(state, fault.task_id)
        served = rec.current
        key = (served["repository"], served["target_branch"])
        if isinstance(fault, F.SecondLease):
            generation = served["generation"]
        else:
            generation = fault.generation or state.highest_generation.get(key, served["generation"]) + 1
        grant(state, log, served, generation=generation, official=False, holder=None, heads=heads)
    elif isinstance(fault, F.MoveClock):
        move_clock(state, log, fault.delta_ms)
    # MoveBranch without ``on`` is done by the shell, which logs ``branch_moved``.


def _kit_task(state: State, task_id: str) -> TaskRec:
    if task_id not in state.tasks:
        raise KitError(f"no task {task_id!r}")
    return state.tasks[task_id]
