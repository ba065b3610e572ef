"""Adapter-protocol servers that each misbehave in one way: ``python -m tests.broken.adapters MODE``.

Each is the reference server with one thing bent. The kit must give each the verdict named in
``VERDICTS`` and must never hang on any of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from resumekit.reference.adapter import Harness, serve

# The case each disruptive mode picks on; every other case is answered properly.
VICTIM = "prefix-after-function-response"


class AckBeforeDurable(Harness):
    """Acknowledges an append at once and writes it only when the next request arrives."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[dict[str, Any]] = []

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("cmd") != "phase0.store.append":
            self._flush()
        return super().handle(request)

    def _flush(self) -> None:
        store = self._store
        while self._pending and store is not None:
            store.append(self._pending.pop(0))

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        self._flush()
        self._pending.append(request["event"])
        store = self._open_store()
        return {"rows": len(store.read().events) + len(self._pending)}


class FinallyAnyway(Harness):
    """Runs its cleanup (and writes the exit marker) after every append, not only on exit."""

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return super()._store_append(request)
        finally:
            self._markers_written = False
            self.write_markers()


class NeverWritesMarker(Harness):
    """Accepts phase0.crash.arm but writes the marker on no exit path at all."""

    def write_markers(self) -> None:
        pass


class NotDeterministic(Harness):
    """Stamps each plan with the time it was made."""

    def _project(self, events: Any, request: dict[str, Any]) -> dict[str, Any]:
        plan = super()._project(events, request)
        plan["computedAtNs"] = time.perf_counter_ns()
        return plan


class RewritesLedger(Harness):
    """Normalises the ledger file (sorted keys) whenever it plans from it."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_plan(request)
        path = self._open_store().ledger_path
        rows = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        path.write_bytes(b"".join(json.dumps(row, sort_keys=True).encode() + b"\n" for row in rows))
        return answer


class RewritesSameBytes(Harness):
    """Writes the ledger back, byte for byte the same, after every read (STORE-6: a rewrite all the same)."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        path = self._open_store().ledger_path
        if path.exists():
            data = path.read_bytes()
            with open(path, "r+b") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        return answer


class RecreatesLedger(Harness):
    """Removes the ledger after every read and writes a new file with the same bytes and times."""

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        self._reopen = dict(request)
        return super()._store_open(request)

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        path = self._open_store().ledger_path
        if path.exists():
            data, info = path.read_bytes(), path.stat()
            self.close_store()  # let go of the append handle, as a store that swaps files would
            path.unlink()
            path.write_bytes(data)
            os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
            self._store_open(self._reopen)
        return answer


class TouchesLedger(Harness):
    """Sets the ledger's modification time to now after every read, bytes untouched."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        path = self._open_store().ledger_path
        if path.exists():
            os.utime(path)
        return answer


class CreatesOnFirstRead(Harness):
    """Leaves an empty file beside the ledger on the first read of each process (a recovery flag)."""

    def __init__(self) -> None:
        super().__init__()
        self._first_read = True

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        if self._first_read:
            self._first_read = False
            (self._open_store().ledger_path.parent / "recovered.flag").touch()
        return answer


class SurfacesTornRow(Harness):
    """Parses the uncommitted tail and, when it happens to be JSON, returns it as an event."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        path: Path = self._open_store().ledger_path
        if answer.get("status") == "ok" and answer.get("tornTail"):
            tail = path.read_bytes()[answer["tornTail"]["offset"] :]
            with contextlib.suppress(ValueError):
                answer["events"].append(json.loads(tail))
        return answer


