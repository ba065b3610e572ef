"""The worker's HTTP client of the control plane (p1-control-plane.md), through urllib.

Every request has a timeout of at most 5 s (WRK-3); no proxy from the environment is used, so the
base URL is the only address spoken to (WRK-1). A request without a complete JSON answer is a
transport failure, returned as status 0.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "ControlPlane"]

TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A control-plane answer: its status (0 for a transport failure) and its JSON object body."""

    status: int
    body: dict[str, Any]

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
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        data = None if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status = error.code
            try:
                raw = error.read()
            except (OSError, http.client.HTTPException):
                return Answer(status, {})
            finally:
                error.close()
        except (OSError, http.client.HTTPException, ValueError):
            return Answer(0, {})
        try:
            parsed = json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, ValueError):
            return Answer(0 if status < 300 else status, {})
        return Answer(status, parsed if isinstance(parsed, dict) else {})

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        return self.request("POST", path, body, headers)

    def put(self, path: str, body: dict[str, Any]) -> Answer:
        return self.request("PUT", path, body)
