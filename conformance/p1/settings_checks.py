"""JNL-5 and JNL-6 over the journal settings of every worker process of a scenario.

``synchronous`` and the busy timeout are settings of a connection: only the worker can report them, so
they are attested (ADP-3). The kit asks each process before it kills it at a failpoint, after an orderly
stop and after the last step; a worker process the kit killed at a kit-side point cannot be asked, and
only an adapter that claims ``p1.journal-log`` reports its settings (it appends each connection to a file
of the kit's as it opens it). The journal mode is different: a WAL journal says so in the file's header,
so the kit reads it there and holds the worker's report to it.

Pure: the harness asks and reads; this module only judges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.checks.story import JournalSettings
from resumekit.conformance.p1.evidence_data import mismatch as _m
from resumekit.conformance.results import Mismatch

SYNCHRONOUS_OK = (2, 3)
JOURNAL_MODES_OK = ("delete", "truncate", "persist", "wal")
# The header's read and write versions (bytes 18 and 19 of an SQLite file): 2 for WAL, 1 for a rollback journal.
HEADER_MODES = {"wal": ("wal",), "rollback": ("delete", "truncate", "persist")}


def settings_checks(settings: JournalSettings | None) -> list[Mismatch]:
    """JNL-5 and JNL-6: every reported connection, every process that wrote, and the file's header."""
    if settings is None:
        note = "no p1.journal: the JNL-5 evidence is missing (attested)"
        return [_m("ADP-1", "/p1.journal", "claimed", "not claimed", note)]
    found = [
        _m("JNL-5", f"/p1.journal/{name}", "a journal log of the connections", None, f"{name}'s journal log: {why}")
        for name, why in sorted(settings.unreadable.items())
    ]
    if not any(settings.reported.values()):
        found.append(
            _m(
                "JNL-5",
                "/p1.journal/connections",
                "at least one connection",
                [],
                "no worker process reported a journal connection (attested)",
            )
        )
        return found
    for name, connections in settings.reported.items():
        for index, connection in enumerate(connections):
            found += _connection(f"/p1.journal/{name}/connections/{index}", connection)
    found += _silent_writers(settings)
    found += _header(settings)
    return found


def unreported(settings: JournalSettings | None) -> list[str]:
    """The processes that wrote rows but whose settings the kit could not ask (killed at a kit-side point)."""
    if settings is None or settings.logged:
        return []
    return [name for name in settings.wrote if name not in settings.reported]


def attested(settings: JournalSettings | None, blocked_at: Sequence[str]) -> tuple[str, ...]:
    """What a scenario's verdict took on the worker's word (EVID-2), one line per clause, for its result."""
    marks = []
    if settings is not None and any(settings.reported.values()):
        count = sum(len(connections) for connections in settings.reported.values())
        names = ", ".join(name for name, connections in settings.reported.items() if connections)
        mark = f"JNL-5, JNL-6: synchronous and busy timeout of {count} journal connection(s) of {names}, as reported"
        missing = unreported(settings)
        if missing:
            mark += f"; not reported: {', '.join(missing)} (killed at a kit-side point, no p1.journal-log)"
        if settings.header is None:
            mark += "; journal mode as reported (the journal file's header was not read)"
        marks.append(mark)
    if blocked_at:
        marks.append(f"FPT-2: that each block was at the site its name says ({', '.join(sorted(set(blocked_at)))})")
    return tuple(marks)


def _connection(pointer: str, connection: Mapping[str, Any]) -> list[Mismatch]:
    """One connection's values, as read back by PRAGMA after they were set (ADP-3)."""
    found = []
    busy = connection.get("busyTimeoutMs")
    if not isinstance(busy, int) or isinstance(busy, bool) or busy < 5000:
        note = "a journal connection's busy timeout is too short (attested)"
        found.append(_m("JNL-6", f"{pointer}/busyTimeoutMs", ">= 5000", busy, note))
    mode = connection.get("journalMode")
    if connection.get("synchronous") not in SYNCHRONOUS_OK or str(mode).lower() not in JOURNAL_MODES_OK:
        expected = {"synchronous": "2 or 3", "journalMode": list(JOURNAL_MODES_OK)}
        note = "a journal connection is not synchronous=FULL or EXTRA in an allowed journal mode (attested)"
        found.append(_m("JNL-5", pointer, expected, dict(connection), note))
    return found


def _silent_writers(settings: JournalSettings) -> list[Mismatch]:
    """A process that wrote rows and, asked or logged, named no connection it wrote them through."""
    found = []
    for name in settings.wrote:
        connections = settings.reported.get(name)
        if connections is not None and not connections:
            note = f"{name} wrote rows to the journal but reported no journal connection (attested)"
            found.append(_m("JNL-5", f"/p1.journal/{name}/connections", "at least one connection", [], note))
        elif connections is None and settings.logged:
            note = f"{name} wrote rows to the journal but its journal log names no connection"
            found.append(_m("JNL-5", f"/p1.journal/{name}", "a logged connection", None, note))
    return found


def _header(settings: JournalSettings) -> list[Mismatch]:
    """The mode the file's header shows must be the one the last process to report its connections reported."""
    if settings.header is None:
        return []
    last = [c for name in settings.header_of for c in settings.reported.get(name, ())]
    mode = str(last[-1].get("journalMode", "")).lower() if last else ""
    if mode in HEADER_MODES[settings.header] or mode not in JOURNAL_MODES_OK:
        return []  # a mode outside the allowed ones is already a finding of its own
    note = (
        f"the last reported journal connection says journal_mode {mode!r}, but the journal file's header shows "
        f"a {settings.header} journal: the mode was changed without being reported"
    )
    return [_m("JNL-5", "/journal/header", settings.header, mode, note)]
