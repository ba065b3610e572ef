"""Sharded certification: a deterministic 1/N of a selection per run, and merging the shard reports.

A case's shard depends only on the selection: the selected ids are sorted and dealt out round-robin,
so shard K of N holds the ids at sorted positions K-1, K-1+N, K-1+2N, ... Each kind's cases are spread
over the shards alike. Every shard report records the whole selection (in run order) and the seed,
so that ``merge`` can refuse shards of different certifications, and find overlaps and gaps.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from resumekit.conformance import contracts, report, schemas
from resumekit.conformance.results import Outcome

_T = TypeVar("_T")


class ShardError(ValueError):
    """A --shard option that is not K/N, or shard reports that do not make one run."""


def parse(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N), with 1 <= K <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise ShardError(f"--shard takes K/N, such as 2/3; got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"--shard {text}: K must be between 1 and N, and N at least 1")
    return index, count


def owned(ids: Iterable[str], index: int, count: int) -> set[str]:
    """The ids of *ids* that belong to shard *index* of *count*."""
    return {case_id for position, case_id in enumerate(sorted(set(ids))) if position % count == index - 1}


def take(items: Sequence[_T], ids: Sequence[str], index: int, count: int) -> list[_T]:
    """The items (one per id of *ids*, in the same order) of shard *index* of *count*, in their order."""
    mine = owned(ids, index, count)
    return [item for item, case_id in zip(items, ids, strict=True) if case_id in mine]


def _differ(label: str, named: Sequence[tuple[str, Mapping[str, Any]]], value: Any, what: str) -> None:
    seen: dict[str, str] = {}
    for name, document in named:
        seen.setdefault(repr(value(document)), name)
    if len(seen) > 1:
        shown = "; ".join(f"{name}: {text}" for text, name in seen.items())
        raise ShardError(f"the shards are of different {what} ({shown}): {label}")


def merge(named: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One run report made of the shard reports *named* ((file name, document) pairs); ShardError if
    they are not the shards of one certification, each exactly once."""
    if not named:
        raise ShardError("no shard reports to merge")
    for name, document in named:
        violation = schemas.first_violation(schemas.RUN_REPORT, document)
        if violation is not None:
            raise ShardError(f"{name} is not a run report: it breaks schemas/report/run-report.json {violation}")
        if "shard" not in document:
            raise ShardError(f"{name} is not a shard report: it was not run with --shard K/N")
    _check_alike(named)
    selection: list[str] = list(named[0][1]["shard"]["selection"])
    results = _results_by_case(named, selection)
    return _merged(named, [dict(results[case_id]) for case_id in selection])


