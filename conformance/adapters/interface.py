"""What every adapter is and answers: the ``Adapter`` protocol, its ``Reply`` and the error of a failed start.

Whatever goes wrong on the other side comes back as a ``Reply`` with outcome ``errored``; only starting an
implementation, or its handshake, raises ``AdapterStartError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from resumekit.conformance._text import printable
from resumekit.conformance.results import Implementation


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
        """An ``errored`` reply saying *message*; *kwargs* are the other fields."""
        return cls("errored", message=message, **kwargs)


class AdapterStartError(Exception):
    """The implementation could not be started or failed its handshake."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        """The message and the stderr tail for a person, their control characters as escapes (``printable``)."""
        if self.stderr_tail:
            return printable(f"{self.message}\n--- stderr (last lines) ---\n{self.stderr_tail}")
        return printable(self.message)


class Adapter(Protocol):
    """One connection to an implementation under test."""

    implementation: Implementation

    def request(self, cmd: str, **fields: Any) -> Reply:
        """Send one command and return its reply; never raises for the implementation's faults."""
        ...

    def close(self) -> None:
        """Release the implementation."""
        ...
