"""``--keep-failed`` for a P1 scenario: which parts of its world are kept, and what each holds.

Called once the scenario's processes have ended and before its world is removed (``scenario.run_steps``).
The copy itself, and everything that makes it safe against what the worker left, is ``keep``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resumekit.conformance import _files
from resumekit.conformance.keep import Keeper, KeepError
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.p1.world import World
from resumekit.conformance.results import CaseResult, Outcome

KEPT = (Outcome.FAILED, Outcome.ERRORED)


def keep_world(keeper: Keeper, case: ScenarioCase, world: World, result: CaseResult, log: Path) -> CaseResult:
    """Keep the world of a failed or errored *result* (*log* is the control plane's log); the result, its
    message telling where the world is kept, or why it could not be."""
    if result.outcome not in KEPT:
        return result
    copies, about = _parts(world, log)
    listings = {f"{label}-root": root for label, (root, _) in _homes(world).items()}
    try:
        where = keeper.keep(
            case.id,
            kind=case.kind,
            copies=copies,
            listings=listings,
            history=_history(world, result),
            result=result.to_dict(),
            about=about,
        )
    except (OSError, KeepError, _files.Refused) as error:
        note = f"--keep-failed could not keep this case's world: {error}"
    else:
        note = f"its world is kept in {where} (README.txt there says how to run it again)"
    return dataclasses.replace(result, message="\n".join(part for part in (result.message, note) if part))


def _homes(world: World) -> dict[str, tuple[Path, Path]]:
    """Each worker's workspace root and state directory, by a label: ``workspaces`` for the first worker's
    pair, the folder's own name for a second worker's."""
    pairs = {"workspaces": (world.workspace_root, world.state_dir)}
    for root, state in world.homes.values():
        if (root, state) not in pairs.values():
            pairs[root.name] = (root, state)
    return pairs


def _parts(world: World, log: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The folders and files copied, by label, and what each holds in words."""
    copies: dict[str, Path] = {}
    about: dict[str, str] = {}
    for label, (_, state) in _homes(world).items():
        name = "state" if label == "workspaces" else state.name
        copies[name] = state
        about[name] = "a worker's state directory: its journal (SQLite) and its task caches (tasks/)"
    copies["control-plane.jsonl"] = log
    about["control-plane.jsonl"] = "the control plane's log, an entry a line (CP-19)"
    for repository, origin in sorted(world.origins.items()):
        copies[f"origin-{repository}"] = origin.path
        about[f"origin-{repository}"] = f"the bare git origin of {repository!r}, with the kit's hooks"
    return copies, about


def _history(world: World, result: CaseResult) -> list[Mapping[str, Any]]:
    """The case's whole history when the world records one, else the copy its result carries."""
    recorded = getattr(world, "history", None)
    if recorded is not None and hasattr(recorded, "events"):
        return [event.to_dict() for event in recorded.events()]
    return list(result.history)
