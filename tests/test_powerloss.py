"""The power-loss fault model: the durable model's rules, the FUSE layer, and the stores it must catch.

The model tests are pure and run everywhere. The rest mount the layer and skip, with the reason,
where it cannot run (not Linux, no /dev/fuse, no permission, no libfuse or mfusepy): there the kit
reports the power-loss cases as not run, which ``test_without_fuse_the_cases_are_not_run`` checks.
"""

from __future__ import annotations

import functools
import os
import random
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumekit.conformance import _files, powerloss
from resumekit.conformance._resources import golden_dir
from resumekit.conformance.adapters import process_factory, split_command
from resumekit.conformance.cases import Case
from resumekit.conformance.fixtures import load_file
from resumekit.conformance.p1 import harness
from resumekit.conformance.p1.cases import ScenarioCase
from resumekit.conformance.phase0 import crash
from resumekit.conformance.phase0.cases import CrashCase, ScheduleCase
from resumekit.conformance.powerloss import layer as powerloss_layer
from resumekit.conformance.powerloss.model import CUT_MODES, PAGE, Durable, Op, apply_ops, page_cuts
from resumekit.conformance.results import Outcome, Run
from tests.broken.durability import MODES
from tests.support import NODE, python_command
from tests.support import ROOT as REPOSITORY

# -- the model (pure) ----------------------------------------------------------------------------------

ROOT, DIR, FILE, OTHER, THIRD = 1, 2, 3, 4, 5


def test_a_write_is_durable_only_once_its_file_and_its_name_are_synced() -> None:
    model = Durable(ROOT)
    model.write(FILE, 0, b"row\n")
    assert model.resolve(("ledger",)) is None
    model.sync_file(FILE)
    assert model.resolve(("ledger",)) is None  # the data is safe, the name is not
    model.sync_dir(ROOT, {"ledger": (FILE, "file", None)})
    assert model.resolve(("ledger",)) == b"row\n"
    model.write(FILE, 4, b"more\n")
    assert model.resolve(("ledger",)) == b"row\n"
    assert model.unsynced() == 1


def test_a_name_synced_before_its_data_survives_empty() -> None:
    model = Durable(ROOT)
    model.write(FILE, 0, b"row\n")
    model.sync_dir(ROOT, {"ledger": (FILE, "file", None)})
    assert model.resolve(("ledger",)) == b""


def test_a_rename_stays_volatile_until_its_directory_is_synced() -> None:
    model = Durable(ROOT)
    model.sync_dir(ROOT, {"cache": (FILE, "file", None)})
    model.write(FILE, 0, b"old")
    model.sync_file(FILE)
    model.write(OTHER, 0, b"new")
    model.sync_file(OTHER)  # the temporary file is synced, the replace is not
    cut = model.cut("lose", 0)
    assert [(parts, content) for parts, _, content in cut.walk()] == [(("cache",), b"old")]
    model.sync_dir(ROOT, {"cache": (OTHER, "file", None)})
    assert model.resolve(("cache",)) == b"new"


def test_a_new_directory_needs_its_parent_synced() -> None:
    model = Durable(ROOT)
    model.sync_dir(DIR, {"ledger": (FILE, "file", None)})
    assert model.resolve(("runs", "ledger")) is None
    model.sync_dir(ROOT, {"runs": (DIR, "dir", None)})
    assert model.resolve(("runs", "ledger")) == b""


def test_a_truncate_is_data_of_its_file() -> None:
    model = Durable(ROOT)
    model.sync_dir(ROOT, {"ledger": (FILE, "file", None)})
    model.write(FILE, 0, b"row\ntorn")
    model.sync_file(FILE)
    model.truncate(FILE, 4)
    assert model.resolve(("ledger",)) == b"row\ntorn"
    model.sync_file(FILE)
    assert model.resolve(("ledger",)) == b"row\n"


def test_a_write_past_the_end_leaves_zeros() -> None:
    assert apply_ops(b"ab", [Op(1, FILE, 4, b"z")]) == b"ab\0\0z"


def _torn(mode: str, seed: int, offset: int, size: int) -> bytes:
    model = Durable(ROOT)
    model.sync_dir(ROOT, {"ledger": (FILE, "file", None)})
    model.write(FILE, 0, b"a" * offset)
    model.sync_file(FILE)
    model.write(FILE, offset, b"b" * size)
    cut = model.cut(mode, seed)
    return cut.files[FILE]


def test_a_byte_tear_keeps_a_strict_prefix_of_the_last_write() -> None:
    kept = {len(_torn("tear-byte", seed, 10, 50)) - 10 for seed in range(200)}
    assert kept <= set(range(1, 50))
    assert len(kept) > 10


