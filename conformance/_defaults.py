"""The defaults of a run, in a module that imports nothing: the command line reads them before it loads the kit."""

from __future__ import annotations

DEFAULT_KILLS = 200  # kills in the random crash schedule of a certification; fewer make a subset run
DEFAULT_TIMEOUT = 10.0  # seconds an adapter has for each response
