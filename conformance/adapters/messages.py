"""What the kit checks in the messages it exchanges with an implementation, before any case judges them.

Every line is strict JSON of bounded depth and size, its strings made safe (``decode_message``); a hello
names this protocol and known capabilities (``hello_problem``); each result has a schema
(``RESULT_SCHEMAS``), and the RuntimeEvents already checked once are not checked again (``CheckedEvents``).
A plan's result schema checks its envelope only: the values inside it are the answer a case judges.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from resumekit.conformance import PROTOCOL_VERSION
from resumekit.conformance._text import SURROGATE_ESCAPE, safe_value
from resumekit.conformance.adapters import _bounded
from resumekit.conformance.adapters._bounded import MAX_STRING_BYTES, MAX_VALUES

MAX_DEPTH = 128  # nesting of arrays and objects in one message (docs/adapter-protocol.md, Transport)
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
    "p1.worker.start": "results/p1-worker-start.json",
    "p1.worker.wait": "results/p1-worker-wait.json",
    "p1.worker.continue": "results/p1-worker-continue.json",
    "p1.worker.stop": "results/p1-worker-stop.json",
    "p1.journal.settings": "results/p1-journal-settings.json",
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
    "p1.journal-log",
)


def preview(raw: bytes | str) -> str:
    """*raw* as text for a message or a transcript: without its line end, and cut short if it is long.

    Only the head of a long line is decoded: a line may be 64 MiB, and its preview is 600 characters.
    """
    if isinstance(raw, bytes):
        size = len(raw.rstrip(b"\r\n"))
        text = raw[: 4 * _MESSAGE_PREVIEW + 4].decode("utf-8", "replace").rstrip("\r\n")
        unit = "bytes"
    else:
        text = raw.rstrip("\r\n")
        size, unit = len(text), "characters"
    if size <= _MESSAGE_PREVIEW and len(text) <= _MESSAGE_PREVIEW:
        return text
    return text[:_MESSAGE_PREVIEW] + f"... ({size} {unit})"


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
    """The one decoding check for every message from an implementation: strict UTF-8 JSON, its strings safe.

    NaN, Infinity and numbers out of a double's range are refused, as is nesting deeper than
    ``MAX_DEPTH``, so nothing downstream meets a value JSON cannot carry or recursion it cannot
    afford. A line over its budget (``MAX_VALUES`` values, ``MAX_STRING_BYTES`` of strings) is refused
    before it is parsed, so that one line cannot fill the kit's memory. Lone surrogates (``\\ud800``, a
    valid JSON escape) are written as their escapes (``_text.safe``). Raise MessageError saying why.
    """
    values, string_bytes = _bounded.measure(raw)
    if values > MAX_VALUES:
        raise MessageError(
            f"it holds about {values} JSON values (its commas, colons and opening brackets outside strings), "
            f"more than the {MAX_VALUES} a message may hold; the line of {len(raw)} bytes was not parsed"
        )
    if string_bytes > MAX_STRING_BYTES:
        raise MessageError(
            f"its strings hold {string_bytes} bytes, more than the {MAX_STRING_BYTES} a message may hold; "
            f"the line of {len(raw)} bytes was not parsed"
        )
    try:
        text = _bounded.text(raw)
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except MessageError:
        raise
    except RecursionError:
        raise MessageError(f"it is nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, too-long int strings
        raise MessageError(str(error)) from None
    del text
    # Counting brackets is cheap and bounds the depth; only a message with many walks the tree.
    if (raw.count(b"[") + raw.count(b"{") > MAX_DEPTH) and isinstance(value, (dict, list)) and _too_deep(value):
        raise MessageError(f"it is nested deeper than {MAX_DEPTH} levels")
    return safe_value(value) if SURROGATE_ESCAPE.search(raw) else value


def is_integer(value: Any) -> bool:
    """Whether *value* is a JSON integer as the protocol means it: not a bool, not a float like 7.0."""
    return isinstance(value, int) and not isinstance(value, bool)


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

        The list is a read's ``events``: a list holding one event not checked before is kept whole, and
        its events are returned so that they can be recorded once the result has passed. A plan's echoed
        lists are not among them: a result's schema checks only that they hold objects
        (``results/plan-envelope.json``), so passing it proves no event valid.
        """
        if not isinstance(result, dict):
            return result, []
        events = result.get("events")
        if not isinstance(events, list) or not events:
            return result, []
        if all(self._text(event) in self._texts for event in events):
            return {**result, "events": []}, []
        return result, list(events)


CHECKED_EVENTS = CheckedEvents()
# The commands whose requests and results carry RuntimeEvents where the protocol schemas say so.
EVENTS_SENT = frozenset(("phase0.plan", "phase0.store.append", "phase0.store.read", "phase0.store.plan"))


def hello_problem(hello: Any) -> str | None:
    """Why *hello*, the result of the handshake, is unusable, or None."""
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

