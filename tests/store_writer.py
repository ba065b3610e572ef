"""One of several processes writing one run's ledger: ``python -m tests.store_writer WORKSPACE NAME ROWS MAX SEED``.

It opens the reference store, appends one row of a seeded random size up to MAX bytes, prints the
row's id once the append is acknowledged, closes the store and starts over, ROWS times. When another
writer holds the run it waits for it (STORE-8 makes it one writer at a time); the lines it printed are
the rows that must survive.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from resumekit.reference.phase0.store import LedgerBusy, LedgerStore

WAIT_S = 60.0


def event(name: str, index: int, size: int) -> dict[str, object]:
    return {
        "id": f"{name}-{index}",
        "invocationId": "inv-1",
        "runId": "run-1",
        "sessionId": "session-1",
        "turnId": "turn-1",
        "ts": 1_700_000_000_000 + index,
        "partial": False,
        "role": "user",
        "author": "user",
        "content": {"kind": "text", "text": name[0] * size},
    }


def open_store(workspace: Path) -> LedgerStore:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return LedgerStore(workspace, "session-1", "run-1")
        except LedgerBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def main(argv: list[str]) -> int:
    workspace, name, rows, biggest, seed = Path(argv[0]), argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    rng = random.Random(seed)
    for index in range(rows):
        with open_store(workspace) as store:
            store.append(event(name, index, rng.randint(1, biggest)))
        print(f"{name}-{index}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
