"""The misbehaving adapters the campaign drives, each a mode of ``tests/broken/adapters.py``.

A behaviour names its mode and argument, the cases it runs, the ``--timeout`` it gets, whether the kit
must refuse it or pass it, and a fragment the kit's reasons must contain. Arguments may name
``{decoy_file}`` (a file outside every workspace), ``{decoy_pid}`` (an unrelated process) and
``{flag}`` (a scratch file of the campaign's own).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = ("--only", "prefix-*")
CRASH = ("--only", "crash-p0")
SCHEDULE = ("--only", "random-crash-schedule", "--kills", "3")
# Long enough that a later process of some stream appends to a ledger an earlier one wrote (seed 7: 5 rows,
# then 2 more, in the third stream), and that a final ledger holds more than four rows.
LONG_SCHEDULE = ("--only", "random-crash-schedule", "--kills", "8", "--seed", "7")
# Cases with a core reading that the undamaged ledger meets too, and cases whose append may cut the tail.
UNDAMAGED_READINGS = ("--profile", "core", "--only", "unterminated-complete-row*", "--only", "append-of-another-run")
CUT_READINGS = ("--profile", "core", "--only", "torn-last-row-then-append", "--only", "invalid-tail-then-append")
TORN = ("--only", "torn-last-row-every-byte")
# A store that surfaces its tail only when it parses: since the every-byte sweep stops before the complete
# row (which core may read as committed, spec 9.1), the strict case of that complete row is where it shows.
COMPLETE_TAIL = ("--only", "unterminated-complete-row")


@dataclass(frozen=True)
class Behaviour:
    name: str
    mode: str
    argument: str = ""
    selection: tuple[str, ...] = PREFIX
    timeout: float = 2
    expect: str = "refuse"  # or "pass"
    evidence: str = ""
    posix_only: bool = False


BEHAVIOURS = [
    # Answers that are not a usable reply.
    Behaviour("prints garbage before a reply", "prints-garbage", evidence="not a JSON line"),
    Behaviour("stray output between exchanges", "late-stray-output", selection=TORN,
              evidence="DEBUG read done"),
    Behaviour("greets on stdout before hello", "chatty-hello"),
    Behaviour("count as a string", "sloppy-messages", selection=CRASH, evidence="/result/rows"),
    Behaviour("extra field in a result", "extra-field", selection=CRASH, evidence="cachedRows"),
    Behaviour("extra field in hello", "extra-hello-field", evidence="debug"),
    *(
        Behaviour(f"reply: {name}", "bad-json", name)
        for name in (
            "nan",
            "infinity",
            "overflow",
            "deep",
            "seq-float",
            "seq-true",
            "seq-huge",
            "seq-stale",
            "seq-missing",
            "binary",
            "invalid-utf8",
            "nul",
            "empty-line",
            "array",
            "string",
            "both",
            "neither",
            "two-answers",
            "error-no-message",
            "skipped-no-reason",
            "duplicate-keys",
            "huge-int",
            "deep-object",
            "lone-surrogate",
            "bom",
        )
    ),
    # Hello that fails.
    *(
        Behaviour(f"hello: {how}", "bad-hello", how, timeout=2)
        for how in ("exit", "hang", "protocol-2", "garbage", "error", "empty", "unknown-capability")
    ),
    # Silence, death and floods.
    Behaviour("hangs on one case", "hangs", evidence="no line on stdout within 2 s"),
    Behaviour("crashes mid-run", "crashes-mid-run", evidence="exited with 3"),
    Behaviour("closes stdout, stays alive", "closes-stdout"),
    Behaviour("endless output without a newline", "endless-output", evidence="no line on stdout"),
    Behaviour("a 100 MB line", "huge-line", timeout=30, evidence="longer than"),
    # Text no report format carries as it is, and lines of up to 64 MiB the kit must parse in bounded memory.
    Behaviour("error and skip with lone surrogates and controls", "hostile-text", evidence="lone \\ud800 and"),
    *(
        Behaviour(f"a 64 MiB line: {shape}", "huge-values", shape, timeout=60, evidence=evidence)
        for shape, evidence in (
            ("arrays", "JSON values"),
            ("strings", "JSON values"),
            ("keys", "JSON values"),
            ("nested", "JSON values"),
            ("context", "JSON values"),
            ("lone-surrogates", "its strings hold"),
            ("wide-string", "its strings hold"),
            ("padded", "after spaces"),
            ("most-values", "'diagnostics' is a required property"),
            ("most-string", "the first 65536 kept"),
        )
    ),
    Behaviour("a readable plan, every value outside the vocabulary", "plans-beyond-vocabulary", timeout=10,
              evidence="outside the contract's vocabulary"),
    Behaviour("256 MB on stderr in one line", "huge-stderr", "256", timeout=60, expect="pass"),
    Behaviour("200,000 short stderr lines", "stderr-flood", timeout=10, expect="pass"),
    Behaviour("starts once, then hangs at every start", "starts-once", "{flag}", ("--kind", "decision"), timeout=1),
    Behaviour("grandchild holds the pipes", "grandchild-holds-pipes", "{flag}", timeout=2, posix_only=True),
    Behaviour("ignores stop, grandchild holds pipes", "hangs-with-grandchild", "{flag}", timeout=2, posix_only=True),
    # Wrong pids in crash.arm.
    Behaviour("crash.arm names an unrelated process", "names-a-stranger", "{decoy_pid}", SCHEDULE,
              evidence="is not the adapter or one of its descendants"),
    Behaviour("crash.arm names the kit", "names-the-kits-pid", "", CRASH, evidence="will not kill"),
    Behaviour("crash.arm names the kit's parent", "names-the-kits-parent", "", CRASH, posix_only=True),
    Behaviour("crash.arm names pid 2**40", "names-a-huge-pid", "", CRASH, evidence="will not kill"),
    *(Behaviour(f"crash.arm names pid {pid}", "names-a-pid", pid, CRASH) for pid in ("0", "-1", "1", "true", '"12"')),
    # Ledger files outside the workspace.
    Behaviour("ledger.locate names a file outside", "locates-outside", "{decoy_file}", TORN,
              evidence="outside the kit's workspace"),
    Behaviour("ledger.locate names a link to outside", "links-outside", "{decoy_file}", TORN, posix_only=True,
              evidence="outside the kit's workspace"),
    *(
        Behaviour(f"ledger.locate names {how}", "locates-odd", how, TORN)
        for how in ("relative", "folder", "missing", "dev-zero", "nul", "number", "dotdot")
    ),
    # Broken durability and purity (verdicts, not protocol errors).
    Behaviour("acknowledges before durable", "ack-before-durable", selection=("--only", "crash-p1"),
              evidence="CRASH-1"),
    Behaviour("cleanup on every append", "finally-anyway", selection=CRASH, evidence="CRASH-2"),
    Behaviour("never writes the marker", "never-writes-marker", selection=CRASH),
    Behaviour("stamps the time into plans", "not-deterministic", evidence="PURE-2"),
    Behaviour("rewrites the ledger on plan", "rewrites-ledger", selection=("--only", "crash-p6"), evidence="STORE-6"),
    Behaviour("touches the ledger on read", "touches-ledger", selection=("--only", "crash-p6"), evidence="STORE-6"),
    Behaviour("surfaces the torn row", "surfaces-torn-row", selection=COMPLETE_TAIL, evidence="STORE-4"),
    Behaviour("hides the torn tail", "hides-torn-tail", selection=TORN, evidence="STORE-4"),
    # Checks that passed without evidence (issue 19).
    Behaviour("plans nothing for the final ledger", "plans-nothing", selection=SCHEDULE, evidence="CRASH-3"),
    Behaviour("plans a high-water one too high", "plans-one-too-high", selection=SCHEDULE, evidence="PLAN-1"),
    Behaviour("counts only its own appends", "counts-own-appends", selection=LONG_SCHEDULE, evidence="STORE-1"),
    Behaviour("caches the plans of long ledgers", "caches-long-plans", selection=LONG_SCHEDULE, evidence="STORE-6"),
    Behaviour("ledger.locate names a copy", "locates-a-copy", selection=UNDAMAGED_READINGS, evidence="STORE-1"),
    Behaviour("writes the located copy at open", "refreshes-located-copy", selection=UNDAMAGED_READINGS,
              evidence="STORE-1"),
    Behaviour("cuts a torn tail at open", "cuts-torn-tail-at-open", selection=CUT_READINGS, evidence="STORE-1"),
]