def test_a_page_tear_cuts_at_4_kib_boundaries() -> None:
    ends = {len(_torn("tear-page", seed, 100, 3 * PAGE)) for seed in range(200)}
    assert ends == {100, PAGE, 2 * PAGE, 3 * PAGE, 100 + 3 * PAGE}


def test_a_subset_cut_is_replayable_and_spares_the_last_file_nothing() -> None:
    def cut(seed: int) -> tuple[bytes, bytes]:
        model = Durable(ROOT)
        for index in range(20):
            model.write(OTHER, index, b"x")
        model.write(FILE, 0, b"last")
        result = model.cut("subset", seed)
        return result.files.get(OTHER, b""), result.files.get(FILE, b"")

    assert cut(3) == cut(3)
    assert all(cut(seed)[1] == b"" for seed in range(20))
    assert len({cut(seed)[0] for seed in range(20)}) > 1


def _prefixes(durable: bytes, ops: list[Op], *, torn: bool = True) -> set[bytes]:
    """Every content a prefix of *ops* in write order can leave: whole changes, then part of the next write."""
    legal = set()
    for count in range(len(ops) + 1):
        legal.add(apply_ops(durable, ops[:count]))
        following = ops[count] if count < len(ops) else None
        if torn and following is not None and following.data is not None:
            for size in range(1, len(following.data)):
                head = Op(following.seq, following.node, following.offset, following.data[:size])
                legal.add(apply_ops(durable, [*ops[:count], head]))
    return legal


def _ledger(durable: bytes) -> Durable:
    model = Durable(ROOT)
    model.sync_dir(ROOT, {"ledger": (FILE, "file", None)})
    model.write(FILE, 0, durable)
    model.sync_file(FILE)
    return model


ROW = b"".join(b'{"id":"e%d","payload":"%s"}\n' % (n, b"p" * 90) for n in range(2))  # no zero byte in it


def test_a_write_the_kernel_split_at_a_page_tears_as_one_write() -> None:
    # The shape that failed the reference: a row crossing a 4 KiB boundary reaches the layer as two
    # writes, and a tear that kept part of the second without the first left zero bytes before it.
    durable = b"r" * (PAGE - 40)
    cut_at = PAGE - len(durable)
    seen = set()
    for seed in range(300):
        model = _ledger(durable)
        model.write(FILE, len(durable), ROW[:cut_at])
        model.write(FILE, PAGE, ROW[cut_at:])
        content = model.cut("tear-byte", seed).files[FILE]
        assert content[: len(durable)] == durable
        kept = content[len(durable) :]
        assert 0 < len(kept) < len(ROW) and kept == ROW[: len(kept)], (seed, kept[:60])
        seen.add(len(kept))
    assert any(size > cut_at for size in seen) and any(size < cut_at for size in seen)


def test_a_page_tear_of_a_split_write_keeps_whole_pages_in_order() -> None:
    durable = b"r" * (PAGE - 40)
    ends = set()
    for seed in range(100):
        model = _ledger(durable)
        model.write(FILE, len(durable), ROW[:40])
        model.write(FILE, PAGE, ROW[40:])
        content = model.cut("tear-page", seed).files[FILE]
        assert content == durable + ROW[: len(content) - len(durable)]
        ends.add(len(content))
    assert ends == {len(durable), PAGE, len(durable) + len(ROW)}


def test_a_byte_tear_keeps_a_prefix_of_several_writes_to_one_file() -> None:
    rows = [b"first row\n", b"second row\n", b"third row\n"]
    stream = b"".join(rows)
    kept = set()
    for seed in range(300):
        model = _ledger(b"old\n")
        offset = 4
        for row in rows:
            model.write(FILE, offset, row)
            offset += len(row)
        result = model.cut("tear-byte", seed)
        content = result.files[FILE]
        assert content == b"old\n" + stream[: len(content) - 4], seed
        kept.add(len(content) - 4)
        assert "the last file's 3 unsynced write(s)" in result.kept
    assert kept == set(range(1, len(stream)))


def test_a_tear_keeps_a_truncate_before_the_bytes_after_it() -> None:
    # A store that cuts a torn tail and appends: the cut must not leave the new row over the old tail.
    outcomes = set()
    for seed in range(200):
        model = _ledger(b"row\ntorn")
        model.truncate(FILE, 4)
        model.write(FILE, 4, b"next\n")
        result = model.cut("tear-byte", seed)
        outcomes.add(result.files[FILE])
        assert "kept their first" in result.kept and "1 truncate(s)" in result.kept, result.kept
    assert outcomes == {b"row\n" + b"next\n"[:size] for size in range(1, 5)}


