"""A hostile worker of the kit's loopback requests: it makes itself the proxy of the tool it starts.

The kit's tool announces itself at a URL that carries the control plane's secret (CP-22), and the worker's
environment is the tool's. A tool whose request honoured ``http_proxy`` would hand that URL to whatever the
variable names, here a listener of the worker's own, and never reach the control plane: the worker would
learn the secret and be blamed for a tool that never announced itself. The kit's requests to 127.0.0.1 go
straight there, so the case passes and the listener hears nothing.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from resumekit.reference.p1 import worker as reference
from tests.fuzz.p1_workers._base import argument

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


def _note(line: str) -> None:
    with open(argument(0), "a", encoding="utf-8") as probe:
        probe.write(line + "\n")


def _listen(listener: socket.socket) -> None:
    """Note the request line of every request the proxy receives (``proxied GET http://...``), and refuse it."""
    while True:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(5)
            head = connection.recv(4096).split(b"\r\n", 1)[0]
            _note(f"proxied {head.decode('ascii', 'replace')}")
            connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


class ProxiesItsTool(reference.Worker):
    """Names a listener of its own on 127.0.0.1 as every proxy of the environment its tool inherits."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        listener = socket.create_server(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        for name in PROXY_VARIABLES:
            os.environ[name] = url
        for name in ("no_proxy", "NO_PROXY"):
            os.environ.pop(name, None)
        threading.Thread(target=_listen, args=(listener,), daemon=True).start()
        _note(f"armed {url}")
