"""Python literals of a JSON schema's values, as grammar IR (`grammar_ir`): what the layouts that
write Python share (`grammar_ir.CallLayout`).

Two writers of Python, one grammar of its literals, each with its own `Spelling`:
- pythonic calls (`pythonic.py`): keyword arguments as the pythonic reader takes them
  (`python_literals.literal`: JSON's `true`/`false`/`null` too, raw single quotes for LFM2.5);
- the tagged kinds whose templates print non-strings with Python's `str()` (Qwen3-Coder 2025-07-31,
  Seed-OSS): object and array values as `repr` writes them, `{'k': None}`, read by the shared typing
  (`schema_typing`, `ast.literal_eval`: Python's words only, no tuple, no lone surrogate).

A literal follows the schema where it names what to write: `const`/`enum`, `anyOf`/`oneOf` (as
alternatives), `type` (one or a list), array `items` with `minItems`/`maxItems`, object `properties`
in the schema's order (required ones once, optional ones at most once, no other key) or, without
them, `additionalProperties` for every value, and local `$ref`s to a depth of 4. Past that depth,
and where the schema says nothing more (an object with neither, an array without `items`, an empty
schema), any literal of that kind nested 3 deep.
Not enforced (the tools check still rejects such a value): numeric bounds, string lengths and
patterns, `uniqueItems`, `allOf`, and unique keys in an object the schema leaves open.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..grammar_ir import Lit, Node, Regex, Repeat, alt, optional, ordered_members, seq
from ..schema_typing import resolve_ref, schema_types

# A separator's space apart from its punctuation: llguidance's lexer is greedy, and `: ` as one
# lexeme would outrun the `:` of the JSON alternative beside it (JSON whitespace is its own lexeme).
COMMA = seq(Lit(","), optional(Lit(" ")))
_COLON = seq(Lit(":"), optional(Lit(" ")))
INTEGER = r"-?(0|[1-9][0-9]{0,15})"
# Exponents of at most two digits: a float literal never overflows to `inf` (not JSON data).
NUMBER = INTEGER + r"(\.[0-9]{1,16})?([eE][-+]?[0-9]{1,2})?"
# The escapes `repr` writes for ASCII (`\\n`, `\\x1b`; not `\\u200b`, kept short: a structural tag
# repeats the pattern wherever a string may stand); no raw line break or NUL, which `ast` refuses
# inside a one-line string.
_REPR_ESCAPE = r"\\([\"'\\nrt]|x[0-9a-fA-F]{2})"
_NESTING = 3  # how deep a literal the schema leaves open may nest (the IR has no recursion)
_REF_DEPTH = 4  # how many schema levels (references included) are followed


@dataclass(frozen=True)
class Spelling:
    """How one reader's literals are spelled: a string literal, and the names a literal may use."""

    strings: Node
    words: tuple[str, ...]


PYTHONIC = Spelling(alt(Regex(r'"([^"\\\n]|\\["\\nrt\'])*"'), Regex(r"'([^'\\\n]|\\[\"\\nrt'])*'")),
                    ("True", "False", "None", "true", "false", "null"))  # the pythonic reader takes JSON's words
PYTHONIC_RAW = Spelling(alt(Regex(r'"([^"\\\n]|\\["\\nrt\'])*"'), Regex(r"'[^']*'")),  # raw: as written
                        PYTHONIC.words)
REPR = Spelling(alt(Regex(rf"'([^'\\\n\r\x00]|{_REPR_ESCAPE})*'"), Regex(rf'"([^"\\\n\r\x00]|{_REPR_ESCAPE})*"')),
                ("True", "False", "None"))