def _check_alike(named: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """ShardError unless the shards share a kit, golden set, implementation, profile, seed and selection."""
    same = "merge only the shards of one certification"
    _differ(same, named, lambda d: d["resumekit"]["version"], "kit versions")
    _differ(same, named, lambda d: d["resumekit"].get("goldenDigest", ""), "golden fixtures (golden digests)")
    _differ(same, named, lambda d: d["implementation"], "implementations")
    _differ(same, named, lambda d: d["profile"], "profiles")
    _differ("run every shard with the same --seed", named, lambda d: d["shard"]["seed"], "seeds")
    _differ(same, named, lambda d: d["shard"]["count"], "shard counts")
    alike = "run every shard with the same --only, --kind and --profile"
    _differ(alike, named, lambda d: d["shard"]["selection"], "selections")
    _differ(alike, named, lambda d: _options(d.get("selection")), "options")
    _differ("a certification is of one platform", named, lambda d: d["platform"].get("system"), "systems")
    _differ("a certification is of one platform", named, lambda d: d["platform"].get("machine"), "machines")


def _results_by_case(named: Sequence[tuple[str, Mapping[str, Any]]], selection: Sequence[str]) -> dict[str, Any]:
    """Every shard's results by case id; ShardError on a shard or case given twice, or one missing."""
    count = named[0][1]["shard"]["count"]
    by_index: dict[int, str] = {}
    where: dict[str, str] = {}
    results: dict[str, Mapping[str, Any]] = {}
    for name, document in named:
        index = document["shard"]["index"]
        if index in by_index:
            raise ShardError(f"overlap: {by_index[index]} and {name} are both shard {index}/{count}")
        by_index[index] = name
        mine = owned(selection, index, count)
        for result in document["results"]:
            case_id = result["id"]
            if case_id in where:
                raise ShardError(f"overlap: case {case_id!r} is in both {where[case_id]} and {name}")
            if case_id not in mine:
                raise ShardError(
                    f"{name} (shard {index}/{count}) holds case {case_id!r}, which is not one of its cases"
                )
            where[case_id] = name
            results[case_id] = result
    absent = [index for index in range(1, count + 1) if index not in by_index]
    if absent:
        raise ShardError(f"gap: shard(s) {', '.join(f'{i}/{count}' for i in absent)} missing")
    missing = [case_id for case_id in selection if case_id not in results]
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ShardError(f"gap: {len(missing)} selected case(s) have no result in any shard: {shown}")
    return results


def _merged(named: Sequence[tuple[str, Mapping[str, Any]]], ordered: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged report of the shards *named*, whose results are *ordered* as the unsharded run's."""
    count = named[0][1]["shard"]["count"]
    outcomes = [Outcome(result["outcome"]) for result in ordered]
    claimed = [outcome for outcome in outcomes if outcome is not Outcome.NOT_CLAIMED]
    documents = [document for _, document in sorted(named, key=lambda pair: pair[1]["shard"]["index"])]
    first = documents[0]
    merged: dict[str, Any] = {
        "resumekit": dict(first["resumekit"]),
        "implementation": dict(first["implementation"]),
        "profile": first["profile"],
        "platform": _platform([document["platform"] for document in documents]),
        "started": min(document["started"] for document in documents),
        "finished": max(document["finished"] for document in documents),
        # The shards run side by side: the certification took as long as its longest shard.
        "durationSeconds": max(document["durationSeconds"] for document in documents),
        "seed": first["shard"]["seed"] if any(_seeded(r["kind"]) for r in ordered) else None,
        "faultModels": sorted({r["faultModel"] for r in ordered if r.get("faultModel")}),
        "certified": bool(claimed) and all(outcome is Outcome.PASSED for outcome in claimed),
        "summary": {outcome.value: outcomes.count(outcome) for outcome in Outcome},
        "results": ordered,
        "jobs": max(document.get("jobs", 1) for document in documents),
        "mergedFrom": [
            {
                "index": document["shard"]["index"],
                "count": count,
                "jobs": document.get("jobs", 1),
                "started": document["started"],
                "finished": document["finished"],
                "durationSeconds": document["durationSeconds"],
            }
            for document in documents
        ],
    }
    if first.get("selection") is not None:
        merged["selection"] = dict(first["selection"])
    if any(document.get("interrupted") for document in documents):
        merged["interrupted"] = True
    # The verdict and the contracts' summary tables come from the one result model every report uses, so
    # a merged subset can never read as a certification.
    run = report.from_json(merged)
    tables = contracts.summaries({result.kind for result in run.results}, run.results, run.profile)
    document = report.to_json(dataclasses.replace(run, summaries=tables))
    document["mergedFrom"] = merged["mergedFrom"]
    return document


def _seeded(kind_name: str) -> bool:
    kind = contracts.kind(kind_name)
    return kind is not None and kind.seeded


def _options(selection: Mapping[str, Any] | None) -> Any:
    # Everything but the seed, which shards share by their own check, and the timeout, which may differ.
    if selection is None:
        return None
    return {key: value for key, value in selection.items() if key not in ("seed", "timeoutSeconds")}


def _platform(facts: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The shards' platform facts: a fact they disagree on (a kernel release) lists each value once."""
    keys = dict.fromkeys(key for fact in facts for key in fact)
    return {key: " | ".join(dict.fromkeys(fact[key] for fact in facts if key in fact)) for key in keys}


__all__ = ["ShardError", "merge", "owned", "parse", "take"]
