"""The campaign: ``python -m tests.fuzz [--budget SECONDS] [--mutations N] [--part PART] ...``.

Five parts, each bounded: mutated golden trees (``--mutations`` trees, or fewer when ``--budget``
seconds run out), the misbehaving adapters of ``behaviours.py`` (every one, each under a guard timeout),
the reference store under abuse, the loader at scale, and hostile P1 workers (``p1.py``: every attack, or
those ``--only`` names, each under ``--p1-guard``). It prints a table of counts per part (see ``campaign.py`` for
the categories) and the findings behind every bad count, writes it all as JSON with ``--report``, and
exits 1 when a count the kit must keep at zero is not zero.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz import guards
from tests.fuzz.campaign import Tally, format_table
from tests.fuzz.p1 import GUARD as P1_GUARD
from tests.fuzz.p1 import p1_part
from tests.fuzz.parts import MEMORY_TARGET_MB, PARTS, Context, adapters, fixtures, scale, store_part

# -- the whole campaign -----------------------------------------------------------------------------


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1800, help="seconds for the fixture part (default 1800)")
    parser.add_argument("--mutations", type=int, default=1000, help="mutated trees at most (default 1000)")
    parser.add_argument("--part", action="append", choices=PARTS, help="run only these parts (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (default 0)")
    parser.add_argument("--workers", type=int, default=2, help="fixture workers at once (default 2)")
    parser.add_argument("--job-timeout", type=float, default=60, help="seconds a mutated tree may take (default 60)")
    parser.add_argument("--guard", type=float, default=180, help="seconds an adapter run may take (default 180)")
    parser.add_argument("--p1-guard", type=float, default=P1_GUARD,
                        help=f"seconds a P1 attack may take (default {P1_GUARD:.0f})")
    parser.add_argument("--only", action="append", metavar="GLOB", help="run only the p1 attacks named (repeatable)")
    parser.add_argument("--writer-trials", type=int, default=50, help="two-writer trials (default 50)")
    parser.add_argument("--writer-rows", default="200000,700000,2000000", help="row sizes of the writer trials")
    parser.add_argument("--report", type=Path, help="write the counts and findings as JSON")
    parser.add_argument("--keep", type=Path, help="keep the work folder (findings' trees) here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(sys.argv[1:] if argv is None else argv)
    parts = arguments.part or list(PARTS)
    work = arguments.keep or Path(tempfile.mkdtemp(prefix="resumekit-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    context = Context(work)
    tallies = []
    runners = {"fixtures": fixtures, "adapters": adapters, "store": store_part, "scale": scale, "p1": p1_part}
    try:
        for part in parts:
            tally = Tally(part)
            print(f"{part}:", flush=True)
            began = time.monotonic()
            runners[part](context, tally, arguments)
            tally.seconds = time.monotonic() - began
            tally.outside_writes += context.outside_writes()
            tallies.append(tally)
    finally:
        context.decoy.close()
    # Every part's tally holds its peak. The p1 part's is the kit's own processes; RUSAGE_CHILDREN would
    # count its adapters' trees too (the kit reaps them), so it stands in only when the p1 part did not run.
    import resource  # POSIX only, imported here so that the tests collect on Windows

    reaped = [] if "p1" in parts else [resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]
    peak = max([t.peak_kb for t in tallies] + reaped)
    system_left = context.system_scratch_left()
    print()
    print(format_table(tallies, peak))
    print()
    for tally in tallies:
        print(f"{tally.name}: {tally.seconds:.0f} s")
        if tally.scale_ratio is not None:
            print(f"loading 10,000 cases / 1,000 cases: {tally.scale_ratio:.1f} times the time (linear: 10)")
    print(f"orphans checked: {'yes' if guards.ORPHANS_CHECKED else 'no (no /proc on this OS)'}")
    # Every process of the campaign has its own TMPDIR (counted in the table); a resumekit-* folder that
    # appeared in the system's temporary folder meanwhile may also come from anything else on the machine.
    print(f"new resumekit-* folders in {context.system_tmp} (any user of the machine): {len(system_left)}")
    findings = [f for t in tallies for f in t.findings]
    if findings:
        print(f"\n{len(findings)} finding(s):")
        for finding in findings:
            print(f"- [{finding['category']}] {finding['what']}")
            if finding.get("reason"):
                print("    " + finding["reason"][:700].replace("\n", "\n    "))
            if finding.get("kept"):
                print(f"    tree kept at {finding['kept']}")
    if arguments.report:
        arguments.report.parent.mkdir(parents=True, exist_ok=True)
        arguments.report.write_text(
            json.dumps(
                {
                    "tallies": [
                        {**{k: v for k, v in vars(t).items() if k != "counts"}, "counts": dict(t.counts)}
                        for t in tallies
                    ],
                    "peakKb": peak,
                    "systemScratchLeft": system_left,
                },
                indent=2,
                default=str,
            ),
            encoding="utf-8",
        )
    clean = all(t.clean() for t in tallies) and peak / 1024 < MEMORY_TARGET_MB
    if not arguments.keep and not findings:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"\nwork folder kept: {work}")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
