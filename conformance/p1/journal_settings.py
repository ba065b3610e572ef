"""The journal settings of a worker's processes, as the kit gathers them for JNL-5 and JNL-6 (ADP-3).

Each process's answers to ``p1.journal.settings`` (kept by the worker handle), its journal log where the
adapter claims ``p1.journal-log``, the processes during whose life the journal grew, and the journal
file's header; ``checks.journal.settings`` judges them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from resumekit.conformance.p1 import journal_reader, views
from resumekit.conformance.p1.checks.story import JournalSettings

if TYPE_CHECKING:
    from resumekit.conformance.p1.worker import Worker


def journal_settings(worker: Worker, header_of: Sequence[str]) -> JournalSettings | None:
    """What the kit learned of the journal connections of a worker handle's processes; None without p1.journal.

    With p1.journal-log every process's log is read, killed ones included, and stands for what it
    reported; without it, a process killed at a kit-side point is simply absent.
    """
    if not worker.claims_journal:
        return None
    reported, unreadable = dict(worker.settings), {}
    if worker.claims_log:
        for name in names(worker):
            connections, why = journal_reader.read_journal_log(worker.world.root, worker.journal_log(name))
            if connections is not None:
                reported[name] = connections
            else:
                unreadable[name] = why or "unreadable"
    header = journal_reader.journal_header(worker.state_dir)
    return JournalSettings(
        reported={name: reported[name] for name in names(worker) if name in reported},
        wrote=writers(worker),
        logged=worker.claims_log,
        header=header,
        header_of=header_of,
        unreadable=unreadable,
    )


def names(worker: Worker) -> list[str]:
    """A worker handle's processes, in the order the kit started them."""
    return [f"{worker.label}{number}" for number in range(1, worker.count + 1)]


def writers(worker: Worker) -> list[str]:
    """The processes during whose life the journal grew: from their start to the next one's (or the end)."""
    started = names(worker)
    at_start = views.rows_at_start(worker.world.history.events())
    counts = [at_start.get(name, 0) for name in started]
    final = len(worker.read_journal())
    return [name for name, here, after in zip(started, counts, [*counts[1:], final], strict=True) if after > here]


def of_scenario(worker: Worker, second: Worker | None) -> JournalSettings | None:
    """The journal settings of every process of both workers; the header read is the first worker's journal."""
    first = journal_settings(worker, header_of=names(worker))
    if second is None or first is None:
        return first
    other = journal_settings(second, header_of=())
    if other is None:
        return first
    return dataclasses.replace(
        first,
        reported={**first.reported, **other.reported},
        wrote=(*first.wrote, *other.wrote),
        unreadable={**first.unreadable, **other.unreadable},
    )
