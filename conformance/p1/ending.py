"""The end of a P1 case: every process it started ends before the verdict (WRK-5).

Every adapter process of a case carries the case's marker in its environment, and on Linux starts below a
subreaper of the case; ``end_case`` closes the workers' adapters, ends their trees, and then every process of
the case left (marked, or below a subreaper), which fails WRK-5 by name (``_process.escaped``, Linux).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from resumekit.conformance._process import MARKER, sweep_marked
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.worker import Worker
from resumekit.conformance.p1.world import World

ESCAPE_GRACE_S = 5.0  # how long what a worker started may take to end once its adapter's tree has (WRK-5)


def end_case(case: ScenarioCase, world: World, workers: Sequence[Worker | None], profile: str) -> str | None:
    """Before the verdict, every process the case started ends (WRK-5); a sentence for the report, if any.

    The kit's tool is told to stop (whether it outlived a worker is the WRK-5 watch's to judge), each worker's
    adapter is closed and its tree ended, and so are the trees of adapters killed with the tool. Every process
    still marked with the world's token, or below one of the case's subreapers, ``ESCAPE_GRACE_S`` later (Linux)
    is then stopped, named and killed: a WRK-5 mismatch each in the strict profile, a sentence of the message
    in core, where WRK-5 does not bind.
    """
    if world.tool_flag is not None:
        world.stop_tool()
    for worker in workers:
        if worker is not None:
            worker.close()
    for process in world.held:
        with contextlib.suppress(OSError):
            process.kill()
    world.held.clear()
    sweep = sweep_marked(world.case_token, ESCAPE_GRACE_S)
    if not sweep.looked:
        cited = "WRK-5" in case.clauses
        return f"processes that outlived the worker were not looked for: {sweep.reason}" if cited else None
    for left in sweep.escaped:  # WRK-5 (strict), judged by the rules (processes.outlived)
        world.record(
            "kit", "outlived", pid=left.pid, command=left.command(), cwd=left.cwd, state=left.state,
            files=list(left.files), ended=left.ended, description=left.describe(), signs=left.signs(MARKER),
            graceSeconds=ESCAPE_GRACE_S,
        )
    if sweep.escaped and profile != "strict":
        named = "; ".join(left.describe() for left in sweep.escaped)
        return (
            f"the kit killed {len(sweep.escaped)} process(es) the worker left running, which WRK-5 (strict) "
            f"forbids: {named}"
        )
    return None
