"""Golden fixture files become frozen cases, or a clear error naming file, case, line and pointer."""

from __future__ import annotations

import dataclasses
import fnmatch
import gc
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from resumekit.conformance import _cache, _yaml, contracts, schemas
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.cases import Case
from resumekit.conformance.results import Source

SUPPORTED_SCHEMA_VERSIONS = (1,)


class FixtureError(Exception):
    """A fixture file that cannot be used: unreadable, not YAML, or breaking its schema."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        line: int | None = None,
        case_id: str | None = None,
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file, self.message, self.line, self.case_id, self.pointer = file, message, line, case_id, pointer

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        parts = [where]
        if self.case_id:
            parts.append(f"case {self.case_id!r}")
        if self.pointer is not None:
            parts.append(f"at {self.pointer or '/'}")
        return f"{': '.join(parts)}: {self.message}"


@dataclass(frozen=True, slots=True)
class Suite:
    """Every case of the golden directory, in file order."""

    cases: tuple[Case, ...]
    root: Path
    digest: str = ""  # sha256 over every fixture file's path and bytes: which golden set a run used

    def select(
        self, profile: str = "strict", only: Sequence[str] = (), kinds: Iterable[str] | None = None
    ) -> list[Case]:
        """The cases to run for *profile*, limited to ids matching any glob of *only*."""
        wanted = set(kinds) if kinds is not None else None
        opt_in = contracts.opt_in_kinds()
        order = {name: index for index, name in enumerate(contracts.kind_names())}
        chosen = [
            case
            for case in self.cases
            if case.runs_in(profile)
            and (case.kind in wanted if wanted is not None else case.kind not in opt_in)
            and (not only or any(fnmatch.fnmatchcase(case.id, pattern) for pattern in only))
        ]
        # Kinds in the registry's order (each contract's quick kinds first), each kind in file order.
        return sorted(chosen, key=lambda case: order.get(case.kind, len(order)))

    @property
    def clauses(self) -> dict[str, list[str]]:
        """Clause id -> the ids of the cases that cite it."""
        cited: dict[str, list[str]] = {}
        for case in self.cases:
            for clause in case.clauses:
                cited.setdefault(clause, []).append(case.id)
        return cited


def _ancestors(pointer: str) -> Iterator[str]:
    while pointer:
        pointer = pointer.rsplit("/", 1)[0]
        yield pointer


class _Reported:
    """JSON pointers already reported, asked in time linear in a pointer's depth, not in their number."""

    def __init__(self) -> None:
        self.pointers: set[str] = set()
        self.enclosing: set[str] = set()

    def add(self, pointer: str) -> None:
        self.pointers.add(pointer)
        self.enclosing.update(_ancestors(pointer))

    def related(self, pointer: str) -> bool:
        """Whether *pointer* is a reported one, encloses one, or lies inside one."""
        if pointer in self.pointers or pointer in self.enclosing:
            return True
        return any(ancestor in self.pointers for ancestor in _ancestors(pointer))


class _Abandon(Exception):
    """The rest of a file cannot be read; its problems are recorded already."""


_T = TypeVar("_T")


def _name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _read(path: Path, name: str) -> bytes:
    """The bytes of a fixture file: a regular file of at most ``_yaml.MAX_BYTES`` (a FIFO would block)."""
    try:
        return _yaml.read(path)
    except OSError as error:
        raise FixtureError(name, f"cannot be read: {error.strerror or error}") from None