class AcceptsForeignRows(Harness):
    """Reads rows of any session or run, as a store that never checks identity (STORE-10)."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        from resumekit.reference.phase0.store import CorruptLedger, parse_ledger

        path: Path = self._open_store().ledger_path
        try:
            read = parse_ledger(path, path.read_bytes() if path.exists() else b"")  # no run: any identity
        except CorruptLedger as error:
            return {"status": "corrupt", "line": error.line, "message": str(error)}
        tail = None if read.torn_tail is None else {"offset": read.torn_tail.offset, "length": read.torn_tail.length}
        return {"status": "ok", "events": list(read.events), "tornTail": tail}


class CutsInvalidTail(Harness):
    """Cuts whatever follows the last line feed before an append, torn or not (STORE-9)."""

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        path: Path = self._open_store().ledger_path
        if path.exists():
            data = path.read_bytes()
            with open(path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
                os.fsync(handle.fileno())
        return super()._store_append(request)


class ReturnsUnterminatedObject(Harness):
    """Reads any JSON object after the last line feed as a committed row, RuntimeEvent or not (TORN-1)."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        from resumekit.reference.phase0.store import CorruptLedger, parse_ledger

        store = self._open_store()
        path: Path = store.ledger_path
        data = path.read_bytes() if path.exists() else b""
        committed = data[: data.rfind(b"\n") + 1]
        try:
            read = parse_ledger(path, committed, (store.session_id, store.run_id))
        except CorruptLedger as error:
            return {"status": "corrupt", "line": error.line, "message": str(error)}
        events, tail = list(read.events), None
        if len(data) > len(committed):
            tail = {"offset": len(committed), "length": len(data) - len(committed)}
            with contextlib.suppress(ValueError):
                value = json.loads(data[len(committed) :])
                if isinstance(value, dict):
                    events.append(value)
                    tail = None
        return {"status": "ok", "events": events, "tornTail": tail}


class Hangs(Harness):
    """Never answers the plan for one case."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            time.sleep(3600)
        return super()._plan(request)


class CrashesMidRun(Harness):
    """Dies without a word on one case, after saying why on stderr."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            print("broken adapter: giving up on this case", file=sys.stderr, flush=True)
            os._exit(3)
        return super()._plan(request)


class PrintsGarbage(Harness):
    """Prints a debugging line to stdout before one answer."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            out = sys.__stdout__
            assert out is not None
            out.buffer.write(b"DEBUG computing the plan...\n")
            out.buffer.flush()
        return super()._plan(request)


class LateStrayOutput(Harness):
    """Prints a debugging line to stdout a moment after answering each read: stray output between exchanges."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        threading.Timer(0.05, _raw, args=(b"DEBUG read done\n",)).start()
        return super()._store_read(request)


class SloppyMessages(Harness):
    """Acknowledges appends with the row count as a string: breaks the result schema."""

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"rows": str(super()._store_append(request)["rows"])}


class ExtraField(Harness):
    """Adds a field of its own to every read result: breaks the result schema (no additional properties)."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**super()._store_read(request), "cachedRows": 0}


class ExtraHelloField(Harness):
    """Adds a field of its own to the hello result: breaks the hello schema."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**super()._hello(request), "debug": True}


class P1WaitWithExtraField(Harness):
    """Adds a field of its own to every p1.worker.wait result: breaks that result's schema."""

    def _worker_wait(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**super()._worker_wait(request), "debug": True}


class NoJournalClaim(Harness):
    """The reference with p1.journal left out of its claims: its worker is sound, but the kit gets no JNL-5
    evidence, so every P1 scenario fails on ADP-1 and no gate may read passed."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._hello(request)
        return {**answer, "capabilities": [c for c in answer["capabilities"] if c != "p1.journal"]}


class HidesTornTail(Harness):
    """Reports no torn tail even when the ledger ends in one."""

    def _store_read(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_read(request)
        if answer.get("status") == "ok":
            answer["tornTail"] = None
        return answer


class NamesTheKitsPid(Harness):
    """Reports its parent, the kit, as the process to kill."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        return {"pid": os.getppid()}


class ChattyHello(Harness):
    """Greets on stdout before its hello answer, as a logging library set up to print might."""

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        out = sys.__stdout__
        assert out is not None
        out.buffer.write(b"runtime starting up\n")
        out.buffer.flush()
        return super()._hello(request)


