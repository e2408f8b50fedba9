"""The tools a caller offers: checked once when a parser is built, then used to judge each call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from .types import SCHEMA_VIOLATION, UNKNOWN_TOOL


def _optional_null(error: ValidationError, schema: Any) -> bool:
    """A `null` written for a property its object does not require means "not given".

    Models write it often for optional parameters (and templates that cannot describe a
    nullable type still show them an optional one), so it does not reject the call."""
    path = list(error.schema_path)
    if error.instance is not None or len(path) < 3:
        return False
    if path[-3] != "properties" or not error.path or error.path[-1] != path[-2]:
        return False
    parent: Any = schema
    for step in path[:-3]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(parent, Mapping) and path[-2] not in parent.get("required", ())


def _describe(tool: object, position: int) -> str:
    if isinstance(tool, Mapping):
        inner = tool.get("function", tool)
        if isinstance(inner, Mapping) and isinstance(inner.get("name"), str):
            return f"tool {inner['name']!r}"
    return f"tool #{position}"


def _normalize(tool: object, position: int) -> tuple[str, Any]:
    where = _describe(tool, position)
    if not isinstance(tool, Mapping):
        raise TypeError(f"{where}: expected a dict like {{'type': 'function', 'function': {{'name': ..., "
                        f"'parameters': {{...}}}}}}, got {type(tool).__name__}")
    inner = tool.get("function", tool)
    if not isinstance(inner, Mapping):
        raise TypeError(f"{where}: 'function' must be a dict with 'name' and 'parameters'")
    name = inner.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: a tool needs a non-empty string 'name'")
    parameters = inner.get("parameters", {})
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, (Mapping, bool)):
        raise ValueError(f"tool {name!r}: 'parameters' must be a JSON Schema object, "
                         f"got {type(parameters).__name__}")
    return name.strip(), dict(parameters) if isinstance(parameters, Mapping) else parameters


class ToolSet:
    """The offered tools with one validator each, built when the parser is built."""

    def __init__(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        self.given = tools is not None
        self.schemas: dict[str, Any] = {}
        self._validators: dict[str, Validator] = {}
        if tools is None:
            return
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise TypeError("tools must be a list of tool definitions (OpenAI 'tools' or "
                            "{'name', 'parameters'} dicts), or None")
        for position, tool in enumerate(tools):
            name, schema = _normalize(tool, position)
            if name in self.schemas:
                raise ValueError(f"tool {name!r} is defined twice; tool names must be unique")
            cls = validator_for(schema, default=jsonschema.Draft202012Validator)
            try:
                cls.check_schema(schema)
            except SchemaError as error:
                path = "/".join(str(p) for p in error.path) or "(root)"
                raise ValueError(f"tool {name!r}: 'parameters' is not a valid JSON Schema "
                                 f"({cls.__name__}): {error.message} at {path}") from None
            self.schemas[name] = schema
            self._validators[name] = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def schema(self, name: str) -> Any:
        """The parameters schema of a tool, or None when it is unknown or no tools were given."""
        return self.schemas.get(name)

    def known(self, name: str) -> bool:
        return not self.given or name in self.schemas

    def check(self, name: str, arguments: dict[str, Any]) -> tuple[str, list[str]] | None:
        """`(status, errors)` when the call fails a check, else None."""
        if not self.given:
            return None
        if name not in self.schemas:
            known = ", ".join(sorted(self.schemas)) or "none"
            return UNKNOWN_TOOL, [f"no tool named {name!r} was offered (offered: {known})"]
        schema = self.schemas[name]
        try:
            errors = [e for e in self._validators[name].iter_errors(arguments) if not _optional_null(e, schema)]
        except RecursionError:  # a recursive schema over arguments nested deeper than Python's stack
            return SCHEMA_VIOLATION, ["$: the arguments nest too deeply to be checked against the schema"]
        errors.sort(key=lambda e: [str(p) for p in e.path])
        if errors:
            return SCHEMA_VIOLATION, [f"{e.json_path}: {e.message}" for e in errors]
        return None
