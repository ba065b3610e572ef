"""The checkpoint journal (docs/spec/p1.md, section 4): readable as JNL-1 says, what each row fills (JNL-2), no
row rewritten (JNL-4), ``seq`` in commit order (JNL-3), the rows of one attempt at a time (WRK-2), the journal
connections' settings (JNL-5, JNL-6, as the worker attests them, ADP-3, its answers held to its journal log),
no side effect on a row whose commit failed (JNL-7), and a fatal exit after a disk error (JNL-8).

``synchronous`` and the busy timeout are settings of a connection: only the worker can report them, so
they are attested (ADP-3). The kit asks each process before it kills it at a failpoint, after an orderly
stop and after the last step; a worker process the kit killed at a kit-side point cannot be asked, and
only an adapter that claims ``p1.journal-log`` reports its settings (it appends each connection to a file
of the kit's as it opens it). The journal mode is different: a WAL journal says so in the file's header,
so the kit reads it there and holds the worker's report to it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from resumekit.conformance.p1.canonical import NotCanonical, canonical_json, result_hash
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks._shared import on_second_worker, parsed_json
from resumekit.conformance.p1.checks.story import JournalSettings, Scenario, Story
from resumekit.conformance.p1.model import Row, Snapshot, attempts
from resumekit.conformance.results import Mismatch

SYNCHRONOUS_OK = (2, 3)
JOURNAL_MODES_OK = ("delete", "truncate", "persist", "wal")
# The header's read and write versions (bytes 18 and 19 of an SQLite file): 2 for WAL, 1 for a rollback journal.
HEADER_MODES = {"wal": ("wal",), "rollback": ("delete", "truncate", "persist")}


def readable(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-1: every read of the journal the kit made found it readable as JNL-1 says."""
    found = []
    for event in history.of("journal", "unreadable"):
        error = str(event.get("error"))
        found.append(Mismatch("/journal", "readable as JNL-1", error, "JNL-1", error, event=event.seq))
    return found


def _disk_text(fault: Mapping[str, Any]) -> str:
    return f"({fault.get('errno')} from {fault.get('op')} #{fault.get('hit')} of the {fault.get('file')})"


def _went_on(fault: Mapping[str, Any], state: str) -> str:
    """Why a worker armed with a disk error did not exit. Idle, it may also never have reached the hit armed:
    it counted fewer operations than the kit (which writes count: adapter-protocol.md, ``p1.disk-faults``)."""
    note = f"after the injected disk error {_disk_text(fault)} the worker went on to be {state} instead of exiting"
    if state != "idle":
        return f"{note}: it took the failed operation for a success"
    return (
        f"{note}: it took the failed operation for a success, or it never counted that many; the hits count every "
        "transaction committed on the journal, a row of a side table (recoveries, abandonments) included, and "
        "the cache write after each checkpoint row"
    )