class Declines(Harness):
    """Declines one case on purpose (a `skipped` answer): never a pass, and against certification."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("case") == VICTIM:
            return {"seq": request["seq"], "skipped": {"reason": "declined on purpose"}}
        return super().handle(request)


# -- hostile adapters (issue 12): each takes its argument from the command line after the mode -----------


def _argument() -> str:
    return sys.argv[2] if len(sys.argv) > 2 else ""


def _raw(line: bytes) -> None:
    out = sys.__stdout__
    assert out is not None
    out.buffer.write(line)
    out.buffer.flush()


class LocatesOutside(Harness):
    """Names a file outside the workspace (the command-line argument) as its ledger."""

    def _ledger_locate(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._ledger_locate(request)
        return {"path": _argument()}


class LinksOutside(Harness):
    """Names a link inside the workspace that points at a file outside it (the argument) as its ledger."""

    def _ledger_locate(self, request: dict[str, Any]) -> dict[str, Any]:
        ledger = Path(super()._ledger_locate(request)["path"])
        link = ledger.parent / "ledger-link.jsonl"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(_argument())
        return {"path": str(link)}


class NamesAStranger(Harness):
    """Reports an unrelated process (its pid is the argument) as the one to kill."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        return {"pid": int(_argument())}


class NamesAHugePid(Harness):
    """Reports 2**40 as the process to kill."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        return {"pid": 2**40}


class GrandchildHoldsPipes(Harness):
    """Starts a grandchild that inherits stdout and stderr (its pid appended to the argument file),
    then dies on one case, leaving the grandchild holding both pipes."""

    def __init__(self) -> None:
        super().__init__()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL)
        with open(_argument(), "a", encoding="utf-8") as pids:
            pids.write(f"{child.pid}\n")

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            os._exit(3)
        return super()._plan(request)


class HangsWithGrandchild(GrandchildHoldsPipes):
    """As grandchild-holds-pipes, but ignores stop and end of input: it never exits by itself."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("cmd") == "stop":
            time.sleep(3600)
        return super().handle(request)

    def shutdown(self) -> None:
        time.sleep(3600)


class EndlessOutput(Harness):
    """Answers one case with bytes that keep coming, slowly, and never end in a newline."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            while True:
                _raw(b"x" * 1024)
                time.sleep(0.005)
        return super()._plan(request)


class HugeLine(Harness):
    """Answers one case with a line of 100 MB."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            _raw(b'{"seq": ' + str(request["seq"]).encode() + b', "result": {"pad": "' + b"x" * 100_000_000 + b'"}}\n')
            time.sleep(3600)
        return super()._plan(request)


# Lines of up to the protocol's 64 MiB, each the worst of one shape for the kit's memory: a head, a unit
# repeated (``%d`` in it numbered) as often as fits, a last value and a tail. The shapes of a result are JSON
# values by the million; those of an error's message one huge string (ASCII, widened by an emoji, escaped
# pairs, lone surrogates); "nested" is values under the depth limit; "padded" a small message with one emoji
# after 60 MB of spaces. The "most-" shapes stay just within the kit's budgets: the most values (many
# schema errors), the longest strings (four bytes a character).
_MIB = 1024 * 1024
_RESULT = (b'{"seq": %d, "result": {"plan": [', b"]}}")
_MESSAGE = (b'{"seq": %d, "error": {"message": "', b'"}}')
_OPERATIONS = b'{"seq": %d, "result": {"plan": {"disposition": "blocked", "operations": ['
HUGE_SHAPES: dict[str, tuple[bytes, bytes, bytes, bytes, int]] = {
    "arrays": (_RESULT[0], b"[],", b"[]", _RESULT[1], 64 * _MIB),
    "objects": (_RESULT[0], b"{},", b"{}", _RESULT[1], 64 * _MIB),
    "numbers": (_RESULT[0], b"0,", b"0", _RESULT[1], 64 * _MIB),
    "strings": (_RESULT[0], b'"",', b'""', _RESULT[1], 64 * _MIB),
    "nested": (_RESULT[0], b"[" * 120 + b"]" * 120 + b",", b"0", _RESULT[1], 64 * _MIB),
    "keys": (b'{"seq": %d, "result": {"plan": {', b'"k%09d": 0, ', b'"end": 0', b"}}}", 64 * _MIB),
    "context": (b'{"seq": %d, "error": {"message": "many", "context": {"x": [', b"[],", b"0", b"]}}}", 64 * _MIB),
    "string": (_MESSAGE[0], b"x", b"", _MESSAGE[1], 64 * _MIB),
    "wide-string": (_MESSAGE[0], b"x", "\U0001f600".encode("utf-8"), _MESSAGE[1], 64 * _MIB),
    "pairs": (_MESSAGE[0], b"\\ud83d\\ude00", b"", _MESSAGE[1], 64 * _MIB),
    "lone-surrogates": (_MESSAGE[0], b"\\ud800", b"", _MESSAGE[1], 64 * _MIB),
    "padded": (b'{"seq": %d, "error": {"message": "\xf0\x9f\x98\x80 after spaces"}}', b" ", b"", b"", 64 * _MIB),
    "most-values": (_OPERATIONS, b"{},", b"{}", b"]}}}", 1_499_000),
    "most-string": (_MESSAGE[0], b"x", b"\\ud83d\\ude00", _MESSAGE[1], 16 * _MIB - 64),
}


