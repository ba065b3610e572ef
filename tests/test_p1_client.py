"""The reference worker's control-plane client against a real loopback server that answers badly.

Each server below answers one request with fixed bytes (or none) and closes: whatever is not one whole
HTTP/1.1 answer with a JSON body must come back as a transport failure, status 0, never an exception.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from resumekit.reference.p1 import client
from resumekit.reference.p1.client import ControlPlane


@contextmanager
def _server(answer: bytes | None, *, hold: threading.Event | None = None) -> Iterator[tuple[str, list[bytes]]]:
    """A server on 127.0.0.1 that reads one request, sends *answer* (None: nothing) and closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    while len(body) < int(line.split(b":")[1]):
                        body += connection.recv(65536)
            received.append(head + b"\r\n\r\n" + body)
            if hold is not None:
                hold.wait(10)
            if answer is not None:
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/w/worker-1/", received
    finally:
        if hold is not None:
            hold.set()
        thread.join(10)
        listener.close()


def _http(status: str, body: bytes, *, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode() + body


def test_a_whole_answer_is_read_and_the_request_is_well_formed() -> None:
    with _server(_http("200 OK", b'{"now_ms": 7, "task": null}')) as (url, received):
        answer = ControlPlane(url).post("claim", {"worker": "w"}, {"Idempotency-Key": "k"})
    assert (answer.status, answer.body, answer.now_ms) == (200, {"now_ms": 7, "task": None}, 7)
    request = received[0]
    assert request.startswith(b"POST /w/worker-1/claim HTTP/1.1\r\n")
    assert b"\r\nIdempotency-Key: k\r\n" in request and b"\r\nConnection: close\r\n" in request
    assert request.endswith(b'\r\n\r\n{"worker":"w"}')


def test_an_error_status_keeps_its_json_body() -> None:
    with _server(_http("409 Conflict", b'{"error": "lease_conflict"}')) as (url, _):
        answer = ControlPlane(url).get("tasks/t1")
    assert (answer.status, answer.body, answer.transport_failure) == (409, {"error": "lease_conflict"}, False)


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        pytest.param(None, 0, id="no-answer-at-all"),
        pytest.param(_http("200 OK", b'{"a": 1}', length=40), 0, id="body-cut-short"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", 0, id="head-cut-short"),
        pytest.param(_http("200 OK", b"not json"), 0, id="not-json"),
        pytest.param(_http("200 OK", b"[1, 2]"), 200, id="json-but-not-an-object"),
        pytest.param(_http("503 Unavailable", b"<html>"), 503, id="error-page-not-json"),
        pytest.param(b"SPDY/3 200 OK\r\n\r\n{}", 0, id="not-http"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n{}", 0, id="status-not-a-number"),
        pytest.param(_http("200 OK", b"{}", length=-1), 0, id="length-not-a-number"),
    ],
)
def test_what_is_not_one_whole_json_answer_is_no_success(answer: bytes | None, status: int) -> None:
    with _server(answer) as (url, _):
        got = ControlPlane(url).get("tasks/t1")
    assert (got.status, got.body) == (status, {})
    assert got.transport_failure == (status == 0 or status >= 500)


def test_an_answer_longer_than_the_cap_is_a_transport_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "MAX_ANSWER", 1024)
    with _server(_http("200 OK", b'{"x": "' + b"y" * 4096 + b'"}')) as (url, _):
        assert ControlPlane(url).get("tasks/t1").status == 0


def test_a_silent_server_is_a_transport_failure_by_the_deadline() -> None:
    hold = threading.Event()
    with _server(_http("200 OK", b"{}"), hold=hold) as (url, _):
        answer = ControlPlane(url, timeout=0.2).get("tasks/t1")
        hold.set()
    assert answer.status == 0


def test_nothing_listening_is_a_transport_failure() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    assert ControlPlane(f"http://127.0.0.1:{port}/").get("x").status == 0


def test_only_a_plain_http_url_is_taken() -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        ControlPlane("https://127.0.0.1:1/")
