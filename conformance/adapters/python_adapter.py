"""The in-process Python adapter: a plan function called in the kit's own process (``python:module:attribute``).

An exception the function raises comes back as a ``Reply`` with outcome ``errored``, with its traceback. A
plan's strings are made safe as a process adapter's are (``_text.safe_value``: a lone surrogate is repaired in
place, as the text of its escape).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Mapping
from typing import Any, Protocol

from resumekit.conformance._text import safe_value
from resumekit.conformance.adapters.interface import AdapterStartError, Reply
from resumekit.conformance.results import Implementation


class PlanFunction(Protocol):
    """An in-process Python implementation of ``phase0.projection``."""

    def __call__(
        self, events: list[dict[str, Any]], *, expected_high_water: int | None = ..., profile: str = ...
    ) -> Mapping[str, Any]: ...


class PythonAdapter:
    """Calls a Python function in this process (``--adapter python:package.module:attribute``)."""

    def __init__(
        self,
        function: PlanFunction,
        *,
        name: str,
        version: str = "",
        adapter: str = "",
        profiles: tuple[str, ...] = ("core", "strict"),
    ) -> None:
        self._function = function
        self.implementation = Implementation(
            name=name,
            version=version,
            language="python",
            capabilities=("phase0.projection",),
            profiles=profiles,
            adapter=adapter,
        )

    def request(self, cmd: str, **fields: Any) -> Reply:
        """Call the plan function for ``phase0.plan``; skip every other command."""
        if cmd != "phase0.plan":
            return Reply("skipped", message=f"an in-process adapter answers only phase0.plan, not {cmd!r}")
        try:
            plan = self._function(
                fields["events"],
                expected_high_water=fields.get("expectedRuntimeEventHighWater"),
                profile=fields["profile"],
            )
        except Exception as error:
            return Reply.errored(f"the implementation raised {error!r}", context={"traceback": traceback.format_exc()})
        return Reply("result", {"plan": safe_value(plan)})

    def close(self) -> None:
        """Nothing to release: the function runs in this process."""


def load_python(spec: str) -> PythonAdapter:
    """Import ``package.module:attribute``; the attribute is a plan function or has ``build_resume_plan``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise AdapterStartError(f"python adapter {spec!r} is not of the form 'package.module:attribute'")
    # Resolve the module as ``python -m`` would: the working directory first, whichever way the kit started.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise AdapterStartError(f"cannot import {module_name!r} for adapter {spec!r}: {error!r}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise AdapterStartError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    function = getattr(target, "build_resume_plan", target)
    if not callable(function):
        raise AdapterStartError(f"{spec!r} is neither callable nor has a callable 'build_resume_plan'")
    version = str(getattr(module, "__version__", getattr(target, "version", "")))
    # An attribute `profiles` (say ("core",)) of the attribute, or else of its module, narrows what it claims;
    # by default both profiles.
    profiles = getattr(target, "profiles", getattr(module, "profiles", ("core", "strict")))
    if (
        not isinstance(profiles, (list, tuple))
        or "core" not in profiles
        or not set(profiles) <= {"core", "strict"}
    ):
        raise AdapterStartError(f"{spec!r}: 'profiles' must list 'core' and may add 'strict', got {profiles!r}")
    return PythonAdapter(
        function,
        name=str(getattr(target, "name", spec)),
        version=version,
        adapter=f"python:{spec}",
        profiles=tuple(str(p) for p in profiles),
    )

