"""Typing untyped parameter text by the tool's JSON schema (qwen3_coder, DSML): one implementation.

FORMATS.md, "Typing by schema": try the schema's non-string types in the order null, boolean,
integer, number, object, array (JSON spelling first, then Python's); if none fits and a string is
allowed, it is a string; if none fits at all, the text stays a string and validation reports it.
Where the schema allows no string, a number may be written with leading zeros (`018956` is 18956:
fourth wave, Decision 23).

Every value returned is plain JSON data (str keys, finite numbers, no tuples or sets), so that
`json.dumps` of the arguments never fails and reads back to the same arguments. Integers stay
exact, also when written `5.0` or `1e3`.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from .grammar import encodable, strict_loads

_ORDER = ("null", "boolean", "integer", "number", "object", "array")
_PYTHON_TYPE = {type(None): "null", bool: "boolean", int: "integer", float: "number",
                str: "string", dict: "object", list: "array"}
_ALL_TYPES = frozenset((*_ORDER, "string"))
# Deeper values stay text: JSON encoders and validators recurse, and must not hit the stack limit.
MAX_DEPTH = 200
# Python refuses to print integers longer than this (sys.int_info.default_max_str_digits).
_MAX_DIGITS = 4300


_MAX_SCHEMA_DEPTH = 16


def resolve_ref(ref: str, root: Any) -> Any:
    """The subschema a local `$ref` (`#`, `#/$defs/Name`, any JSON pointer into `root`) names, or None."""
    if not ref.startswith("#"):
        return None
    node = root
    pointer = ref[1:]
    if not pointer:
        return node
    if not pointer.startswith("/"):
        return None
    for escaped in pointer[1:].split("/"):
        part = unquote(escaped).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def schema_types(schema: Any, depth: int = 0, root: Any = None) -> set[str]:
    """The JSON types a schema allows, looking through `type` lists, anyOf/oneOf/allOf, enum,
    const, OpenAPI's `nullable` and, given the tool's schema as `root`, local `$ref`s. An empty
    set means the schema says nothing about types."""
    if schema is None or depth > _MAX_SCHEMA_DEPTH or (type(schema) is not dict and not isinstance(schema, Mapping)):
        return set()
    declared = schema.get("type")
    if len(schema) == 1 and type(declared) is list:  # `{"type": [...]}`, as `Tools` writes typing schemas
        return {t for t in declared if isinstance(t, str)} & _ALL_TYPES
    found: set[str] = set()
    if isinstance(declared, str):
        found.add(declared)
    elif isinstance(declared, list):
        found.update(t for t in declared if isinstance(t, str))
    for keyword in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                found |= schema_types(branch, depth + 1, root)
    ref = schema.get("$ref")
    if root is not None and isinstance(ref, str):
        found |= schema_types(resolve_ref(ref, root), depth + 1, root)
    values = list(schema.get("enum", [])) if isinstance(schema.get("enum"), list) else []
    if "const" in schema:
        values.append(schema["const"])
    for value in values:
        found.add(_PYTHON_TYPE.get(type(value), "string"))
    if schema.get("nullable") is True:
        found.add("null")
    return found & _ALL_TYPES


def top_level_schemas(schema: Any) -> list[Mapping[str, Any]]:
    """The schema and every schema that describes the same object with it: the branches of
    `allOf`/`anyOf`/`oneOf` and the targets of local `$ref`s, followed to any depth (cycles once)."""
    found: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, Mapping) or id(node) in seen or depth > _MAX_SCHEMA_DEPTH:
            continue
        seen.add(id(node))
        found.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            stack.append((resolve_ref(ref, schema), depth + 1))
        for keyword in ("allOf", "anyOf", "oneOf"):
            branches = node.get(keyword)
            if isinstance(branches, list):
                stack.extend((branch, depth + 1) for branch in reversed(branches))
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def is_json_data(value: Any) -> bool:
    """Whether `value` is plain JSON data that `json.dumps` writes and strict JSON readers read back
    equal: dicts with str keys, lists, str without lone surrogates, bool, None, ints, finite floats;
    at most MAX_DEPTH deep."""
    return _json_data_problem(value) is None


def _json_data_problem(value: Any) -> str | None:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                return "surrogate"
            continue
        if item is None or isinstance(item, (bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return "number"
            continue
        if depth >= MAX_DEPTH:
            return "depth"
        if type(item) is list:
            stack.extend((child, depth + 1) for child in item)
        elif type(item) is dict:
            stack.extend((key, depth + 1) for key in item)  # keys: str is checked like values
            if not all(isinstance(key, str) for key in item):
                return "key"
            stack.extend((child, depth + 1) for child in item.values())
        else:
            return "type"
    return None


class TooDeepText(str):
    """Parameter text whose JSON nests deeper than MAX_DEPTH, where the schema wanted an object or
    an array and no string: it stays the text, and validation rejects the call as nested too deeply."""

    __slots__ = ()


# A typed value, and its JSON text when that is the parameter's text itself without surrounding
# whitespace (else None): what `arguments_json` writes for it, as the model wrote it.
Typed = tuple[Any, "str | None"]
_NOT_JSON, _TOO_DEEP = object(), object()  # what `_strict_json` says instead of a value


def _strict_json(text: str) -> Any:
    """The value of `text` read as strict JSON (RFC 8259: no NaN/Infinity, no overflow, no lone
    surrogates, no duplicate keys) and at most MAX_DEPTH deep; `_TOO_DEEP` when it is strict JSON
    nested deeper, `_NOT_JSON` when it is not JSON at all. Never raises."""
    try:
        value = strict_loads(text)
    except json.JSONDecodeError as error:
        return _TOO_DEEP if error.msg == "nested too deeply" else _NOT_JSON
    except ValueError:
        return _NOT_JSON
    return _TOO_DEEP if deeper_than(value, MAX_DEPTH, text) else value


def deeper_than(value: Any, limit: int, text: str | None = None) -> bool:
    """Whether `value` (JSON data, decoded from the JSON `text` when given) nests deeper than
    `limit`. Most values are proved shallow from their text at C speed (fewer brackets than
    `limit`, or `_nesting_at_most`); the others are walked level by level."""
    if text is not None and (text.count("[") + text.count("{") < limit
                             or _nesting_at_most(text, min(limit, _TEXT_LEVELS))):
        return False
    level = [value]
    for _ in range(limit):
        level = [child for item in level for child in (item.values() if type(item) is dict else item)
                 if type(child) is dict or type(child) is list]
        if not level:
            return False
    return True


# How many levels `_nesting_at_most` peels off the text before leaving a value to the walk: each
# level is one pass over the brackets left (deep values are rare; the walk's cost does not grow so).
_TEXT_LEVELS = 32
_NOT_SKELETON = bytes(byte for byte in range(256) if byte not in b'"[]{}')
_SQUARE = bytes.maketrans(b"{}", b"[]")


def _nesting_at_most(text: str, levels: int) -> bool:
    """Whether the JSON value `text` (valid JSON: the decoder read it) nests at most `levels` deep.

    Exact, in C-speed passes over the text: drop the escaped backslashes and quotes (left to right,
    as a JSON reader pairs them), keep only quotes and brackets, drop what is inside the strings
    (quotes now alternate), then remove the innermost bracket pairs once per level."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(None, _NOT_SKELETON)
    if b'"' in data:
        data = data.replace(b'""', b"")  # an empty string, or the empty gap between two strings
        if b'"' in data:
            data = b"".join(data.split(b'"')[::2])
    data = data.translate(_SQUARE)
    for _ in range(levels):
        if not data:
            return True
        data = data.replace(b"[]", b"")
    return not data


