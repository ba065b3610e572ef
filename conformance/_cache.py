"""A cache of what the kit derives from files, keyed by a digest of every byte it was derived from.

An entry is trusted only when its key, a digest over the kit's version, its own code, its schemas and
the source files' contents, is the one asked for: a changed byte anywhere gives a new key, whatever the
files' times say. Nothing here is required: a cache folder that cannot be written, or an entry that is
damaged, unreadable or from another kit, means reading the files again, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from resumekit.conformance import __version__, _yaml
from resumekit.conformance._resources import cache_dir, schemas_dir

FORMAT = 1
MAX_ENTRY_BYTES = 512 * 1024 * 1024  # a larger entry is not read; the files are read instead
_PACKAGE = Path(__file__).resolve().parent


@cache
def _code_digest() -> str:
    """The kit's own Python sources and schemas: a changed loader or schema must not trust an old entry."""
    digest = hashlib.sha256(f"{FORMAT}\0{__version__}\0".encode())
    for folder, pattern in ((_PACKAGE, "*.py"), (schemas_dir(), "*.json")):
        for path in sorted(folder.rglob(pattern), key=lambda p: p.as_posix()):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def key(content_digest: str) -> str | None:
    """The cache key of files whose contents digest to *content_digest*; None when caching is off."""
    if cache_dir() is None:
        return None
    try:
        return hashlib.sha256(f"{_code_digest()}\0{content_digest}".encode()).hexdigest()
    except OSError:
        return None


def _entry(root: Path) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    # One entry per golden folder: a changed folder replaces its entry, so the cache does not grow.
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return folder / f"golden-{name}.json"


def load(root: Path, wanted: str) -> Any | None:
    """The value stored for *root* under the key *wanted*, or None."""
    entry = _entry(root)
    if entry is None:
        return None
    try:
        document = json.loads(_yaml.read(entry, MAX_ENTRY_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("key") != wanted:
        return None
    return document.get("value")


def store(root: Path, stored: str, value: Any) -> None:
    """Keep *value* for *root* under the key *stored*, atomically; quietly nothing when it cannot be written."""
    entry = _entry(root)
    if entry is None:
        return
    with contextlib.suppress(OSError, ValueError, TypeError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": FORMAT, "key": stored, "value": value}, ensure_ascii=False, allow_nan=False)
        descriptor, temporary = tempfile.mkstemp(prefix=".golden-", suffix=".tmp", dir=entry.parent)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, entry)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