def test_page_cuts_fall_where_the_next_byte_starts_a_page() -> None:
    assert page_cuts([Op(1, FILE, 100, bytes(3 * PAGE))]) == [PAGE - 100, 2 * PAGE - 100, 3 * PAGE - 100]
    assert page_cuts([Op(1, FILE, 0, bytes(PAGE)), Op(2, FILE, PAGE, bytes(10))]) == [PAGE]
    assert page_cuts([Op(1, FILE, 0, bytes(PAGE))]) == []  # at the end: that is the whole stream
    split = [Op(1, FILE, 10, bytes(PAGE - 10)), Op(2, FILE, 5, None), Op(3, FILE, 2 * PAGE - 1, b"ab")]
    assert page_cuts(split) == [PAGE - 10 + 1]


def test_a_subset_cut_keeps_a_prefix_of_each_other_file() -> None:
    def cut(seed: int) -> tuple[bytes, bytes, bytes]:
        model = Durable(ROOT)
        for index in range(12):
            model.write(OTHER, index, bytes([65 + index]))
            model.write(THIRD, 2 * index, b"%02d" % index)
        model.write(FILE, 0, b"last")
        files = model.cut("subset", seed).files
        return files.get(OTHER, b""), files.get(THIRD, b""), files.get(FILE, b"")

    others = {cut(seed)[:2] for seed in range(60)}
    assert {other for other, _ in others} <= {bytes(range(65, 65 + n)) for n in range(13)}
    assert {mine for _, mine in others} <= {b"".join(b"%02d" % i for i in range(n)) for n in range(13)}
    assert len({len(other) for other, _ in others}) > 3
    assert len({(len(a), len(b)) for a, b in others}) > len({len(a) for a, _ in others})  # chosen per file


def _random_changes(rng: random.Random) -> Durable:
    # Writes and truncates near a page boundary, so that page tears have somewhere to cut.
    model = Durable(ROOT)
    for node in (FILE, OTHER, THIRD):
        model.write(node, 0, rng.randbytes(rng.randrange(PAGE - 400, PAGE + 100)))
        model.sync_file(node)
    for _ in range(rng.randrange(1, 7)):
        node, offset = rng.choice((FILE, OTHER, THIRD)), rng.randrange(PAGE - 300, PAGE + 300)
        if rng.random() < 0.2:
            model.truncate(node, offset)
        else:
            model.write(node, offset, rng.randbytes(rng.randrange(1, 200)))
    return model


def _untouched(mode: str, node: int, last: int | None) -> bool:
    """Whether a cut in *mode* must leave *node* exactly durable: the modes keep changes of one side only."""
    if mode == "lose" or last is None:
        return True
    return node == last if mode == "subset" else node != last


def test_every_cut_leaves_each_file_a_prefix_of_its_unsynced_changes() -> None:
    torn = 0
    for trial in range(150):
        model = _random_changes(random.Random(trial))
        writes = [op for op in model.pending if op.data is not None]
        last = writes[-1].node if writes else None
        pending = {node: [op for op in model.pending if op.node == node] for node in model.files}
        whole = {node: _prefixes(model.files[node], ops, torn=False) for node, ops in pending.items()}
        parts = {node: _prefixes(model.files[node], ops) for node, ops in pending.items()}
        for mode in CUT_MODES:
            for seed in range(3):
                files = model.cut(mode, seed).files
                for node, durable in model.files.items():
                    if _untouched(mode, node, last):
                        assert files[node] == durable, (trial, mode, seed, node)
                    else:
                        assert files[node] in (whole if mode == "subset" else parts)[node], (trial, mode, seed)
                        torn += files[node] not in whole[node]
    assert torn > 20  # the tears did tear inside a change, often


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cut mode"):
        Durable(ROOT).cut("melt", 0)


# -- where the layer cannot run ------------------------------------------------------------------------


@functools.cache
def _cases() -> dict[str, Case]:
    # Only the two files these tests use: loading the whole golden set takes seconds on a busy machine.
    root = golden_dir()
    files = ("phase0/failpoints.yaml", "phase0/crash-schedule.yaml")
    return {case.id: case for name in files for case in load_file(root / name, root)}


def _case(case_id: str) -> CrashCase | ScheduleCase:
    case = _cases()[case_id]
    assert isinstance(case, (CrashCase, ScheduleCase))
    return case