class HugeValues(Harness):
    """Answers one case with a long line of the shape the argument names (``HUGE_SHAPES``), written in pieces
    so that this process stays small."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("case") != VICTIM:
            return super().handle(request)
        head, unit, last, tail, size = HUGE_SHAPES[_argument()]
        numbered = b"%d" in unit
        first = head % request["seq"]
        count = (size - 1024 - len(first) - len(last) - len(tail)) // len(unit % 0 if numbered else unit)
        out = sys.__stdout__
        assert out is not None
        out.buffer.write(first)
        for start in range(0, count, 1 << 16):
            numbers = range(start, min(count, start + (1 << 16)))
            out.buffer.write(b"".join(unit % n for n in numbers) if numbered else unit * len(numbers))
        out.buffer.write(last + tail + b"\n")
        out.buffer.flush()
        return None


class HugeStderr(Harness):
    """Writes the argument's count of megabytes to stderr on one case, in one line, then answers."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            err = sys.__stderr__
            assert err is not None
            block = b"e" * (1 << 20)
            for _ in range(int(_argument())):
                err.buffer.write(block)
            err.buffer.write(b"\nlast words\n")
            err.buffer.flush()
        return super()._plan(request)


BAD_REPLIES = {
    "nan": lambda seq: b'{"seq": %d, "result": {"plan": {"x": NaN}}}' % seq,
    "infinity": lambda seq: b'{"seq": %d, "result": {"plan": {"x": -Infinity}}}' % seq,
    "overflow": lambda seq: b'{"seq": %d, "result": {"plan": {"x": 1e400}}}' % seq,
    "deep": lambda seq: b'{"seq": %d, "result": {"plan": ' % seq + b"[" * 200_000 + b"]" * 200_000 + b"}}",
    "seq-float": lambda seq: b'{"seq": %d.0, "result": {"plan": {}}}' % seq,
    # More garbage, for the campaign (tests/fuzz): each line is one way a reply can be wrong.
    "seq-true": lambda seq: b'{"seq": true, "result": {"plan": {}}}',
    "seq-huge": lambda seq: b'{"seq": %d, "result": {"plan": {}}}' % 2**70,
    "seq-stale": lambda seq: b'{"seq": %d, "result": {"plan": {}}}' % (seq - 1),
    "seq-missing": lambda seq: b'{"result": {"plan": {}}}',
    "binary": lambda seq: bytes(range(256)).replace(b"\n", b""),
    "invalid-utf8": lambda seq: b'{"seq": %d, "result": {"plan": "\xff\xfe"}}' % seq,
    "nul": lambda seq: b'{"seq": %d, "result": {"plan": "a\x00b"}}' % seq,
    "empty-line": lambda seq: b"",
    "array": lambda seq: b"[%d, {}]" % seq,
    "string": lambda seq: b'"hello"',
    "both": lambda seq: b'{"seq": %d, "result": {"plan": {}}, "error": {"message": "x"}}' % seq,
    "neither": lambda seq: b'{"seq": %d}' % seq,
    "two-answers": lambda seq: b'{"seq": %d, "result": {"plan": {}}}\n{"seq": %d, "result": {"plan": {}}}' % (seq, seq),
    "error-no-message": lambda seq: b'{"seq": %d, "error": {}}' % seq,
    "skipped-no-reason": lambda seq: b'{"seq": %d, "skipped": {}}' % seq,
    "duplicate-keys": lambda seq: b'{"seq": %d, "seq": %d, "result": {"plan": {}}}' % (seq, seq + 1),
    "huge-int": lambda seq: b'{"seq": %d, "result": {"plan": {"x": %s}}}' % (seq, b"9" * 100_000),
    "deep-object": lambda seq: (
        b'{"seq": %d, "result": {"plan": ' % seq + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}}"
    ),
    "lone-surrogate": lambda seq: b'{"seq": %d, "result": {"plan": {"x": "\\ud800"}}}' % seq,
    "bom": lambda seq: b'\xef\xbb\xbf{"seq": %d, "result": {"plan": {}}}' % seq,
}


