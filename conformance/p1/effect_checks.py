"""The P1 checks of the side effects the kit saw at the control plane and the origin: one governed commit,
pushed once (COMMIT-3); one key per attempt, never shared (KEY-1, KEY-2) and one body per key (SUB-4); the
stored result is the task's (TASK-2); no side effect with a lost lease (LEASE-4), for a result_submitted row
the control plane does not back (SUB-7), or for an attempt served against CP-5 or CP-7 (SCOPE-6, SCOPE-7);
no request to the kit's own paths (CP-22).

Pure: the harness reads the control plane's log and the origins; this module only judges what they saw.
"""

from __future__ import annotations

from collections.abc import Mapping

from resumekit.conformance.p1.evidence_data import Evidence
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.results import Mismatch


def lease_checks(ev: Evidence) -> list[Mismatch]:
    """LEASE-4 (EVID-4): no push and no submission reached the kit while the attempt's lease was not ACTIVE, and
    none from a worker that was told the lease was lost, even once a replayed delivery made it ACTIVE again."""
    found = [
        _m(
            "LEASE-4",
            f"/control-plane/{revival['task_id']}/{revival['attempt']}/revived/{revival['journal']}",
            [],
            list(revival["governed"]),
            f"governed side effects for an abandoned attempt: the control plane had told this worker that lease "
            f"{revival['lease_id']!r} was lost ({revival['told']}) before a replayed delivery made it ACTIVE again",
        )
        for revival in ev.revivals
        if revival["governed"]
    ]
    for index, push in enumerate(ev.pushes):
        lease = push.get("lease")
        state = lease.get("state") if isinstance(lease, Mapping) else None
        if push.get("task_id") is not None and state is not None and state != "ACTIVE":
            found.append(
                _m("LEASE-4", f"/origin/pushes/{index}", "ACTIVE", state, "a push reached the origin with a lost lease")
            )
    for submission in ev.submissions:
        if int(submission["status"]) == 403:
            found.append(
                _m(
                    "LEASE-4",
                    f"/control-plane/{submission['task_id']}/{submission['attempt']}/submission",
                    "a lease ACTIVE at CP time",
                    "answered 403",
                    "a submission reached the control plane with a lost lease",
                )
            )
    return found


