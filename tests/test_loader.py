"""The fixture loader under hostile files, its semantic lint, and the cache of the validated golden set.

Every file here that the kit refuses must be refused with a clear error naming file and line (and pointer
where there is one), never a traceback, a hang or memory without bound; `validate` must refuse what `run`
would otherwise blame on the implementation.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from resumekit.conformance import _cache, _yaml, fixtures
from resumekit.conformance.cli import COMMANDS, EXIT_USAGE, _parser
from resumekit.conformance.fixtures import FixtureError, load_file, load_suite
from resumekit.conformance.phase0.cases import DecisionCase
from resumekit.conformance.phase0.fixtures import ledger_problems, offset_problems
from tests.support import ROOT

Write = Callable[[str, str], Path]

DECISIONS = """
schema_version: 1
kind: phase0/decisions
envelope: {invocationId: i, runId: r, sessionId: s, turnId: t, ts: 1, partial: false}
cases:
  - id: a-call-and-its-response
    description: A settled call is safe to replay.
    clauses: [OP-1]
    profile: core
    events:
      - {id: e1, role: model, author: agent, content: {kind: function_call, id: t1, name: Bash, args: {}}}
      - {id: e2, role: tool, author: tool, content: {kind: function_response, id: t1, name: Bash, result: {}}}
    expect:
      disposition: safe_replay
      requiresVerification: false
      sourceRuntimeEventHighWater: 2
      rejectionReasons: []
      operations:
        - toolCallId: t1
          toolName: Bash
          status: succeeded
          callRuntimeEventId: e1
          responseRuntimeEventId: e2
          responseIsError: false
      diagnostics: []
      replay: [e1, e2]
