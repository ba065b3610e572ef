"""The process adapter: protocol v1 over JSON lines with a long-lived child process (docs/adapter-protocol.md).

Whatever goes wrong on the other side (an exit, a hang, garbage on stdout, a message that breaks its
schema) comes back as a ``Reply`` with outcome ``errored``, and the next request starts a fresh process;
nothing here raises into the runner once the handshake has succeeded.
"""

from __future__ import annotations

import collections
import contextlib
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resumekit.conformance import PROTOCOL_VERSION, __version__, _files, schemas
from resumekit.conformance._defaults import DEFAULT_TIMEOUT
from resumekit.conformance._process import LineProcess, ProcessGone, ReadTimeout
from resumekit.conformance._text import clip
from resumekit.conformance.adapters.budget import StartBudget
from resumekit.conformance.adapters.interface import AdapterStartError, Reply
from resumekit.conformance.adapters.messages import (
    CHECKED_EVENTS,
    EVENTS_SENT,
    RESULT_SCHEMAS,
    MessageError,
    decode_message,
    hello_problem,
    is_integer,
    preview,
)
from resumekit.conformance.results import Implementation

TRANSCRIPT_LENGTH = 8
# Characters the kit keeps of a message about a reply (the implementation's error message or skip reason, a
# schema violation quoting the value): the reports carry it in every format, and a line may be 64 MiB.
MESSAGE_LIMIT = 64 * 1024
# Characters kept of each field of the hello's implementation (name, version, language, homepage).
NAME_LIMIT = 1024