def _literal(text: str) -> Any:
    """The value of a Python literal (never evaluated: `ast.literal_eval`) that is JSON data and
    writes no dict key twice; `_NOT_JSON` for any other text."""
    try:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = [ast.literal_eval(key) if key is not None else None for key in node.keys]
                if len(set(map(repr, keys))) != len(keys):
                    return _NOT_JSON
        value = ast.literal_eval(tree)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOT_JSON
    return value if is_json_data(value) else _NOT_JSON


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


_NUMBER_START = frozenset("-0123456789")  # a JSON number starts with one of these
# Zeros before the first digit of a number's integer part, after its sign: `018956`, `-007`, `01.5`.
_LEADING_ZEROS = re.compile(r"(-?)0+(?=[0-9])")


def without_leading_zeros(text: str) -> str:
    """A decimal number written with leading zeros, as JSON writes it (`018956` -> `18956`, `-007` ->
    `-7`, `01.5` -> `1.5`, `00` -> `0`); any other text as it is. (FORMATS.md, fourth wave, Decision 23:
    such text typed integer or number reads as Python's `int()`/`float()` and the peers read it.)"""
    match = _LEADING_ZEROS.match(text)
    return text if match is None else match.group(1) + text[match.end():]


def _scalar(kind: str, text: str, zeros: bool = False) -> tuple[bool, Any]:
    """`text` (stripped) as a null, boolean, integer or number; with `zeros`, a number may be written
    with leading zeros (where the schema allows no string, which would keep them)."""
    if kind == "null":
        return (True, None) if text in ("null", "None") else (False, None)
    if kind == "boolean":
        if text in ("true", "True"):
            return True, True
        if text in ("false", "False"):
            return True, False
        return False, None
    if text[:1] not in _NUMBER_START:
        return False, None
    if zeros:
        text = without_leading_zeros(text)
    if kind == "integer":
        return _integer(text)
    value = _strict_json(text)
    if type(value) is int or type(value) is float:
        return True, value
    return False, None


