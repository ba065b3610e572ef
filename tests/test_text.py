"""Text the implementation sends that no report format can carry as it is (issue 36): a lone surrogate (a valid
JSON escape), NUL, ESC and the other control characters, bytes that are not UTF-8. Each is made safe where it
enters the kit, every report format writes it and parses again, the terminal shows it as escapes, and a report
file is never left cut short."""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from resumekit.conformance import _report_files, expectations
from resumekit.conformance._text import clip, decode, printable, safe, safe_value
from tests.support import ROOT, python_command

# What a report may not carry raw: C0 controls but tab and line feed, DEL, C1, surrogates, U+FFFE and U+FFFF.
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
ERRORED, SKIPPED = "prefix-after-function-response", "prefix-before-function-call"


def _kit(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "resumekit.conformance", *args], capture_output=True, cwd=ROOT, timeout=120
    )
    output = (done.stdout + done.stderr).decode("utf-8")  # the kit's output is UTF-8 whatever it was given
    assert "Traceback" not in output, output
    return done.returncode, output


class _Page(html.parser.HTMLParser):
    """The tags and the text of an HTML page, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _check_outputs(paths: dict[str, Path]) -> dict[str, Any]:
    """Parse every report *paths* names; each carries the hostile text as escapes, none of it raw."""
    texts = {name: path.read_text(encoding="utf-8") for name, path in paths.items()}
    for name, text in texts.items():
        if name != "report.json":  # JSON escapes controls itself; the others must hold none raw
            assert not UNPRINTABLE.search(text), (name, UNPRINTABLE.findall(text))
    junit = ET.parse(paths["junit.xml"]).getroot()
    error = junit.find(".//testcase[@name='prefix-after-function-response']/error")
    assert error is not None and error.text is not None
    assert "lone \\ud800 and \\udfff, NUL \\x00, ESC \\x1b[31m" in error.text
    skipped = junit.find(".//testcase[@name='prefix-before-function-call']/skipped")
    assert skipped is not None and "BEL \\x07" in skipped.get("message", "")
    page = _Page()
    page.feed(texts["page.html"])
    page.close()
    assert "script" not in page.tags, "the implementation's markup stays text"
    assert "lone \\ud800 and \\udfff, NUL \\x00, ESC \\x1b[31m" in "".join(page.text)
    assert "\\x1b[31m" in texts["summary.md"] and "\\ud800" in texts["summary.md"]
    assert json.loads(texts["badge.json"])["label"] == "resumekit"
    return json.loads(texts["report.json"])


def test_every_report_format_writes_a_lone_surrogate_and_control_characters(tmp_path: Path) -> None:
    names = ("report.json", "junit.xml", "summary.md", "page.html", "badge.json")
    paths = {name: tmp_path / name for name in names}
    known = tmp_path / "known.yaml"
    code, output = _kit(
        "run", "--adapter", python_command("-m", "tests.broken.adapters", "hostile-text"), "--only", "prefix-*",
        "--report-json", str(paths["report.json"]), "--junit", str(paths["junit.xml"]),
        "--summary-md", str(paths["summary.md"]), "--report-html", str(paths["page.html"]),
        "--badge", str(paths["badge.json"]), "--write-expectations", str(known),
    )  # fmt: skip
    assert code == 1, output
    assert not UNPRINTABLE.search(output), UNPRINTABLE.findall(output)  # no ESC reaches the terminal
    assert "ESC \\x1b[31m" in output and "\\xff\\xfe \\x00 \\x1b[2J \\xed\\xa0\\x80" in output
    document = _check_outputs(paths)
    results = {result["id"]: result for result in document["results"]}
    assert (results[ERRORED]["outcome"], results[SKIPPED]["outcome"]) == ("errored", "skipped")
    for message in (results[ERRORED]["message"], results[SKIPPED]["message"]):
        # The lone surrogates as their escapes' text, the controls as they were (JSON carries them), the pair whole.
        assert "lone \\ud800 and \\udfff, NUL \x00, ESC \x1b[31m, BEL \x07" in message
        assert "pair \U0001f600 end" in message
    assert "stderr: \\xff\\xfe \x00 \x1b[2J \\xed\\xa0\\x80 invalid UTF-8" in results[ERRORED]["stderrTail"]
    failures = expectations.load(known, results).failures  # the kit reads back the expectations it wrote
    assert "\\ud800" in failures[ERRORED] and "\\x1b" in failures[ERRORED]
    # The saved report renders again in every format.
    again = {name: tmp_path / f"again-{name}" for name in names}
    code, output = _kit(
        "report", str(paths["report.json"]), "--junit", str(again["junit.xml"]), "--summary-md",
        str(again["summary.md"]), "--report-html", str(again["page.html"]), "--badge", str(again["badge.json"]),
    )  # fmt: skip
    assert code == 1, output
    again["report.json"] = paths["report.json"]
    _check_outputs(again)


def test_a_saved_report_with_a_lone_surrogate_renders_in_every_format(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    code, output = _kit("run", "--adapter", "reference", "--only", ERRORED, "-q", "--report-json", str(saved))
    assert code == 3, output
    document = json.loads(saved.read_text(encoding="utf-8"))
    document["implementation"]["name"] = "name \ud800 \x1b[2J"  # a JSON escape the kit's own run never writes
    saved.write_text(json.dumps(document), encoding="utf-8")
    page, summary = tmp_path / "page.html", tmp_path / "summary.md"
    code, output = _kit("report", str(saved), "--report-html", str(page), "--summary-md", str(summary))
    assert code == 3, output
    for text in (page.read_text(encoding="utf-8"), summary.read_text(encoding="utf-8")):
        assert "name \\ud800 \\x1b[2J" in text
        assert not UNPRINTABLE.search(text)


# -- the one function, where text enters the kit ------------------------------------------------------


def test_safe_text_writes_lone_surrogates_as_their_escapes_and_leaves_other_text_alone() -> None:
    text = "plain \u00e9 \U0001f600 \\ud800"  # a literal backslash-u is text, not a surrogate
    assert safe(text) is text
    assert safe("a\ud800b\udfff") == "a\\ud800b\\udfff"
    assert decode(b"ok \xff \xed\xa0\x80 \xe2\x82") == "ok \\xff \\xed\\xa0\\x80 \\xe2\\x82"
    assert decode("\u00e9".encode()) == "\u00e9"
    value = json.loads('{"k\\ud800": ["\\udfff", {"ok": "\\ud83d\\ude00", "n": 1}]}')
    assert safe_value(value) == {"k\\ud800": ["\\udfff", {"ok": "\U0001f600", "n": 1}]}
    deep: list[Any] = ["\ud800"]
    for _ in range(100_000):  # no recursion, however deep
        deep = [deep]
    safe_value(deep)
    while len(deep) == 1 and isinstance(deep[0], list):
        deep = deep[0]
    assert deep == ["\\ud800"]


def test_printable_escapes_what_a_terminal_obeys_or_xml_refuses() -> None:
    assert printable("tab\tline\nend \u00e9 \U0001f600") == "tab\tline\nend \u00e9 \U0001f600"
    assert printable("\x00\x1b[2J\r\x7f\x85\x9b\ud800\ufffe\uffff") == (
        "\\x00\\x1b[2J\\x0d\\x7f\\x85\\x9b\\ud800\\ufffe\\uffff"
    )
    assert clip("x" * 10, 4) == "xxxx... (10 characters, the first 4 kept)"


# -- report files, whole or not at all ----------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_report_the_disk_refuses_leaves_the_old_file_whole(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    code, output = _kit("run", "--adapter", "reference", "--only", ERRORED, "-q", "--report-json", str(saved))
    assert code == 3, output
    page = tmp_path / "page.html"
    page.write_text("the page of the last run\n", encoding="utf-8")
    # A file-size limit below the page's size: the write fails part way, as on a full disk.
    limit = (
        "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        "sys.argv = ['resumekit', *sys.argv[1:]]; runpy.run_module('resumekit.conformance', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", limit, "report", str(saved), "--report-html", str(page)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert page.read_text(encoding="utf-8") == "the page of the last run\n"
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {page}: File too large" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "saved.json"], "no temporary left"


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need a privilege on Windows")
def test_a_report_file_is_replaced_whole_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _report_files.write(link, "new \ud800\n")  # a surrogate no safe() caught is written as its escape
    assert link.is_symlink(), "the user's link is followed, not replaced"
    assert target.read_text(encoding="utf-8") == "new \\ud800\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "report.json"]


# -- hostile P1 workers of text (tests/fuzz/p1_workers/text.py) ---------------------------------------------


@pytest.mark.skipif(sys.platform == "win32" or shutil.which("git") is None, reason="the campaign's P1 part: POSIX, git")
@pytest.mark.parametrize(
    ("name", "category"),
    [("text-in-requests", "accepted correctly"), ("cache-lone-surrogates", "clear error"),
     ("journal-log-lone-surrogates", "clear error"), ("huge-wait-answer", "clear error")],
)  # fmt: skip
def test_a_p1_worker_sending_hostile_text_ends_in_a_clear_verdict(name: str, category: str, tmp_path: Path) -> None:
    from tests.fuzz import guards, p1
    from tests.fuzz.parts import Context

    context = Context(tmp_path / "work")
    try:
        [attack] = [a for a in p1.ATTACKS if a.name == name]
        folder = context.work / "p1"
        outcome = p1.run_attack(context, attack, folder, guard=120)
        assert outcome["category"] == category, outcome["reason"]
        assert outcome["peakKb"] < 500 * 1024
        assert context.outside_writes() == 0
        assert guards.reap_orphans(context.tag) == []
        assert guards.scratch_left(folder / "tmp") == []
    finally:
        context.decoy.close()


@pytest.mark.skipif(sys.platform == "win32" or shutil.which("git") is None, reason="ref names of bytes: POSIX, git")
def test_refs_whose_names_are_not_utf8_stay_apart(tmp_path: Path) -> None:
    from resumekit.conformance.p1.origin import create_origin, read_refs

    origin = create_origin(tmp_path / "origin", {"README.md": "hello\n"})
    for name in (b"refs/heads/a\xff", b"refs/heads/a\xfe"):  # a worker can make any ref in its origin
        subprocess.run([b"git", b"update-ref", name, origin.base_oid.encode()], cwd=origin.path, check=True)
    refs = read_refs(origin.path)
    assert refs["refs/heads/a\\xff"] == refs["refs/heads/a\\xfe"] == origin.base_oid


def test_an_in_process_plan_with_a_lone_surrogate_is_made_safe() -> None:
    from resumekit.conformance.adapters import PythonAdapter

    def plan(events: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        return {"disposition": "blocked", "diagnostics": [{"code": "\ud800", "message": "\udfff\x1b"}]}

    reply = PythonAdapter(plan, name="surrogates").request("phase0.plan", events=[], profile="core")
    diagnostics = [{"code": "\\ud800", "message": "\\udfff\x1b"}]
    assert reply.value == {"plan": {"disposition": "blocked", "diagnostics": diagnostics}}
