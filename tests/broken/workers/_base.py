"""What every broken worker shares: the reference worker that remembers its own rows, and two small patches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from resumekit.reference.p1 import git
from resumekit.reference.p1 import worker as reference
from resumekit.reference.p1.journal import Row


class _Tracked(reference.Worker):
    """The reference worker, remembering which rows this process wrote (to tell a resumed row apart)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mine: set[int] = set()

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        row = super()._record(attempt, phase, **columns)
        self.mine.add(row.seq)
        return row


class _AtBoundary(_Tracked):
    """A worker that knows when it renews at a step boundary (while it records a row), not before a governed
    side effect: the bugs of the local clock skip only the boundary's renewal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.at_boundary = False

    def _record(self, attempt: reference.Attempt, phase: str, **columns: Any) -> Row:
        self.at_boundary = True
        try:
            return super()._record(attempt, phase, **columns)
        finally:
            self.at_boundary = False


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _write_origin(attempt: reference.Attempt, cwd: Path, *args: str) -> None:
    """Run git straight on the attempt's origin repository, behind its hook's back (CP-17 forbids it)."""
    origin = Path(url2pathname(urlparse(str(attempt.task["origin_url"])).path))
    git.run(["--git-dir", str(origin), *args], cwd=cwd)