def _container(text: str, wanted: set[str]) -> Typed:
    """`text` (stripped) as an object or array of a kind in `wanted`: strict JSON (then its JSON text
    is `text` itself), else a Python literal; `_TOO_DEEP` or `_NOT_JSON` instead of a value."""
    value = _strict_json(text)
    if value is _TOO_DEEP:
        return value, None
    written: str | None = text
    if value is _NOT_JSON:
        value, written = _literal(text), None
    if value is _NOT_JSON or _PYTHON_TYPE.get(type(value)) not in wanted:
        return _NOT_JSON, None
    return value, written


_SCALARS = ("null", "boolean", "integer", "number")
_CONTAINERS = frozenset(("object", "array"))


def typed(text: str, schema: Any) -> Typed:
    """The value `text` stands for under `schema` (a property schema), a string when nothing fits;
    and the value's JSON text when it is `text` itself without its surrounding whitespace (an object
    or array written as strict JSON: `arguments_json` keeps it as written), else None."""
    types = schema_types(schema)
    if not types - {"string"}:
        return text, None
    stripped = text.strip()
    zeros = "string" not in types  # a string-typed value keeps its zeros (`"03106"`)
    for kind in _SCALARS:
        if kind in types:
            ok, value = _scalar(kind, stripped, zeros)
            if ok:
                return value, None
    wanted = types & _CONTAINERS
    if wanted:
        value, written = _container(stripped, wanted)
        if value is _TOO_DEEP:
            if "string" not in types:
                return TooDeepText(text), None
        elif value is not _NOT_JSON:
            return value, written
    return text, None


def typed_json(text: str, schema: Any) -> Typed:
    """A value written as JSON (DSML `string="false"`): JSON, else the typing rules, else the text;
    with its JSON text as in `typed`."""
    stripped = text.strip()
    value = _strict_json(stripped)
    if value is not _NOT_JSON and value is not _TOO_DEEP:
        return value, (stripped if type(value) is dict or type(value) is list else None)
    if schema_types(schema):
        return typed(text, schema)
    value = _literal(stripped)
    return (text if value is _NOT_JSON else value), None


def json_or_text(text: str) -> Typed:
    """A value whose writer declared it JSON (Kimi K3 `type="number"`): the JSON, whitespace around
    it ignored, kept as parsed whatever the schema says; else the text, as written (the schema check
    then decides). With its JSON text as in `typed`."""
    stripped = text.strip()
    value = _strict_json(stripped)
    if value is _NOT_JSON or value is _TOO_DEEP:
        return text, None
    return value, (stripped if type(value) is dict or type(value) is list else None)


def property_schema(tool_schema: Any, name: str) -> Any:
    """The schema of parameter `name` in a tool's parameters schema, or None when not named.

    The parameter may be declared at the top, in `allOf`/`anyOf`/`oneOf` branches or behind a local
    `$ref` (a tool's `parameters` written as a union of shapes); declared in several places, its
    schema is their `anyOf` (typing tries every type any of them allows)."""
    if tool_schema is None or (type(tool_schema) is not dict and not isinstance(tool_schema, Mapping)):
        return None
    properties = tool_schema.get("properties")
    direct = properties.get(name) if type(properties) is dict or isinstance(properties, Mapping) else None
    if direct is not None and "allOf" not in tool_schema and "anyOf" not in tool_schema \
            and "oneOf" not in tool_schema and "$ref" not in tool_schema:
        return direct
    declared = []
    for part in top_level_schemas(tool_schema):
        found = part.get("properties")
        if isinstance(found, Mapping) and name in found:
            declared.append(found[name])
    if not declared:
        return None
    return declared[0] if len(declared) == 1 else {"anyOf": declared}