"""

PARSERS = pytest.mark.parametrize("parser", _yaml.PARSERS, ids=lambda parser: parser.__name__)


def _cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def _refused(path: Path, fragment: str) -> FixtureError:
    """Both ways of loading refuse *path* with a FixtureError saying *fragment*, and leave its case out."""
    pattern = "|".join(re.escape(part) for part in fragment.split("|"))
    with pytest.raises(FixtureError, match=pattern) as caught:
        load_file(path, path.parent)
    problems: list[FixtureError] = []
    kept = load_file(path, path.parent, problems)
    assert any(re.search(pattern, str(problem)) for problem in problems)
    assert caught.value.case_id is None or caught.value.case_id not in {case.id for case in kept}
    return caught.value


# -- the YAML reader: one JSON value check for everything YAML produces ------------------------------


@PARSERS
@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ("a: &x [1, *x]\n", "recursive alias", 1),
        ("a: &x {b: *x}\n", "recursive alias", 1),
        # libyaml stops at its own limit of 1,000 first ("exceeded maximum nesting depth")
        ("a: " + "[" * 1500 + "]" * 1500 + "\n", "nest", 1),
        ("a: " + "[" * 100 + "]" * 100 + "\n", f"more than {_yaml.MAX_DEPTH} deep", 1),
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 80)), f"more than {_yaml.MAX_DEPTH} deep", None),
        ("n: " + "7" * 5000 + "\n", "outside +-(2**53 - 1)", 1),
        ("n: 9007199254740992\n", "outside +-(2**53 - 1)", 1),
        ("n: 0x" + "f" * 40 + "\n", "outside +-(2**53 - 1)", 1),
        ("n: 1e999\n", "beyond a double's range", 1),
        ("a: 1\nn: .nan\n", "not a JSON number", 2),
        ("n: -.inf\n", "not a JSON number", 1),
        ("b: !!binary aGVsbG8=\n", "the tag !!binary is not allowed", 1),
        ("s: !!set {a, b}\n", "the tag !!set is not allowed", 1),
        ("t: !!timestamp 2026-01-01\n", "the tag !!timestamp is not allowed", 1),
        ("o: !!python/object:os.system {}\n", "the tag !!python/object:os.system is not allowed", 1),
        ("c: !mine x\n", "the tag !mine is not allowed", 1),
        ('s: "\\ud800"\n', "surrogate|invalid Unicode character escape", 1),  # libyaml refuses it itself
        ("1: x\n", "a mapping key must be a string, not the number 1", 1),
        ("a: 1\ntrue: x\n", "not the boolean true", 2),
        ("null: x\n", "not null", 1),
        ("? [a]\n: x\n", "a mapping key must be a string", 1),
        ("{[a]: x}\n", "a mapping key must be a string", 1),
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' at / (first on line 1)", 3),
        ("x:\n  y: 1\n  y: 2\n", "duplicate key 'y' at /x (first on line 2)", 3),
        ("a: 1\n<<: {b: 2}\n", "merge keys", 2),
        ("a: 1\n---\nb: 2\n", "more than one YAML document", 2),
        ("a: *nowhere\n", "names no anchor", 1),
        ("n: !!int x\n", "is not what its tag !!int says", 1),
    ],
)
def test_yaml_that_json_cannot_carry_is_refused_with_its_line(
    parser: type[Any], text: str, fragment: str, line: int | None
) -> None:
    with pytest.raises(_yaml.YamlError) as caught:
        _yaml.load(text, parser)
    assert any(part in caught.value.message for part in fragment.split("|"))
    if line is not None:
        assert caught.value.line == line


@PARSERS
def test_an_alias_bomb_is_refused_after_a_bounded_expansion(parser: type[Any]) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    with pytest.raises(_yaml.YamlError, match=f"aliases add more than {_yaml.MAX_ALIAS_VALUES} values") as caught:
        _yaml.load("\n".join(levels) + "\n", parser)
    assert caught.value.line is not None and caught.value.line <= 5


@PARSERS
def test_a_few_aliases_are_fine_and_keep_the_anchors_lines(parser: type[Any]) -> None:
    document = _yaml.load("base: &b {k: 1}\nuse:\n  - *b\n  - *b\n", parser)
    assert document.data == {"base": {"k": 1}, "use": [{"k": 1}, {"k": 1}]}
    assert document.line_of("/use/1") == 4
    assert document.line_of("/use/1/k") == 1


@PARSERS
def test_scalars_resolve_as_json_by_yaml_1_2_core(parser: type[Any]) -> None:
    text = (
        "a: yes\nb: on\nc: 2026-01-01\nd: true\ne: ~\nf:\ng: 0755\nh: 1_000\ni: 1:30\nj: 0x1F\nk: 0o17\n"
        "l: 1.5\nm: 1e3\nn: '12'\no: !!str 12\np: !!float 2\nq: -0\nr: .5\ns: \"\\x01\"\nt: ! 12\n"
    )
    data = _yaml.load(text, parser).data
    assert data == {
        "a": "yes", "b": "on", "c": "2026-01-01", "d": True, "e": None, "f": None, "g": 755, "h": "1_000",
        "i": "1:30", "j": 31, "k": 15, "l": 1.5, "m": 1000.0, "n": "12", "o": "12", "p": 2.0, "q": 0,
        "r": 0.5, "s": "\x01", "t": "12",
    }  # fmt: skip
    assert type(data["p"]) is float and type(data["g"]) is int


@pytest.mark.parametrize(
    ("raw", "fragment", "line"),
    [
        (b"a: 1\nb: x\x00y\n", "control character U+0000 at line 2, column 5", 2),
        (b"a: 1\x07\n", "control character U+0007 at line 1, column 5", 1),
        (b"\xff\xfea\x00:\x00 \x001\x00\n\x00", "is UTF-16", 1),
        ("a: 1\n".encode("utf-16-le"), "often UTF-16", 1),
        (b"\xfe\xff\x00a", "is UTF-16", 1),
        (b"\xff\xfe\x00\x00a\x00\x00\x00", "is UTF-32", 1),
        (b"a: 1\nb: \xc3\x28\n", "is not UTF-8: byte 0xc3", 2),
    ],
)
def test_control_characters_and_other_encodings_name_their_line(raw: bytes, fragment: str, line: int) -> None:
    with pytest.raises(_yaml.YamlError) as caught:
        _yaml.load(_yaml.decode(raw))
    assert fragment in caught.value.message
    assert caught.value.line == line


def test_both_parsers_read_every_bundled_file_alike() -> None:
    for path in fixtures.fixture_files(ROOT / "golden"):
        text = path.read_text(encoding="utf-8")
        documents = [_yaml.load(text, parser) for parser in _yaml.PARSERS]
        assert all(document == documents[0] for document in documents), path


def test_libyaml_is_used_where_pyyaml_has_it() -> None:
    if getattr(yaml, "__with_libyaml__", False):
        assert _yaml.PARSERS[0] is yaml.CSafeLoader
    assert _yaml.PARSERS[-1] is yaml.SafeLoader


# -- fixture files: each finding refused with file, line and pointer ---------------------------------


@pytest.mark.parametrize(
    ("change", "fragment", "pointer"),
    [
        (("kind: phase0/decisions", "kind: [x]"), "kind ['x'] is not one of", "/kind"),
        (("kind: phase0/decisions", "kind: {a: 1}"), "kind {'a': 1} is not one of", "/kind"),
        (("schema_version: 1", "schema_version: 1.0"), "schema_version 1.0 is not one", "/schema_version"),
        (
            ("    expect:\n", "    expectedHighWater: 2.0\n    expect:\n"),
            "2.0 is not of type 'integer'",
            "/cases/0/expectedHighWater",
        ),
        (("sourceRuntimeEventHighWater: 2", "sourceRuntimeEventHighWater: 2.0"), "2.0 is not of type 'integer'", None),
        (("ts: 1,", "ts: .nan,"), "not a JSON number", None),
        (("ts: 1,", "ts: 1" + "0" * 5000 + ","), "outside +-(2**53 - 1)", None),
        (("args: {}", "args: !!binary aGk="), "!!binary is not allowed", None),
        (("args: {}", "args: !!set {a}"), "!!set is not allowed", None),
        (("args: {}", "args: {1: x}"), "a mapping key must be a string", None),
        (("args: {}", 'args: {x: "\\udc00"}'), "surrogate|invalid Unicode character escape", None),
    ],
)
def test_a_fixture_that_is_not_json_is_refused_where_it_is(
    write_fixture: Write, change: tuple[str, str], fragment: str, pointer: str | None
) -> None:
    assert change[0] in DECISIONS
    path = write_fixture("bad.yaml", DECISIONS.replace(change[0], change[1], 1))
    error = _refused(path, fragment)
    assert error.file == "bad.yaml" and error.line is not None
    if pointer is not None:
        assert error.pointer == pointer


def test_a_failpoint_length_that_is_not_an_integer_is_refused(golden_copy: Path) -> None:
    path = golden_copy / "phase0" / "failpoints.yaml"
    text = path.read_text(encoding="utf-8")
    assert "length: 1\n" in text
    path.write_text(text.replace("length: 1\n", "length: 1.0\n", 1), encoding="utf-8")
    error = _refused(path, "1.0 is not of type 'integer'")
    assert error.pointer is not None and error.pointer.endswith("/length")
    code, _, err = _cli("validate", "--golden", str(golden_copy))
    assert code == 1 and "1.0 is not of type 'integer'" in err and "Traceback" not in err


def _failpoint_line(text: str, failpoint: str) -> str:
    """The catalog line of *failpoint*, with its line feed."""
    [line] = [line for line in text.splitlines(keepends=True) if line.startswith(f"  - {{id: {failpoint}, ")]
    return line


# Each edit breaks FP-1 in one way: (the catalog text) -> (the broken text, what the message must say).
CATALOG_BREAKS: dict[str, Callable[[str], tuple[str, str]]] = {
    "a wrong id prefix": lambda text: (text.replace("{id: P3, ", "{id: Q3, "), "'Q3' does not match"),
    "a gap": lambda text: (text.replace(_failpoint_line(text, "P3"), ""), "failpoint id 'P4' where FP-1 has 'P3'"),
    "a duplicate": lambda text: (text.replace("{id: P3, ", "{id: P2, "), "duplicate failpoint id 'P2'"),
    "ids out of order": lambda text: (
        text.replace("{id: P2, ", "{id: TMP, ").replace("{id: P3, ", "{id: P2, ").replace("{id: TMP, ", "{id: P3, "),
        "failpoint id 'P3' where FP-1 has 'P2'",
    ),
    "a leading zero": lambda text: (text.replace("{id: P1, ", "{id: P01, "), "failpoint id 'P01' where FP-1 has 'P1'"),
    "a missing last boundary": lambda text: (
        text.replace(_failpoint_line(text, "P11"), ""),
        "the catalog stops before 'P11'",
    ),
    "a boundary past P11": lambda text: (
        text + _failpoint_line(text, "P11").replace("{id: P11, ", "{id: P12, "),
        "failpoint id 'P12' is past P11",
    ),
    "the wrong committed prefix": lambda text: (
        text.replace(
            "{id: P9, boundary: Terminal run-header commit, committedPrefix: after_terminal_event",
            "{id: P9, boundary: Terminal run-header commit, committedPrefix: after_function_response",
        ),
        "failpoint 'P9' leaves the committed prefix 'after_terminal_event' (FP-1), not 'after_function_response'",
    ),
}


@pytest.mark.parametrize("break_", CATALOG_BREAKS, ids=list(CATALOG_BREAKS))
def test_validate_refuses_a_failpoint_catalog_that_contradicts_fp_1(golden_copy: Path, break_: str) -> None:
    catalog = golden_copy / "phase0" / "failpoints.yaml"
    text = catalog.read_text(encoding="utf-8")
    broken, fragment = CATALOG_BREAKS[break_](text)
    assert broken != text, "the edit no longer applies to the bundled catalog"
    catalog.write_text(broken, encoding="utf-8")
    code, out, err = _cli("validate", "--golden", str(golden_copy), str(catalog))
    assert code == 1, (out, err)
    assert "1 problem(s)" in out and "Traceback" not in err
    [problem] = [line for line in err.splitlines() if fragment in line]
    assert problem.startswith("phase0/failpoints.yaml:"), problem


def test_the_bundled_failpoint_catalog_is_fp_1s() -> None:
    cases = load_file(ROOT / "golden" / "phase0" / "failpoints.yaml", ROOT / "golden")
    crashes = [case.id for case in cases if case.id.startswith("crash-")]
    assert crashes == [f"crash-p{index}" for index in range(12)]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_validate_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "golden" / "pipe.yaml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", "validate", "--golden", str(fifo.parent), str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    assert "pipe.yaml: cannot be read: is not a regular file (a FIFO)" in done.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_validate_refuses_a_device_without_reading_it(tmp_path: Path) -> None:
    code, _, err = _cli("validate", "--golden", str(tmp_path), "/dev/zero")
    assert code == 1
    assert "cannot be read: is not a regular file (a character device)" in err


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as out:
        out.truncate(_yaml.MAX_BYTES + 1)  # sparse: nothing is written, and nothing must be read
    error = _refused(path, "cannot be read: is ")
    assert f"more than the {_yaml.MAX_BYTES}" in str(error)


def test_a_directory_named_like_a_fixture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dir.yaml"
    path.mkdir()
    _refused(path, "is not a regular file (a directory)")


# -- semantic lint: what `run` would blame on the implementation -------------------------------------


OFFSET = DECISIONS.replace("    expect:\n", "    expectedHighWater: 2\n    expect:\n", 1)


@pytest.mark.parametrize(
    ("text", "fragment", "pointer"),
    [
        (
            OFFSET.replace("expectedHighWater: 2", "expectedHighWater: 5"),
            "must hold a runtime_offset_mismatch diagnostic: expectedHighWater 5 differs from the 2 event(s) (OFF-1)",
            "/cases/0/expect/diagnostics",
        ),
        (
            OFFSET.replace("diagnostics: []", "diagnostics: [{code: runtime_offset_mismatch}]")
            .replace("rejectionReasons: []", "rejectionReasons: [runtime_offset_mismatch]")
            .replace("disposition: safe_replay", "disposition: blocked"),
            "cannot be runtime_offset_mismatch: expectedHighWater 2 equals the 2 event(s)",
            "/cases/0/expect/diagnostics/0",
        ),
        (
            DECISIONS.replace("diagnostics: []", "diagnostics: [{code: runtime_offset_mismatch}]")
            .replace("rejectionReasons: []", "rejectionReasons: [runtime_offset_mismatch]")
            .replace("disposition: safe_replay", "disposition: blocked"),
            "cannot be runtime_offset_mismatch: no expectedHighWater is given (OFF-1)",
            "/cases/0/expect/diagnostics/0",
        ),
        (
            DECISIONS.replace("toolCallId: t1", "toolCallId: t9"),
            "'t9' is not the tool-call id of its call event (OP-1)",
            "/cases/0/expect/operations/0/toolCallId",
        ),
        (
            DECISIONS.replace("toolName: Bash", "toolName: Read"),
            "'Read' is not the name its call event gives (OP-1)",
            "/cases/0/expect/operations/0/toolName",
        ),
        (
            DECISIONS.replace("callRuntimeEventId: e1", "callRuntimeEventId: e2"),
            "names no non-partial function_call event (OP-1)",
            "/cases/0/expect/operations/0/callRuntimeEventId",
        ),
        (
            DECISIONS.replace("responseRuntimeEventId: e2", "responseRuntimeEventId: e1"),
            "names no non-partial function_response with tool-call id 't1' (OP-2, OP-3)",
            "/cases/0/expect/operations/0/responseRuntimeEventId",
        ),
        (
            DECISIONS.replace(
                "diagnostics: []", "diagnostics: [{code: unmatched_tool_result, eventId: e2, toolCallId: t7}]"
            )
            .replace("rejectionReasons: []", "rejectionReasons: [dangling_tool_state]")
            .replace("disposition: safe_replay", "disposition: blocked"),
            "'t7' is not the tool-call id of event 'e2' (PLAN-3)",
            "/cases/0/expect/diagnostics/0/toolCallId",
        ),
        (
            DECISIONS.replace(
                "diagnostics: []", "diagnostics: [{code: pending_tool_result, eventId: e2, toolCallId: t1}]"
            )
            .replace("rejectionReasons: []", "rejectionReasons: [dangling_tool_state]")
            .replace("disposition: safe_replay", "disposition: blocked"),
            "names a non-partial function_call event (PLAN-2)",
            "/cases/0/expect/diagnostics/0/eventId",
        ),
        (
            DECISIONS.replace("diagnostics: []", "diagnostics: [{code: pending_tool_result, eventId: e1}]")
            .replace("rejectionReasons: []", "rejectionReasons: [dangling_tool_state]")
            .replace("disposition: safe_replay", "disposition: blocked"),
            "carries eventId and toolCallId, no more and no less (PLAN-10, PLAN-2)",
            "/cases/0/expect/diagnostics/0",
        ),
        (
            DECISIONS.replace("rejectionReasons: []", "rejectionReasons: [dangling_tool_state]").replace(
                "disposition: safe_replay", "disposition: blocked"
            ),
            "holds dangling_tool_state, which no diagnostic gives (PLAN-5)",
            "/cases/0/expect/rejectionReasons",
        ),
    ],
)
def test_an_expectation_the_clauses_contradict_is_refused(
    write_fixture: Write, text: str, fragment: str, pointer: str
) -> None:
    path = write_fixture("lint.yaml", text)
    error = _refused(path, fragment)
    assert error.pointer == pointer
    assert error.case_id == "a-call-and-its-response"


def test_the_lint_accepts_a_consistent_offset_case(write_fixture: Write) -> None:
    text = (
        OFFSET.replace("expectedHighWater: 2", "expectedHighWater: 1")
        .replace("diagnostics: []", "diagnostics: [{code: runtime_offset_mismatch}]")
        .replace("rejectionReasons: []", "rejectionReasons: [runtime_offset_mismatch]")
        .replace("disposition: safe_replay", "disposition: blocked")
    )
    path = write_fixture("ok.yaml", text)
    [case] = load_file(path, path.parent)
    assert isinstance(case, DecisionCase) and case.expected_high_water == 1


def test_offset_rules_are_pure_and_cite_off_1() -> None:
    plain = {"diagnostics": [], "rejectionReasons": []}
    assert offset_problems(3, None, plain) == []
    assert offset_problems(3, 3, plain) == []
    assert [p for p, _ in offset_problems(3, 0, plain)] == ["/diagnostics", "/rejectionReasons"]
    assert all("(OFF-1)" in message for _, message in offset_problems(3, 4, plain))


@pytest.mark.parametrize(
    ("change", "fragment", "pointer"),
    [
        (
            ("expect: {status: ok, committedRows: 3}", "expect: {status: ok, committedRows: 9}"),
            "must be 3",
            "committedRows",
        ),
        (("expect: {status: ok, committedRows: 3}", "expect: {status: corrupt, line: 4}"), "must be ok", "status"),
        (("expect: {status: corrupt, line: 2}", "expect: {status: corrupt, line: 7}"), "must be 2", "line"),
        (("expect: {status: corrupt, line: 2}", "expect: {status: ok, committedRows: 1}"), "must be corrupt", "status"),
    ],
)
def test_a_ledger_expectation_beyond_the_ledger_is_refused(
    golden_copy: Path, change: tuple[str, str], fragment: str, pointer: str
) -> None:
    path = golden_copy / "phase0" / "ledger-faults.yaml"
    text = path.read_text(encoding="utf-8")
    assert change[0] in text
    path.write_text(text.replace(change[0], change[1], 1), encoding="utf-8")
    error = _refused(path, fragment)
    assert error.pointer is not None and error.pointer.endswith(f"/expect/{pointer}")
    assert "(STORE-" in str(error)


def test_ledger_rules_are_pure() -> None:
    tear = {"kind": "tear-last-row"}
    assert ledger_problems(tear, 4, {"status": "ok", "committedRows": 3}) == []
    damage = {"kind": "damage-row", "row": 2, "damage": "zeros"}
    assert ledger_problems(damage, 4, {"status": "corrupt", "line": 2}) == []
    assert ledger_problems(damage, 4, {"status": "corrupt", "line": 5})[0][0] == "/expect/line"


@pytest.mark.parametrize("contents", [{}, {"README.md": "# golden\n"}, {"notes/todo.txt": "cases go here\n"}])
def test_validate_refuses_a_golden_folder_without_a_fixture_file(tmp_path: Path, contents: dict[str, str]) -> None:
    golden = tmp_path / "golden"
    golden.mkdir()
    for name, text in contents.items():
        (golden / name).parent.mkdir(parents=True, exist_ok=True)
        (golden / name).write_text(text, encoding="utf-8")
    code, out, err = _cli("validate", "--golden", str(golden))
    assert code == EXIT_USAGE
    assert err.splitlines() == [f"resumekit: the golden folder {str(golden)!r} holds no fixture file (*.yaml or *.yml)"]
    assert "problem" not in out


def test_a_missing_golden_folder_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    code, out, err = _cli("validate", "--golden", str(missing))
    assert code == EXIT_USAGE
    assert f"the golden folder {missing} does not exist" in err
    assert "problem" not in out
    code, _, err = _cli("list", "--golden", str(missing))
    assert code == EXIT_USAGE and "does not exist" in err
    code, _, err = _cli("run", "--golden", str(missing), "--adapter", "python:resumekit.reference:build_resume_plan")
    assert code == EXIT_USAGE
    assert f"the golden folder {missing} does not exist" in err
    assert "--only" not in err


# -- the cache of the validated golden set --------------------------------------------------------------


@pytest.fixture
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("RESUMEKIT_CACHE_DIR", str(folder))
    monkeypatch.delenv("RESUMEKIT_NO_CACHE", raising=False)
    return folder


@pytest.fixture
def small_golden(tmp_path: Path) -> Path:
    """Three of the bundled files: enough for the cache's checks, quick to parse again and again."""
    root = tmp_path / "small-golden"
    for name in ("phase0/ledger-faults.yaml", "phase0/crash-schedule.yaml", "phase0/decisions/offset.yaml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "golden" / name, root / name)
    return root


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the golden files were parsed although the cache holds them")

    monkeypatch.setattr(fixtures, "load_file", refuse)


def test_the_cache_gives_back_the_same_suite_without_parsing(
    golden_copy: Path, cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = load_suite(golden_copy)
    assert len(list(cache_folder.glob("golden-*.json"))) == 1
    with monkeypatch.context() as patch:
        _no_parsing(patch)
        cached = load_suite(golden_copy)
    assert cached == fresh
    assert cached.digest == fresh.digest
    assert load_suite(golden_copy, cache=False) == fresh


def test_a_changed_byte_is_never_served_from_the_cache(
    small_golden: Path, cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_suite(small_golden)
    path = small_golden / "phase0" / "decisions" / "offset.yaml"
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    first = next(case for case in load_suite(small_golden).cases if case.source.file.endswith(path.name))
    changed = text.replace(first.description, first.description[:-1] + "!", 1)
    assert len(changed) == len(text) and changed != text
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same size and time: only bytes differ
    suite = load_suite(small_golden)
    assert next(case for case in suite.cases if case.id == first.id).description.endswith("!")


@pytest.mark.parametrize(
    "damage",
    [
        b"\x00garbage",
        b'{"format": 1, "key": "%s", "value": [{"kind": "decision"}]}',
        b'{"format": 1, "key": "%s", "value": [{"kind": "nonsense"}]}',
        b'{"format": 1, "key": "%s", "value": 7}',
        b"[" * 100000,
    ],
)
def test_a_damaged_cache_is_ignored(small_golden: Path, cache_folder: Path, damage: bytes) -> None:
    fresh = load_suite(small_golden)
    [entry] = cache_folder.glob("golden-*.json")
    key = json.loads(entry.read_text(encoding="utf-8"))["key"]
    entry.write_bytes(damage.replace(b"%s", key.encode()) if b"%s" in damage else damage)
    assert load_suite(small_golden) == fresh


def test_an_unwritable_cache_folder_means_no_cache(
    small_golden: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("RESUMEKIT_CACHE_DIR", str(blocker / "cache"))
    assert len(load_suite(small_golden).cases) > 10


def test_no_cache_when_it_is_turned_off(
    small_golden: Path, cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESUMEKIT_NO_CACHE", "1")
    load_suite(small_golden)
    assert not cache_folder.exists()
    assert _cache.key("0" * 64) is None


def test_a_broken_file_is_refused_even_after_its_good_version_was_cached(
    small_golden: Path, cache_folder: Path
) -> None:
    load_suite(small_golden)
    path = small_golden / "phase0" / "ledger-faults.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "bad: [\n", encoding="utf-8")
    with pytest.raises(FixtureError, match=r"ledger-faults\.yaml"):
        load_suite(small_golden)


def test_concurrent_loads_share_the_cache_safely(small_golden: Path, cache_folder: Path) -> None:
    results: list[int] = []
    errors: list[BaseException] = []

    def load() -> None:
        try:
            results.append(len(load_suite(small_golden).cases))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(results)) == 1
    assert not list(cache_folder.glob(".golden-*"))


def test_list_reads_the_cache_without_importing_jsonschema(cache_folder: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from resumekit.conformance.cli import main
        main(["list"])
        print("jsonschema" in sys.modules)
        """
    )
    env = {**os.environ, "RESUMEKIT_CACHE_DIR": str(cache_folder)}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env, cwd=ROOT, timeout=120)
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "False"


def test_version_is_answered_before_the_kit_is_loaded() -> None:
    code = textwrap.dedent(
        """
        import sys
        from resumekit.conformance.cli import main
        code = main(["--version"])
        print(code, sorted(m for m in sys.modules if m.startswith("resumekit.")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    version_line, loaded = done.stdout.splitlines()
    assert version_line.startswith("resumekit ")
    # The command line and the constants it shows; no registry, harness, adapter or process module.
    assert loaded == "0 ['resumekit.conformance', 'resumekit.conformance._defaults', 'resumekit.conformance.cli']"
