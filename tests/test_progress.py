"""Progress for logs (issue 21, item 3): without a terminal a line comes at least every heartbeat of a long
case (cases done of how many, failures so far, time elapsed); on a terminal the status line does that."""

from __future__ import annotations

import threading
import time

from resumekit.conformance.cases import Case
from resumekit.conformance.progress import HEARTBEAT, ProgressReporter
from resumekit.conformance.results import CaseResult, Outcome, Source

BEAT = 0.05


def _case(name: str) -> Case:
    return Case(id=name, description="", clauses=(), profile="core", source=Source("x.yaml", 1))


class _Log:
    """What a reporter wrote, each write with the moment it came."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        with self.lock:
            self.lines.append((time.monotonic(), text))

    def texts(self) -> list[str]:
        with self.lock:
            return [text for _, text in self.lines]


def test_a_long_case_gets_a_line_every_heartbeat_without_a_terminal() -> None:
    log = _Log()
    progress = ProgressReporter(log.write, total=3, heartbeat=BEAT)
    progress.case_started(_case("quick"))
    progress.case_finished(CaseResult("quick", "case", Outcome.FAILED))
    progress.case_started(_case("slow-one"))
    begun = time.monotonic()
    time.sleep(BEAT * 8)
    progress.case_finished(CaseResult("slow-one", "case", Outcome.PASSED))
    progress.finish()
    beats = [text for text in log.texts() if "cases done" in text]
    assert len(beats) >= 4, log.texts()
    assert beats[0].split()[:8] == ["case", "1/3", "cases", "done,", "1", "failed", "so", "far,"], beats[0]
    assert beats[0].rstrip().endswith("at slow-one") and " s elapsed; " in beats[0]
    moments = [moment for moment, _ in log.lines if moment >= begun]
    gaps = [later - earlier for earlier, later in zip([begun, *moments], moments, strict=False)]
    assert max(gaps) < BEAT * 4, gaps  # never much longer than a beat (the machine may be busy)
    written = len(log.lines)
    time.sleep(BEAT * 3)
    assert len(log.lines) == written, "the heartbeat stops with the run"


def test_a_terminal_gets_its_status_line_and_no_heartbeat() -> None:
    log = _Log()
    progress = ProgressReporter(log.write, total=1, live=True, heartbeat=BEAT)
    progress.case_started(_case("slow-one"))
    time.sleep(BEAT * 4)
    progress.case_finished(CaseResult("slow-one", "case", Outcome.PASSED))
    progress.finish()
    assert not [text for text in log.texts() if "cases done" in text]
    assert any(text.startswith("\r[1/1]") for text in log.texts())


def test_the_default_heartbeat_is_ten_seconds_at_most() -> None:
    assert 0 < HEARTBEAT <= 10
