"""How the kit reaches an implementation: in-process Python, or any program over JSON lines.

Whatever goes wrong on the other side (an exception, an exit, a hang, garbage on stdout, a message
that breaks its schema) comes back as a ``Reply`` with outcome ``errored``; nothing here raises into
the runner once the handshake has succeeded.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import json
import os
import shlex
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from resumekit.conformance import PROTOCOL_VERSION, __version__, schemas
from resumekit.conformance._process import LineProcess, ProcessGone, ReadTimeout
from resumekit.conformance.canonical import canonical_json
from resumekit.conformance.results import Implementation

DEFAULT_TIMEOUT = 10.0
TRANSCRIPT_LENGTH = 8
MAX_DEPTH = 128  # nesting of arrays and objects in one message (docs/adapter-protocol.md, Transport)
START_ATTEMPTS = 3  # consecutive failed starts after which the kit stops starting an adapter
_MESSAGE_PREVIEW = 600

RESULT_SCHEMAS = {
    "hello": "results/hello.json",
    "phase0.plan": "results/plan.json",
    "phase0.store.open": "results/store-open.json",
    "phase0.store.append": "results/store-append.json",
    "phase0.store.read": "results/store-read.json",
    "phase0.store.plan": "results/store-plan.json",
    "phase0.crash.arm": "results/crash-arm.json",
    "phase0.ledger.locate": "results/ledger-locate.json",
}

CAPABILITIES = (
    "phase0.projection",
    "phase0.store",
    "phase0.crash",
    "phase0.ledger-file",
    "p1.worker",
    "p1.journal",
    "p1.failpoint-any",
    "p1.disk-faults",
    "p1.tools",
)


@dataclass(frozen=True, slots=True)
class Reply:
    """What came back for one request."""

    outcome: str  # "result", "skipped" or "errored"
    value: Any = None
    message: str = ""
    stderr_tail: str | None = None
    transcript: tuple[str, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def errored(cls, message: str, **kwargs: Any) -> Reply:
        return cls("errored", message=message, **kwargs)


class AdapterStartError(Exception):
    """The implementation could not be started or failed its handshake."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        if self.stderr_tail:
            return f"{self.message}\n--- stderr (last lines) ---\n{self.stderr_tail}"
        return self.message


class Adapter(Protocol):
    """One connection to an implementation under test."""

    implementation: Implementation

    def request(self, cmd: str, **fields: Any) -> Reply:
        """Send one command and return its reply; never raises for the implementation's faults."""
        ...

    def close(self) -> None:
        """Release the implementation."""
        ...


class PlanFunction(Protocol):
    """An in-process Python implementation of ``phase0.projection``."""

    def __call__(
        self, events: list[dict[str, Any]], *, expected_high_water: int | None = ..., profile: str = ...
    ) -> Mapping[str, Any]: ...


class PythonAdapter:
    """Calls a Python function in this process (``--adapter python:package.module:attribute``)."""

    def __init__(
        self,
        function: PlanFunction,
        *,
        name: str,
        version: str = "",
        adapter: str = "",
        profiles: tuple[str, ...] = ("core", "strict"),
    ) -> None:
        self._function = function
        self.implementation = Implementation(
            name=name,
            version=version,
            language="python",
            capabilities=("phase0.projection",),
            profiles=profiles,
            adapter=adapter,
        )

    def request(self, cmd: str, **fields: Any) -> Reply:
        if cmd != "phase0.plan":
            return Reply("skipped", message=f"an in-process adapter answers only phase0.plan, not {cmd!r}")
        try:
            plan = self._function(
                fields["events"],
                expected_high_water=fields.get("expectedRuntimeEventHighWater"),
                profile=fields["profile"],
            )
        except Exception as error:
            return Reply.errored(f"the implementation raised {error!r}", context={"traceback": traceback.format_exc()})
        return Reply("result", {"plan": plan})

    def close(self) -> None:
        pass


