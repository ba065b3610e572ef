"""The checkpoint journal (docs/spec/p1.md, section 4): readable as JNL-1 says, and a fatal exit after a disk
error (JNL-8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch


def readable(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-1: every read of the journal the kit made found it readable as JNL-1 says."""
    found = []
    for event in history.of("journal", "unreadable"):
        error = str(event.get("error"))
        found.append(Mismatch("/journal", "readable as JNL-1", error, "JNL-1", error, event=event.seq))
    return found


def _disk_text(fault: Mapping[str, Any]) -> str:
    return f"({fault.get('errno')} from {fault.get('op')} #{fault.get('hit')} of the {fault.get('file')})"


def fatal_exits(history: Story, scenario: Scenario) -> list[Mismatch]:
    """JNL-8: after an injected disk error the worker exits, non-zero, through its own exit path (the marker)."""
    found = []
    for event in history.of(None, "not-as-waited"):
        fault = event.get("diskFault")
        if fault and event.get("wanted") == "exited":
            note = (
                f"after the injected disk error {_disk_text(fault)} the worker went on to be {event.get('state')} "
                "instead of exiting: it took the failed operation for a success"
            )
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
