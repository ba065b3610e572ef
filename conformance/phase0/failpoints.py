"""The failpoint cases: append a committed prefix, kill the writer (and cut the power), reopen, and decide.

Each case is one failpoint of ``golden/phase0/failpoints.yaml``: the reopened ledger must be the
prefix that was acknowledged (CRASH-1), no exit path may have run (CRASH-2), reading and planning
must leave the workspace as it is (STORE-6), and the two plans of the reopened run must agree with
each other and with the plan the spec demands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance.adapters import is_integer
from resumekit.conformance.cases import Event
from resumekit.conformance.fault_models import Abort
from resumekit.conformance.phase0 import grades, plan_checks, vocabulary
from resumekit.conformance.phase0.cases import CrashCase
from resumekit.conformance.phase0.session import Factory, Session, ids, make_workspace, same_events, scratch_folder
from resumekit.conformance.powerloss import PowerLoss
from resumekit.conformance.results import CaseResult, Mismatch, Outcome
from resumekit.conformance.runner import result_for


def run_crash(case: CrashCase, factory: Factory, profile: str, power: PowerLoss | None = None) -> CaseResult:
    """One failpoint: append its prefix, kill the writer (and cut the power), reopen, read, plan twice, decide."""
    session = Session(case, factory, profile, power)
    try:
        with scratch_folder(case.failpoint.lower(), session) as scratch:
            workspace, marker = make_workspace(scratch, session), scratch / "finally.marker"
            _append_and_kill(session, case.events, workspace, marker)
            mismatches, plans = _reopen_and_plan(session, case, workspace, profile)
            session.close()
            if mismatches:
                grade = grades.grade(case.events, case.expect, plans)
                message = f"after the crash at {case.failpoint} the reopened run is wrong"
                failed = session.fail(message, *mismatches, grade=grade)
                return session.told(failed)
            return result_for(case, Outcome.PASSED, fault_model=session.model)
    except Abort as abort:
        return session.told(abort.result)
    finally:
        session.close()


def _append_and_kill(session: Session, events: Sequence[Event], workspace: Path, marker: Path) -> None:
    """Open the store, arm the marker, append *events* one acknowledgement at a time, and kill the writer."""
    session.start()
    session.open(workspace)
    pid = session.arm(marker)
    for index, event in enumerate(events):
        rows = session.ask("phase0.store.append", event=event).get("rows")
        if not is_integer(rows) or rows != index + 1:
            raise Abort(
                session.fail(
                    "the acknowledgement counts the wrong rows",
                    Mismatch(f"/append/{index}/rows", index + 1, rows, "STORE-1"),
                )
            )
        session.acknowledged(index + 1)
    session.crash(pid)
    if marker.exists():
        raise Abort(
            session.fail(
                "the finally marker was written: an exit path ran, so this was not a crash",
                Mismatch("/marker", "absent", "present", "CRASH-2"),
            )
        )


def _reopen_and_plan(
    session: Session, case: CrashCase, workspace: Path, profile: str
) -> tuple[list[Mismatch], list[dict[str, Any]]]:
    """Reopen the store, require the committed prefix, plan twice: every way the outcome departs, and the plans."""
    session.start()
    session.open(workspace)
    # From here to the end of the case nothing may change a file (STORE-6): `open` may prepare
    # the store, but the first read after reopening is already watched.
    before = _files.snapshot(workspace, settle=True)
    read = session.read()
    if read.get("status") != "ok" or not same_events(case.events, read.get("events")):
        raise Abort(
            session.fail(
                "the reopened ledger is not the committed prefix",
                Mismatch(
                    "/read/events",
                    [e["id"] for e in case.events],
                    read if read.get("status") != "ok" else ids(read.get("events")),
                    "CRASH-1",
                ),
            )
        )
    plans = [session.plan(profile, len(case.events)) for _ in range(2)]
    changes = _files.describe_changes(before, _files.snapshot(workspace))
    mismatches = plan_checks.compare_determinism(plans[0], plans[1])
    if changes:
        mismatches.append(
            Mismatch("/workspace", "unchanged", changes, "STORE-6", "reading or planning changed the workspace")
        )
    mismatches += vocabulary.judge_plan(case.events, case.expect, plans[0])
    return mismatches, plans


__all__ = ["run_crash"]
