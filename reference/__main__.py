"""``python -m reference``: the reference runtime as an adapter-protocol server on stdin and stdout."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from resumekit.reference.adapter import serve


def _terminate(signum: int, frame: FrameType | None) -> None:
    # A polite termination request is an orderly exit: unwind, so the exit path (and an armed crash
    # marker) runs. SIGKILL and TerminateProcess cannot be caught, which is what a crash is.
    raise SystemExit(128 + signum)


def main() -> int:
    for stream in (sys.stdin, sys.stdout):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # UTF-8 and bare line feeds on every platform, Windows included
            reconfigure(encoding="utf-8", newline="\n")
    reconfigure = getattr(sys.stderr, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(encoding="utf-8", errors="backslashreplace")
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _terminate)
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
