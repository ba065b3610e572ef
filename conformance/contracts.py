"""The registry of contracts: each contract the kit can certify is one value, and the rest of the kit asks here.

A contract (Phase 0, P1, or one registered by a test or a third party) says what its golden files are
and how each is read, which kinds of case it has, what each kind needs an implementation to claim, how
each kind is run, which spec documents define its clauses, and any summary table of its own that every
report carries (P1's gates). The loader, the runner, the CLI, shards, the reports and the pytest plugin
iterate over the registered contracts and name none of them.

The built-in contracts are found on first use, so that importing this module loads neither of them.
Others register with ``register`` (tests do) or through the ``resumekit.contracts`` entry-point group,
whose entries name a ``Contract`` value (``package.module:CONTRACT``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resumekit.conformance.results import Summary, SummaryTable, name_contract

if TYPE_CHECKING:
    from resumekit.conformance.adapters import Adapter, ProcessAdapter
    from resumekit.conformance.cases import Case
    from resumekit.conformance.fixtures import FixtureFile
    from resumekit.conformance.history import ReportBudget
    from resumekit.conformance.keep import Keeper
    from resumekit.conformance.powerloss import PowerLoss
    from resumekit.conformance.results import CaseResult

CaseRunner = Callable[["Case"], "CaseResult"]
Reader = Callable[["FixtureFile", dict[str, Any]], Iterator["Case"]]

BUILT_IN = ("resumekit.conformance.phase0.contract:CONTRACT", "resumekit.conformance.p1.contract:CONTRACT")
ENTRY_POINT_GROUP = "resumekit.contracts"


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of case: what an implementation must claim to be asked it, and how the runner schedules it."""

    name: str
    capabilities: tuple[str, ...]
    description: str = ""
    opt_in: bool = False  # runs only when named with --kind: campaigns too long for every certification
    in_process: bool = False  # its runner needs only the run's adapter, so an in-process adapter runs it
    serial: bool = False  # its cases form one unit on one thread (asked in order through the run's adapter)
    first: bool = False  # its single cases take longest: start them first when cases run side by side
    seeded: bool = False  # its cases draw from the run's seed, which the report then records
    campaign: bool = False  # a passing result's message is a campaign summary worth printing


