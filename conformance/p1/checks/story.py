"""What a check reads: one case's history, with the views every check shares, each taken from the events alone.

``Story`` holds the events the harness recorded and the profile the run compared in; each view (the journal
as the kit read it last, the submissions the control plane saw, the origins' refs once the last step was
done, ...) is computed from the events the first time a check asks for it (``p1.views`` has the queries).
``Scenario`` is what a check knows of the case: what each task must converge to, under which task id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from resumekit.conformance.events import Event
from resumekit.conformance.p1 import views
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.model import Row, Snapshot


@dataclass(frozen=True)
class JournalSettings:
    """What the kit learned of the journal connections of one scenario's worker processes (JNL-5, JNL-6)."""

    # process name -> the connections it reported (ADP-3); a process absent was never asked or never answered
    reported: Mapping[str, Sequence[Mapping[str, Any]]]
    # the processes, in start order, that wrote rows while they lived (the journal grew from their start)
    wrote: Sequence[str] = ()
    logged: bool = False  # p1.journal-log claimed: every process's log was read, killed ones included
    header: str | None = None  # wal | rollback, from the journal file's header; None: unread or no journal
    header_of: Sequence[str] = ()  # the processes whose journal that header is (the first worker's)
    unreadable: Mapping[str, str] = field(default_factory=dict)  # process name -> why its log could not be read

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> JournalSettings:
        """The settings as the kit recorded them (``dataclasses.asdict`` of one)."""
        return cls(
            reported={name: tuple(value) for name, value in data["reported"].items()},
            wrote=tuple(data["wrote"]),
            logged=bool(data["logged"]),
            header=data["header"],
            header_of=tuple(data["header_of"]),
            unreadable=dict(data["unreadable"]),
        )


@dataclass(frozen=True)
class Scenario:
    """What the checks know of the case they judge: its expected outcomes and its tasks' names."""

    expect: Mapping[str, Mapping[str, Any]]
    names: Mapping[str, str]  # the scenario's name of a task -> its task_id
    profile: str = "strict"  # the profile the run compares in
    cites: tuple[str, ...] = ()  # the clauses its file names for it, its own rules first

    @classmethod
    def of(cls, case: ScenarioCase, profile: str) -> Scenario:
        """The scenario of *case*, judged in *profile*."""
        names = {name: template["task_id"] for name, template in case.tasks.items()}
        return cls(case.expect, names, profile, case.cites)