def fatal_exits(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-8: after an injected disk error the worker exits, non-zero, through its own exit path (the marker)."""
    found = []
    for event in history.of(None, "not-as-waited"):
        fault = event.get("diskFault")
        if fault and event.get("wanted") == "exited":
            note = _went_on(fault, str(event.get("state")))
            found.append(Mismatch("/wait/state", "exited", event.get("answer"), "JNL-8", note, event=event.seq))
    for event in history.of(None, "exited"):
        fault, code = event.get("diskFault"), event.get("exitCode")
        if not fault or event.get("settling"):
            continue
        if not isinstance(code, int) or isinstance(code, bool) or code == 0:
            note = (
                f"after the injected disk error {_disk_text(fault)} the worker exited with status {code!r}, not a "
                "non-zero one"
            )
            found.append(Mismatch("/wait/exitCode", "non-zero", code, "JNL-8", note, event=event.seq))
        elif not event.get("marker"):
            note = (
                f"after the injected disk error {_disk_text(fault)} the worker exited with status {code!r} and wrote "
                "no marker: the fatal exit cannot be told from a crash of the worker"
            )
            found.append(Mismatch("/marker", "present", "absent", "JNL-8", note, event=event.seq))
    return found

# The rows a governed side effect rests on (SUB-1, COMMIT-5): the moment the control plane read the journal at ->
# the phases of the attempt, any one of which backs it (a reused result_pending carries the commit).
_BACKED_BY = {"submission": ("result_pending",), "receipt": ("commit_done", "result_pending")}


def failed_writes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-7: a worker process armed with a disk error on its journal sends no submission and no receipt of an
    attempt whose row it rests on the journal did not hold as the request arrived: a commit that reported an
    error is a step not done, and nothing that depends on it follows. The kit cannot tell which commit the error
    hit (side tables count too), so it judges every such request of the process; a failed fsync may leave the
    row readable to the kit, where only JNL-8 (strict) sees the worker go on."""
    armed = {
        event.actor: fault
        for event in history.of(None, "started")
        if isinstance(fault := event.get("diskFault"), Mapping) and fault.get("file") == "journal"
    }
    found = []
    for moment in (*history.moments("submission"), *history.moments("receipt")):
        worker, check = moment.get("worker"), str(moment.get("check"))
        reads = [read for read in history.reads_at(moment.get("request")) if read.get("worker") == worker]
        if worker not in armed or not reads:
            continue
        which = (moment.get("task_id"), moment.get("attempt"))
        mine = [row for row in reads[0].get("rows", ()) if (row.get("task_id"), row.get("attempt")) == which]
        held = [row.get("phase") for row in mine]
        if any(phase in _BACKED_BY[check] for phase in held):
            continue
        note = (
            f"{worker!r}, armed with the disk error {_disk_text(armed[worker])}, sent the {check} of {which[0]!r} "
            f"attempt {which[1]!r} (request {moment.get('request')!r}) while its journal held no "
            f"{' or '.join(_BACKED_BY[check])} row of the attempt (its rows: {held!r}): a failed commit is a step "
            "not done, and no governed side effect that depends on it follows"
        )
        where = f"/workers/{worker}/{check}/{moment.get('request')}"
        found.append(_m("JNL-7", where, f"{' or '.join(_BACKED_BY[check])} durable first", held[-1:] or None, note))
    return found


def rows(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-2 and JNL-4 over the (first) worker's journal: no row rewritten, each row filling what its phase
    fills (a reconciliation its reason, PHASE-4; a workspace its ``task-`` name, WRK-4)."""
    found = _rewrite_checks(history.snapshots)
    for ident, group in attempts(history.rows).items():
        where = f"/journal/{ident[0]}/{ident[1]}"
        for position, row in enumerate(group):
            found += _row_fill(row, f"{where}/{position}")
    return found


def second_worker_rows(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-2 and JNL-4 over the journal of a scenario's second worker (its pointers under /second-worker)."""
    return on_second_worker(rows, history, scenario)


def _rewrite_checks(snapshots: Sequence[Snapshot]) -> list[Mismatch]:
    """JNL-4: every snapshot keeps the rows of the one before; one rewrite is reported once."""
    for earlier, later in itertools.pairwise(snapshots):
        if not earlier.kept_by(later):
            return [
                _m(
                    "JNL-4",
                    "/journal",
                    "every earlier row unchanged",
                    "a row changed or vanished",
                    "the journal was rewritten",
                )
            ]
    return []


def seq_order(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-3 over each worker's journal: ``seq`` follows commit order and is SQLite's own (no explicit ``seq``)."""
    return _seq_order(history) + on_second_worker(lambda story, _: _seq_order(story), history, scenario)


def _seq_order(history: Story) -> list[Mismatch]:
    """A row first seen in a later read was committed after every row of the read before, so its ``seq`` is
    higher than theirs; and a row inserted without an explicit ``seq`` gets one above the highest of the table,
    so with no row ever removed (JNL-4) the journal's seqs are 1, 2, 3, ... without a gap. Whether each row had
    a transaction of its own, and which statement inserted it, only the worker knows: the file shows neither."""
    found = []
    for earlier, later in itertools.pairwise(history.snapshots):
        top = max((values[0] for values in earlier.rows), default=0)
        below = sorted(values[0] for values in set(later.rows) - set(earlier.rows) if values[0] <= top)
        if below:
            note = (
                f"rows committed after a read whose highest seq was {top!r} carry the lower seq(s) {below!r}: seq "
                "does not follow commit order"
            )
            found.append(_m("JNL-3", "/journal/seq", f"above {top!r}", below, note))
            break
    seqs = sorted(row["seq"] for row in history.rows)
    if seqs != list(range(1, len(seqs) + 1)):
        note = (
            f"the journal's seqs are {_abridged(seqs)}, not 1 to {len(seqs)}: SQLite gives a row inserted without "
            "an explicit seq the next one, so these were chosen by the worker (or rows were removed)"
        )
        found.append(_m("JNL-3", "/journal/seq", f"1 to {len(seqs)}", _abridged(seqs), note))
    return found


def _abridged(seqs: Sequence[int]) -> list[int] | str:
    return list(seqs) if len(seqs) <= 12 else f"{list(seqs[:6])} ... {list(seqs[-6:])}"


def one_attempt_at_a_time(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-2 over each worker's journal: no attempt gets a row after the claimed row of an attempt begun after it.

    The worker claims the next attempt only once the current one is terminal (then it gets no row, PHASE-5) or
    abandoned (its rows stay as they were, LEASE-4), and at a start it takes up every open attempt before its first
    claim (RESUME-1); so the rows of one journal come attempt by attempt, each attempt's before the next's."""
    return _interleaved(history.rows) + on_second_worker(lambda story, _: _interleaved(story.rows), history, scenario)


def _interleaved(rows: Sequence[Row]) -> list[Mismatch]:
    found = []
    groups = list(attempts(rows).values())  # in the order of their first rows
    for group, following in itertools.pairwise(groups):
        begun = following[0]
        late = [row for row in group if row["seq"] > begun["seq"]]
        if late:
            first = group[0]
            note = (
                f"attempt {first['attempt']!r} of {first['task_id']!r} wrote {late[0]['phase']} (seq "
                f"{late[0]['seq']!r}) after the {begun['phase']} row (seq {begun['seq']!r}) of attempt "
                f"{begun['attempt']!r} of {begun['task_id']!r}: the worker worked on two attempts at once, claiming "
                "the next before this one was terminal or abandoned"
            )
            where = f"/journal/{first['task_id']}/{first['attempt']}/{late[0]['seq']}"
            found.append(_m("WRK-2", where, f"no row after seq {begun['seq']!r}", late[0]["phase"], note))
    return found


def _row_fill(row: Row, where: str) -> list[Mismatch]:
    """JNL-2: the columns a row of each phase fills."""
    phase = row["phase"]
    problems = []
    if phase in ("source_capture_done", "commit_done", "result_pending", "result_submitted"):
        body = row["result_body"]
        parsed = parsed_json(body)
        try:
            canonical = canonical_json(parsed).decode("utf-8") if parsed is not None else None
        except (ValueError, NotCanonical, RecursionError):  # nested just short of the parser's limit
            parsed = canonical = None
        if parsed is None or canonical != body:
            problems.append(
                _m("JNL-2", f"{where}/result_body", "canonical JSON", body, "result_body is not canonical JSON")
            )
        elif row["result_hash"] != result_hash(parsed):
            problems.append(
                _m(
                    "JNL-2",
                    f"{where}/result_hash",
                    result_hash(parsed),
                    row["result_hash"],
                    "result_hash is not the hash of result_body",
                )
            )
    if phase in ("result_pending", "result_submitted") and not row["idempotency_key"]:
        problems.append(_m("JNL-2", f"{where}/idempotency_key", "a key", None, f"a {phase} row carries no key"))
    if phase == "commit_done" and not row["commit_oid"]:
        problems.append(
            _m("JNL-2", f"{where}/commit_oid", "the governed commit", None, "commit_done carries no commit")
        )
    if phase == "workspace_prepared":
        problems += _workspace_name(row["workspace"], f"{where}/workspace")
    if phase == "reconciliation_required" and not row["reason"]:
        problems.append(_m("PHASE-4", f"{where}/reason", "a reason", None, "reconciliation_required carries no reason"))
    return problems


def _workspace_name(name: object, where: str) -> list[Mismatch]:
    """JNL-2 and WRK-4: a workspace_prepared row names its workspace, a ``task-`` directory right under the root."""
    if not isinstance(name, str) or not name:
        return [_m("JNL-2", where, "the workspace's name", name, "a workspace_prepared row names no workspace")]
    if not name.startswith("task-") or any(bad in name for bad in ("/", "\\", "\0")):
        return [
            _m(
                "WRK-4",
                where,
                "a name starting with 'task-', of a directory right under the workspace root",
                name,
                "the workspace is not a task- directory of the root",
            )
        ]
    return []


def settings(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-1, JNL-5 and JNL-6: every reported connection, every process that wrote, and the file's header;
    none of it without p1.journal."""
    return _settings(history.settings)


def _settings(settings: JournalSettings | None) -> list[Mismatch]:
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


def answered_settings(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-3: with p1.journal-log, a process's answer to ``p1.journal.settings`` and its journal log both list
    every connection it opened, so an answer of none beside a log of one contradicts itself (the log alone
    would pass JNL-5). A process never asked, or whose log the kit could not read, is JNL-5's to judge."""
    settings = history.settings
    if settings is None or not settings.logged:
        return []
    answers = {event.actor: event for event in history.of(None, "settings")}  # each process's last answer
    found = []
    for name, event in answers.items():
        logged = settings.reported.get(name, ())
        if event.get("connections") or not logged or name in settings.unreadable:
            continue
        note = (
            f"{name} answered p1.journal.settings with no connection, but its journal log lists {len(logged)} "
            "it opened: the answer contradicts the log"
        )
        expected = f"the {len(logged)} connection(s) its journal log lists"
        found.append(Mismatch(f"/p1.journal/{name}/answer", expected, [], "ADP-3", note, event=event.seq))
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
