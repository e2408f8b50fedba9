"""Typing untyped parameter text by the tool's JSON schema (qwen3_coder, DSML): one implementation.

FORMATS.md, "Typing by schema": try the schema's non-string types in the order null, boolean,
integer, number, object, array (JSON spelling first, then Python's); if none fits and a string is
allowed, it is a string; if none fits at all, the text stays a string and validation reports it.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from typing import Any

_ORDER = ("null", "boolean", "integer", "number", "object", "array")
_PYTHON_TYPE = {type(None): "null", bool: "boolean", int: "integer", float: "number",
                str: "string", dict: "object", list: "array"}
_ALL_TYPES = frozenset((*_ORDER, "string"))


def schema_types(schema: Any, depth: int = 0) -> set[str]:
    """The JSON types a schema allows, looking through `type` lists, anyOf/oneOf/allOf, enum,
    const and OpenAPI's `nullable`. An empty set means the schema says nothing about types."""
    if depth > 16 or not isinstance(schema, Mapping):
        return set()
    found: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        found.add(declared)
    elif isinstance(declared, list):
        found.update(t for t in declared if isinstance(t, str))
    for keyword in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                found |= schema_types(branch, depth + 1)
    values = list(schema.get("enum", [])) if isinstance(schema.get("enum"), list) else []
    if "const" in schema:
        values.append(schema["const"])
    for value in values:
        found.add(_PYTHON_TYPE.get(type(value), "string"))
    if schema.get("nullable") is True:
        found.add("null")
    if "integer" in found:
        found.add("integer")
    return found & _ALL_TYPES


def _literal(text: str) -> tuple[bool, Any]:
    """JSON first, then a Python literal (never evaluated: `ast.literal_eval`)."""
    try:
        return True, json.loads(text, parse_constant=_no_constant)
    except ValueError:
        pass
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _as(kind: str, text: str) -> tuple[bool, Any]:
    stripped = text.strip()
    if kind == "null":
        return (True, None) if stripped in ("null", "None") else (False, None)
    if kind == "boolean":
        if stripped in ("true", "True"):
            return True, True
        if stripped in ("false", "False"):
            return True, False
        return False, None
    if kind in ("integer", "number"):
        try:
            value: Any = json.loads(stripped, parse_constant=_no_constant)
        except ValueError:
            return False, None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None
        if isinstance(value, float) and not math.isfinite(value):
            return False, None
        if kind == "integer":
            if isinstance(value, float):
                return (True, int(value)) if value.is_integer() else (False, None)
            return True, value
        return True, value
    ok, value = _literal(stripped)
    wanted = dict if kind == "object" else list
    if ok and isinstance(value, wanted):
        return True, value
    return False, None


def coerce(text: str, schema: Any) -> Any:
    """The value `text` stands for under `schema` (a property schema); a string when nothing fits."""
    types = schema_types(schema)
    for kind in _ORDER:
        if kind in types:
            ok, value = _as(kind, text)
            if ok:
                return value
    return text


def parse_json_value(text: str, schema: Any) -> Any:
    """A value written as JSON (DSML `string="false"`): JSON, else the typing rules, else the text."""
    stripped = text.strip()
    try:
        return json.loads(stripped, parse_constant=_no_constant)
    except ValueError:
        pass
    if schema_types(schema):
        return coerce(text, schema)
    ok, value = _literal(stripped)
    return value if ok else text


def property_schema(tool_schema: Any, name: str) -> Any:
    """The schema of parameter `name` in a tool's parameters schema, or None when not named."""
    if not isinstance(tool_schema, Mapping):
        return None
    properties = tool_schema.get("properties")
    if isinstance(properties, Mapping):
        return properties.get(name)
    return None