class Story:
    """One case's history as the checks read it: the events, and the views taken from them."""

    def __init__(self, events: Sequence[Event], profile: str = "strict", journal: str = "first") -> None:
        self.events = tuple(events)
        self.profile = profile
        self.journal = journal  # whose journal ``rows`` and ``snapshots`` are: the first worker's or the second's

    def second(self) -> Story:
        """The same story with the second worker's journal as ``rows`` and ``snapshots`` (a scenario's second
        worker obeys the journal's rules on its own)."""
        return Story(self.events, self.profile, "second")

    def of(self, actor: str | None, kind: str) -> list[Event]:
        """The events of *kind* (by *actor*, if named), in order."""
        return views.of_kind(self.events, actor, kind)

    def since(self, seq: int) -> Story:
        """The story of the events at or after *seq* only (what the harness asks the checks about as it goes)."""
        return Story([e for e in self.events if e.seq >= seq], self.profile, self.journal)

    def reads_at(self, request: object) -> list[Event]:
        """The journal reads the kit made as request number *request* arrived, in order (first worker's first)."""
        return [e for e in self._moment_reads if e.get("request") == request]

    @cached_property
    def _moment_reads(self) -> list[Event]:
        return [e for e in self.events if e.actor == "journal" and e.kind == "read" and e.get("request") is not None]

    def moments(self, check: str) -> list[dict[str, Any]]:
        """The control plane's moment entries of *check* (``first_request``, ``submission``, ``receipt``,
        ``push``): each request the kit read the journal at, with what the request named."""
        return [entry for entry in self.log if entry.get("kind") == "moment" and entry.get("check") == check]

    @property
    def strict(self) -> bool:
        """Whether the run compares in the strict profile: the strict clauses are checked too."""
        return self.profile == "strict"

    # ------------------------------------------------------------ the journal

    @cached_property
    def rows(self) -> list[Row]:
        """The (first) worker's journal as the kit read it once the last step was done."""
        return views.final_rows(self.events, self.journal)

    @cached_property
    def snapshots(self) -> tuple[Snapshot, ...]:
        """The (first) worker's journal at each read while it ran and after (JNL-4)."""
        return views.snapshots(self.events, self.journal)

    @cached_property
    def second_rows(self) -> list[Row]:
        """The journal of a scenario's second worker, if it has one."""
        return views.final_rows(self.events, "second")

    @cached_property
    def second_snapshots(self) -> tuple[Snapshot, ...]:
        """The second worker's journal at each read."""
        return views.snapshots(self.events, "second")

    @cached_property
    def open_at_start(self) -> dict[str, list[Row]]:
        """Worker process -> the last row of each attempt its journal held open when it started (RESUME-1)."""
        return views.open_at_start(self.events)

    @cached_property
    def settings(self) -> JournalSettings | None:
        """What the kit learned of the journal connections of the case's processes; None: no p1.journal."""
        found = views.settings(self.events)
        return None if found is None else JournalSettings.of(found)

    # ------------------------------------------------------------ the control plane

    @cached_property
    def log(self) -> list[dict[str, Any]]:
        """The control plane's log (CP-19), entry by entry."""
        return views.control_log(self.events)

    @cached_property
    def _entry_events(self) -> dict[int, int]:
        entries = [e for e in self.events if e.actor == views.CONTROL_PLANE]
        found = {id(event.data): event.seq for event in self.events}
        return found | {id(entry): event.seq for entry, event in zip(self.log, entries, strict=True)}

    def seen_at(self, value: object) -> int | None:
        """The seq of the event that recorded *value*, when *value* is one event's data or one of the log's own
        entries (a push, a request, a receipt) as a check quotes it whole; None for anything else."""
        return self._entry_events.get(id(value))

    @cached_property
    def _facts(self) -> dict[str, Any]:
        return views.control_facts(self.log, self._at_end, views.issued(self.events))

    @cached_property
    def _at_end(self) -> Mapping[str, Any]:
        return views.at_end(self.events, "at-end")

    @property
    def submissions(self) -> list[dict[str, Any]]:
        """Every result submission: task_id, attempt, key, result_hash, status, and a 409's answer (SUB-5)."""
        return list(self._facts["submissions"])

    @property
    def tasks(self) -> dict[str, dict[str, Any]]:
        """task_id -> the control plane's view of it once the last step was done (state, attempts, stored)."""
        return dict(self._facts["tasks"])

    @property
    def leases(self) -> list[Mapping[str, Any]]:
        """Every lease of the scenario's branches once the last step was done."""
        return list(self._facts["leases"])

    @property
    def pushes(self) -> list[dict[str, Any]]:
        """Every push attempt the origins' hooks logged."""
        return list(self._facts["pushes"])

    @property
    def commits(self) -> dict[str, list[str]]:
        """task_id -> the commits its branch gained above its expected_branch_oid."""
        return dict(self._facts["commits"])

    @property
    def claims(self) -> list[dict[str, Any]]:
        """Every claim answered 200: worker, arrived_ms, and whether it was told to wait (WRK-3)."""
        return list(self._facts["claims"])

    @property
    def retry_after_ms(self) -> int:
        """The wait WRK-3 asks after a claim answered without a task."""
        return int(self._facts["retry_after_ms"])

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request of the log in order: worker, endpoint, path."""
        return list(self._facts["requests"])

    @cached_property
    def deliveries(self) -> list[dict[str, Any]]:
        """Attempts served against CP-5 or CP-7, each with the governed side effects after it (SCOPE-6, -7)."""
        return views.faulty_deliveries(self.log)

    @cached_property
    def losses(self) -> list[dict[str, Any]]:
        """Leases a worker was told were lost, with what it did after and whether they were revived (LEASE-4)."""
        return views.after_loss(self.log)

    @cached_property
    def stopped(self) -> list[dict[str, Any]]:
        """Each orderly stop of a blocked or idle worker, with the governed side effects before it exited."""
        return views.effects_after_stops(self.log, views.stops(self.events))

    @cached_property
    def reports(self) -> list[dict[str, Any]]:
        """Every report the control plane received: task_id, attempt, state, reason (PHASE-4, CP-11)."""
        fields = ("task_id", "attempt", "state", "reason")
        return [{name: e.get(name) for name in fields} for e in self.log if e.get("kind") == "report"]

    @cached_property
    def kit_calls(self) -> list[dict[str, Any]]:
        """Every request refused for calling one of the kit's own paths without its secret (CP-22)."""
        return views.kit_calls(self.log)

    @cached_property
    def lease_log(self) -> list[dict[str, Any]]:
        """The log's clock moves and lease events in order (LEASE-3)."""
        return views.lease_log(self.log)

    # ------------------------------------------------------------ the kit's own changes and readings

    @cached_property
    def clock_moves(self) -> tuple[dict[str, Any], ...]:
        """Each clock move a step made: its log entry's seq and the journal's length around it (LEASE-3)."""
        return tuple(
            {"seq": e.get("seq"), "rows_before": e.get("rowsBefore"), "rows_after": e.get("rowsAfter")}
            for e in self.of("kit", "clock-moved")
        )

    @cached_property
    def cache_damages(self) -> tuple[dict[str, Any], ...]:
        """Each cache the kit damaged: task_id, how, and the attempt the journal then held open (CACHE-4)."""
        return tuple(
            {"task_id": e.get("task_id"), "how": e.get("how"), "open": e.get("open")}
            for e in self.of("kit", "cache-damaged")
        )

    @property
    def expected(self) -> dict[str, Any]:
        """task_id -> the result body the kit computes for its current attempt."""
        return dict(self._at_end.get("expected", {}))

    @property
    def caches(self) -> dict[str, tuple[str, Any]]:
        """task_id -> (status, cache) once the last step was done."""
        return {task_id: (status, value) for task_id, (status, value) in self._at_end.get("caches", {}).items()}

    @property
    def idle(self) -> bool:
        """Whether the first worker was last waited for as idle."""
        return self._at_end.get("last_wait") == "idle"

    @cached_property
    def _origins(self) -> Mapping[str, Any]:
        return views.at_end(self.events, "origins-at-end")

    @property
    def origin_refs(self) -> Mapping[str, Mapping[str, str]] | None:
        """Every ref of every origin once the last step was done; None when the kit did not read them."""
        return self._origins.get("origin_refs")

    @property
    def kit_refs(self) -> dict[str, Mapping[str, str]]:
        """repository -> every ref the kit made when it created the origin -> the object it made it at."""
        return dict(self._origins.get("kit_refs", {}))

    @property
    def ref_updates(self) -> tuple[Mapping[str, Any], ...]:
        """Every change of an origin's ref: by the kit (CP-21) or by a push the hook let land (CP-18)."""
        return tuple(self._origins.get("ref_updates", ()))

    @property
    def governed(self) -> list[Mapping[str, Any]]:
        """The governed commit the kit computed for each commit attempt served (TASK-4): repository, ref, task_id,
        attempt, base_oid and ``commit``; empty when the kit did not read the origins."""
        return list(self._origins.get("governed", ()))

    @cached_property
    def fast_forward(self) -> dict[tuple[str, str, str], bool | None]:
        """(repository, old, new) of each push attempt -> whether it was a fast-forward (COMMIT-2)."""
        return {(r, o, n): known for r, o, n, known in self._origins.get("fast_forward", ())}

    @cached_property
    def _decoys(self) -> dict[str, dict[str, str]]:
        return {e.get("when"): dict(e.get("entries", {})) for e in self.of("kit", "decoys")}

    @property
    def decoy_changed(self) -> bool:
        """Whether the decoy trees outside the root changed in the scenario."""
        return self._decoys.get("before", {}) != self._decoys.get("after", {})

    @cached_property
    def decoy_changes(self) -> dict[str, str]:
        """Each path of the decoy trees removed, added or changed in the scenario."""
        return views.decoy_changes(self._decoys.get("before", {}), self._decoys.get("after", {}))
