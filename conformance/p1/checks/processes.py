"""The worker's processes (docs/spec/p1.md, sections 1 and 15): what the adapter reports of them, how they end
(WRK-3, ADP-2, CRASH-2), what outlives them (WRK-5), how often they claim (WRK-3), the base URL their requests
come through (WRK-1), and the kit's own paths they must not call (p1-control-plane.md CP-22).

The harness records what a worker process answered or did when the scenario could not go on from it: a
reply that is no object, a pid the kit may not kill, a state other than the one waited for, a wait that
never ended, an idle worker that never claimed, a kill whose exit marker was written.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from resumekit.conformance._text import clip
from resumekit.conformance.events import Event
from resumekit.conformance.p1 import views
from resumekit.conformance.p1.checks import failpoints
from resumekit.conformance.p1.checks._shared import mismatch as _m
from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch

# A claim may come a little sooner than retry_after_ms after the empty answer's arrival: timers of some
# runtimes fire up to a millisecond early, and the answer's own latency is not the worker's to wait out.
TOLERANCE = 0.75


def _seen(history: Story, kind: str) -> list[Event]:
    return history.of(None, kind)


def replies(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2: every reply to a ``p1.worker`` command is an object, and its pid one the kit may kill."""
    found = []
    for event in _seen(history, "not-an-object"):
        cmd, value = event.get("cmd"), event.get("value")
        note = f"{cmd} answered {value!r}, not an object"
        found.append(Mismatch(f"/{cmd}", "an object", value, "ADP-2", note, event=event.seq))
    for event in _seen(history, "pid-refused"):
        where, pid = event.get("where"), event.get("pid")
        note = (
            f"{where} reported pid {pid!r}, which the kit will not kill: it is not the adapter or one of its "
            "descendants"
        )
        expected = "the adapter's pid or a descendant's"
        found.append(Mismatch(f"/{where}/pid", expected, pid, "ADP-2", note, event=event.seq))
    for event in _seen(history, "not-running"):
        note = "the scenario kills a worker that is not running: the adapter's process ended before the kill"
        found.append(Mismatch("/kill", "a running worker", None, "ADP-2", note, event=event.seq))
    return found


def kit_files(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2 and ADP-3: a file of the kit's (the journal log, the tool's files) that a process of the worker's
    took the place of, so that the kit could not make it."""
    found = []
    for event in _seen(history, "kit-file-taken"):
        name, refused = event.get("name"), event.get("refused")
        note = f"the kit could not make {event.get('what')}: {refused} (a process of the worker's put it there)"
        clause = str(event.get("clause"))
        found.append(Mismatch(f"/scratch/{name}", "a file of the kit's", refused, clause, note, event=event.seq))
    return found


def waits(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2, OUT-2 and WRK-3: a wait ends in the state waited for, in time, and an idle worker claims."""
    found = []
    for event in _seen(history, "not-as-waited"):
        if event.get("diskFault"):
            continue  # JNL-8's (journal.fatal_exits)
        if failpoints.still_released(event) is not None:
            continue  # the block continue released, reported again (failpoints.released)
        wanted, state, answer = event.get("wanted"), event.get("state"), event.get("answer")
        note = f"waited for the worker to be {wanted}, it is {state}"
        found.append(Mismatch("/wait/state", wanted, answer, "ADP-2", note, event=event.seq))
    for event in _seen(history, "not-in-time"):
        wanted, state = event.get("wanted"), event.get("state")
        note = f"the worker was not {wanted} within {event.get('seconds'):.0f} s"
        found.append(Mismatch("/wait/state", wanted, state, "OUT-2", note, event=event.seq))
    for event in _seen(history, "no-claim"):
        note = (
            f"the worker said it is idle, but it sent no claim in the {event.get('seconds'):.0f} s since the kit's "
            f"last change, so it never asked for the work the kit offered (waiting for {event.get('wanted')!r})"
        )
        expected = "a claim after the kit's last change"
        found.append(Mismatch("/requests/claims", expected, None, "WRK-3", note, event=event.seq))
    return found


