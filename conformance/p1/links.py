"""Whether this machine lets the kit make the symbolic links that some scenarios plant, and which need them.

The cleanup scenarios under attack (CLEAN-2 to CLEAN-5) plant links out of the workspace root. Windows makes
a symbolic link only for a process holding the symbolic-link privilege (an elevated shell, or any user once
Developer Mode is on), so a plain user's machine refuses them. Such a scenario is then *not run*, with the
reason, before any worker starts: the set-up the kit could not make says nothing of the implementation, and
the verdict names what was not run (never a certification)."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from resumekit.conformance import _files

# The steps (scenario.py's verbs) that make a link, and the members of a ``plant`` that do.
LINK_VERBS = frozenset({"link_workspaces_to_decoy", "swap_for_link", "root_through_link"})
LINK_PLANTS = frozenset({"link_to_decoy", "link_to_sibling", "link_inside_to_decoy", "nested_links"})
REMEDY = "on Windows, turn on Developer Mode or run the kit from an elevated shell"


def fifo_refused(steps: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a scenario whose *steps* plant a FIFO cannot run here (Windows has none), or None."""
    plants = [step.get("plant") for step in steps]
    if any(isinstance(plant, Mapping) and plant.get("fifo") for plant in plants) and not hasattr(os, "mkfifo"):
        return "this system has no FIFOs, which the scenario plants"
    return None


def needs_links(steps: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a scenario's *steps* make a symbolic link."""
    for step in steps:
        if LINK_VERBS.intersection(step):
            return True
        plant = step.get("plant")
        if isinstance(plant, Mapping) and any(plant.get(member) for member in LINK_PLANTS):
            return True
    return False


@functools.lru_cache(maxsize=1)
def refused() -> str | None:
    """None where the kit can make a symbolic link to a folder and to a file in a folder of its own; otherwise
    why not, with the remedy. Looked at once per run: the answer is the machine's, not the case's."""
    folder = Path(tempfile.mkdtemp(prefix="resumekit-links-"))
    try:
        (folder / "folder").mkdir()
        (folder / "file").write_bytes(b"")
        os.symlink(folder / "folder", folder / "to-folder", target_is_directory=True)
        os.symlink(folder / "file", folder / "to-file")
    except OSError as error:
        return f"this machine refuses the symbolic links the scenario plants ({error}); {REMEDY}"
    finally:
        _files.remove(folder)
    return None
