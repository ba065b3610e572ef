"""The two ways of reading an implementation's stdout give the same lines, ends and timeouts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from resumekit.conformance._process import LineProcess, ProcessGone, ReadTimeout, _SelectedLines, _ThreadedLines
from resumekit.conformance.adapters import split_command

READERS = [_ThreadedLines] + ([_SelectedLines] if os.name != "nt" else [])
SCRIPT = (
    "import sys, time\n"
    "sys.stdout.write('one\\ntwo\\n'); sys.stdout.flush()\n"
    "time.sleep(float(sys.argv[1]))\n"
    "sys.stdout.write('three'); sys.stdout.flush()\n"
)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, "0.5"], stdout=subprocess.PIPE)
    yield process
    process.kill()
    process.wait()
    assert process.stdout is not None
    process.stdout.close()


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_lines_then_a_timeout_then_an_unterminated_tail_then_the_end(
    reader: type, child: subprocess.Popen[bytes]
) -> None:
    assert child.stdout is not None
    lines = reader(child.stdout)
    assert lines.next(10.0) == b"one\n"
    assert lines.next(10.0) == b"two\n"
    with pytest.raises(ReadTimeout, match=r"no line on stdout within 0\.01 s"):
        lines.next(0.01)
    assert lines.next(10.0).rstrip(b"\n") == b"three"
    assert lines.next(10.0) is None
    assert lines.next(0.0) is None


def test_a_process_that_exits_is_reported_gone_with_its_status() -> None:
    process = LineProcess([sys.executable, "-c", "import sys; sys.stderr.write('bye\\n'); sys.exit(4)"])
    with pytest.raises(ProcessGone, match="exited with 4"):
        process.receive(10.0)
    process.kill()
    assert "bye" in process.stderr_tail()


def test_stray_lines_are_seen_before_the_next_request() -> None:
    process = LineProcess([sys.executable, "-c", "print('noise', flush=True); import time; time.sleep(30)"])
    stray: list[bytes] = []
    deadline = time.monotonic() + 30
    while not stray and time.monotonic() < deadline:
        stray = process.pending()
        time.sleep(0.01)
    process.kill()
    assert stray == [b"noise\n"]


@pytest.mark.parametrize(
    ("command", "windows", "argv"),
    [
        ("node tests/node_impl/adapter.mjs", False, ["node", "tests/node_impl/adapter.mjs"]),
        ("'/opt/my runtime/bin/rt' --serve", False, ["/opt/my runtime/bin/rt", "--serve"]),
        (r'"C:\Program Files\Runtime\rt.exe" --serve', True, [r"C:\Program Files\Runtime\rt.exe", "--serve"]),
        (
            r"C:\tools\python.exe -m tests.broken.adapters hangs",
            True,
            [r"C:\tools\python.exe", "-m", "tests.broken.adapters", "hangs"],
        ),
        # As docs/certifying.md says: on Windows single quotes group a word but stay in it, and a backslash
        # is no escape; on POSIX both work as a shell's.
        ("node 'my adapter.mjs'", True, ["node", "'my adapter.mjs'"]),
        ("node 'my adapter.mjs'", False, ["node", "my adapter.mjs"]),
        (r"node my\ adapter.mjs", False, ["node", "my adapter.mjs"]),
        (r'node "C:\My Tools\adapter.mjs"', True, ["node", r"C:\My Tools\adapter.mjs"]),
    ],
)
def test_adapter_commands_split_like_the_platform_shell(command: str, windows: bool, argv: list[str]) -> None:
    assert split_command(command, windows=windows) == argv