def kill_points(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2 (the tool) and the scenario's kit-side kill points: the worker reached the point armed."""
    found = []
    for event in _seen(history, "tool-never-ran"):
        note = (
            "the kit's tool never announced itself: the worker did not run the tool of p1.worker.start in a "
            "workspace (or it never reached a verified workspace)"
        )
        found.append(Mismatch("/tool", "the tool started in a workspace", None, "ADP-2", note, event=event.seq))
    for event in _seen(history, "kill-point-not-reached"):
        note = "the armed kit-side kill point was never reached"
        found.append(Mismatch("/faults/KillPoint", event.get("points"), None, None, note, event=event.seq))
    return found


def crashes(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CRASH-2 (Phase 0) and ADP-2: a kill runs no exit path, an orderly stop runs it."""
    found = []
    for event in _seen(history, "reaped"):
        if event.get("marker"):
            note = "the exit marker was written: an exit path ran, so this was not a crash"
            found.append(Mismatch("/marker", "absent", "present", "CRASH-2", note, event=event.seq))
    for event in _seen(history, "stopped"):
        if event.get("exitCode") == 0 and not event.get("marker"):
            note = "the exit path never wrote the marker, so a kill cannot be told from an orderly exit"
            found.append(Mismatch("/marker", "present", "absent", "ADP-2", note, event=event.seq))
    return found


def tool(history: Story, scenario: Scenario) -> list[Mismatch]:
    """ADP-2 and WRK-4: a worker started with the kit's tool ran it, in a workspace directly under the root;
    without it the WRK-5 watch would prove nothing."""
    if not any(event.get("tool") for event in history.of(None, "started")):
        return []
    announced = [entry for entry in history.log if entry.get("kind") == "tool_started"]
    world = views.last_of(history.events, "kit", "world")
    root = str(world.get("workspaceRoot")) if world is not None else ""
    places = views.last_of(history.events, "kit", "tool-places")
    return _tool_problems(announced, root, (places.get("places") or {}) if places is not None else {})


def watch(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-5: nothing the root held when the next worker started changed after its first request."""
    found = []
    for event in history.of("watch", "changes"):
        found += [dataclasses.replace(m, event=event.seq) for m in _watch_problems(event.get("changes", {}))]
    return found


def outlived(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-5 (strict): no process of the case (marked in its environment, or below a reaper of the case) still
    ran once the worker's processes had ended; the kit names and kills each one it found."""
    found = []
    for index, event in enumerate(history.of("kit", "outlived")):
        note = (
            f"{event.get('description')}: {event.get('signs')} and still ran {event.get('graceSeconds'):g} s after "
            "the worker's adapter and its tree had ended, so a process the worker started outlived it "
            + ("(the kit killed it)" if event.get("ended") else "(the kit's SIGKILL has not ended it)")
        )
        actual = {name: event.get(name) for name in ("pid", "command", "cwd", "state", "files")}
        expected = "no process of the case once its worker's had ended"
        found.append(Mismatch(f"/processes/outlived/{index}", expected, actual, "WRK-5", note, event=event.seq))
    return found


def scratch_left(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-5 (strict): once every process of the case had ended, the kit could remove the scenario's folder;
    one it could not remove still had something of the worker's writing in it."""
    found = []
    for event in history.of("kit", "scratch-left"):
        left = event.get("left")
        note = f"the kit could not remove the scenario's folder once every process of the case had ended: {left}"
        found.append(Mismatch("/scratch", "the scenario's folder removed", left, "WRK-5", note, event=event.seq))
    return found


# The endpoints of the kit's own callers (the origin's hook, the kit's tool), which come through no worker's base URL.
_KIT_ENDPOINTS = frozenset({"origin_check", "origin_updated", "tool_started"})


def base_urls(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-1: a worker speaks to the control plane through the base URL the kit gave it (``controlPlaneUrl``),
    which names the process: every request the control plane logged, other than the kit's own callers' and the
    ``_kit/`` paths CP-22 judges, came through the base URL of a worker process the kit started. A worker that
    builds its paths from the host's root, or from a base URL it was not given, sends requests no process owns.
    One finding per base URL a request came through, naming the first and counting them."""
    started = {event.actor for event in history.of(None, "started")}
    refused = {entry.get("request") for entry in history.log if entry.get("kind") == "kit_path_refused"}
    strays: dict[Any, list[Mapping[str, Any]]] = {}
    for entry in history.log:
        if entry.get("kind") != "request" or entry.get("worker") in started:
            continue
        if entry.get("endpoint") in _KIT_ENDPOINTS or entry.get("request") in refused:
            continue  # the kit's own call, or CP-22's to judge
        strays.setdefault(entry.get("worker"), []).append(entry)
    found = []
    for worker, entries in strays.items():
        first = clip(f"{entries[0].get('method')} {entries[0].get('path')}", 120)
        shown = None if worker is None else clip(str(worker), 80)
        where = "outside any worker's base URL" if shown is None else f"through the base URL of {shown!r}"
        note = (
            f"{len(entries)} request(s) came {where}, which the kit gave no worker process it started, the first "
            f"{first!r}: a worker sends every request through its controlPlaneUrl"
        )
        found.append(_m("WRK-1", f"/control-plane/requests/{shown}", "the base URL the kit gave", first, note))
    return found


def kit_paths(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CP-22: a worker never calls the kit's own paths. The kit's callers carry the control plane's secret, which
    the worker is never given, so every request the control plane refused for a ``_kit/`` path without it is a
    worker's: one finding per base URL it came through, naming the first path called (as the log shows it,
    any secret as ``<secret>``) and how many there were. Refused is not harmless: a worker that forges the
    origin's or the tool's calls is probing for a way around the governed push."""
    by_worker: dict[str | None, list[Mapping[str, Any]]] = {}
    for call in history.kit_calls:
        worker = call.get("worker")
        by_worker.setdefault(None if worker is None else str(worker), []).append(call)
    found = []
    for worker, calls in sorted(by_worker.items(), key=lambda item: (item[0] is not None, item[0] or "")):
        first = f"{calls[0].get('method')} {calls[0].get('path')}"
        where = "outside any worker's base URL" if worker is None else f"through the base URL of {worker!r}"
        pointer = "/control-plane/kit-paths" + ("" if worker is None else f"/{worker}")
        note = (
            f"{len(calls)} request(s) to the kit's own paths {where}, which a worker must not call, "
            f"the first {first!r}; the control plane refused them"
        )
        found.append(_m("CP-22", pointer, "no request to a _kit/ path", first, note))
    return found


def pacing(history: Story, scenario: Scenario) -> list[Mismatch]:
    """WRK-3 over every worker process's claims: after an empty one, the next comes no sooner than allowed."""
    by_worker: dict[str, list[Mapping[str, Any]]] = {}
    for claim in history.claims:
        by_worker.setdefault(str(claim.get("worker")), []).append(claim)
    found: list[Mismatch] = []
    for worker, claims in sorted(by_worker.items()):
        found += _gaps(worker, claims, history.retry_after_ms)
    return found


def _gaps(worker: str, claims: Sequence[Mapping[str, Any]], retry_after_ms: int) -> list[Mismatch]:
    """The WRK-3 finding for one worker process's claims, in order: one mismatch, however many early."""
    early: list[float] = []
    for earlier, later in itertools.pairwise(claims):
        if not earlier.get("empty"):
            continue
        before, after = earlier.get("arrived_ms"), later.get("arrived_ms")
        if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
            return [
                _m(
                    "WRK-3",
                    f"/workers/{worker}/claims",
                    "each claim's arrival time",
                    None,
                    "a claim's arrival went unrecorded",
                )
            ]
        if after - before < TOLERANCE * retry_after_ms:
            early.append(after - before)
    if not early:
        return []
    # Claims sent side by side are logged as they are answered, so one may have arrived before the one
    # logged ahead of it: no claim came sooner than at once.
    soonest = max(0.0, min(early))
    at_once = sum(gap <= 0 for gap in early)
    note = (
        f"{len(early)} claim(s) came sooner than retry_after_ms ({retry_after_ms} ms) after a claim answered "
        f"without a task, the soonest after {soonest:.1f} ms"
        + (f"; {at_once} of them while an earlier one was still being answered" if at_once else "")
    )
    return [_m("WRK-3", f"/workers/{worker}/claims", f">= {retry_after_ms} ms between claims", round(soonest, 1), note)]


def _tool_problems(
    announced: Sequence[Mapping[str, Any]], root: str, places: Mapping[str, Any] | None = None
) -> list[Mismatch]:
    """The kit's tool ran, in a workspace directly under the (resolved) workspace root (ADP-2, WRK-4):
    without it the WRK-5 watch would prove nothing. Where the kit looked at the folder holding a workspace
    (*places*: ``scenario.tool_places``), it is the root by identity; the spelling decides only otherwise."""
    places = places or {}
    if not announced:
        return [_m("ADP-2", "/tool", "the tool started in a workspace", None,
                   "the kit's tool never announced itself: the worker did not run it")]
    problems = []
    for entry in announced:
        cwd = entry.get("cwd")
        if not isinstance(cwd, str):
            in_root = False
        else:
            in_root = places[cwd] is True if cwd in places else PurePath(cwd).parent == PurePath(root)
        if not in_root or not PurePath(str(cwd)).name.startswith("task-"):
            problems.append(_m("ADP-2", "/tool/cwd", f"a task- workspace directly under {root}", cwd,
                               "the kit's tool ran outside a workspace of the workspace root"))
        problems += _unseen(entry)
    return problems


def _unseen(entry: Mapping[str, Any]) -> list[Mismatch]:
    """ADP-2: each process the tool's announcement names is, as the kit saw it when the announcement arrived, a
    process running the kit's tool in the directory announced. The announcement comes to one of the kit's own
    paths, whose secret the worker can read, so it is held to what the kit saw (``seen``; None where the kit
    cannot look, off Linux)."""
    seen = entry.get("seen")
    if not isinstance(seen, Mapping):
        return []
    problems = []
    for role in ("pid", "grandchild"):
        if entry.get(role) is None and role == "grandchild":
            continue  # the grandchild had ended before the announcement: the tool names none
        view = seen.get(role)
        if isinstance(view, Mapping) and view.get("runs") is True and view.get("cwd") == entry.get("cwd"):
            continue
        what = (
            "there was no such process" if not isinstance(view, Mapping)
            else "it runs no kit tool" if view.get("runs") is not True
            else f"it runs in {view.get('cwd')!r}"
        )
        note = (
            f"the tool's announcement names {role} {entry.get(role)!r} in {entry.get('cwd')!r}, but when it arrived "
            f"{what}: an announcement the kit's tool did not make (the worker can read its secret) proves no tool ran"
        )
        problems.append(_m("ADP-2", f"/tool/{role}", f"the kit's tool running in {entry.get('cwd')!r}", view, note))
    return problems


def _watch_problems(changes: Mapping[str, str], shown: int = 8) -> list[Mismatch]:
    """WRK-5: nothing the root held when the next worker started changed after its first request."""
    if not changes:
        return []
    paths = sorted(changes)
    listed = ", ".join(f"{path} ({changes[path]})" for path in paths[:shown])
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    note = (
        f"{len(paths)} path(s) under the workspace root changed after the next worker's startup cleanup, so a "
        f"process the killed worker started outlived it: {listed}{more}"
    )
    return [_m("WRK-5", "/workspace-root/after-restart", "no change", {p: changes[p] for p in paths[:shown]}, note)]
