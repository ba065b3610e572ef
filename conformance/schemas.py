"""The kit's JSON Schemas, loaded once and linked through one registry.

jsonschema is imported on first use, not with this module: a start that finds its golden set in the
cache (``resumekit list``) never needs it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resumekit.conformance._resources import schemas_dir

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

BASE = "https://resumekit.dev/schemas/"
RUNTIME_EVENT = BASE + "phase0/runtime-event.json"
RESUME_PLAN = BASE + "phase0/resume-plan.json"
DECISIONS_FILE = BASE + "golden/decisions.json"
FAILPOINTS_FILE = BASE + "golden/failpoints.json"
LEDGER_FAULTS_FILE = BASE + "golden/ledger-faults.json"
CRASH_SCHEDULE_FILE = BASE + "golden/crash-schedule.json"
P1_SCENARIOS_FILE = BASE + "golden/p1-scenarios.json"
P1_FAILPOINTS_FILE = BASE + "golden/p1-failpoints.json"
P1_CRASH_MATRIX_FILE = BASE + "golden/p1-crash-matrix.json"
P1_SOAK_FILE = BASE + "golden/p1-soak.json"
P1_TASK = BASE + "p1/task.json"
RUN_REPORT = BASE + "report/run-report.json"
ADAPTER_REQUEST = BASE + "adapter/request.json"
ADAPTER_RESPONSE = BASE + "adapter/response.json"
FIRST_ERRORS = 1000  # errors ``first_violation`` weighs: enough for any fixture or message that is nearly right


@dataclass(frozen=True, slots=True)
class SchemaViolation:
    """One way an instance breaks a schema, located by JSON pointer."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"at {self.pointer or '/'}: {self.message}"


def registry() -> Registry[Any]:
    """Every schema under ``schemas/`` and the schema folders of registered contracts, keyed by its ``$id``."""
    return _registry(True, _folders())


def _folders() -> tuple[Path, ...]:
    from resumekit.conformance import contracts

    return (schemas_dir(), *contracts.schema_dirs())


@cache
def _registry(keep_dialect: bool, folders: tuple[Path, ...]) -> Registry[Any]:
    # Without its "$schema", a file reached through "$ref" is validated by the class that started, not
    # the one its dialect names: the exact-integer class must reach every file (they all are 2020-12).
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources = []
    for path in sorted(path for folder in folders for path in folder.rglob("*.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        if "$id" not in contents:
            raise ValueError(f"schema {path} has no '$id'")
        if not keep_dialect:
            contents.pop("$schema", None)
        resources.append((contents["$id"], Resource.from_contents(contents, default_specification=DRAFT202012)))
    return Registry().with_resources(resources).crawl()


@cache
def validator(uri: str, exact_integers: bool = False) -> Draft202012Validator:
    """A validator for the schema whose ``$id`` is *uri*.

    With *exact_integers*, ``"type": "integer"`` takes only integers as written: JSON Schema counts
    ``2.0`` as an integer, but a fixture's ``length: 2.0`` is a mistake its author should hear about
    rather than a float the kit later slices a list with.
    """
    from jsonschema import Draft202012Validator

    if not exact_integers:
        return Draft202012Validator(registry().contents(uri), registry=registry())
    plain = _registry(False, _folders())
    exact: type[Draft202012Validator] = _exact_integer_class()
    return exact(plain.contents(uri), registry=plain)


@cache
def _exact_integer_class() -> Any:
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return validators.extend(Draft202012Validator, type_checker=checker)  # type: ignore[no-untyped-call]


def pointer(path: Any) -> str:
    """Turn a jsonschema error path into a JSON pointer."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def violations(
    uri: str, instance: Any, *, exact_integers: bool = False, limit: int | None = None
) -> Iterator[SchemaViolation]:
    """Every violation of the schema *uri* by *instance*, the most relevant per location first; with *limit*,
    among the first *limit* errors found only (an implementation's message may hold a million wrong values,
    and each error costs kilobytes)."""
    from jsonschema.exceptions import relevance

    errors = list(itertools.islice(validator(uri, exact_integers).iter_errors(instance), limit))
    if not errors:
        return
    # The error a person should read first (jsonschema's relevance); among alternatives (oneOf, anyOf) the
    # branch the instance came closest to, the one with the fewest errors, says what is wrong.
    first = _closest_branch(max(errors, key=relevance))
    yield SchemaViolation(pointer(first.absolute_path), first.message)
    seen = {pointer(first.absolute_path)}
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        where = pointer(error.absolute_path)
        if where not in seen:
            seen.add(where)
            yield SchemaViolation(where, error.message)


def _closest_branch(error: ValidationError) -> ValidationError:
    from jsonschema.exceptions import relevance

    while error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0] if sub.relative_schema_path else None, []).append(sub)
        fewest = min(branches.values(), key=len)
        error = max(fewest, key=relevance)
    return error


def first_violation(uri: str, instance: Any, *, exact_integers: bool = False) -> SchemaViolation | None:
    """The most relevant violation of schema *uri* by *instance* (of its first ``FIRST_ERRORS``), or None
    when it is valid."""
    return next(violations(uri, instance, exact_integers=exact_integers, limit=FIRST_ERRORS), None)


@cache
def _branches(uri: str, key: str) -> dict[str, str] | None:
    """For a schema whose ``oneOf`` branches each fix *key* with ``const``: each value's branch, by URI.

    None unless every branch is a local ``$ref`` whose target requires *key* and fixes it.
    """
    schema = registry().contents(uri)
    found: dict[str, str] = {}
    for branch in schema.get("oneOf", ()):
        target = branch.get("$ref", "") if isinstance(branch, dict) else ""
        if not target.startswith("#/$defs/") or len(branch) != 1:
            return None
        definition = schema.get("$defs", {}).get(target[len("#/$defs/") :], {})
        value = definition.get("properties", {}).get(key, {}).get("const")
        if not isinstance(value, str) or key not in definition.get("required", ()) or value in found:
            return None
        found[value] = uri + target
    return found or None


def passes_discriminated(uri: str, key: str, instance: Any) -> bool:
    """Whether *instance* is valid against *uri*, checking only the ``oneOf`` branch its *key* selects.

    The same verdict as a full check: every other branch fixes *key* to another value, so it fails,
    and ``oneOf`` holds exactly when the selected branch does. The rest of the schema (``oneOf`` taken
    away) is checked too. Falls back to the full check wherever that reasoning does not apply.
    """
    branches = _branches(uri, key)
    value = instance.get(key) if isinstance(instance, dict) else None
    selected = branches.get(value) if branches and isinstance(value, str) else None
    if selected is None:
        return validator(uri).is_valid(instance)
    return _without_one_of(uri).is_valid(instance) and _referring(selected).is_valid(instance)


@cache
def _referring(uri: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator({"$ref": uri}, registry=registry())


@cache
def _without_one_of(uri: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = {k: v for k, v in registry().contents(uri).items() if k != "oneOf"}
    return Draft202012Validator(schema, registry=registry())