@dataclass(frozen=True, slots=True)
class FileKind:
    """A kind of fixture file: the ``kind`` its files declare, the schema they satisfy, and their reader."""

    name: str
    schema: str  # the $id of the schema
    read: Reader


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a contract may use to build the runners of its kinds for one run.

    *factory* is None for an in-process adapter: then only kinds whose runner needs just *adapter*
    (``Kind.in_process``) can run.
    """

    adapter: Adapter
    profile: str
    factory: Callable[[], ProcessAdapter] | None = None
    adapter_spec: str = ""
    seed: int = 0  # the run's seed: --seed, or one drawn for the run
    requested_seed: int | None = None  # --seed as given, None when the run drew its own
    kills: int | None = None
    power: PowerLoss | None = None
    on_kill: Callable[[int, int], None] | None = None
    jobs: int = 1
    keeper: Keeper | None = None  # --keep-failed: where a failing case's world is kept
    budget: ReportBudget | None = None  # the bytes the run's report may still keep of failing cases' histories


@dataclass(frozen=True, slots=True)
class Contract:
    """Everything the kit knows of one contract, in one value."""

    name: str  # a short word: "phase0", "p1"
    title: str  # how people call it: "Phase 0", "P1"
    kinds: tuple[Kind, ...]
    files: tuple[FileKind, ...]
    case_types: tuple[type[Case], ...]
    spec_files: tuple[str, ...]  # the documents whose numbered clauses the cases cite
    runners: Callable[[RunContext], Mapping[str, CaseRunner]]
    kit_spec_files: tuple[str, ...] = ()  # documents of the kit's own side (a simulated peer), not binding
    spec_root: Callable[[], Path] | None = None  # where spec_files live; the kit's spec folder when None
    schema_dirs: tuple[Path, ...] = ()  # schemas of its own beyond the kit's schemas/ folder
    summary: Summary | None = None
    summarize: Callable[[Sequence[CaseResult], str], tuple[Mapping[str, Any], ...]] | None = None
    extra_capabilities: Callable[[Case], tuple[str, ...]] = field(default=lambda case: ())
    # Clauses that bind an implementation but have no golden case yet, and why: `validate` reports them
    # apart from uncited clauses, and a test keeps each list exact, so it can only shrink on purpose.
    not_yet_covered: Mapping[str, str] = field(default_factory=dict)
    # Clauses of the binding documents that bind the kit itself (what it serves, how it gathers evidence):
    # no case has to cite them, and `list --clauses` says so.
    kit_clauses: tuple[str, ...] = ()
    # The checks its results' mismatches name (their ``check``), each as (name, clauses, when), for
    # ``resumekit list --checks``; called when listed, so the contract's value stays cheap to import.
    checks: Callable[[], Sequence[tuple[str, tuple[str | None, ...], str]]] | None = None

    def kind(self, name: str) -> Kind | None:
        """The kind called *name*, or None."""
        return next((kind for kind in self.kinds if kind.name == name), None)

    def spec_paths(self, *, kit_side: bool | None = None) -> tuple[Path, ...]:
        """The contract's spec documents: all of them, only the kit's side (True) or only the binding ones (False)."""
        if self.spec_root is not None:
            root = self.spec_root()
        else:
            from resumekit.conformance._resources import spec_dir

            root = spec_dir()
        names = self.spec_files if kit_side is None else self.kit_spec_files if kit_side else self.binding_spec_files
        return tuple(root / name for name in names)

    @property
    def binding_spec_files(self) -> tuple[str, ...]:
        """The spec documents that bind an implementation (the kit's own side left out)."""
        return tuple(name for name in self.spec_files if name not in self.kit_spec_files)


def lazy_reader(module: str, name: str) -> Reader:
    """The reader *name* of *module*, imported when the first file of its kind is read.

    A contract's value stays cheap to import: its readers (and what they import) load only when needed.
    """

    def read(file: FixtureFile, data: dict[str, Any]) -> Iterator[Case]:
        reader: Reader = getattr(importlib.import_module(module), name)
        yield from reader(file, data)

    read.__qualname__ = read.__name__ = name
    return read


class ContractError(Exception):
    """A contract that cannot be registered or loaded: a clash of names, or an entry point that fails."""


_registered: list[Contract] = []
_loaded = False


def _load(reference: str) -> Contract:
    module, _, attribute = reference.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    if not isinstance(value, Contract):
        raise ContractError(f"{reference!r} is {type(value).__name__}, not a resumekit Contract")
    return value


def _discover() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    found = [_load(reference) for reference in BUILT_IN]
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found.append(_load(entry.value))
        except Exception as error:  # a third party's broken plug-in is a clear error, never a traceback
            raise ContractError(f"the contract entry point {entry.name!r} ({entry.value!r}) fails: {error}") from None
    for contract in found:
        _add(contract)


def _add(contract: Contract) -> None:
    for other in _registered:
        if other.name == contract.name:
            raise ContractError(f"a contract called {contract.name!r} is registered already")
        clash = {kind.name for kind in other.kinds} & {kind.name for kind in contract.kinds}
        clash |= {file.name for file in other.files} & {file.name for file in contract.files}
        if clash:
            raise ContractError(f"contract {contract.name!r} reuses {sorted(clash)} of contract {other.name!r}")
    _registered.append(contract)
    name_contract(contract.name, contract.title)
    _index.cache_clear()


def register(contract: Contract) -> None:
    """Add *contract* after those already known; ContractError if a name, kind or file kind is taken."""
    _discover()
    _add(contract)


def unregister(name: str) -> None:
    """Forget the contract called *name* (tests register one for a while)."""
    _discover()
    _registered[:] = [contract for contract in _registered if contract.name != name]
    name_contract(name, None)
    _index.cache_clear()


def registered() -> tuple[Contract, ...]:
    """Every known contract, the built-in ones first, in the order they were registered."""
    _discover()
    return tuple(_registered)


@dataclass(frozen=True, slots=True)
class _Index:
    kinds: dict[str, tuple[Contract, Kind]]
    files: dict[str, FileKind]
    order: tuple[str, ...]


def _index_of(contracts: tuple[Contract, ...]) -> _Index:
    kinds = {kind.name: (contract, kind) for contract in contracts for kind in contract.kinds}
    files = {file.name: file for contract in contracts for file in contract.files}
    return _Index(kinds, files, tuple(kinds))


class _IndexCache:
    """The lookups of the registered contracts, rebuilt whenever one is added or removed."""

    def __init__(self) -> None:
        self._value: _Index | None = None

    def __call__(self) -> _Index:
        if self._value is None:
            self._value = _index_of(registered())
        return self._value

    def cache_clear(self) -> None:
        self._value = None


_index = _IndexCache()


def kind_names() -> tuple[str, ...]:
    """Every kind of every contract, in registration order: the order a run goes through them."""
    return _index().order


def kind(name: str) -> Kind | None:
    """The kind called *name*, or None."""
    found = _index().kinds.get(name)
    return found[1] if found else None


def contract_of(kind_name: str) -> Contract | None:
    """The contract that has the kind *kind_name*, or None."""
    found = _index().kinds.get(kind_name)
    return found[0] if found else None


def file_kinds() -> dict[str, FileKind]:
    """Every fixture-file kind, by the name its files declare."""
    return _index().files


def opt_in_kinds() -> tuple[str, ...]:
    """The kinds that run only when named with --kind."""
    return tuple(name for name, (_, kind) in _index().kinds.items() if kind.opt_in)


def required_capabilities(case: Case) -> tuple[str, ...]:
    """What an implementation must claim to be asked *case*: its kind's capabilities and any its steps need."""
    found = _index().kinds.get(case.kind)
    if found is None:
        return ()
    contract, kind = found
    return kind.capabilities + contract.extra_capabilities(case)


def runners(context: RunContext) -> dict[str, CaseRunner]:
    """The runner of every kind some registered contract can run in *context*."""
    built: dict[str, CaseRunner] = {}
    for contract in registered():
        built.update(contract.runners(context))
    return built


def summaries(kinds: Iterable[str], results: Sequence[CaseResult], profile: str) -> tuple[SummaryTable, ...]:
    """The summary tables of the contracts that have one and some of whose *kinds* were selected."""
    tables = []
    selected = set(kinds)
    for contract in registered():
        if contract.summary is None or contract.summarize is None:
            continue
        if not selected & {kind.name for kind in contract.kinds}:
            continue
        mine = {kind.name for kind in contract.kinds}
        rows = contract.summarize([result for result in results if result.kind in mine], profile)
        tables.append(SummaryTable(contract.name, contract.summary, rows))
    return tuple(tables)


def spec_paths(*, kit_side: bool | None = None) -> tuple[Path, ...]:
    """The spec documents of every contract (see ``Contract.spec_paths``)."""
    return tuple(path for contract in registered() for path in contract.spec_paths(kit_side=kit_side))


def not_yet_covered() -> dict[str, str]:
    """Every contract's clauses that no golden case covers yet, with why."""
    return {clause: why for contract in registered() for clause, why in contract.not_yet_covered.items()}


def kit_clauses() -> frozenset[str]:
    """Every contract's clauses that bind the kit rather than an implementation (beside the kit's documents)."""
    return frozenset(clause for contract in registered() for clause in contract.kit_clauses)


def schema_dirs() -> tuple[Path, ...]:
    """The schema folders registered contracts bring beyond the kit's own."""
    return tuple(folder for contract in registered() for folder in contract.schema_dirs)


def fingerprint() -> str:
    """Which contracts, kinds and case classes are registered: part of the golden cache's key."""
    parts = []
    for contract in registered():
        types = ",".join(f"{cls.__module__}.{cls.__qualname__}" for cls in contract.case_types)
        parts.append(f"{contract.name}:{','.join(kind.name for kind in contract.kinds)}:{types}")
    return ";".join(parts)


def case_types() -> dict[str, type[Case]]:
    """Every case class of every contract, by class name (one kind may have several classes)."""
    return {cls.__name__: cls for contract in registered() for cls in contract.case_types}