def test_without_fuse_the_cases_are_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(powerloss_layer, "_checked", ["no /dev/fuse in this test"])
    runners = crash.process_runners(
        process_factory("reference"), profile="strict", seed=1, kills=3, adapter_spec="reference",
        power=powerloss.PowerLoss(),
    )  # fmt: skip
    results = [runners["crash"](_case("crash-p1")), runners["schedule"](_case("random-crash-schedule"))]
    assert [r.outcome for r in results] == [Outcome.NOT_RUN, Outcome.NOT_RUN]
    assert all("no /dev/fuse in this test" in (r.message or "") for r in results)
    assert all(r.fault_model == powerloss.FAULT_MODEL for r in results)
    from resumekit.conformance.adapters import Implementation

    run = Run(Implementation("x", "1", "python"), "strict", tuple(results), "", "", 0.0)
    assert not run.certified
    assert any("not run on this machine" in reason for reason in run.verdict.reasons)


# -- the layer (Linux, FUSE) ---------------------------------------------------------------------------

needs_fuse = pytest.mark.skipif(
    powerloss.unavailable() is not None, reason=f"power loss cannot be simulated here: {powerloss.unavailable()}"
)


@pytest.fixture
def layer(tmp_path: Path) -> Iterator[powerloss.PowerLayer]:
    mounted = powerloss.PowerLayer(tmp_path / "backing", tmp_path / "mount", sync_delay=0.0)
    mounted.start()
    try:
        yield mounted
    finally:
        mounted.stop()


@needs_fuse
def test_a_cut_keeps_what_was_synced_and_drops_the_rest(layer: powerloss.PowerLayer) -> None:
    root = layer.mountpoint
    (root / "runs").mkdir()
    with open(root / "runs" / "ledger", "ab") as handle:
        handle.write(b"one\n")
        handle.flush()
        os.fsync(handle.fileno())
        _files.sync_path(root / "runs")
        _files.sync_path(root)
        handle.write(b"two\n")
    (root / "name-only").write_bytes(b"gone")  # its name is synced below, its data never
    cache = root / "cache"
    cache.write_bytes(b"old")
    _files.sync_path(cache)
    _files.sync_path(root)
    fresh = root / "cache.tmp"
    fresh.write_bytes(b"new")
    _files.sync_path(fresh)
    fresh.replace(cache)  # the directory is not synced after the replace
    (root / "never-synced").write_bytes(b"gone")
    assert layer.durable(root / "runs" / "ledger") == b"one\n"
    layer.cut("lose", 0)
    assert (root / "runs" / "ledger").read_bytes() == b"one\n"
    assert cache.read_bytes() == b"old"
    assert (root / "name-only").read_bytes() == b""
    assert sorted(p.name for p in root.iterdir()) == ["cache", "name-only", "runs"]


@needs_fuse
def test_sqlite_in_wal_mode_keeps_its_synced_commits(layer: powerloss.PowerLayer) -> None:
    # The -shm file is never synced and SQLite rebuilds it from the WAL: a cut that drops it is harmless.
    database = layer.mountpoint / "journal.sqlite"
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("CREATE TABLE t(x)")
    connection.commit()
    _files.sync_path(layer.mountpoint)  # the database and its WAL are new names
    connection.execute("INSERT INTO t VALUES (1)")
    connection.commit()
    connection.close()
    layer.cut("lose", 0)
    connection = sqlite3.connect(database)
    try:
        assert connection.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        connection.close()


SPLIT = bytes(range(1, 256)) * 40  # about 10 KiB, no zero byte: a hole would show


def _one_long_write(root: Path, name: str, durable: bytes) -> Path:
    """A synced file of *durable* bytes, then one unsynced write of SPLIT after it, the file closed."""
    path = root / name
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, durable)
        os.fsync(fd)
        _files.sync_path(root)
        assert os.write(fd, SPLIT) == len(SPLIT)
    finally:
        os.close(fd)
    return path


@needs_fuse
@pytest.mark.parametrize("mode", ["tear-byte", "tear-page"])
def test_a_write_across_pages_tears_to_a_prefix_on_the_layer(layer: powerloss.PowerLayer, mode: str) -> None:
    # The kernel hands a write that crosses a page to the layer in pieces; a tear must keep a prefix of
    # the write as the program made it, whatever the pieces.
    durable = b"d" * 1000  # unaligned: the write crosses 4096 and 8192 inside
    kept = set()
    for seed in range(12):
        path = _one_long_write(layer.mountpoint, f"ledger-{seed}", durable)
        note = layer.cut(mode, seed)
        content = path.read_bytes()
        assert content[: len(durable)] == durable, note
        tail = content[len(durable) :]
        assert tail == SPLIT[: len(tail)], f"{note}: {tail.count(0)} zero byte(s) in the tail"
        kept.add(len(tail))
    if mode == "tear-byte":
        assert 0 not in kept and len(SPLIT) not in kept
        assert len(kept) > 6
    else:
        assert kept <= {0, PAGE - 1000, 2 * PAGE - 1000, len(SPLIT)}
        assert len(kept) > 1


