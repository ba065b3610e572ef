"""How the kit reaches an implementation: in-process Python, or any program over JSON lines.

Whatever goes wrong on the other side (an exception, an exit, a hang, garbage on stdout, a message
that breaks its schema) comes back as a ``Reply`` with outcome ``errored``; nothing here raises into
the runner once the handshake has succeeded.

The package's modules, each re-exported here: ``interface`` (the ``Adapter`` protocol, ``Reply``,
``AdapterStartError``), ``messages`` (what every message must be), ``budget`` (the start budget),
``process_adapter`` (the JSON-lines protocol with a child process), ``python_adapter`` (a function in
this process) and ``factory`` (an adapter from what the user names).
"""

from __future__ import annotations

from resumekit.conformance._defaults import DEFAULT_TIMEOUT
from resumekit.conformance.adapters._bounded import MAX_STRING_BYTES, MAX_VALUES
from resumekit.conformance.adapters.budget import START_ATTEMPTS, StartBudget
from resumekit.conformance.adapters.factory import (
    AdapterFactory,
    open_adapter,
    process_factory,
    reference_argv,
    split_command,
)
from resumekit.conformance.adapters.interface import Adapter, AdapterStartError, Reply
from resumekit.conformance.adapters.messages import (
    CAPABILITIES,
    CHECKED_EVENTS,
    MAX_DEPTH,
    RESULT_SCHEMAS,
    CheckedEvents,
    MessageError,
    decode_message,
    is_integer,
)
from resumekit.conformance.adapters.process_adapter import TRANSCRIPT_LENGTH, ProcessAdapter
from resumekit.conformance.adapters.python_adapter import PlanFunction, PythonAdapter, load_python
from resumekit.conformance.results import Implementation

__all__ = [
    "CAPABILITIES",
    "CHECKED_EVENTS",
    "DEFAULT_TIMEOUT",
    "MAX_DEPTH",
    "MAX_STRING_BYTES",
    "MAX_VALUES",
    "RESULT_SCHEMAS",
    "START_ATTEMPTS",
    "TRANSCRIPT_LENGTH",
    "Adapter",
    "AdapterFactory",
    "AdapterStartError",
    "CheckedEvents",
    "Implementation",
    "MessageError",
    "PlanFunction",
    "ProcessAdapter",
    "PythonAdapter",
    "Reply",
    "StartBudget",
    "decode_message",
    "is_integer",
    "load_python",
    "open_adapter",
    "process_factory",
    "reference_argv",
    "split_command",
]