def python_literal(schema: Any, root: Any, spelling: Spelling = PYTHONIC, depth: int = 0) -> Node:
    """The Python literal of a value valid against the JSON schema `schema` (`root`: the schema its
    local `$ref`s point into), as the module docstring says."""
    if depth > _REF_DEPTH or not isinstance(schema, Mapping) or not schema:
        return _any_literal(spelling, _NESTING)
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#"):
        return python_literal(resolve_ref(schema["$ref"], root), root, spelling, depth + 1)
    if "const" in schema:
        return _constant(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return alt(*map(_constant, schema["enum"]))
    for word in ("anyOf", "oneOf"):
        if isinstance(schema.get(word), list) and schema[word]:
            return alt(*(python_literal(option, root, spelling, depth + 1) for option in schema[word]))
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return alt(*(python_literal({**schema, "type": kind}, root, spelling, depth) for kind in kinds))
    if kinds == "string":
        return spelling.strings
    if kinds == "integer":
        return Regex(INTEGER)
    if kinds == "number":
        return Regex(NUMBER)
    if kinds == "boolean":
        return alt(Lit("True"), Lit("False"))
    if kinds == "null":
        return Lit("None")
    if kinds == "array":
        item = python_literal(schema.get("items", {}), root, spelling, depth + 1)
        least = schema.get("minItems", 0) if isinstance(schema.get("minItems", 0), int) else 0
        most = schema.get("maxItems") if isinstance(schema.get("maxItems"), int) else None
        return seq(Lit("["), Repeat(item, least, most, COMMA), Lit("]"))
    if kinds == "object":
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            return _mapping(schema.get("additionalProperties"), root, spelling, depth)
        required = set(schema.get("required", ()))
        members = [(seq(_constant(key), _COLON, python_literal(sub, root, spelling, depth + 1)), key in required)
                   for key, sub in properties.items()]
        return seq(Lit("{"), ordered_members(members, COMMA), Lit("}"))
    return _any_literal(spelling, _NESTING)


def python_container(schema: Any, root: Any, spelling: Spelling = REPR) -> Node | None:
    """The list and dict literals of a value valid against `schema` (what Python's `str()` prints as
    a repr), or None when the schema allows neither an array nor an object."""
    options = [python_literal(branch, root, spelling) for branch in _container_branches(schema, root, 0)]
    return alt(*options) if options else None


_CONTAINERS = ("array", "object")


def _container_branches(schema: Any, root: Any, depth: int) -> Iterator[Any]:
    """The parts of `schema` that allow only arrays or only objects (followed through `$ref`,
    `anyOf`/`oneOf`, `type` lists and `enum`s)."""
    if depth > _REF_DEPTH or not isinstance(schema, Mapping):
        return
    if isinstance(schema.get("$ref"), str):
        yield from _container_branches(resolve_ref(schema["$ref"], root), root, depth + 1)
        return
    constants = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(constants, list):
        found = [value for value in constants if type(value) is list or type(value) is dict]
        if found:
            yield {"enum": found}
        return
    for word in ("anyOf", "oneOf"):
        if isinstance(schema.get(word), list):
            for option in schema[word]:
                yield from _container_branches(option, root, depth + 1)
            return
    kinds = schema.get("type")
    if kinds is None:  # typed elsewhere (`allOf`, `nullable`): any literal of the container kinds it allows
        kinds = sorted(schema_types(schema, root=root))
    for kind in ([kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []):
        if kind in _CONTAINERS:
            yield {**schema, "type": kind} if "type" in schema else {"type": kind}


def _constant(value: Any) -> Node:
    """A JSON value as the Python literal that writes it (a string in either quote where it needs no
    escape, else in double quotes with JSON's escapes)."""
    if value is True or value is False or value is None:
        return Lit(repr(value))
    if isinstance(value, str) and not any(char in value for char in "'\\\n"):  # either quote
        return alt(Lit(json.dumps(value, ensure_ascii=False)), Lit(f"'{value}'"))
    if isinstance(value, (int, float, str)):
        return Lit(json.dumps(value, ensure_ascii=False))
    if isinstance(value, list):
        return seq(Lit("["), *_joined([_constant(item) for item in value]), Lit("]"))
    if isinstance(value, dict):
        pairs = [seq(Lit(json.dumps(str(key))), _COLON, _constant(item)) for key, item in value.items()]
        return seq(Lit("{"), *_joined(pairs), Lit("}"))
    return Lit(repr(value))


def _joined(items: list[Node]) -> list[Node]:
    out: list[Node] = []
    for position, item in enumerate(items):
        out += [COMMA, item] if position else [item]
    return out


def _mapping(values: Any, root: Any, spelling: Spelling, depth: int) -> Node:
    """A dict with string keys whose values follow `values` (an `additionalProperties`: a schema,
    `False` for none, anything else for any value)."""
    if values is False:
        return Lit("{}")
    if not isinstance(values, Mapping) or not values:
        return _any_mapping(spelling, _NESTING)
    pair = seq(spelling.strings, _COLON, python_literal(values, root, spelling, depth + 1))
    return seq(Lit("{"), Repeat(pair, 0, None, COMMA), Lit("}"))


def _any_literal(spelling: Spelling, depth: int) -> Node:
    """Any literal nested at most `depth` deep."""
    scalar = alt(spelling.strings, Regex(NUMBER), *map(Lit, spelling.words))
    if depth == 0:
        return scalar
    inner = _any_literal(spelling, depth - 1)
    return alt(scalar, seq(Lit("["), Repeat(inner, 0, None, COMMA), Lit("]")), _any_mapping(spelling, depth))


def _any_mapping(spelling: Spelling, depth: int) -> Node:
    """Any dict with string keys, nested at most `depth` deep."""
    pair = seq(spelling.strings, _COLON, _any_literal(spelling, depth - 1))
    return seq(Lit("{"), Repeat(pair, 0, None, COMMA), Lit("}"))