def _factory(mode: str | None) -> crash.Factory:
    if mode is None:
        return process_factory("reference")
    return process_factory(" ".join(split_command(python_command("-m", "tests.broken.durability", mode))))


@needs_fuse
def test_the_reference_passes_a_failpoint_under_power_loss() -> None:
    result = crash.run_crash(_case("crash-p9"), _factory(None), "strict", powerloss.PowerLoss())  # type: ignore[arg-type]
    assert result.outcome is Outcome.PASSED, result.message
    assert result.fault_model == powerloss.FAULT_MODEL


@needs_fuse
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_store_that_skips_a_sync_passes_a_process_crash_and_fails_power_loss(mode: str) -> None:
    case = _case("crash-p1")
    survived = crash.run_crash(case, _factory(mode), "strict")  # type: ignore[arg-type]
    assert survived.outcome is Outcome.PASSED, survived.message
    # A slower disk than the default widens the window in which a row acknowledged before its sync is
    # seen not yet durable, so a busy test machine cannot close it.
    slow = powerloss.PowerLoss(sync_delay=0.05)
    caught = crash.run_crash(case, _factory(mode), "strict", slow)  # type: ignore[arg-type]
    assert caught.outcome is Outcome.FAILED, caught.message
    assert any(m.clause == "STORE-2" for m in caught.mismatches)
    assert "acknowledged before it was durable" in (caught.message or "")


@needs_fuse
def test_the_reference_survives_a_short_schedule_of_power_cuts() -> None:
    case = _case("random-crash-schedule")
    result = crash.run_schedule(
        case,
        _factory(None),
        "strict",
        seed=5,
        kills=6,
        replay="",
        power=powerloss.PowerLoss(),  # type: ignore[arg-type]
    )
    assert result.outcome is Outcome.PASSED, result.message
    assert re.match(r"6 kills( over \d+ ledgers)? and power cuts \(", result.message or ""), result.message
    assert result.fault_model == powerloss.FAULT_MODEL


@pytest.mark.skipif(sys.platform == "linux", reason="elsewhere than Linux the layer names the system")
def test_off_linux_the_reason_names_the_system() -> None:
    assert "Linux" in (powerloss.unavailable() or "")


# -- a runtime in another language ------------------------------------------------------------------


def _node(flag: str) -> crash.Factory:
    assert NODE is not None
    return process_factory(f'"{NODE}" "{REPOSITORY / "tests" / "node_impl" / "adapter.mjs"}" {flag}')


@needs_fuse
@pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")
def test_the_node_store_survives_power_loss_and_its_no_fsync_variant_does_not() -> None:
    case = _case("crash-p9")
    durable = crash.run_crash(case, _node("--store"), "strict", powerloss.PowerLoss())  # type: ignore[arg-type]
    assert durable.outcome is Outcome.PASSED, durable.message
    careless = _node("--store=no-fsync")
    assert crash.run_crash(case, careless, "strict").outcome is Outcome.PASSED  # type: ignore[arg-type]
    caught = crash.run_crash(case, careless, "strict", powerloss.PowerLoss())  # type: ignore[arg-type]
    assert caught.outcome is Outcome.FAILED, caught.message
    assert any(m.clause == "STORE-2" for m in caught.mismatches)


# -- P1: the journal and the cache under power cuts ----------------------------------------------------


def _scenario(case_id: str) -> ScenarioCase:
    root = golden_dir()
    case = next(c for c in load_file(root / "p1" / "scenarios" / "cache.yaml", root) if c.id == case_id)
    assert isinstance(case, ScenarioCase)
    return case


@needs_fuse
def test_a_p1_cache_replaced_without_syncing_its_temporary_is_torn_by_a_cut() -> None:
    # The reference passes this scenario under power loss in `nox -s powerloss`; here only the catch.
    case = _scenario("p1-cache-torn-changes-nothing")
    careless = _factory("p1-cache-unsynced")
    caught = harness.run_scenario(case, careless, "strict", powerloss.PowerLoss())  # type: ignore[arg-type]
    assert caught.outcome is Outcome.FAILED, caught.message
    assert caught.fault_model == powerloss.FAULT_MODEL
    assert any(m.clause == "CACHE-3" and "after-power-cut" in m.pointer for m in caught.mismatches)
