"""The worker's processes (WRK, CRASH-2, ADP, CP-22): what the adapter answered of them, how they ended, what
outlived them, how often they claimed, and the kit's own paths they called; each rule over a history written
by hand, an empty one included."""

from __future__ import annotations

from typing import Any

import pytest

from tests.p1_stories import Told, clauses, judged

AT_STOP = ("processes.replies", "processes.kit_files", "processes.waits", "processes.kill_points",
           "processes.crashes")


@pytest.mark.parametrize("name", [*AT_STOP, "processes.watch", "processes.outlived", "processes.scratch_left",
                                  "processes.kit_paths", "processes.pacing", "processes.tool",
                                  "processes.base_urls"])
def test_a_history_without_the_events_a_rule_judges_has_nothing_wrong_for_it(name: str) -> None:
    # Each of these rules judges what a process did; no such event, nothing to fail (the tool's rule judges
    # only a worker started with the tool, which an empty history has not).
    assert judged(name, Told()) == []


def test_a_reply_that_is_no_object_a_pid_the_kit_will_not_kill_or_a_kill_of_no_worker_is_adp_2() -> None:
    told = (Told().by("w1", "not-an-object", cmd="p1.worker.start", value=[1])
            .by("w1", "pid-refused", where="p1.worker.start", pid=1).by("w1", "not-running"))
    found = judged("processes.replies", told)
    assert [(m.clause, m.pointer) for m in found] == [
        ("ADP-2", "/p1.worker.start"), ("ADP-2", "/p1.worker.start/pid"), ("ADP-2", "/kill")
    ]
    assert "answered [1], not an object" in (found[0].note or "") and [m.event for m in found] == [0, 1, 2]


def test_a_kit_file_a_process_of_the_worker_took_fails_the_clause_recorded_with_it() -> None:
    taken = {"name": "journal-w1.jsonl", "what": "the journal log of p1.journal-log", "refused": "a FIFO"}
    (found,) = judged("processes.kit_files", Told().by("w1", "kit-file-taken", clause="ADP-3", **taken))
    assert (found.clause, found.pointer, found.actual) == ("ADP-3", "/scratch/journal-w1.jsonl", "a FIFO")


def test_a_wait_that_ends_elsewhere_never_ends_or_finds_an_idle_worker_that_never_claimed_fails() -> None:
    told = (Told().by("w1", "not-as-waited", wanted="blocked", state="idle", answer={"state": "idle"})
            .by("w1", "not-in-time", wanted="idle", state="running", seconds=120.0)
            .by("w1", "no-claim", wanted="idle", seconds=30.0))
    assert clauses(judged("processes.waits", told)) == ["ADP-2", "OUT-2", "WRK-3"]
    # After an injected disk error the wait is JNL-8's to judge (journal.fatal_exits), not this rule's.
    disk = Told().by("w1", "not-as-waited", wanted="exited", state="idle", answer={}, diskFault={"errno": "EIO"})
    assert judged("processes.waits", disk) == []


def test_a_tool_that_never_ran_or_a_kill_point_never_reached_fails() -> None:
    (tool,) = judged("processes.kill_points", Told().by("w1", "tool-never-ran"))
    assert tool.clause == "ADP-2" and tool.pointer == "/tool"
    # A kit-side kill point never reached names no clause: the scenario fails its own gates.
    (point,) = judged("processes.kill_points", Told().by("w1", "kill-point-not-reached", points=["before_push"]))
    assert (point.clause, point.expected) == (None, ["before_push"])


def test_a_kill_runs_no_exit_path_and_an_orderly_stop_runs_it() -> None:
    assert judged("processes.crashes", Told().by("w1", "reaped", marker=False)) == []
    assert clauses(judged("processes.crashes", Told().by("w1", "reaped", marker=True))) == ["CRASH-2"]
    assert judged("processes.crashes", Told().by("w1", "stopped", exitCode=0, marker=True)) == []
    assert clauses(judged("processes.crashes", Told().by("w1", "stopped", exitCode=0, marker=False))) == ["ADP-2"]


ROOT = "/scratch/workspaces"


def _tool(*cwds: Any) -> Told:
    told = Told().kit("world", workspaceRoot=ROOT).by("w1", "started", tool=True)
    for cwd in cwds:
        told.logged("tool_started", cwd=cwd)
    return told


