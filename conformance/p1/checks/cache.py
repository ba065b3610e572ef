"""The task cache (docs/spec/p1.md, section 6): after a power cut every cache is a whole version (CACHE-3)."""

from __future__ import annotations

from resumekit.conformance.p1.checks.story import Scenario, Story
from resumekit.conformance.results import Mismatch


def after_power_cuts(history: Story, scenario: Scenario) -> list[Mismatch]:
    """CACHE-3: each cache the kit read just after a power cut was complete, old or new, never torn or empty."""
    found = []
    for event in history.of("kit", "caches-after-cut"):
        for name, (status, raw) in sorted(event.get("caches", {}).items()):
            if status in ("torn", "unreadable"):
                note = (
                    "after a power cut the cache was torn or empty: its temporary file was not synced before the "
                    "replace"
                )
                actual = raw[:80] if raw else "empty"
                pointer = f"/caches/{name}/after-power-cut"
                expected = "a complete cache, old or new"
                found.append(Mismatch(pointer, expected, actual, "CACHE-3", note, event=event.seq))
    return found
