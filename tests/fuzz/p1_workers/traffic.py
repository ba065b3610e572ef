"""Hostile workers of what the kit receives: a flood of claims, request lines no HTTP server can parse, and
stderr that is huge or never ends."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.client import Answer
from tests.fuzz.p1_workers._base import argument

FLOOD_REQUESTS = 10_000
FLOOD_THREADS = 2
FLOOD_SECONDS = 120.0  # a bound of the attack's own, far below the campaign's guard


class _AtFirstEmptyClaim(reference.Worker):
    """The reference worker, which strikes once, when a claim is first answered without a task (idle)."""

    struck = False

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Answer:
        answer = super()._request(method, path, body, headers)
        if path == "v1/claims" and answer.status == 200 and answer.body.get("task") is None and not self.struck:
            self.struck = True
            self.strike()
        return answer

    def strike(self) -> None:
        raise NotImplementedError


class FloodsClaims(_AtFirstEmptyClaim):
    """Idle, sends 10,000 claims as fast as two threads can, ignoring retry_after_ms (WRK-3), then goes on."""

    def strike(self) -> None:
        deadline = time.monotonic() + FLOOD_SECONDS

        def flood(count: int) -> None:
            for _ in range(count):
                if time.monotonic() > deadline:
                    return
                self.cp.request("POST", "v1/claims", {})

        share = FLOOD_REQUESTS // FLOOD_THREADS
        threads = [threading.Thread(target=flood, args=(share,)) for _ in range(FLOOD_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


# Request lines and headers http.server cannot take as HTTP/1.1; each must get CP-2's JSON 400.
MALFORMED: dict[str, bytes] = {
    "binary request line": b"\x00\xff\xfe not http at all\r\n\r\n",
    "method alone": b"GET\r\n\r\n",
    "unknown version": b"GET /v1/clock HTTP/9.9\r\n\r\n",
    "unknown method": b"BREW /v1/claims HTTP/1.1\r\nHost: x\r\n\r\n",
    "request line of 70,000 bytes": b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    "header line of 70,000 bytes": b"GET /v1/clock HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n",
    "Content-Length not a number": b"POST /v1/claims HTTP/1.1\r\nContent-Length: many\r\n\r\n",
}


class SendsMalformedRequests(_AtFirstEmptyClaim):
    """Idle, sends each of ``MALFORMED`` on a connection of its own and writes what came back, one JSON line per
    request, to the probe file the campaign names (argument 1); then goes on as the reference."""

    def strike(self) -> None:
        address = urlsplit(self.config.control_plane_url)
        with open(argument(0), "w", encoding="utf-8") as probe:
            for name, data in MALFORMED.items():
                answer = _exchange(address.hostname or "127.0.0.1", address.port or 80, data)
                probe.write(json.dumps({"sent": name, **answer}) + "\n")


def _exchange(host: str, port: int, data: bytes) -> dict[str, Any]:
    """Send *data* raw; the status, Content-Type and body of the answer (read until the server closes)."""
    received = b""
    try:
        with socket.create_connection((host, port), timeout=5) as connection:
            connection.sendall(data)
            connection.shutdown(socket.SHUT_WR)
            while chunk := connection.recv(65536):
                received += chunk
    except OSError as error:
        return {"error": str(error), "raw": received[:300].decode("latin-1")}
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return {"status": status, "contentType": headers.get("content-type", ""), "body": body[:2000].decode("latin-1")}


HUGE_STDERR_BYTES = 200 * 1024 * 1024
_LINE = b"p1 worker: a line of noise on stderr, as a chatty worker writes it ".ljust(1023, b".") + b"\n"  # 1 KiB


class HugeStderr(reference.Worker):
    """Writes 200 MB of 1 KiB lines to stderr before it starts its work, then says so in the probe file the
    campaign names (argument 1)."""

    def run(self) -> int:
        chunk, written = _LINE * 1024, 0
        for _ in range(HUGE_STDERR_BYTES // len(chunk)):
            written += os.write(2, chunk)
        with open(argument(0), "a", encoding="utf-8") as probe:
            probe.write(json.dumps({"wrote": f"{written} bytes to stderr"}) + "\n")
        return super().run()


class EndlessStderr(reference.Worker):
    """Writes to stderr without end, in one line that never gets its newline, for as long as its process lives."""

    def run(self) -> int:
        def noise() -> None:
            chunk = b"x" * 65536
            while True:
                os.write(2, chunk)

        threading.Thread(target=noise, name="endless-stderr", daemon=True).start()
        return super().run()