def test_the_tool_must_announce_itself_in_a_task_workspace() -> None:
    assert clauses(judged("processes.tool", _tool())) == ["ADP-2"]  # never announced: the watch proves nothing
    assert judged("processes.tool", _tool(f"{ROOT}/task-t-1-1-ab")) == []
    for cwd in (None, "/elsewhere/task-x", f"{ROOT}/odd", f"{ROOT}/task-x/deeper"):
        assert clauses(judged("processes.tool", _tool(cwd))) == ["ADP-2"], cwd
    # Without the kit's world event the root is unknown: no workspace is under it.
    bare = Told().by("w1", "started", tool=True).logged("tool_started", cwd=f"{ROOT}/task-x")
    assert clauses(judged("processes.tool", bare)) == ["ADP-2"]


def _seen(pid: Any, grandchild: Any = None, cwd: str = f"{ROOT}/task-t-1-1-ab") -> Told:
    """The tool announced itself in *cwd*, and the kit saw *pid* and *grandchild* so (None: no such process)."""
    told = Told().kit("world", workspaceRoot=ROOT).by("w1", "started", tool=True)
    return told.logged("tool_started", cwd=cwd, pid=11, grandchild=12, seen={"pid": pid, "grandchild": grandchild})


def test_an_announcement_the_kits_look_at_the_processes_belies_is_adp_2() -> None:
    tool = {"runs": True, "cwd": f"{ROOT}/task-t-1-1-ab"}
    assert judged("processes.tool", _seen(tool, tool)) == []
    # The worker's own pid, not the tool: it announced a tool with the secret it read in the announce file.
    (found,) = judged("processes.tool", _seen({"runs": False, "cwd": "/w"}, tool))
    assert (found.clause, found.pointer) == ("ADP-2", "/tool/pid") and "runs no kit tool" in (found.note or "")
    (gone,) = judged("processes.tool", _seen(tool, None))
    assert gone.pointer == "/tool/grandchild" and "no such process" in (gone.note or "")
    elsewhere = judged("processes.tool", _seen({"runs": True, "cwd": "/elsewhere"}, tool))
    assert [m.pointer for m in elsewhere] == ["/tool/pid"] and "/elsewhere" in (elsewhere[0].note or "")
    # A grandchild that had ended before the announcement is not named; where the kit cannot look (off Linux),
    # nothing was seen to hold the announcement to.
    ended = Told().kit("world", workspaceRoot=ROOT).by("w1", "started", tool=True)
    ended.logged("tool_started", cwd=f"{ROOT}/task-t-1-1-ab", pid=11, grandchild=None, seen={"pid": tool})
    assert judged("processes.tool", ended) == []
    unseen = Told().kit("world", workspaceRoot=ROOT).by("w1", "started", tool=True)
    assert judged("processes.tool", unseen.logged("tool_started", cwd=f"{ROOT}/task-t-1-1-ab", seen=None)) == []


def test_the_watch_names_every_change_under_the_root_after_a_restart() -> None:
    assert judged("processes.watch", Told().by("watch", "changes", changes={})) == []
    changes = {f"task-{n}/f": "changed" for n in range(10)}
    (found,) = judged("processes.watch", Told().by("watch", "changes", changes=changes))
    assert found.clause == "WRK-5" and "10 path(s)" in (found.note or "") and "and 2 more" in (found.note or "")
    assert found.event == 0


def test_a_process_that_outlived_the_worker_or_a_folder_left_fails_wrk_5_in_strict_only() -> None:
    left = {"pid": 7, "command": "sleep", "cwd": "/", "state": "S", "files": [], "ended": True,
            "description": "pid 7 (sleep)", "signs": "the case's marker", "graceSeconds": 5.0}
    told = Told().kit("outlived", **left).kit("scratch-left", left="a file kept being written")
    assert clauses(judged("processes.outlived", told)) == ["WRK-5"]
    assert "(the kit killed it)" in (judged("processes.outlived", told)[0].note or "")
    assert clauses(judged("processes.scratch_left", told)) == ["WRK-5"]
    assert judged("processes.outlived", told, profile="core") == []
    assert judged("processes.scratch_left", told, profile="core") == []


def _refused(*calls: tuple[str | None, str]) -> Told:
    told = Told()
    for worker, path in calls:
        told.logged("kit_path_refused", worker=worker, method="POST", path=path)
    return told