class BadJson(Harness):
    """Answers one case with the reply of BAD_REPLIES named by the argument."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("case") == VICTIM:
            _raw(BAD_REPLIES[_argument()](request["seq"]) + b"\n")
            return None
        return super().handle(request)


class StartsOnce(Harness):
    """Starts properly once (the argument file marks it), dies on its first plan, then hangs at every start."""

    def __init__(self) -> None:
        super().__init__()
        flag = Path(_argument())
        if flag.exists():
            time.sleep(3600)
        flag.write_text("started\n", encoding="utf-8")

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        os._exit(5)


class BadHello(Harness):
    """Fails its hello in the way the argument names: exit, hang, protocol-2, garbage, error, empty."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("cmd") != "hello":
            return super().handle(request)
        how = _argument()
        if how == "exit":
            os._exit(0)
        if how == "hang":
            time.sleep(3600)
        if how == "garbage":
            _raw(b"\x00\x01 not a reply\n")
            return None
        if how == "error":
            return {"seq": request["seq"], "error": {"message": "not today"}}
        answer = super().handle(request)
        assert answer is not None
        if how == "protocol-2":
            answer["result"]["protocol"] = 2
        elif how == "empty":
            answer["result"]["capabilities"] = []
        elif how == "unknown-capability":
            answer["result"]["capabilities"] = ["phase9.teleport"]
        return answer


class NamesAPid(Harness):
    """Reports the argument, decoded as JSON, as the process to kill: 0, -1, 1, true, "12", null."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        return {"pid": json.loads(_argument())}


class NamesTheKitsParent(Harness):
    """Reports the kit's parent (the adapter's grandparent) as the process to kill."""

    def _crash_arm(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._crash_arm(request)
        kit = os.getppid()
        stat = Path(f"/proc/{kit}/stat").read_text()
        return {"pid": int(stat.rsplit(")", 1)[1].split()[1])}


class LocatesOdd(Harness):
    """Names an odd ledger: relative, the workspace folder, a missing file, /dev/zero, a NUL, a number."""

    def _ledger_locate(self, request: dict[str, Any]) -> dict[str, Any]:
        ledger = Path(super()._ledger_locate(request)["path"])
        how = _argument()
        workspace = ledger.parents[4]
        path: object = {
            "relative": "sessions/session-1/runs/run-1/runtime-events.jsonl",
            "folder": str(workspace),
            "missing": str(ledger.parent / "no-such.jsonl"),
            "dev-zero": "/dev/zero",
            "nul": str(ledger) + "\0.txt",
            "number": 7,
            "dotdot": str(ledger.parent / ".." / ".." / ".." / ".." / ".." / "escaped.jsonl"),
        }[how]
        return {"path": path}


class ClosesStdout(Harness):
    """Closes its stdout on one case and stays alive."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("case") == VICTIM:
            os.close(1)
            time.sleep(3600)
        return super()._plan(request)


# Text no report format can carry as it is: a lone surrogate (valid as a JSON escape), NUL, ESC and other
# control characters, markup, and a surrogate pair that must come through whole.
HOSTILE_TEXT = r"lone \ud800 and \udfff, NUL \u0000, ESC \u001b[31m, BEL \u0007, VT \u000b, FF \u000c, " \
    r"DEL \u007f, C1 \u0085, \ufffe, ]]> </td><script>x</script> & pair \ud83d\ude00 end"


