"""The worker's HTTP client of the control plane (p1-control-plane.md), over a plain socket.

Every request has a deadline of at most 5 s for the whole exchange, connecting included (WRK-3); the
client speaks only to the base URL's host and port, never through a proxy (WRK-1). A request without a
complete JSON answer is a transport failure, returned as status 0.

Why not urllib or http.client: the worker starts once per process and every start pays for the imports.
Those two bring the email package, ssl and urllib.request, about a third of the worker's start. The
control plane speaks HTTP/1.1 with a Content-Length on every answer (CP-2), and each request here
closes its connection, so one request and one answer read to the end of the stream are all we need.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse

TYPE_CHECKING = False  # typing is not imported at run time: annotations are never evaluated
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Answer", "ControlPlane"]

TIMEOUT_S = 5.0
MAX_ANSWER = 8 << 20  # bytes: far beyond any control-plane answer, so a flood cannot fill the memory


class Answer:
    """A control-plane answer: its status (0 for a transport failure) and its JSON object body."""

    __slots__ = ("body", "status")

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body

    def __repr__(self) -> str:
        return f"Answer(status={self.status!r}, body={self.body!r})"

    @property
    def transport_failure(self) -> bool:
        return self.status == 0 or self.status >= 500

    @property
    def now_ms(self) -> int | None:
        value = self.body.get("now_ms")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class ControlPlane:
    def __init__(self, base_url: str, timeout: float = TIMEOUT_S) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.timeout = min(timeout, TIMEOUT_S)
        split = urllib.parse.urlsplit(self.base_url)
        if split.scheme != "http" or not split.hostname:
            raise ValueError(f"the control plane's URL must be http://host:port/..., not {base_url!r}")
        self._address = (split.hostname, split.port or 80)
        self._host = split.netloc
        self._prefix = split.path

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        data = b"" if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        lines = [f"{method} {self._prefix}{path} HTTP/1.1", f"Host: {self._host}", "Connection: close",
                 "Accept: application/json"]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        message = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + data
        try:
            raw = _exchange(self._address, message, time.monotonic() + self.timeout)
        except (OSError, ValueError):
            return Answer(0, {})
        return _answer(raw)

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        return self.request("POST", path, body, headers)

    def put(self, path: str, body: dict[str, Any]) -> Answer:
        return self.request("PUT", path, body)


def _exchange(address: tuple[str, int], message: bytes, deadline: float) -> bytes:
    """Send *message* and read the answer to the end of the stream, all before *deadline*."""
    with socket.create_connection(address, timeout=_left(deadline)) as connection:
        connection.settimeout(_left(deadline))
        connection.sendall(message)
        received = bytearray()
        while True:
            connection.settimeout(_left(deadline))
            chunk = connection.recv(65536)
            if not chunk:
                return bytes(received)
            received += chunk
            if len(received) > MAX_ANSWER:
                raise ValueError(f"the answer is longer than {MAX_ANSWER} bytes")


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request's deadline passed")
    return left


def _answer(raw: bytes) -> Answer:
    """The status and JSON body of one whole HTTP/1.1 answer; status 0 when it is not one."""
    head, separator, content = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not separator or version not in ("HTTP/1.1", "HTTP/1.0") or not (code.isdigit() and len(code) == 3):
        return Answer(0, {})
    status = int(code)
    for line in header_lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = value.strip()
            if not length.isdigit() or len(content) < int(length):
                return Answer(0, {})  # cut short: the answer never arrived whole
            content = content[: int(length)]
    try:
        parsed = json.loads(content.decode("utf-8")) if content else {}
    except (UnicodeDecodeError, ValueError):
        return Answer(0 if status < 300 else status, {})
    return Answer(status, parsed if isinstance(parsed, dict) else {})
