"""Verdicts that cannot overstate (issue 7): subset runs, the certified profile, expected failures,
errors before work, progress, interruption, and looking at cases."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from resumekit.conformance import _cmd_run, cli, schemas
from resumekit.conformance.cli import (
    COMMANDS,
    EXIT_CERTIFIED,
    EXIT_INTERRUPTED,
    EXIT_NOT_CERTIFIED,
    EXIT_SUBSET,
    EXIT_USAGE,
    _parser,
)
from resumekit.conformance.expectations import EXPECTATIONS
from tests.support import ROOT

REFERENCE = "python:resumekit.reference:build_resume_plan"
BROKEN = "python:tests.broken.decisions:error_counts_as_success"
CORE_ONLY = "python:tests.core_only:core_only"


def _cli(*argv: str, stdout: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    arguments = _parser().parse_args(argv)
    code = COMMANDS[arguments.command](arguments, out, err)
    return code, out.getvalue(), err.getvalue()


def _reports(tmp_path: Path) -> tuple[list[str], Path, Path, Path]:
    report, junit, summary = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "s.md"
    return ["--report-json", str(report), "--junit", str(junit), "--summary-md", str(summary)], report, junit, summary


@pytest.mark.parametrize(
    ("selection", "reason"),
    [
        (["--adapter", REFERENCE, "--only", "prefix-*", "--kills", "0"], "--only prefix-*"),
        (["--adapter", REFERENCE, "--kind", "decision"], "--kind decision"),
        (["--adapter", "reference", "--kind", "schedule", "--kills", "0"], "--kills 0"),
    ],
)
def test_a_narrowed_run_says_subset_in_every_report(selection: list[str], reason: str, tmp_path: Path) -> None:
    options, report, junit, summary = _reports(tmp_path)
    code, out, _ = _cli("run", "-q", *selection, *options)
    assert code == EXIT_SUBSET, out
    assert "SUBSET: selected cases passed (not a certification)" in out
    assert "CERTIFIED" not in out.replace("NOT CERTIFIED", "")
    assert reason in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["certified"] is False
    assert document["scope"] == "subset"
    assert document["verdict"]["status"] == "subset-passed"
    assert any(reason in why for why in document["verdict"]["reasons"])
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["resumekit.certified"] == "false"
    assert properties["resumekit.scope"] == "subset"
    assert reason in properties["resumekit.reasons"]
    markdown = summary.read_text(encoding="utf-8")
    assert "SUBSET" in markdown and "not a certification" in markdown
    assert "is certified" not in markdown


def test_a_failing_subset_is_not_certified() -> None:
    code, out, _ = _cli("run", "-q", "--adapter", BROKEN, "--kind", "decision")
    assert code == EXIT_NOT_CERTIFIED
    assert "SUBSET: selected cases did not all pass (not a certification)" in out


def test_a_whole_run_is_a_certification_and_records_its_full_selection(tmp_path: Path) -> None:
    options, report, junit, _ = _reports(tmp_path)
    code, out, _ = _cli("run", "-q", "--adapter", REFERENCE, "--seed", "9", "--timeout", "12.5", *options)
    assert code == EXIT_CERTIFIED, out
    assert "CERTIFIED: strict, Phase 0 projection only:" in out  # in-process: the decisions alone are claimed
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["certified"] is True and document["scope"] == "certification"
    assert document["verdict"]["profile"] == "strict"
    assert document["selection"] == {
        "profile": "strict",
        "only": [],
        "kinds": [],
        "kills": 200,
        "timeoutSeconds": 12.5,
        "seed": 9,  # recorded although this adapter runs no schedule
        "golden": "bundled",
        "expectations": None,
        "expectationsDigest": None,
        "faultModel": "process-crash",
    }
    assert document["resumekit"]["version"] and len(document["resumekit"]["goldenDigest"]) == 64
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["resumekit.selection.seed"] == "9"
    assert properties["resumekit.kitVersion"] == document["resumekit"]["version"]


def test_a_core_only_implementation_is_certified_for_core_and_nowhere_for_strict(tmp_path: Path) -> None:
    options, report, junit, summary = _reports(tmp_path)
    code, out, _ = _cli("run", "-q", "--adapter", CORE_ONLY, *options)  # the default profile: strict
    assert code == EXIT_CERTIFIED, out
    assert "CERTIFIED: core (strict not claimed)" in out
    assert "CERTIFIED: strict" not in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["verdict"]["profile"] == "core"
    assert document["profile"] == "core" and document["selection"]["profile"] == "strict"
    assert document["summary"]["not_claimed"] > 0
    markdown = summary.read_text(encoding="utf-8")
    assert "certified: core (strict not claimed)" in markdown
    assert "Profile `core`" in markdown and "certified: strict" not in markdown
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["resumekit.certifiedProfile"] == "core (strict not claimed)"


def test_profiles_on_the_module_narrow_the_claim_too(tmp_path: Path) -> None:
    # Issue 21, item 5: a module-level `profiles = ("core",)` was silently ignored (46 strict failures).
    code, out, _ = _cli("run", "-q", "--adapter", "python:tests.core_only_module:build_resume_plan")
    assert code == EXIT_CERTIFIED, out
    assert "CERTIFIED: core (strict not claimed)" in out


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--kills", "-5", "negative"), ("--timeout", "0", "positive"), ("--timeout", "soon", "not a number")],
)
def test_bad_arguments_are_usage_errors_before_any_work(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", "--adapter", REFERENCE, option, value])
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert option in err and message in err and "Traceback" not in err


# -- expected failures -------------------------------------------------------------------------------------


def test_expectations_round_trip_known_failures_then_an_unexpected_pass(tmp_path: Path) -> None:
    known = tmp_path / "known" / "failures.yaml"  # its folder is made before the run
    code, out, _ = _cli("run", "-q", "--adapter", BROKEN, "--write-expectations", str(known))
    assert code == EXIT_NOT_CERTIFIED
    written = yaml.safe_load(known.read_text(encoding="utf-8"))
    assert schemas.first_violation(EXPECTATIONS, written) is None
    failing = set(written["failures"])
    assert failing and all(reason for reason in written["failures"].values())

    options, report, junit, summary = _reports(tmp_path)
    code, out, _ = _cli("run", "-q", "--adapter", BROKEN, "--expect", str(known), *options)
    assert code == EXIT_CERTIFIED, out
    assert f"CERTIFIED WITH {len(failing)} KNOWN FAILURE(S): strict" in out
    assert "\nCERTIFIED: " not in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert set(document["verdict"]["knownFailures"]) == failing
    assert document["selection"]["expectations"] == str(known)
    assert len(document["selection"]["expectationsDigest"]) == 64
    assert not ET.parse(junit).getroot().findall(".//failure")
    assert f"with {len(failing)} known failure(s)" in summary.read_text(encoding="utf-8")

    # The bug is fixed: the reference passes every listed case, and the stale file fails the run.
    code, out, _ = _cli("run", "-q", "--adapter", REFERENCE, "--expect", str(known), *options)
    assert code == EXIT_NOT_CERTIFIED
    assert "UNEXPECTED PASS" in out and "NOT CERTIFIED" in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert set(document["verdict"]["unexpectedPasses"]) == failing
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert len(failures) == len(failing) and all("unexpected pass" in (f.get("message") or "") for f in failures)


def test_an_expectations_file_naming_an_unknown_case_or_breaking_its_schema_is_a_usage_error(tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("failures:\n  no-such-case: because\n", encoding="utf-8")
    code, out, err = _cli("run", "--adapter", REFERENCE, "--expect", str(unknown))
    assert code == EXIT_USAGE and out == ""
    assert "no-such-case" in err and "unknown.yaml:2" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("failures:\n  crash-p3: ''\n", encoding="utf-8")
    code, _, err = _cli("run", "--adapter", REFERENCE, "--expect", str(broken))
    assert code == EXIT_USAGE and "broken.yaml:2" in err and "expectations.json" in err


# -- errors before work ------------------------------------------------------------------------------------


def test_report_folders_are_made_before_the_run(tmp_path: Path) -> None:
    junit = tmp_path / "nodir" / "deeper" / "j.xml"
    code, _, err = _cli("run", "-q", "--adapter", REFERENCE, "--only", "prefix-*", "--junit", str(junit))
    assert code == EXIT_SUBSET, err
    assert ET.parse(junit).getroot().findall(".//testcase")


def test_an_unusable_output_path_is_refused_before_the_first_case(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    code, out, err = _cli("run", "--adapter", REFERENCE, "--junit", str(blocker / "j.xml"))
    assert code == EXIT_USAGE
    assert out == ""  # not even the header: nothing ran
    assert "--junit" in err and "cannot make its folder" in err and "Traceback" not in err
    code, _, err = _cli("run", "--adapter", REFERENCE, "--report-json", str(tmp_path))
    assert code == EXIT_USAGE and "is a directory" in err


def test_every_report_that_can_be_written_is_written_when_one_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cmd_run, "_prepare_outputs", lambda arguments, stderr: True)  # as if it broke during the run
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    report, summary = tmp_path / "r.json", tmp_path / "s.md"
    code, _, err = _cli(
        "run", "-q", "--adapter", REFERENCE, "--only", "prefix-*",
        "--junit", str(blocker / "j.xml"), "--report-json", str(report), "--summary-md", str(summary),
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "cannot write the JUnit file" in err and "Traceback" not in err
    assert json.loads(report.read_text(encoding="utf-8"))["scope"] == "subset"
    assert "SUBSET" in summary.read_text(encoding="utf-8")


@pytest.mark.skipif(os.name == "nt", reason="closing a pipe early is a POSIX idiom (`| head`)")
def test_a_broken_pipe_is_quiet() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "resumekit.conformance", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# -- looking at cases --------------------------------------------------------------------------------------


def test_show_prints_the_case_its_clauses_and_a_path_to_open() -> None:
    code, out, _ = _cli("show", "offset-equal-after-response")
    assert code == EXIT_CERTIFIED, out
    [file_line] = [line for line in out.splitlines() if line.startswith("file: ")]
    path, _, line = file_line[len("file: ") :].rpartition(":")
    assert Path(path).is_absolute() and Path(path).is_file()
    assert "offset-equal-after-response" in Path(path).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert f"{line} | " in out and "id: offset-equal-after-response" in out
    assert "expect:" in out and "events:" in out
    # The text of each clause it cites, from the spec, with where it is.
    assert "\nOFF-1 (" in out and "phase0.md:" in out and "  **OFF-1** (core)" in out


def test_show_of_an_unknown_case_suggests_close_ids() -> None:
    code, _, err = _cli("show", "crash-p3x")
    assert code == EXIT_USAGE
    assert "crash-p3" in err


def test_failure_output_names_a_file_a_user_can_open_and_the_show_command() -> None:
    code, out, _ = _cli("run", "-q", "--adapter", BROKEN, "--kind", "decision")
    assert code == EXIT_NOT_CERTIFIED
    paths = [line.split("file: ", 1)[1] for line in out.splitlines() if line.strip().startswith("file: ")]
    assert paths
    for where in paths:
        path, _, line = where.rpartition(":")
        assert Path(path).is_absolute() and Path(path).is_file() and int(line) >= 1
    assert "see it: resumekit show " in out


@pytest.mark.parametrize("command", ["run", "list", "show", "validate", "doctor"])
def test_help_of_every_command_shows_defaults_exit_codes_and_an_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    assert "exit codes:" in text and "examples:" in text and f"resumekit {command}" in text
    if command != "show":
        assert "(default: " in text
    if command == "run":
        for code in (EXIT_CERTIFIED, EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_SUBSET, EXIT_INTERRUPTED):
            assert f"\n  {code} " in text
        flat = " ".join(text.split())
        assert "(default: 200)" in flat and "(default: strict)" in flat


# -- progress and interruption -----------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_header_comes_first_and_a_terminal_gets_live_progress_with_the_kill_counter() -> None:
    terminal = _Terminal()
    code, out, _ = _cli("run", "--adapter", "reference", "--kind", "schedule", "--kills", "3", "--seed", "5",
                        stdout=terminal)  # fmt: skip
    assert code == EXIT_SUBSET, out
    first = out.splitlines()[:5]
    assert first[0].startswith("resumekit ") and "golden set" in first[0]
    assert any(line.startswith("implementation:") for line in first)
    assert any("selection:" in line and "profile strict" in line for line in first)
    assert any(line.startswith("seed:           5") for line in first)
    assert "\r" in out
    assert "kill 3/3" in out and "kill 1/3" in out


def test_off_a_terminal_progress_is_quiet_and_line_based() -> None:
    code, out, _ = _cli("run", "--adapter", "reference", "--kind", "schedule", "--kills", "4", "--seed", "5")
    assert code == EXIT_SUBSET, out
    assert "\r" not in out
    kills = [line for line in out.splitlines() if ": kill " in line]
    assert 1 <= len(kills) <= 4, kills  # a line every quarter, not one per kill
    assert any(line.startswith("schedule ") and "1 passed" in line for line in out.splitlines())


def _processes_marked(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if mark.encode() in environ:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(os.name == "nt", reason="SIGINT to a process is POSIX")
def test_ctrl_c_kills_every_process_writes_interrupted_reports_and_exits_130(tmp_path: Path) -> None:
    import signal

    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    mark = f"RESUMEKIT_TEST_MARK=interrupt-{os.getpid()}-{time.monotonic_ns()}"
    scratch = tmp_path / "tmp"  # the run's temporary folder: its scratch folders must all be gone at the end
    scratch.mkdir()
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1], "TMPDIR": str(scratch)}
    process = subprocess.Popen(
        [sys.executable, "-m", "resumekit.conformance", "run", "--adapter", "reference",
         "--only", "prefix-*", "--only", "random-crash-schedule", "--kills", "100000",
         "--report-json", str(report), "--junit", str(junit)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        seen = []
        for line in process.stdout:  # the decisions are done when the schedule starts
            seen.append(line)
            if line.startswith("decision "):
                break
        time.sleep(1.5)
        if sys.platform.startswith("linux"):
            assert len(_processes_marked(mark)) >= 2, seen  # the kit and the adapter it started
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_INTERRUPTED, out + err
    assert "Traceback" not in err, err
    assert "INTERRUPTED" in out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert schemas.first_violation(schemas.RUN_REPORT, document) is None
    assert document["interrupted"] is True and document["certified"] is False
    assert document["verdict"]["status"] == "interrupted"
    assert [r["kind"] for r in document["results"]] == ["decision"] * 4  # what finished; the schedule did not
    assert ET.parse(junit).getroot().findall(".//property[@name='resumekit.scope'][@value='interrupted']")
    if sys.platform.startswith("linux"):
        deadline = time.monotonic() + 10
        while _processes_marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_marked(mark) == []
    # The schedule's streams run on threads of their own: their folders go too, and no stream starts a writer
    # that makes its ledger's folders again below a removed one.
    assert sorted(path.name for path in scratch.glob("resumekit-*")) == []