class HostileText(Harness):
    """Answers one case with an error and another with a skip whose text is ``HOSTILE_TEXT``, on stderr too."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("case") not in (VICTIM, "prefix-before-function-call"):
            return super().handle(request)
        err = sys.__stderr__
        assert err is not None
        err.buffer.write(b"stderr: \xff\xfe \x00 \x1b[2J \xed\xa0\x80 invalid UTF-8\n")
        err.buffer.flush()
        kind, field = ("error", "message") if request["case"] == VICTIM else ("skipped", "reason")
        text = HOSTILE_TEXT.encode("ascii")
        context = b', "context": {"%s": ["%s"]}' % (text, text) if kind == "error" else b""
        _raw(b'{"seq": %d, "%s": {"%s": "%s"%s}}\n' % (request["seq"], kind.encode(), field.encode(), text, context))
        return None


class StderrFlood(Harness):
    """Writes many short lines to stderr before each plan, then answers."""

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        err = sys.__stderr__
        assert err is not None
        err.write("a log line\n" * 20_000)
        err.flush()
        return super()._plan(request)



# -- Phase 0 checks that must not pass without evidence (issue 19) -------------------------------------


class PlansNothing(Harness):
    """Answers every phase0.store.plan with a corrupt result, though its read of the same ledger succeeds."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        self._open_store()
        return {"status": "corrupt", "line": 1, "message": "no plan from this store"}


class PlansOneTooHigh(Harness):
    """Counts one event more than the committed prefix holds as its plans' high-water (PLAN-1)."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_plan(request)
        if answer.get("status") == "ok":
            answer["plan"]["sourceRuntimeEventHighWater"] += 1
        return answer


class CountsOwnAppends(Harness):
    """Acknowledges each append with the rows this process appended, not the rows the ledger holds (STORE-1)."""

    def __init__(self) -> None:
        super().__init__()
        self._appended = 0

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        self._appended = 0
        return super()._store_open(request)

    def _store_append(self, request: dict[str, Any]) -> dict[str, Any]:
        super()._store_append(request)
        self._appended += 1
        return {"rows": self._appended}


class CachesLongPlans(Harness):
    """Keeps a plan cache beside a ledger longer than any failpoint's four rows, written by each plan (STORE-6)."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_plan(request)
        if answer.get("status") == "ok" and answer["plan"]["sourceRuntimeEventHighWater"] > 4:
            cache = self._open_store().ledger_path.with_name("plan-cache.json")
            cache.write_text(json.dumps(answer["plan"]), encoding="utf-8")
        return answer


class LocatesACopy(Harness):
    """Names a copy of its ledger in phase0.ledger.locate and reads the ledger itself: damage never reaches it."""

    def _ledger_locate(self, request: dict[str, Any]) -> dict[str, Any]:
        ledger = self._open_store().ledger_path
        copy = ledger.with_name("runtime-events.copy.jsonl")
        copy.write_bytes(ledger.read_bytes() if ledger.exists() else b"")
        return {"path": str(copy)}


class RefreshesLocatedCopy(LocatesACopy):
    """As locates-a-copy, and writes the copy afresh from its ledger at every open: the kit's damage is undone."""

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_open(request)
        ledger = self._open_store().ledger_path
        copy = ledger.with_name("runtime-events.copy.jsonl")
        if copy.exists():
            copy.write_bytes(ledger.read_bytes() if ledger.exists() else b"")
        return answer


