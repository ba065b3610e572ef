"""Hostile workers of the text the kit takes in (issue 36): requests, journal rows, caches, a journal log and stderr
that carry lone surrogates (a valid JSON escape no UTF-8 text holds), control characters and bytes that are not
UTF-8, and an answer to ``p1.worker.wait`` of 60 MB of tiny values. Each must end in a clear failure naming
what the kit found, or a pass where the worker still does its work; never a traceback or a report it cannot
write."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

from resumekit.reference import adapter
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import quote
from tests.fuzz.p1_workers._base import AtTheEnd, argument, execute
from tests.fuzz.p1_workers.files import _copy_of_last_row
from tests.fuzz.p1_workers.traffic import _exchange

SURROGATES = "\\ud800 \\udfff"  # as the JSON text writes them: escapes of lone surrogates
CONTROLS = "\\u0000 \\u001b[2J \\u0007 \\u009b \\ufffe"  # NUL, ESC (clear the screen), BEL, C1 CSI, U+FFFE
STDERR_NOISE = b"p1 worker: \xff\xfe \x00 \x1b[2J\x1b]0;title\x07 \xed\xa0\x80 (not UTF-8, a surrogate's bytes)\n"


def _request(base: str, method: str, path: str, body: bytes = b"", headers: bytes = b"") -> dict[str, Any]:
    address = urlsplit(base)
    head = (
        f"{method} {address.path}{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode("ascii")
        + headers
        + (f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else "").encode("ascii")
        + b"\r\n"
    )
    return _exchange(address.hostname or "127.0.0.1", address.port or 80, head + body)


class TextInRequests(AtTheEnd):
    """Once its result is submitted, with its lease still active: sends a report whose unknown members' names,
    Idempotency-Key and reason carry lone surrogates and control characters (a 400), the same report for an
    attempt that is not running (answered and logged, not applied), and a read of a task whose name is a
    surrogate's UTF-8 (a 404); writes bytes that are not UTF-8 and terminal escapes to stderr. Writes each
    answer to the probe (argument 1), then goes on as the reference: the kit must take every one, log it and
    report the run."""

    def strike(self, attempt: reference.Attempt) -> None:
        os.write(2, STDERR_NOISE)
        base, task = self.config.control_plane_url, quote(attempt.first.task_id)
        fields = f'"attempt": 99, "lease_id": "{SURROGATES}", "state": "FAILED", "reason": "{SURROGATES} {CONTROLS}"'
        sent = {
            "unknown members": (
                _request(base, "POST", f"v1/tasks/{task}/report", f'{{{fields}, "{SURROGATES}": 1}}'.encode(),
                         b"Idempotency-Key: k\x1b[2J\xff\r\n"),
                "400",
            ),
            "a report not applied": (
                _request(base, "POST", f"v1/tasks/{task}/report", f"{{{fields}}}".encode()), "200"
            ),
            "a task named by a surrogate": (_request(base, "GET", "v1/tasks/%ED%A0%80%FF"), "404"),
        }  # fmt: skip
        wrong = {name: answer for name, (answer, status) in sent.items() if not _json(answer, status)}
        with open(argument(0), "a", encoding="utf-8") as probe:
            probe.write(json.dumps({"wrong": wrong} if wrong else {"fired": "every request answered in JSON"}) + "\n")


def _json(answer: dict[str, Any], status: str) -> bool:
    try:
        body = json.loads(answer.get("body", ""))
    except ValueError:
        return False
    return answer.get("status") == status and isinstance(body, dict) and isinstance(body.get("now_ms"), int)


class JournalTextNotUtf8(AtTheEnd):
    """Appends a copy of its last row whose ``lease_id`` is TEXT of bytes that are not UTF-8 (JNL-1): an invalid
    byte, ESC, and the UTF-8 of a lone surrogate."""

    def strike(self, attempt: reference.Attempt) -> None:
        execute(self.journal_path, _copy_of_last_row(lease_id="CAST(X'6C65FF1B5B324AEDA080' AS TEXT)"))


class CacheWithLoneSurrogates(AtTheEnd):
    """Rewrites its task's cache with the lease id and a member's name made of lone surrogates and controls, as
    JSON escapes: the cache no longer matches the journal (CACHE-1)."""

    def strike(self, attempt: reference.Attempt) -> None:
        path = self.cache_path(attempt)
        cache = json.loads(path.read_text(encoding="utf-8"))
        text = json.dumps({**cache, "lease_id": "\ud800\x1b[2J"}, sort_keys=True)  # ensure_ascii: \ud800 escaped
        path.write_text(text[:-1] + f', "{SURROGATES}": "{CONTROLS}"}}', encoding="utf-8")


class JournalLogWithLoneSurrogates(AtTheEnd):
    """Appends to its journal log (``p1.journal-log``) a connection whose path and settings are lone surrogates
    and controls, a connection the journal never had (ADP-3)."""

    def strike(self, attempt: reference.Attempt) -> None:
        path = getattr(self.settings, "path", None)
        if path is None:
            raise SystemExit("this attack needs the kit to ask for a journal log (p1.journal-log)")
        with open(path, "a", encoding="utf-8", newline="\n") as log:
            log.write(f'{{"path": "{SURROGATES}", "journal_mode": "{CONTROLS}", "synchronous": 2}}\n')


HUGE_VALUES = 20_000_000  # "[]," each: 60 MB, 40 million values by the kit's count


class HugeWaitAnswer(reference.Worker):
    """Answers its first ``p1.worker.wait`` with a line of 60 MB: the state and a member of 20 million empty
    arrays. Within the protocol's 64 MiB, over the kit's budget of values: the kit must refuse the line before it
    parses it, naming what it holds, and not grow past its memory bound."""

    def run(self) -> int:
        encode = adapter._encode_response
        sent: list[bool] = []

        def huge(response: dict[str, Any]) -> bytes:
            result = response.get("result")
            if sent or not isinstance(result, dict) or "state" not in result:
                return encode(response)
            sent.append(True)
            line = bytearray(b'{"seq": %d, "result": {"state": "idle", "pad": [' % response["seq"])
            for _ in range(HUGE_VALUES // 1_000_000):
                line += b"[]," * 1_000_000
            line += b"[]]}}\n"
            return line  # type: ignore[return-value]  # the adapter writes any bytes-like object

        adapter._encode_response = huge
        return super().run()
