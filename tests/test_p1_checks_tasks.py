"""What a task asks of its result (TASK-3): a capture's result_pending body is the kit's, and a capture never
writes to the origin; each rule over a history written by hand, absent evidence included."""

from __future__ import annotations

import json
from typing import Any

from tests.p1_stories import Told, judged, row

BASE = "a" * 40
WANTED = {"base_oid": BASE, "kind": "source_capture",
          "files": [{"path": "README.md", "sha256": "1" * 64}, {"path": "src/a.txt", "sha256": "2" * 64}]}
CAPTURE = {"task_id": "t-1", "attempt": 1, "kind": "source_capture", "repository": "acme/w", "base_oid": BASE}


def _pending(body: Any, **columns: Any) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body, sort_keys=True, separators=(",", ":"))
    return row(3, "result_pending", result_body=text, result_hash="h", idempotency_key="k", **columns)


def _told(body: Any, task: dict[str, Any] = CAPTURE, expected: Any = WANTED, **columns: Any) -> Told:
    return (Told().logged("attempt_issued", task_id="t-1", attempt=1, task=task)
            .read([row(1, "claimed"), row(2, "source_capture_done"), _pending(body, **columns)])
            .at_end(expected={"t-1": expected}))


def test_a_history_without_a_capture_or_its_expected_body_has_nothing_wrong_for_it() -> None:
    assert judged("tasks.captures", Told().at_end(last_wait="idle")) == []
    # No expected body (the kit could not compute it), or one of another base: nothing to compare with.
    assert judged("tasks.captures", _told({"files": []}, expected=None)) == []
    assert judged("tasks.captures", _told({"files": []}, expected={**WANTED, "base_oid": "b" * 40})) == []
    # A commit task's result_pending is TASK-4's.
    assert judged("tasks.captures", _told({"files": []}, task={**CAPTURE, "kind": "commit"})) == []


def test_a_captures_result_pending_holds_the_body_the_kit_computed() -> None:
    assert judged("tasks.captures", _told(WANTED)) == []
    nested_only = {**WANTED, "files": WANTED["files"][:1]}
    (found,) = judged("tasks.captures", _told(nested_only))
    assert (found.clause, found.pointer, found.expected) == ("TASK-3", "/journal/t-1/1/3/result_body", WANTED)
    assert "no entry for the blobs ['src/a.txt']" in (found.note or "")


def test_each_way_a_capture_body_can_differ_is_named() -> None:
    files = WANTED["files"]
    cases = {
        "which are no blobs of the tree": [*files, {"path": "src", "sha256": "3" * 64}],
        "is not of the blob's bytes": [files[0], {"path": "src/a.txt", "sha256": "4" * 64}],
        "not sorted by the UTF-8 bytes": [files[1], files[0]],
        "more than once": [*files, files[0]],
    }
    for words, listed in cases.items():
        (found,) = judged("tasks.captures", _told({**WANTED, "files": listed}))
        assert words in (found.note or ""), (words, found.note)
    (other,) = judged("tasks.captures", _told({**WANTED, "base_oid": "c" * 40}))
    assert "['base_oid']" in (other.note or "")
    for text in ("not json", "[" * 100_000 + "]" * 100_000, json.dumps({**WANTED, "files": "x"})):
        (bad,) = judged("tasks.captures", _told(text))
        assert bad.clause == "TASK-3" and len(str(bad.actual)) < 300


def _pushed(told: Told, ref: str = "refs/heads/main", task_id: str | None = "t-1") -> Told:
    return told.logged("push", repository="acme/w", ref=ref, old=BASE, new="c" * 40, accepted=False,
                       task_id=task_id, attempt=1)


def test_a_capture_never_writes_to_the_origin() -> None:
    # A push the log gives a capture's attempt, even refused, is a write it tried.
    (found,) = judged("tasks.captures", _pushed(_told(WANTED)))
    assert (found.clause, found.pointer) == ("TASK-3", "/origins/acme/w/pushes")
    # A tag pushed where only captures were issued is theirs, though the log gives it no attempt.
    (tag,) = judged("tasks.captures", _pushed(_told(WANTED), "refs/tags/captured", None))
    assert "the capture tasks" in (tag.note or "")
    # Beside a commit task on the same repository, a push no capture's attempt made is the commit's.
    commit = {**CAPTURE, "task_id": "t-2", "kind": "commit"}
    both = _told(WANTED).logged("attempt_issued", task_id="t-2", attempt=1, task=commit)
    assert judged("tasks.captures", _pushed(both, task_id="t-2")) == []
