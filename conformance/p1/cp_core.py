"""The control plane's pure core (docs/spec/p1-control-plane.md): state, rules and answers, with no I/O.

The shell (``control_plane.py``) parses HTTP into a ``Request``, asks ``prepare`` what the request needs
(moment checks, origin heads, branch moves), does that I/O, and hands the results to ``handle``, which
applies the rules of CP-4 to CP-18 to the ``State`` and returns an ``Outcome``: the status, the body, how
the answer travels (answered, dropped, delayed), a kill point, and the log entries (CP-19) the shell must
make durable before anything leaves. The kit's own operations (issue, re-issue, clock, faults, states)
are functions here too, so every change of state is made and logged in one place. The one rule the core
cannot apply without reading files, schema validation, is the ``State``'s ``validate``, which the shell
hands in.

This module is the core's one public face; the rules live in ``cp_state`` (the constants, the records, the
log, leases and attempts), ``cp_kit`` (the kit's operations), ``cp_requests`` (routing, planning,
handling), ``cp_endpoints`` (the worker's endpoints) and ``cp_hooks`` (the origin's hook and the kit's
tool). ``tests/test_purity.py`` keeps all of them free of I/O.
"""

from __future__ import annotations

from resumekit.conformance.p1.cp_kit import kit_issue, kit_move_clock, kit_reissue, kit_script, kit_set_state
from resumekit.conformance.p1.cp_requests import (
    CLAIM_FAULTS,
    HANDLERS,
    Handler,
    handle,
    is_kit_call,
    is_kit_path,
    is_refused_kit_call,
    log_refused_kit_call,
    prepare,
    route,
    shown_path,
)
from resumekit.conformance.p1.cp_state import (
    BODY_MEMBERS,
    GOVERNED,
    IDENTITY,
    KEY_RE,
    KIT,
    KIT_ROUTES,
    KIT_STATES,
    OID_RE,
    REISSUE_FIELDS,
    REPORT_STATES,
    ROUTES,
    SCRIPTED_KEY,
    SECRET_SHOWN,
    SUBMISSION_SCHEMA,
    TASK_SCHEMA,
    ZERO,
    Heads,
    KitError,
    Lease,
    Log,
    Moment,
    Outcome,
    Pending,
    Plan,
    Request,
    State,
    TaskRec,
    Validate,
    branch_leases,
    expire,
    fire_kill_point,
    lease_view,
    task_view,
)

__all__ = [
    "BODY_MEMBERS",
    "CLAIM_FAULTS",
    "GOVERNED",
    "HANDLERS",
    "IDENTITY",
    "KEY_RE",
    "KIT",
    "KIT_ROUTES",
    "KIT_STATES",
    "OID_RE",
    "REISSUE_FIELDS",
    "REPORT_STATES",
    "ROUTES",
    "SCRIPTED_KEY",
    "SECRET_SHOWN",
    "SUBMISSION_SCHEMA",
    "TASK_SCHEMA",
    "ZERO",
    "Handler",
    "Heads",
    "KitError",
    "Lease",
    "Log",
    "Moment",
    "Outcome",
    "Pending",
    "Plan",
    "Request",
    "State",
    "TaskRec",
    "Validate",
    "branch_leases",
    "expire",
    "fire_kill_point",
    "handle",
    "is_kit_call",
    "is_kit_path",
    "is_refused_kit_call",
    "kit_issue",
    "kit_move_clock",
    "kit_reissue",
    "kit_script",
    "kit_set_state",
    "lease_view",
    "log_refused_kit_call",
    "prepare",
    "route",
    "shown_path",
    "task_view",
]
