"""Typing untyped parameter text by the tool's JSON schema (qwen3_coder, DSML): one implementation.

FORMATS.md, "Typing by schema": try the schema's non-string types in the order null, boolean,
integer, number, object, array (JSON spelling first, then Python's); if none fits and a string is
allowed, it is a string; if none fits at all, the text stays a string and validation reports it.

Every value returned is plain JSON data (str keys, finite numbers, no tuples or sets), so that
`json.dumps` of the arguments never fails and reads back to the same arguments. Integers stay
exact, also when written `5.0` or `1e3`.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

_ORDER = ("null", "boolean", "integer", "number", "object", "array")
_PYTHON_TYPE = {type(None): "null", bool: "boolean", int: "integer", float: "number",
                str: "string", dict: "object", list: "array"}
_ALL_TYPES = frozenset((*_ORDER, "string"))
# Deeper values stay text: JSON encoders and validators recurse, and must not hit the stack limit.
MAX_DEPTH = 200
# Python refuses to print integers longer than this (sys.int_info.default_max_str_digits).
_MAX_DIGITS = 4300


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
    return found & _ALL_TYPES


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def is_json_data(value: Any) -> bool:
    """Whether `value` is plain JSON data that `json.dumps` writes and `json.loads` reads back equal:
    dicts with str keys, lists, str, bool, None, ints, finite floats; at most MAX_DEPTH deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
            continue
        if depth >= MAX_DEPTH:
            return False
        if type(item) is list:
            stack.extend((child, depth + 1) for child in item)
        elif type(item) is dict:
            if not all(isinstance(key, str) for key in item):
                return False
            stack.extend((child, depth + 1) for child in item.values())
        else:
            return False
    return True


def _json(text: str) -> tuple[bool, Any]:
    """Strict JSON (no NaN/Infinity), as plain JSON data; never raises."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return False, None
    return (True, value) if is_json_data(value) else (False, None)


def _literal(text: str) -> tuple[bool, Any]:
    """JSON first, then a Python literal (never evaluated: `ast.literal_eval`)."""
    ok, value = _json(text)
    if ok:
        return ok, value
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    return (True, value) if is_json_data(value) else (False, None)


def _integer(text: str) -> tuple[bool, Any]:
    """A JSON number with an integral value, exactly (`5.0`, `1e3` and 30-digit integers included)."""
    try:
        value = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return False, None
    if isinstance(value, bool):
        return False, None
    if isinstance(value, int):
        return True, value
    if isinstance(value, Decimal) and value.is_finite() and value.adjusted() < _MAX_DIGITS \
            and value == value.to_integral_value():
        return True, int(value)
    return False, None


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
    if kind == "integer":
        return _integer(stripped)
    if kind == "number":
        ok, value = _json(stripped)
        if ok and not isinstance(value, bool) and isinstance(value, (int, float)):
            return True, value
        return False, None
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
    ok, value = _json(stripped)
    if ok:
        return value
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