def load_python(spec: str) -> PythonAdapter:
    """Import ``package.module:attribute``; the attribute is a plan function or has ``build_resume_plan``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise AdapterStartError(f"python adapter {spec!r} is not of the form 'package.module:attribute'")
    # Resolve the module as ``python -m`` would: the working directory first, whichever way the kit started.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise AdapterStartError(f"cannot import {module_name!r} for adapter {spec!r}: {error!r}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise AdapterStartError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    function = getattr(target, "build_resume_plan", target)
    if not callable(function):
        raise AdapterStartError(f"{spec!r} is neither callable nor has a callable 'build_resume_plan'")
    version = str(getattr(module, "__version__", getattr(target, "version", "")))
    # An attribute `profiles` (say ("core",)) narrows what it claims; by default both profiles.
    profiles = getattr(target, "profiles", ("core", "strict"))
    if (
        not isinstance(profiles, (list, tuple))
        or "core" not in profiles
        or not set(profiles) <= {"core", "strict"}
    ):
        raise AdapterStartError(f"{spec!r}: 'profiles' must list 'core' and may add 'strict', got {profiles!r}")
    return PythonAdapter(
        function,
        name=str(getattr(target, "name", spec)),
        version=version,
        adapter=f"python:{spec}",
        profiles=tuple(str(p) for p in profiles),
    )


def _preview(raw: bytes | str) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    return text if len(text) <= _MESSAGE_PREVIEW else text[:_MESSAGE_PREVIEW] + f"... ({len(text)} characters)"


class MessageError(ValueError):
    """A line that is not one strict JSON value of bounded depth."""


def _reject_constant(name: str) -> Any:
    raise MessageError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise MessageError(f"the number {text[:40]} is out of range")
    return value


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def decode_message(raw: bytes) -> Any:
    """The one decoding check for every message from an implementation: strict UTF-8 JSON.

    NaN, Infinity and numbers out of a double's range are refused, as is nesting deeper than
    ``MAX_DEPTH``, so nothing downstream meets a value JSON cannot carry or recursion it cannot
    afford. Raise MessageError saying why.
    """
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except MessageError:
        raise
    except RecursionError:
        raise MessageError(f"it is nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, too-long int strings
        raise MessageError(str(error)) from None
    # Counting brackets is cheap and bounds the depth; only a message with many walks the tree.
    if (raw.count(b"[") + raw.count(b"{") > MAX_DEPTH) and isinstance(value, (dict, list)) and _too_deep(value):
        raise MessageError(f"it is nested deeper than {MAX_DEPTH} levels")
    return value


def is_integer(value: Any) -> bool:
    """Whether *value* is a JSON integer as the protocol means it: not a bool, not a float like 7.0."""
    return isinstance(value, int) and not isinstance(value, bool)


class StartBudget:
    """Consecutive failed starts of one adapter, shared by every process made for it.

    After ``START_ATTEMPTS`` failures in a row the kit stops trying: every later start fails at once
    with the last reason, so a dead adapter does not cost a timeout per case.
    """

    def __init__(self, attempts: int = START_ATTEMPTS) -> None:
        self.attempts = attempts
        self.failures = 0
        self.last: AdapterStartError | None = None
        self._lock = threading.Lock()  # cases running at once (--jobs) share one budget

    def check(self) -> None:
        with self._lock:
            if self.failures >= self.attempts and self.last is not None:
                raise AdapterStartError(
                    f"not started again: the last {self.failures} starts failed; the last one: {self.last.message}",
                    self.last.stderr_tail,
                )

    def failed(self, error: AdapterStartError) -> None:
        with self._lock:
            self.failures += 1
            self.last = error

    def succeeded(self) -> None:
        with self._lock:
            self.failures, self.last = 0, None


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
        try:
            self.process = LineProcess(self.argv, cwd=self.cwd, env=self.env)
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
        problem = _hello_problem(hello)
        if problem:
            tail = self.process.stderr_tail()
            self.kill()
            raise AdapterStartError(f"{self.label}: the hello result is unusable: {problem}", tail)
        info = hello["implementation"]
        self.implementation = Implementation(
            name=str(info.get("name", "")),
            version=str(info.get("version", "")),
            language=str(info.get("language", "")),
            homepage=str(info.get("homepage", "")),
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
        return Reply.errored(message, stderr_tail=tail, transcript=tuple(self._transcript))

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
            if cmd in _EVENTS_SENT:  # the request schema checks these as RuntimeEvents
                sent = fields.get("events")
                CHECKED_EVENTS.add([fields.get("event"), *(sent if isinstance(sent, list) else ())])
        stray = self.process.pending()
        for line in stray:
            self._transcript.append("<- " + _preview(line))
        if stray:
            return self._fail(
                f"stray output on stdout before {cmd!r} (stdout is for protocol lines only): {_preview(stray[0])!r}"
            )
        encoded = self._encode(message)
        self._transcript.append("-> " + _preview(encoded))
        try:
            self.process.send(encoded, timeout=self.timeout)
            raw = self.process.receive(self.timeout)
        except ReadTimeout as error:
            return self._fail(f"{cmd!r} got no response: {error} (is stdout flushed after each line?)")
        except ProcessGone as error:
            return self._fail(f"{cmd!r} got no response: {error}")
        self._transcript.append("<- " + _preview(raw))
        return self._interpret(cmd, seq, raw, fields)

    def _interpret(self, cmd: str, seq: int, raw: bytes, fields: Mapping[str, Any] | None = None) -> Reply:
        try:
            response = decode_message(raw)
        except MessageError as error:
            return self._fail(f"{cmd!r}: the response is not a JSON line ({error}): {_preview(raw)!r}")
        if not isinstance(response, dict):
            return self._fail(f"{cmd!r}: the response is a JSON {type(response).__name__}, not an object")
        if not is_integer(response.get("seq")) or response.get("seq") != seq:
            return self._fail(f"{cmd!r}: the response has seq {response.get('seq')!r}, expected {seq!r}")
        if self.validate_messages:
            violation = schemas.first_violation(schemas.ADAPTER_RESPONSE, response)
            if violation is None and "result" in response and cmd in RESULT_SCHEMAS:
                result = _without_echoes(cmd, response["result"], fields or {})
                unchecked: list[object] = []
                if cmd in _EVENTS_SENT:
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
            return Reply("skipped", message=str(body.get("reason", "no reason given")))
        context: dict[str, Any] = body["context"] if isinstance(body.get("context"), dict) else {}
        return Reply.errored(
            f"the implementation reported an error: {body.get('message', '(no message)')}",
            stderr_tail=self.process.stderr_tail() if self.process else "",
            transcript=tuple(self._transcript),
            context={**context, "caught": True},
        )


class CheckedEvents:
    """RuntimeEvents, by their exact JSON text, already found valid in a message that passed its schema.

    A schema's verdict depends on the value alone, so an event byte for byte the same as one checked
    before needs no second check. The crash schedule reads back every row it appended after every
    kill: checking them all again each time made its run time grow with the square of the rows.
    The text is Python's own JSON with sorted keys, so ``1`` and ``1.0``, ``true`` and ``1`` differ.
    """

    LIMIT = 200_000  # texts kept; past it the set starts afresh, which only costs checks

    def __init__(self) -> None:
        self._texts: set[str] = set()

    @staticmethod
    def _text(event: object) -> str | None:
        if not isinstance(event, dict):
            return None
        try:
            return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            return None

    def add(self, events: Sequence[object]) -> None:
        """Record *events* (non-objects are ignored) as checked: call only after they passed."""
        texts = {text for text in map(self._text, events) if text is not None}
        if len(self._texts) + len(texts) > self.LIMIT:
            self._texts = set()
        self._texts |= texts  # one set operation: safe enough across the runner's threads

    def lighten(self, result: Any) -> tuple[Any, list[object]]:
        """*result* with each event list emptied whose events were all checked before, and the events kept in.

        The lists are a read's ``events`` and a plan's echoed ``runtimeEvents`` and ``replayRuntimeEvents``;
        a list holding one event not checked before is kept whole, and its events are returned so that
        they can be recorded once the result has passed.
        """
        if not isinstance(result, dict):
            return result, []
        unchecked: list[object] = []
        light = dict(result)
        lists = [(light, "events")]
        plan = result.get("plan")
        if isinstance(plan, dict):
            light["plan"] = dict(plan)
            lists += [(light["plan"], "runtimeEvents"), (light["plan"], "replayRuntimeEvents")]
        texts = self._texts
        for holder, key in lists:
            events = holder.get(key)
            if not isinstance(events, list) or not events:
                continue
            if all(self._text(event) in texts for event in events):
                holder[key] = []
            else:
                unchecked += events
        return light, unchecked


CHECKED_EVENTS = CheckedEvents()
# The commands whose requests and results carry RuntimeEvents where the protocol schemas say so.
_EVENTS_SENT = frozenset(("phase0.plan", "phase0.store.append", "phase0.store.read", "phase0.store.plan"))


def _without_echoes(cmd: str, result: Any, fields: Mapping[str, Any]) -> Any:
    """*result* with the plan's echoed event lists emptied when every event in them is one the kit sent.

    An event the kit sent is valid already (the fixtures are checked against the RuntimeEvent schema),
    and checking it again was most of the cost of checking a plan; an echoed event that differs from
    every sent one, by a byte of canonical JSON, is checked in full.
    """
    sent = fields.get("events")
    plan = result.get("plan") if cmd == "phase0.plan" and isinstance(result, dict) else None
    if not isinstance(plan, dict) or not isinstance(sent, list):
        return result
    known = {canonical_json(event) for event in sent}
    light = dict(plan)
    for key in ("runtimeEvents", "replayRuntimeEvents"):
        echoed = plan.get(key)
        if isinstance(echoed, list) and all(isinstance(e, dict) and canonical_json(e) in known for e in echoed):
            light[key] = []
    return {**result, "plan": light}


def _hello_problem(hello: Any) -> str | None:
    if not isinstance(hello, dict):
        return f"expected an object, got {hello!r}"
    if not is_integer(hello.get("protocol")) or hello.get("protocol") != PROTOCOL_VERSION:
        return f"it speaks protocol {hello.get('protocol')!r}, this kit speaks {PROTOCOL_VERSION}"
    if not isinstance(hello.get("implementation"), dict):
        return "'implementation' is missing"
    capabilities = hello.get("capabilities")
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        return f"'capabilities' must be a list of strings, got {capabilities!r}"
    unknown = sorted(set(capabilities) - set(CAPABILITIES))
    if unknown:
        return f"unknown capabilities {unknown}; this kit knows {list(CAPABILITIES)}"
    profiles = hello.get("profiles", ["core"])
    if (
        not isinstance(profiles, list)
        or not all(isinstance(p, str) for p in profiles)
        or "core" not in profiles
        or not set(profiles) <= {"core", "strict"}
    ):
        return f"'profiles' must list 'core' and may add 'strict', got {profiles!r}"
    return None


# ``python -m`` and ``-c`` put the working directory first on sys.path, where a user's own module could
# shadow the kit's; the child replaces that entry with the folder the kit itself was imported from
# before it imports anything of ours. The reference needs the standard library alone, so the child
# skips ``site`` (-S): processing the environment's .pth files was nearly half of an interpreter's
# start, and the crash schedule starts the reference once per kill.
_REFERENCE_BOOT = (
    "import sys; sys.path[0] = {root!r}; from resumekit.reference.__main__ import main; sys.exit(main())"
)


def reference_argv() -> list[str]:
    """The command that runs the bundled reference as a protocol server, never importing from the cwd."""
    import resumekit.reference

    root = str(Path(resumekit.reference.__file__).resolve().parent.parent.parent)
    return [sys.executable, "-S", "-c", _REFERENCE_BOOT.format(root=root)]


def _package_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def split_command(command: str, *, windows: bool = os.name == "nt") -> list[str]:
    """Split an adapter command line the way the platform's shell would.

    Windows paths hold backslashes, which POSIX splitting would eat, so there the command is split
    in non-POSIX mode, which keeps the quotes around a quoted word: they are taken off here.
    """
    if not windows:
        return shlex.split(command)
    words = shlex.split(command, posix=False)
    return [w[1:-1] if len(w) >= 2 and w[0] == w[-1] == '"' else w for w in words]


AdapterFactory = Callable[[], "ProcessAdapter"]


def process_factory(
    spec: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    validate_messages: bool = True,
    budget: StartBudget | None = None,
) -> AdapterFactory:
    """A maker of fresh, unstarted process adapters for *spec* (``reference`` or a command line).

    Every adapter it makes shares one StartBudget (*budget*, or a new one): pass the budget of the
    adapter that runs the decision cases so that all processes of one run count their failures together.
    """
    if spec == "reference":
        argv, env, label = reference_argv(), _package_env(), "reference"
    else:
        argv = split_command(spec)
        if not argv:
            raise AdapterStartError("the adapter command is empty")
        env, label = None, spec
    shared = budget if budget is not None else StartBudget()

    def make() -> ProcessAdapter:
        return ProcessAdapter(
            argv, label=label, timeout=timeout, validate_messages=validate_messages, env=env, budget=shared
        )

    return make


def open_adapter(spec: str, *, timeout: float = DEFAULT_TIMEOUT, validate_messages: bool = True) -> Adapter:
    """Connect to the implementation named by *spec* and complete the handshake."""
    if spec.startswith("python:"):
        return load_python(spec[len("python:") :])
    adapter = process_factory(spec, timeout=timeout, validate_messages=validate_messages)()
    adapter.start()
    return adapter
