"""A protocol line read in bounded memory (issue 36): any line of up to 64 MiB, however it is made (millions of
tiny values, one huge string, escaped surrogates, a character beyond U+FFFF that widens the text), costs the
kit less than 500 MB, and a line over the budget of values or of string bytes errors its case naming what it
holds. Every line within the budget parses as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resumekit.conformance.adapters import MessageError, decode_message
from resumekit.conformance.adapters._bounded import MAX_STRING_BYTES, MAX_VALUES, NARROW_LINE, ascii_text
from tests.support import ROOT, python_command

VICTIM = "prefix-after-function-response"
VALUES = f"more than the {MAX_VALUES} a message may hold"
STRINGS = f"more than the {MAX_STRING_BYTES} a message may hold"
# tests/broken/adapters.py HUGE_SHAPES: the shape of the victim's line, and what its case's message must say.
SHAPES = {
    "arrays": VALUES,  # 64 MiB of "[]," (3.2 GB before)
    "strings": VALUES,  # 64 MiB of '"",' (1.1 GB before)
    "keys": VALUES,  # 4 million distinct keys of one object
    "lone-surrogates": STRINGS,  # one string of 11 million "\ud800" (a traceback before)
    "wide-string": STRINGS,  # one string of 64 million "x" and an emoji, four bytes a character (1.8 GB before)
    "padded": "the implementation reported an error: \U0001f600 after spaces",  # one emoji, then 64 MB of spaces
    "most-values": "'diagnostics' is a required property",  # 500,000 wrong operations (8.5 GB before)
    "most-string": "(16776119 characters, the first 65536 kept)",  # 16 MiB of "x" and an escaped emoji
}


@pytest.mark.skipif(sys.platform == "win32", reason="the peak is measured with wait4, which is POSIX")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_line_of_up_to_64_mib_costs_the_kit_less_than_500_mb(shape: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "resumekit.conformance", "run", "-q", "--report-json", str(report), "--adapter",
         python_command("-m", "tests.broken.adapters", "huge-values", shape), "--only", VICTIM, "--timeout", "60"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert process.stdout is not None
    output = process.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)  # the kit and the adapter it reaped: the adapter writes in pieces
    peak_mb = usage.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)
    assert peak_mb < 500, f"the kit grew to {peak_mb:.0f} MB reading a line of shape {shape!r}"
    assert os.waitstatus_to_exitcode(status) == 1, output
    assert "Traceback" not in output
    [victim] = json.loads(report.read_text(encoding="utf-8"))["results"]
    assert victim["outcome"] == "errored"
    assert SHAPES[shape] in victim["message"]


def test_the_budget_counts_values_outside_strings() -> None:
    most = b"[" + b"0," * (MAX_VALUES - 2) + b"0]"  # the array and its MAX_VALUES - 1 numbers
    assert len(decode_message(most)) == MAX_VALUES - 1
    with pytest.raises(MessageError, match=f"about {MAX_VALUES + 1} JSON values"):
        decode_message(b"[0," + most[1:])
    commas = b'["' + b"," * (2 * MAX_VALUES) + b'", {"a": "[{:"}]'  # marks inside strings are no values
    assert decode_message(commas) == ["," * (2 * MAX_VALUES), {"a": "[{:"}]
    most = b'["' + b'\\"' * (MAX_STRING_BYTES // 2) + b'", 1, 2]'  # escaped quotes end no string
    assert decode_message(most) == ['"' * (MAX_STRING_BYTES // 2), 1, 2]
    with pytest.raises(MessageError, match=f"strings hold {MAX_STRING_BYTES + 1} bytes, {STRINGS}"):
        decode_message(most.replace(b'", 1', b'x", 1'))


def test_a_long_line_that_is_not_ascii_parses_to_the_same_value() -> None:
    value = {"\u00e9": ["\u4e2d \U0001f600", "\\ud800 \u00ff"], "n": [1, 2.5, None, True]}
    line = json.dumps(value, ensure_ascii=False).encode("utf-8") + b" " * NARROW_LINE
    assert ascii_text(line).isascii()
    assert decode_message(line) == value == json.loads(line)
    with pytest.raises(MessageError, match="can't decode byte 0xff in position 7"):
        decode_message(b'{"a": "\xff"}' + b" " * NARROW_LINE)
    with pytest.raises(MessageError, match="can't decode byte 0xed in position 1048578"):  # in the second piece
        decode_message(b" " * (1 << 20) + b'"a\xed\xa0\x80"' + b" " * NARROW_LINE)  # a surrogate's UTF-8


def test_a_lone_surrogate_in_a_message_is_its_escape_and_a_pair_is_one_character() -> None:
    raw = b'{"seq": 1, "error": {"message": "\\ud800 \\ud83d\\ude00", "context": {"\\udfff": ["\\udc00"]}}}'
    assert decode_message(raw) == {
        "seq": 1, "error": {"message": "\\ud800 \U0001f600", "context": {"\\udfff": ["\\udc00"]}}
    }  # fmt: skip
    literal = b'["\\\\ud800"]'  # an escaped backslash and the letters: text, unchanged
    assert decode_message(literal) == ["\\ud800"] == json.loads(literal)
