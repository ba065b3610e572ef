"""The editable install, ``pip install -e .``: the checkout's ``conformance/`` and ``reference/`` as ``resumekit.*``.

The wheel installs those two folders as ``resumekit.conformance`` and ``resumekit.reference`` (the ``sources``
rewrite in pyproject.toml). Hatchling's own editable wheel cannot express that rewrite, so for the editable
build only this hook makes the wheel carry two files instead of the packages and their data:

- ``__editable___resumekit_finder.py``, a finder appended to ``sys.meta_path`` that loads the two packages
  from the checkout, and makes ``resumekit`` a namespace package when no folder of that name is on ``sys.path``
  (the ``__editable__`` prefix is setuptools' for such finders: pytest, for one, leaves such a module alone);
- ``__editable__.resumekit.pth``, whose one line imports that finder when the interpreter starts.

Nothing of the checkout goes on ``sys.path``, so its ``conformance``, ``reference``, ``tests`` or ``noxfile``
do not become importable as top-level names. The data are not copied either: run from a checkout,
``resumekit.conformance._resources`` finds ``schemas/``, ``golden/`` and ``docs/spec/`` beside the package.
The standard wheel and the sdist are built exactly as without this hook.

Hatchling builds the editable wheel this way only when ``dev-mode-dirs`` is set (otherwise it refuses the
rewrite); it writes those folders into a ``.pth`` file of its own, so the hook checks that they hold nothing
importable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FINDER = "__editable___resumekit_finder"  # conformance/adapters/factory.py imports it by this name for the reference
PTH = "__editable__.resumekit.pth"
# Import name -> folder of the checkout; the wheel's `sources` table in pyproject.toml says the same.
PACKAGES = {"resumekit.conformance": "conformance", "resumekit.reference": "reference"}

_FINDER_SOURCE = '''\
"""resumekit installed editable: its packages load from the checkout at ROOT (written by hatch_build.py)."""

import sys

ROOT = {root!r}
PACKAGES = {packages!r}
NAMESPACE = "resumekit"


class ResumekitCheckoutFinder:
    """Loads resumekit.conformance and resumekit.reference from ROOT, after every other finder.

    Last, so that a resumekit found on sys.path first (an unpacked wheel on PYTHONPATH) still wins.
    """

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname == NAMESPACE:
            from importlib.machinery import ModuleSpec

            # No folder of that name was found on sys.path: a namespace package with no folder of its own.
            return ModuleSpec(NAMESPACE, None, is_package=True)
        folder = PACKAGES.get(fullname)
        if folder is None:
            return None
        import os.path
        from importlib.util import spec_from_file_location

        location = os.path.join(ROOT, folder)
        init = os.path.join(location, "__init__.py")
        if not os.path.isfile(init):
            raise ModuleNotFoundError(
                f"resumekit is installed editable from {{ROOT}}, which has no {{folder}}/__init__.py any more: "
                "reinstall it (python -m pip install -e .) from its checkout",
                name=fullname,
            )
        return spec_from_file_location(fullname, init, submodule_search_locations=[location])


if not any(getattr(finder, "__name__", "") == ResumekitCheckoutFinder.__name__ for finder in sys.meta_path):
    sys.meta_path.append(ResumekitCheckoutFinder)
'''


class EditableFinderHook(BuildHookInterface):
    """For the editable wheel only: a finder module and the ``.pth`` line that imports it."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            return
        self._check_dev_mode_dirs()
        root = os.path.normpath(os.path.abspath(self.root))
        self._scratch = tempfile.mkdtemp(prefix="resumekit-editable-")
        finder = os.path.join(self._scratch, f"{FINDER}.py")
        with open(finder, "w", encoding="utf-8", newline="\n") as out:
            out.write(_FINDER_SOURCE.format(root=root, packages=PACKAGES))
        pth = os.path.join(self._scratch, PTH)
        with open(pth, "w", encoding="utf-8", newline="\n") as out:
            out.write(f"import {FINDER}\n")
        # Replaces the wheel's force-include (the data folders) for this build: the checkout has them.
        build_data["force_include_editable"] = {finder: f"{FINDER}.py", pth: PTH}

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def _check_dev_mode_dirs(self) -> None:
        for relative in self.build_config.dev_mode_dirs:
            folder = os.path.join(self.root, relative)
            names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
            importable = [n for n in names if n.endswith(".py") or os.path.isdir(os.path.join(folder, n))]
            if importable:
                raise ValueError(
                    f"dev-mode-dirs entry {relative!r} goes on sys.path in an editable install, and it holds "
                    f"importable names ({', '.join(importable[:5])}): name a folder with no Python and no folder"
                )