def test_a_call_to_a_kit_path_fails_cp_22_once_per_base_url_naming_the_first() -> None:
    found = judged("processes.kit_paths", _refused(("w1", "_kit/origin/check"), ("w1", "_kit/tool/started"),
                                                    (None, "_kit/<secret>x/tool/started")))
    assert [(m.clause, m.pointer, m.actual) for m in found] == [
        ("CP-22", "/control-plane/kit-paths", "POST _kit/<secret>x/tool/started"),
        ("CP-22", "/control-plane/kit-paths/w1", "POST _kit/origin/check"),
    ]
    assert "2 request(s)" in str(found[1].note) and "'w1'" in str(found[1].note)


def _requested(*requests: tuple[str | None, str, str | None]) -> Told:
    """Processes w1 and w2 started, then requests (worker, path, endpoint) as the control plane logs them."""
    told = Told().by("w1", "started", pid=1).by("w2", "started", pid=2)
    for number, (worker, path, endpoint) in enumerate(requests, start=1):
        told.logged("request", request=number, worker=worker, method="POST", path=path, endpoint=endpoint, status=404)
    return told


def test_every_request_comes_through_the_base_url_of_a_worker_the_kit_started() -> None:
    ours = _requested(("w1", "v1/claims", "claim"), ("w2", "v1/leases/x/renew", "renew"),
                      (None, "_kit/<secret>/origin/check", "origin_check"), (None, "_kit/<secret>/tool/started",
                                                                             "tool_started"))
    assert judged("processes.base_urls", ours) == []
    # From the host's root (no base URL at all), or through a base URL the kit gave no process: one finding
    # per base URL, the first request named and all of them counted.
    stray = _requested(("w1", "v1/claims", "claim"), (None, "v1/leases/x/release", None), (None, "v1/claims", None),
                       ("w9", "v1/claims", "claim"))
    found = judged("processes.base_urls", stray)
    assert [(m.clause, m.pointer, m.actual) for m in found] == [
        ("WRK-1", "/control-plane/requests/None", "POST v1/leases/x/release"),
        ("WRK-1", "/control-plane/requests/w9", "POST v1/claims"),
    ]
    assert "2 request(s) came outside any worker's base URL" in str(found[0].note)
    # A _kit/ path without the secret is CP-22's, not this rule's.
    refused = _requested((None, "_kit/origin/check", None)).logged("kit_path_refused", request=1, worker=None,
                                                                  method="POST", path="_kit/origin/check")
    assert judged("processes.base_urls", refused) == []


def _claims(*claims: tuple[str, float | None, bool]) -> Told:
    """Claims answered 200, each told to wait (empty) or served a task; WRK-3 asks 20 ms after an empty one."""
    told = Told()
    for number, (worker, at, empty) in enumerate(claims, start=1):
        if not empty:
            told.logged("lease", event="granted", request=number, lease={"lease_id": f"L{number}"})
        told.logged("request", worker=worker, endpoint="claim", status=200, request=number, arrived_ms=at)
    return told.at_end(retry_after_ms=20)


def test_claims_that_wait_retry_after_ms_pass_and_none_at_all_is_nothing_to_judge() -> None:
    assert judged("processes.pacing", _claims(("w1", 0.0, True), ("w1", 21.5, True), ("w1", 45.0, False))) == []
    assert judged("processes.pacing", _claims()) == []
    # After a claim that got a task, the next may come at once; another process's claims are its own.
    assert judged("processes.pacing", _claims(("w1", 0.0, False), ("w1", 0.5, True), ("w2", 1.0, True))) == []


def test_a_claim_sooner_than_retry_after_ms_after_an_empty_one_fails_wrk_3() -> None:
    (found,) = judged("processes.pacing", _claims(("w1", 0.0, True), ("w1", 2.0, True), ("w1", 4.5, True)))
    assert found.clause == "WRK-3" and found.pointer == "/workers/w1/claims" and found.actual == 2.0
    assert "2 claim(s) came sooner than retry_after_ms (20 ms)" in (found.note or "")
    # Two threads claiming at once: logged as answered, one arrived before the one logged ahead of it.
    (found,) = judged("processes.pacing", _claims(("w1", 0.0, True), ("w1", 3.0, True), ("w1", 1.0, True)))
    assert found.actual == 0.0 and "1 of them while an earlier one was still being answered" in (found.note or "")


def test_a_claim_whose_arrival_went_unrecorded_is_not_taken_as_paced() -> None:
    (found,) = judged("processes.pacing", _claims(("w1", 0.0, True), ("w1", None, True)))
    assert found.clause == "WRK-3" and "unrecorded" in (found.note or "")
