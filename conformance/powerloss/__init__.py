"""Simulated power loss: a FUSE layer over the workspace that drops every write never synced (Linux).

Fault model ``power loss (simulated, unsynced writes dropped)``. The kit mounts the layer
(``_server``, a separate process) over the implementation's workspace. A write, a change of size and a
directory change pass through to a backing folder at once, so the implementation sees an ordinary
file system, but each becomes durable only as POSIX promises at its weakest: a file's data when that
file is synced, a name (a new file or directory, a rename, an unlink) when its directory is synced.
A power cut kills the implementation, unmounts the layer (so the kernel keeps no page of it), puts
back only what was durable and mounts again. Of the changes made to a file since its last sync, a cut
keeps a prefix in write order, each file independently (``model.CUT_MODES`` say how long a prefix), so
a write the kernel handed to the layer in pieces is torn as the one write it was.

What it proves: every acknowledged row was synced, with its name, before its acknowledgement, so a
power cut after the acknowledgement cannot lose it. What it does not: that the drive honours the
sync (a disk that lies about its cache is not simulated), or that the kernel and the file system
order writes as a real one does (the layer writes nothing back on its own, treats a rename as volatile
until its directory is synced, and never writes a later page of a file before an earlier one: a store
could tell that hole from damage only with a checksum per page, which neither contract asks for).

Importing this module imports no FUSE binding: ``unavailable`` says why the layer cannot run here
(not Linux, no ``/dev/fuse``, no permission, no libfuse, no ``mfusepy``), and only the server process
imports the binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resumekit.conformance.powerloss.layer import (
        FAULT_MODEL,
        SYNC_DELAY,
        LayerError,
        PowerLayer,
        PowerLoss,
        unavailable,
    )
    from resumekit.conformance.powerloss.model import CUT_MODES

__all__ = ["CUT_MODES", "FAULT_MODEL", "SYNC_DELAY", "LayerError", "PowerLayer", "PowerLoss", "unavailable"]


def __getattr__(name: str) -> Any:
    # The shell is imported on first use, so that importing the pure model (``powerloss.model``) runs no
    # code that touches files or processes.
    if name == "CUT_MODES":
        from resumekit.conformance.powerloss import model

        return model.CUT_MODES
    if name in __all__:
        from resumekit.conformance.powerloss import layer

        return getattr(layer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