class CutsTornTailAtOpen(Harness):
    """Cuts a torn tail as soon as the store is opened, not at the next append: no read can report it (STORE-1)."""

    def _store_open(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_open(request)
        path = self._open_store().ledger_path
        data = path.read_bytes() if path.exists() else b""
        if not data.endswith(b"\n") and data:
            with open(path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
                os.fsync(handle.fileno())
        return answer


class ReplaysAfterCrash(Harness):
    """Plans every reopened ledger as safe to replay, a dangling call included (PLAN-6, PLAN-7): unsafe (GRADE-1)."""

    def _store_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = super()._store_plan(request)
        plan = answer.get("plan")
        if answer.get("status") == "ok" and isinstance(plan, dict):
            plan.update(disposition="safe_replay", requiresVerification=False, rejectionReasons=[], diagnostics=[])
            plan.pop("directive", None)
        return answer


class PlansBeyondVocabulary(Harness):
    """Plans in words the contract does not have, hostile ones: a readable plan every value of which is wrong.

    The kit must fail each case (not err, not hang, not grow without bound), listing a bounded number of
    places with their clauses; the values carry controls, lone surrogates and a megabyte-long code.
    """

    def _plan(self, request: dict[str, Any]) -> dict[str, Any]:
        plan = super()._plan(request)["plan"]
        weird = "parked\x1b[2J\ud800\u0085"
        plan["disposition"] = "maybe" + weird
        plan["rejectionReasons"] = [f"reason-{n}{weird}" for n in range(2000)]
        plan["operations"] = [
            {"toolCallId": f"t{n}", "toolName": weird, "args": {"blob": "x" * 512}, "status": weird, "extra": n}
            for n in range(2000)
        ]
        plan["diagnostics"] = [{"code": "c" * 1_000_000 + weird, "detail": {"deep": [[[[weird]]]]}}]
        return {"plan": plan}


MODES: dict[str, type[Harness]] = {
    "declines": Declines,
    "ack-before-durable": AckBeforeDurable,
    "finally-anyway": FinallyAnyway,
    "never-writes-marker": NeverWritesMarker,
    "not-deterministic": NotDeterministic,
    "rewrites-ledger": RewritesLedger,
    "rewrites-same-bytes": RewritesSameBytes,
    "recreates-ledger": RecreatesLedger,
    "touches-ledger": TouchesLedger,
    "creates-on-first-read": CreatesOnFirstRead,
    "surfaces-torn-row": SurfacesTornRow,
    "accepts-foreign-rows": AcceptsForeignRows,
    "cuts-invalid-tail": CutsInvalidTail,
    "returns-unterminated-object": ReturnsUnterminatedObject,
    "hangs": Hangs,
    "crashes-mid-run": CrashesMidRun,
    "prints-garbage": PrintsGarbage,
    "chatty-hello": ChattyHello,
    "sloppy-messages": SloppyMessages,
    "late-stray-output": LateStrayOutput,
    "names-the-kits-pid": NamesTheKitsPid,
    "extra-field": ExtraField,
    "extra-hello-field": ExtraHelloField,
    "p1-wait-extra-field": P1WaitWithExtraField,
    "no-journal-claim": NoJournalClaim,
    "hides-torn-tail": HidesTornTail,
    "locates-outside": LocatesOutside,
    "links-outside": LinksOutside,
    "names-a-stranger": NamesAStranger,
    "names-a-huge-pid": NamesAHugePid,
    "grandchild-holds-pipes": GrandchildHoldsPipes,
    "hangs-with-grandchild": HangsWithGrandchild,
    "endless-output": EndlessOutput,
    "huge-line": HugeLine,
    "huge-stderr": HugeStderr,
    "huge-values": HugeValues,
    "bad-json": BadJson,
    "starts-once": StartsOnce,
    "bad-hello": BadHello,
    "names-a-pid": NamesAPid,
    "names-the-kits-parent": NamesTheKitsParent,
    "locates-odd": LocatesOdd,
    "closes-stdout": ClosesStdout,
    "stderr-flood": StderrFlood,
    "hostile-text": HostileText,
    "plans-nothing": PlansNothing,
    "plans-one-too-high": PlansOneTooHigh,
    "counts-own-appends": CountsOwnAppends,
    "caches-long-plans": CachesLongPlans,
    "locates-a-copy": LocatesACopy,
    "refreshes-located-copy": RefreshesLocatedCopy,
    "cuts-torn-tail-at-open": CutsTornTailAtOpen,
    "replays-after-crash": ReplaysAfterCrash,
    "plans-beyond-vocabulary": PlansBeyondVocabulary,
}


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
    sys.exit(serve(sys.stdin, sys.stdout, harness=MODES[sys.argv[1]]()))
