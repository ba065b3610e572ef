"""Open files against ``--jobs``: each case at once holds descriptors of its own, and a process may hold only
so many (macOS's default soft limit is 256, and ``--jobs auto`` is one case per CPU and two more, 12 to 26 on an
M-series Pro, Max or Ultra). A run raises its soft limit toward what its jobs need, up to the hard limit,
and runs fewer cases at once, saying so, where even that is too low: never "Too many open files" midway.
Windows has no such per-process limit on handles: nothing changes there."""

from __future__ import annotations

import contextlib
import sys

# Descriptors of one case at once, with room (an estimate, not a measure): three pipes per adapter process
# and two in some P1 cases, the control plane's socket, its connections and log, and the transient git,
# SQLite and HTTP descriptors. RESERVE is the kit's own (the golden files, the reports, the terminal).
PER_JOB = 32
RESERVE = 64


def needed(jobs: int) -> int:
    """Descriptors *jobs* cases at once may hold, the kit's own included."""
    return RESERVE + jobs * PER_JOB


def jobs_within(jobs: int, soft_limit: int) -> int:
    """*jobs*, lowered so that every case at once fits under *soft_limit* open files (one at least)."""
    return max(1, min(jobs, (soft_limit - RESERVE) // PER_JOB))


def raised_limit(jobs: int) -> int | None:
    """POSIX: raise the soft open-file limit to what *jobs* cases need, as far as the hard limit lets it, and
    return the soft limit now. None on Windows."""
    if sys.platform == "win32":
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed(jobs)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return want if soft == resource.RLIM_INFINITY else soft
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    with contextlib.suppress(ValueError, OSError):  # macOS refuses more than its kern.maxfilesperproc
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def fitted_jobs(jobs: int) -> tuple[int, str | None]:
    """(the jobs to run, None) or, where the open-file limit could not be raised far enough, (fewer jobs, the
    sentence that says why)."""
    limit = raised_limit(jobs)
    if limit is None or jobs_within(jobs, limit) == jobs:
        return jobs, None
    fewer = jobs_within(jobs, limit)
    return fewer, (
        f"--jobs {jobs} lowered to {fewer}: this process may open {limit} files and each case at once may need "
        f"{PER_JOB} (raise the limit with 'ulimit -n {needed(jobs)}')"
    )
