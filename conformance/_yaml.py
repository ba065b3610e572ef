"""Read YAML the way fixture authors mean it, remembering the line of every value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1's surprises: ``yes``/``on`` stay strings, dates stay strings."""


# Rebuild the implicit resolvers: drop bool (re-added below for true/false only) and timestamp.
_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class YamlError(Exception):
    """Text that is not YAML, or YAML a fixture may not use."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True, slots=True)
class Document:
    """A loaded YAML document and the 1-based line of each JSON pointer in it."""

    data: Any
    lines: dict[str, int]

    def line_of(self, pointer: str) -> int | None:
        """The line of *pointer*, or of its nearest ancestor that has one."""
        while True:
            if pointer in self.lines:
                return self.lines[pointer]
            if not pointer:
                return None
            pointer = pointer.rsplit("/", 1)[0]


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _walk(node: yaml.Node, pointer: str, lines: dict[str, int]) -> None:
    lines[pointer] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise YamlError(
                    "merge keys ('<<') are not allowed in fixtures; write the fields out", key.start_mark.line + 1
                )
            name = str(key.value)
            if name in seen:
                raise YamlError(
                    f"duplicate key {name!r} at {pointer or '/'} (first on line {seen[name]})", key.start_mark.line + 1
                )
            seen[name] = key.start_mark.line + 1
            _walk(value, f"{pointer}/{_escape(name)}", lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, f"{pointer}/{index}", lines)


def load(text: str) -> Document:
    """Parse one YAML document, refusing duplicate keys, merge keys and aliases' surprises."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Document(None, {})
        lines: dict[str, int] = {}
        _walk(node, "", lines)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlError(f"not valid YAML: {error.problem or error}", line) from None
    except yaml.YAMLError as error:
        raise YamlError(f"not valid YAML: {error}", None) from None
    finally:
        loader.dispose()
    return Document(data, lines)