class ProcessAdapter:
    """Talks protocol v1 to a long-lived child process, restarting it after any failure."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        label: str = "",
        timeout: float = DEFAULT_TIMEOUT,
        validate_messages: bool = True,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        budget: StartBudget | None = None,
    ) -> None:
        self.argv = list(argv)
        self.budget = budget if budget is not None else StartBudget()
        self.label = label or shlex.join(self.argv)
        self.timeout = timeout
        self.validate_messages = validate_messages
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        # The token of the P1 case whose processes these are (``factory.with_marker``): on Linux each process
        # starts below a subreaper that the case's sweep ends (``_process.reapers``).
        self.case_token: str | None = None
        self.process: LineProcess | None = None
        self.restarts = 0
        self._seq = 0
        self._transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_LENGTH)
        self.implementation = Implementation(name=self.label, version="", language="", adapter=self.label)

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> Implementation:
        """Start the process and shake hands; raise AdapterStartError if either fails."""
        self.budget.check()
        try:
            implementation = self._start()
        except AdapterStartError as error:
            self.budget.failed(error)
            raise
        self.budget.succeeded()
        return implementation

    def _start(self) -> Implementation:
        _files.check_running()  # an interrupted run starts no process that would write in a removed folder
        try:
            self.process = LineProcess(self.argv, cwd=self.cwd, env=self.env, case_token=self.case_token)
        except ProcessGone as error:
            raise AdapterStartError(str(error)) from None
        reply = self._exchange(
            "hello", {"protocol": PROTOCOL_VERSION, "kit": {"name": "resumekit", "version": __version__}}
        )
        if reply.outcome != "result":
            tail = self.process.stderr_tail() if self.process else ""
            self.kill()
            raise AdapterStartError(f"{self.label}: the handshake failed: {reply.message}", reply.stderr_tail or tail)
        hello = reply.value
        problem = hello_problem(hello)
        if problem:
            tail = self.process.stderr_tail()
            self.kill()
            raise AdapterStartError(f"{self.label}: the hello result is unusable: {problem}", tail)
        info = hello["implementation"]
        self.implementation = Implementation(
            name=clip(str(info.get("name", "")), NAME_LIMIT),
            version=clip(str(info.get("version", "")), NAME_LIMIT),
            language=clip(str(info.get("language", "")), NAME_LIMIT),
            homepage=clip(str(info.get("homepage", "")), NAME_LIMIT),
            capabilities=tuple(hello.get("capabilities", ())),
            profiles=tuple(hello.get("profiles", ("core",))),
            adapter=self.label,
        )
        return self.implementation

    def restart(self) -> None:
        """Kill whatever runs, start afresh and replay the handshake."""
        self.kill()
        self.restarts += 1
        self.start()

    def kill(self) -> None:
        """Kill the process the kit started, if it runs."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def close(self) -> None:
        """Ask the process to stop, then make sure it has."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessGone):
            self.process.send(self._encode({"cmd": "stop", "seq": self._next_seq()}), timeout=self.timeout)
        self.process.stop(grace=self.timeout)
        self.process = None

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr, or nothing if none runs."""
        return self.process.stderr_tail() if self.process else ""

    # -- requests --------------------------------------------------------------------------------

    def request(self, cmd: str, **fields: Any) -> Reply:
        """Send *cmd*; on any failure kill the process, so the next request starts a fresh one."""
        if self.process is None or self.process.poll() is not None:
            try:
                self.restart()
            except AdapterStartError as error:
                return Reply.errored(
                    f"cannot restart the implementation: {error.message}", stderr_tail=error.stderr_tail
                )
        reply = self._exchange(cmd, fields)
        if reply.outcome == "errored" and not reply.context.get("caught"):
            self.kill()
        return reply

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _encode(self, message: Mapping[str, Any]) -> bytes:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    def _fail(self, message: str) -> Reply:
        tail = self.process.stderr_tail() if self.process else ""
        return Reply.errored(clip(message, MESSAGE_LIMIT), stderr_tail=tail, transcript=tuple(self._transcript))

    def _exchange(self, cmd: str, fields: Mapping[str, Any]) -> Reply:
        assert self.process is not None
        seq = self._next_seq()
        message = {"cmd": cmd, "seq": seq, **fields}
        if self.validate_messages:
            # The selected branch alone when it passes; the full, slower report only for a failure.
            passes = schemas.passes_discriminated(schemas.ADAPTER_REQUEST, "cmd", message)
            violation = None if passes else schemas.first_violation(schemas.ADAPTER_REQUEST, message)
            if violation is not None:  # the kit's own bug, but say so rather than send it
                return self._fail(f"the kit built a {cmd!r} request that breaks its schema {violation}")
            if cmd in EVENTS_SENT:  # the request schema checks these as RuntimeEvents
                sent = fields.get("events")
                CHECKED_EVENTS.add([fields.get("event"), *(sent if isinstance(sent, list) else ())])
        stray = self.process.pending()
        for line in stray:
            self._transcript.append("<- " + preview(line))
        if stray:
            return self._fail(
                f"stray output on stdout before {cmd!r} (stdout is for protocol lines only): {preview(stray[0])!r}"
            )
        encoded = self._encode(message)
        self._transcript.append("-> " + preview(encoded))
        try:
            self.process.send(encoded, timeout=self.timeout)
            raw = self.process.receive(self.timeout)
        except ReadTimeout as error:
            return self._fail(f"{cmd!r} got no response: {error} (is stdout flushed after each line?)")
        except ProcessGone as error:
            return self._fail(f"{cmd!r} got no response: {error}")
        self._transcript.append("<- " + preview(raw))
        return self._interpret(cmd, seq, raw, fields)

    def _interpret(self, cmd: str, seq: int, raw: bytes, fields: Mapping[str, Any] | None = None) -> Reply:
        try:
            response = decode_message(raw)
        except MessageError as error:
            return self._fail(f"{cmd!r}: the response is not a JSON line ({error}): {preview(raw)!r}")
        if not isinstance(response, dict):
            return self._fail(f"{cmd!r}: the response is a JSON {type(response).__name__}, not an object")
        if not is_integer(response.get("seq")) or response.get("seq") != seq:
            return self._fail(f"{cmd!r}: the response has seq {response.get('seq')!r}, expected {seq!r}")
        if self.validate_messages:
            violation = schemas.first_violation(schemas.ADAPTER_RESPONSE, response)
            if violation is None and "result" in response and cmd in RESULT_SCHEMAS:
                result = response["result"]
                unchecked: list[object] = []
                if cmd in EVENTS_SENT:
                    result, unchecked = CHECKED_EVENTS.lighten(result)
                violation = schemas.first_violation(schemas.BASE + "adapter/" + RESULT_SCHEMAS[cmd], result)
                if violation is not None:
                    violation = type(violation)("/result" + violation.pointer, violation.message)
                else:
                    CHECKED_EVENTS.add(unchecked)
            if violation is not None:
                return self._fail(f"{cmd!r}: the response breaks the protocol schema {violation}")
        kinds = [key for key in ("result", "skipped", "error") if key in response]
        if len(kinds) != 1:
            return self._fail(
                f"{cmd!r}: a response has exactly one of 'result', 'skipped', 'error'; this one has {kinds}"
            )
        if kinds == ["result"]:
            return Reply("result", response["result"], transcript=tuple(self._transcript))
        body = response[kinds[0]]
        if not isinstance(body, dict):
            return self._fail(f"{cmd!r}: {kinds[0]!r} must be an object, got {body!r}")
        if kinds == ["skipped"]:
            return Reply("skipped", message=clip(str(body.get("reason", "no reason given")), MESSAGE_LIMIT))
        context: dict[str, Any] = body["context"] if isinstance(body.get("context"), dict) else {}
        return Reply.errored(
            clip(f"the implementation reported an error: {body.get('message', '(no message)')}", MESSAGE_LIMIT),
            stderr_tail=self.process.stderr_tail() if self.process else "",
            transcript=tuple(self._transcript),
            context={**context, "caught": True},
        )