class FixtureFile:
    """One fixture file being read: its document and how to point into it.

    With a *problems* list the file is read to the end: each case that breaks a rule is recorded there
    and left out, and the other cases still load (``resumekit validate`` names every problem at once).
    Without one, the first problem raises.
    """

    def __init__(
        self, path: Path, root: Path, problems: list[FixtureError] | None = None, raw: bytes | None = None
    ) -> None:
        self.path = path
        self.problems = problems
        self.bad_cases: set[int] = set()
        self.name = _name(path, root)
        if raw is None:
            raw = _read(path, self.name)
        try:
            self.document = _yaml.load(_yaml.decode(raw))
        except _yaml.YamlError as error:
            raise FixtureError(self.name, error.message, line=error.line) from None

    def error(self, message: str, pointer: str, case_id: str | None = None) -> FixtureError:
        """A FixtureError at *pointer* of this file, with the line it is written on."""
        return FixtureError(self.name, message, line=self.document.line_of(pointer), case_id=case_id, pointer=pointer)

    def source(self, pointer: str) -> Source:
        """Where the value at *pointer* is written."""
        return Source(self.name, self.document.line_of(pointer))

    def case_id_at(self, pointer: str) -> str | None:
        """The id of the case that *pointer* points into, when it points into one that has an id."""
        data = self.document.data
        parts = pointer.split("/")
        if len(parts) >= 3 and parts[1] == "cases" and parts[2].isdigit():
            cases = data.get("cases") if isinstance(data, dict) else None
            if isinstance(cases, list) and int(parts[2]) < len(cases) and isinstance(cases[int(parts[2])], dict):
                found = cases[int(parts[2])].get("id")
                return found if isinstance(found, str) else None
        return None

    def validated(self) -> dict[str, Any]:
        """The file's document once its schema version, kind and schema hold.

        With a problems list, each case that breaks the schema is recorded and left out.
        """
        data = self.document.data
        if not isinstance(data, dict):
            raise self.error(f"a fixture file is a YAML mapping, not {type(data).__name__}", "")
        version = data.get("schema_version")
        if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:
            raise self.error(
                f"schema_version {version!r} is not one this resumekit knows "
                f"(it reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}); upgrade resumekit or fix the file",
                "/schema_version",
            )
        kind = data.get("kind")
        known = contracts.file_kinds()
        if not isinstance(kind, str) or kind not in known:
            raise self.error(f"kind {kind!r} is not one of {sorted(known)}", "/kind")
        schema = known[kind].schema
        if self.problems is None:
            violation = schemas.first_violation(schema, data, exact_integers=True)
            if violation is not None:
                raise self.error(violation.message, violation.pointer, self.case_id_at(violation.pointer))
            return data
        found: list[FixtureError] = []
        reported = _Reported()
        for violation in schemas.violations(schema, data, exact_integers=True):
            # One problem, one report: an enclosing oneOf repeats the error best_match already gave.
            if reported.related(violation.pointer):
                continue
            reported.add(violation.pointer)
            found.append(self.error(violation.message, violation.pointer, self.case_id_at(violation.pointer)))
        self.problems.extend(found)
        for error in found:
            parts = (error.pointer or "").split("/")
            if len(parts) >= 3 and parts[1] == "cases" and parts[2].isdigit():
                self.bad_cases.add(int(parts[2]))
            else:  # outside any case: nothing in the file can be trusted
                raise _Abandon
        return data

    def good_cases(self, data: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The file's cases with their indexes, less those that broke the schema."""
        for index, raw in enumerate(data["cases"]):
            if index not in self.bad_cases:
                yield index, raw

    def report(self, error: FixtureError) -> None:
        """Raise *error*, or record it if problems are being collected."""
        if self.problems is None:
            raise error
        self.problems.append(error)

    def attempt(self, build: Callable[[], _T]) -> _T | None:
        """*build*'s value; when it raises FixtureError, None if problems are being collected."""
        try:
            return build()
        except FixtureError as error:
            if self.problems is None:
                raise
            self.problems.append(error)
            return None


def load_file(
    path: Path, root: Path | None = None, problems: list[FixtureError] | None = None, raw: bytes | None = None
) -> list[Case]:
    """Every case of one fixture file, or FixtureError.

    With *problems*, every problem found is appended to it instead, and the cases without one are returned.
    *raw* is the file's bytes when the caller has read them already.
    """
    # A file of many cases makes millions of small objects and no cycles: the collector's full passes over
    # them would make loading grow faster than the file.
    collecting = gc.isenabled()
    gc.disable()
    try:
        file = FixtureFile(path, root or path.parent, problems, raw)
        data = file.validated()
        return list(contracts.file_kinds()[data["kind"]].read(file, data))
    except _Abandon:
        return []
    except FixtureError as error:
        if problems is None:
            raise
        problems.append(error)
        return []
    finally:
        if collecting:
            gc.enable()


def fixture_files(root: Path) -> list[Path]:
    """The fixture files below *root*, in a stable order on every OS; FileNotFoundError if it is no folder."""
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise FileNotFoundError(f"the golden folder {root} {what}")
    return sorted(
        (p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()), key=lambda p: p.as_posix()
    )


def load_suite(root: Path | None = None, *, cache: bool = True) -> Suite:
    """Every case below *root* (the bundled golden directory by default); ids are unique across files.

    With *cache*, a golden set validated before is read back from the user's cache when every byte it was
    built from is the same (``_cache``); otherwise each file is parsed and checked, and the result cached.
    """
    root = root or golden_dir()
    files = [(path, _name(path, root)) for path in fixture_files(root)]
    contents = [_read(path, name) for path, name in files]
    digest = hashlib.sha256()
    for (_, name), raw in zip(files, contents, strict=True):
        digest.update(name.encode() + b"\0" + raw + b"\0")
    # The registered contracts read the files: another set of them must not trust this one's entry.
    key = _cache.key(f"{contracts.fingerprint()}\0{digest.hexdigest()}") if cache else None
    if key is not None:
        cached = _cache.load(root, key)
        if cached is not None:
            try:
                return Suite(_decode_cases(cached), root, digest.hexdigest())
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a cache from elsewhere or damaged: read the files
    cases: list[Case] = []
    seen: dict[str, Source] = {}
    for (path, _), raw in zip(files, contents, strict=True):
        for case in load_file(path, root, raw=raw):
            if case.id in seen:
                raise FixtureError(
                    case.source.file,
                    f"duplicate case id (first defined at {seen[case.id]})",
                    line=case.source.line,
                    case_id=case.id,
                )
            seen[case.id] = case.source
            cases.append(case)
    if key is not None:
        _cache.store(root, key, _encode_cases(cases))
    return Suite(tuple(cases), root, digest.hexdigest())


def _encode_cases(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Cases as JSON values: each field by name, the source as [file, line], the kind to rebuild it."""
    encoded = []
    for case in cases:
        item: dict[str, Any] = {"kind": type(case).__name__}
        for spec in dataclasses.fields(case):
            value = getattr(case, spec.name)
            item[spec.name] = [value.file, value.line] if isinstance(value, Source) else value
        encoded.append(item)
    return encoded


def _decode_cases(encoded: Any) -> tuple[Case, ...]:
    """The cases of ``_encode_cases``; KeyError, TypeError or ValueError when *encoded* is not its output."""
    types = contracts.case_types()
    shapes = {kind: _shape(cls) for kind, cls in types.items()}
    cases = []
    for item in encoded:
        kind = item["kind"]
        names, tuples = shapes[kind]
        if item.keys() != names:
            raise ValueError("the cached case's fields are not this kit's")
        values = {name: item[name] for name in names if name != "kind"}
        for name in tuples:
            values[name] = tuple(values[name])
        file, line = values["source"]
        values["source"] = Source(file, line)
        cases.append(types[kind](**values))
    return tuple(cases)


def _shape(cls: type[Case]) -> tuple[set[str], list[str]]:
    """A case class's encoded keys, and its fields held as tuples."""
    specs = dataclasses.fields(cls)
    return {"kind", *(spec.name for spec in specs)}, [spec.name for spec in specs if str(spec.type).startswith("tuple")]
