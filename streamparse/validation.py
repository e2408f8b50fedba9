"""The tools a caller offers: checked and compiled once (`Tools`), then used to judge each call.

Compiling a tool list costs about a millisecond per tool (the schemas are checked against their
meta-schema); a server builds a parser per request, so compiled lists are kept: pass a `Tools`
(nothing to do per parser), or a plain list, which is recognised by its content in a bounded LRU
cache of compiled lists (found by its length and first and last tool names, then compared whole
with `==` at C speed; about 1 µs per tool of the benchmark's shape). The cache is bounded in bytes:
its lists' estimated memory totals at most `CACHE_BYTES` (64 MiB), and a list estimated over
`CACHE_MAX_LIST_BYTES` (16 MiB: about 5,000 schema objects) is compiled for its caller and not kept.
A compiled list takes about 2-3 KB of memory per JSON object or array of its schemas (a 3 MB list of
100,000 properties: 226 MB), so the estimate is its JSON text's length plus `BYTES_PER_CONTAINER`
per object and array.

Calls are judged by jsonschema-rs (Rust; under a microsecond for a typical tool schema), which
cannot stall: `uniqueItems` is hash-based, `multipleOf` exact for integers of any size, and
`pattern`/`patternProperties` are ECMA-262 regexes run by the `regex` crate's linear-time engine;
a schema whose patterns need lookaround or backreferences (which that engine lacks) runs on
fancy-regex, at most `BACKTRACK_LIMIT` backtracking steps per match. A recursive schema meets
arguments at most `MAX_DEPTH` deep. Anything that still goes wrong is a `schema_violation` that
says so. Python's `jsonschema` is used when compiling only: it picks the draft by `$schema`, checks
the schema against its meta-schema (its error messages), and its format checkers decide `format`.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from types import MappingProxyType
from typing import Any, overload

import jsonschema
import jsonschema_rs
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from .grammar import encodable
from .schema_typing import MAX_DEPTH, TooDeepText, deeper_than, property_schema, schema_types, top_level_schemas
from .types import INVALID_JSON, SCHEMA_VIOLATION, UNKNOWN_TOOL

# The most backtracking steps one match of a lookaround/backreference pattern may take (~25 ns each
# here, so about 2.5 ms); a match that needs more rejects the call `schema_violation` saying so.
BACKTRACK_LIMIT = 100_000
# Compiled tool lists kept for plain lists seen before (equal content), least recently used first out:
# at most this many, and at most CACHE_BYTES of estimated memory (`_estimated_bytes`) in all.
CACHE_SIZE = 256
CACHE_BYTES = 64 * 1024 * 1024
# A list estimated over this is compiled for its caller and not kept.
CACHE_MAX_LIST_BYTES = 16 * 1024 * 1024
# The memory of a compiled list per JSON object or array in it, over its JSON text: its copies as
# given, frozen and typed, and jsonschema-rs's compiled validator (2-3 KB measured: 1.9 KB for small
# tools of integer parameters, 2.3 KB for a 100,000-property tool, 3 KB with descriptions).
BYTES_PER_CONTAINER = 3 * 1024
# At most this many validation errors are reported for one call (the first, by JSON path).
MAX_ERRORS = 20
# Schemas nesting deeper than this are refused when compiled: the validator recurses along them.
MAX_SCHEMA_DEPTH = 200

_KIND = jsonschema_rs.ValidationErrorKind


# ----------------------------------------------------------------- the engine's options


_RUST_VALIDATORS: dict[type[Validator], type[jsonschema_rs.Validator]] = {
    jsonschema.Draft4Validator: jsonschema_rs.Draft4Validator,
    jsonschema.Draft6Validator: jsonschema_rs.Draft6Validator,
    jsonschema.Draft7Validator: jsonschema_rs.Draft7Validator,
    jsonschema.Draft201909Validator: jsonschema_rs.Draft201909Validator,
    jsonschema.Draft202012Validator: jsonschema_rs.Draft202012Validator,
}
# The formats jsonschema-rs checks itself: each is handed to the draft's Python format checker
# instead, which passes those it does not check (so `format` means what it meant with jsonschema).
_RUST_FORMATS = ("date", "date-time", "duration", "email", "hostname", "idn-email", "idn-hostname", "ipv4",
                 "ipv6", "iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer", "time", "uri",
                 "uri-reference", "uri-template", "uuid")


def _is_regex(instance: object) -> bool:
    """`format: regex`: whether Python compiles the pattern (False, not an exception, for any text)."""
    if not isinstance(instance, str):
        return True
    try:
        re.compile(instance)
    except Exception:  # re.error, OverflowError ("a{4294967296}"), RecursionError
        return False
    return True


def _conforms(checker: jsonschema.FormatChecker, name: str) -> Callable[[str], bool]:
    return lambda instance: checker.conforms(instance, name)


@cache
def _formats(cls: type[Validator]) -> dict[str, Callable[[str], bool]]:
    """The format checks of `cls`'s draft as jsonschema has them, by name, with a `regex` that is
    False for any pattern Python cannot compile."""
    checker = cls.FORMAT_CHECKER
    names = {*_RUST_FORMATS, *checker.checkers}
    formats = {name: _conforms(checker, name) for name in sorted(names)}
    formats["regex"] = _is_regex
    return formats


def _rust_spelling(pattern: str) -> str:
    """`pattern` with the ECMA-262 escapes jsonschema-rs does not read spelled as ones it does:
    `\\0` (NUL, not before a digit) as `\\x00`, and `\\b` inside a class (backspace) as `\\x08`."""
    if "\\0" not in pattern and "\\b" not in pattern:
        return pattern
    out, pos, in_class = [], 0, False
    while pos < len(pattern):
        char = pattern[pos]
        if char == "\\" and pos + 1 < len(pattern):
            escaped = pattern[pos + 1]
            if escaped == "0" and not pattern[pos + 2:pos + 3].isdigit():
                out.append("\\x00")
            elif escaped == "b" and in_class:
                out.append("\\x08")
            else:
                out.append(char + escaped)
            pos += 2
            continue
        in_class = (in_class and char != "]") or (not in_class and char == "[")
        out.append(char)
        pos += 1
    return "".join(out)


def _rust_schema(node: Any, is_schema: bool = True) -> Any:
    """The schema as jsonschema-rs is given it: its `pattern`s and `patternProperties` regexes in
    `_rust_spelling` (the schema nests at most MAX_SCHEMA_DEPTH deep: recursion is safe)."""
    if isinstance(node, list):
        return [_rust_schema(item, is_schema) for item in node]
    if not isinstance(node, Mapping):
        return node
    if not is_schema:
        return {key: _rust_schema(item) for key, item in node.items()}
    rewritten = {}
    for keyword, child in node.items():
        if keyword in _DATA_KEYWORDS:
            rewritten[keyword] = child
        elif keyword == "pattern" and isinstance(child, str):
            rewritten[keyword] = _rust_spelling(child)
        elif keyword == "patternProperties" and isinstance(child, Mapping):
            rewritten[keyword] = {_rust_spelling(key) if isinstance(key, str) else key: _rust_schema(item)
                                  for key, item in child.items()}
        else:
            rewritten[keyword] = _rust_schema(child, keyword not in _NAME_MAPS)
    return rewritten


@cache
def _pattern_engine(pattern: str) -> str:
    """Which engine runs `pattern`: "linear" (the `regex` crate), "fancy" (lookaround or
    backreferences), or why neither compiles it."""
    for engine, options in (("linear", jsonschema_rs.RegexOptions()),
                            ("fancy", jsonschema_rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT))):
        try:
            jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=options, offline=True)
        except (ValueError, jsonschema_rs.ValidationError):
            continue
        return engine
    return "not a valid ECMA-262 regular expression"


# ----------------------------------------------------------------- compiling a tool list


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


_DATA_KEYWORDS = frozenset(("enum", "const", "default", "examples"))
_NAME_MAPS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))


def _check_refs(name: str, schema: Any, cls: type[Validator]) -> bool:
    """Every `$ref` of the schema resolves within the schema itself; remote ones are never fetched.
    Whether the schema refers anywhere (a reference of any kind, or a nested `$id`): without one it
    cannot refer back into itself, and `_recursive` need not build its graph."""
    if not isinstance(schema, Mapping):
        return False
    refers = False
    specification = specification_with(cls.META_SCHEMA.get("$schema", ""), default=DRAFT202012)
    root = specification.create_resource(schema)
    stack: list[tuple[Any, Any, bool]] = [(schema, Registry().resolver_with_root(root), True)]
    while stack:
        node, resolver, is_schema = stack.pop()
        if isinstance(node, list):
            stack.extend((item, resolver, is_schema) for item in node)
            continue
        if not isinstance(node, Mapping):
            continue
        if not is_schema:  # a map of names to schemas (properties, $defs, ...)
            stack.extend((item, resolver, True) for item in node.values())
            continue
        if node is not schema and "$id" in node:
            refers = True
            if isinstance(node.get("$id"), str):
                resolver = resolver.in_subresource(specification.create_resource(node))
        if "$recursiveRef" in node:
            refers = True
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if ref is not None:
                refers = True
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Exception:
                    raise ValueError(f"tool {name!r}: {keyword} {ref!r} does not resolve within the tool's "
                                     "schema (only local references are followed; remote ones are never "
                                     "fetched)") from None
        for keyword, child in node.items():
            if keyword not in _DATA_KEYWORDS:
                stack.append((child, resolver, keyword not in _NAME_MAPS))
    return refers


def _typing_schema(schema: Any) -> Any:
    """What XML formats type parameter text by: each parameter named anywhere at the top of the
    schema (also in `anyOf`/`oneOf`/`allOf` branches and through local `$ref`s) with the JSON
    types its schema allows, as `{"type": [...]}` (`{}` when it says nothing about types)."""
    if not isinstance(schema, Mapping):
        return schema
    names = _parameter_names(schema)
    properties: dict[str, Any] = {}
    for key in names:
        types = schema_types(property_schema(schema, key), root=schema)
        properties[key] = {"type": sorted(types)} if types else {}
    return {"type": "object", "properties": properties}


def _parameter_names(schema: Mapping[str, Any]) -> list[str]:
    names: dict[str, None] = {}
    for part in top_level_schemas(schema):
        properties = part.get("properties")
        if isinstance(properties, Mapping):
            names.update(dict.fromkeys(k for k in properties if isinstance(k, str)))
    return list(names)


class _Tool:
    __slots__ = ("recursive", "schema", "typing", "validator")

    def __init__(self, name: str, schema: Any) -> None:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        rust = _RUST_VALIDATORS.get(cls)
        if rust is None:
            raise ValueError(f"tool {name!r}: 'parameters' declares {cls.__name__.removesuffix('Validator')} "
                             "in $schema, which is not supported; use draft-04 or later (or no $schema: "
                             "Draft 2020-12)")
        _check_depth(name, schema)
        refers = _check_refs(name, schema, cls)
        options = _pattern_options(name, schema)
        try:  # offline: a `$ref` or `$schema` naming a remote resource is never fetched
            self.validator = rust(_rust_schema(schema), formats=_formats(cls), validate_formats=True, offline=True,
                                  pattern_options=options)
        except (ValueError, jsonschema_rs.ReferencingError) as error:
            _check_schema(name, schema, cls)  # jsonschema's words for what is wrong, where it sees it too
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(f"tool {name!r}: 'parameters' cannot be compiled: {first}") from None
        self.schema = schema
        self.typing = _typing_schema(schema)
        self.recursive = refers and _recursive(schema)


def _check_schema(name: str, schema: Any, cls: type[Validator]) -> None:
    """ValueError naming the tool, in jsonschema's words, when the schema is not valid under its
    draft's meta-schema. (Only asked once jsonschema-rs, which checks the same, has refused the
    schema: jsonschema takes about 7 ms per tool schema, most of compiling a tool list.)"""
    try:
        cls.check_schema(schema)
    except SchemaError as error:
        path = "/".join(str(p) for p in error.path) or "(root)"
        raise ValueError(f"tool {name!r}: 'parameters' is not a valid JSON Schema "
                         f"({cls.__name__}): {error.message} at {path}") from None
    except RecursionError:  # jsonschema recurses along the schema in Python
        raise ValueError(f"tool {name!r}: 'parameters' nests too deeply to be checked against its "
                         "meta-schema") from None


def _children(node: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(keyword, value, whether the value is a schema or holds schemas) for each member of a schema;
    a map of names to schemas (`properties`, `$defs`, ...) is not one, data (`enum`, ...) holds none."""
    for keyword, child in node.items():
        if keyword not in _DATA_KEYWORDS:
            yield keyword, child, keyword not in _NAME_MAPS


def _schema_nodes(schema: Any) -> Iterator[tuple[tuple[Any, ...], Mapping[str, Any]]]:
    """Every schema object in `schema` with its JSON-pointer path from the root (iterative)."""
    stack: list[tuple[Any, tuple[Any, ...], bool]] = [(schema, (), True)]
    while stack:
        node, path, is_schema = stack.pop()
        if isinstance(node, list):
            stack.extend((item, (*path, i), is_schema) for i, item in enumerate(node))
        elif isinstance(node, Mapping):
            if not is_schema:
                stack.extend((item, (*path, key), True) for key, item in node.items())
                continue
            yield path, node
            stack.extend((child, (*path, key), holds) for key, child, holds in _children(node))


def _check_depth(name: str, schema: Any, what: str = "'parameters'", limit: int = MAX_SCHEMA_DEPTH) -> None:
    """The schema nests at most `limit` containers deep (the validator recurses along it)."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (Mapping, list)):
            if depth >= limit:
                raise ValueError(f"tool {name!r}: {what} nests deeper than {limit} levels")
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, Mapping) else node))


def _pattern_options(name: str, schema: Any) -> jsonschema_rs.RegexOptions | jsonschema_rs.FancyRegexOptions:
    """The regex engine for the schema's `pattern`/`patternProperties`: the linear-time one when it
    compiles them all, else fancy-regex with its backtracking bounded; ValueError naming the tool
    for a pattern neither compiles."""
    fancy = False
    for _, node in _schema_nodes(schema):
        found = [(node["pattern"], False)] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), Mapping):
            found.extend((k, True) for k in node["patternProperties"] if isinstance(k, str))
        for pattern, on_keys in found:
            engine = _pattern_engine(_rust_spelling(pattern))
            if engine not in ("linear", "fancy"):
                raise ValueError(f"tool {name!r}: the pattern {pattern!r} is {engine}")
            if engine == "fancy" and on_keys:  # jsonschema-rs reads a match cut short as "no match"
                raise ValueError(f"tool {name!r}: the patternProperties regex {pattern!r} uses lookaround or "
                                 "backreferences, which are not supported there (a match over the "
                                 "backtracking bound would leave the property unchecked)")
            fancy = fancy or engine == "fancy"
    if fancy:
        return jsonschema_rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
    return jsonschema_rs.RegexOptions()


def _recursive(schema: Any) -> bool:
    """Whether validation may follow the schema's references back into themselves, and so go as deep
    as the arguments do; True when unsure (dynamic references, anchors, nested `$id`s).

    The schema's containers are the nodes of a graph whose edges lead from each container to those
    inside it, and from each local `$ref` to the container it points to; recursion is a cycle in
    it, found by one depth-first search: O(nodes + refs)."""
    if not isinstance(schema, Mapping):
        return False
    edges: dict[tuple[str, ...], list[tuple[str, ...]]] = {}  # a container's path -> where it leads
    stack: list[tuple[Any, tuple[str, ...], bool]] = [(schema, (), True)]
    while stack:
        node, path, is_schema = stack.pop()
        leads = edges[path] = []
        if isinstance(node, list):
            items: Iterator[tuple[str, Any, bool]] = ((str(i), item, is_schema) for i, item in enumerate(node))
        elif not is_schema:  # a map of names to schemas (properties, $defs, ...)
            items = ((str(key), item, True) for key, item in node.items())
        else:
            if "$dynamicRef" in node or "$recursiveRef" in node or (path and "$id" in node):
                return True
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref != "#" and not ref.startswith("#/"):
                    return True
                leads.append(tuple(part.replace("~1", "/").replace("~0", "~")
                                   for part in ref[2:].split("/")) if ref != "#" else ())
            items = ((str(key), child, holds) for key, child, holds in _children(node))
        for step, child, holds in items:
            if isinstance(child, (Mapping, list)):
                leads.append((*path, step))
                stack.append((child, (*path, step), holds))
    return _has_cycle(edges)


def _has_cycle(edges: Mapping[tuple[str, ...], list[tuple[str, ...]]]) -> bool:
    """Whether the graph (each node's successors; one outside it has none) has a cycle: an iterative
    depth-first search that meets a node still on its path."""
    state: dict[tuple[str, ...], bool] = {}  # False: on the current path; True: done
    for start in edges:
        if start in state:
            continue
        state[start] = False
        path = [(start, iter(edges[start]))]
        while path:
            node, successors = path[-1]
            step = next(successors, None)
            if step is None:
                state[node] = True
                path.pop()
            elif step not in state:
                state[step] = False
                path.append((step, iter(edges.get(step, ()))))
            elif state[step] is False:
                return True
    return False


class Tools(Sequence[Mapping[str, Any]]):
    """A tool list checked and compiled once: immutable, shareable across parsers and threads.

    Accepted wherever `tools=` is. Build one per deployment (or let plain lists be recognised by
    content). Raises `TypeError`/`ValueError` naming the tool for a malformed definition, an
    invalid schema, a pattern that does not compile or a `$ref` that does not resolve locally."""

    __slots__ = ("_definitions", "_tools")
    _definitions: tuple[Mapping[str, Any], ...]
    _tools: Mapping[str, _Tool]

    def __init__(self, tools: Sequence[Mapping[str, Any]] | Tools) -> None:
        if isinstance(tools, Tools):
            self._definitions, self._tools = tools._definitions, tools._tools
            return
        _check_list(tools)
        try:  # a copy: the caller may change their list afterwards
            copied: Any = json.loads(json.dumps(tools))
        except (TypeError, ValueError, RecursionError):
            copied = tools
        compiled: dict[str, _Tool] = {}
        for position, tool in enumerate(copied):
            name, schema = _normalize(tool, position)
            if name in compiled:
                raise ValueError(f"tool {name!r} is defined twice; tool names must be unique")
            compiled[name] = _Tool(name, schema)
            # the definition around its parameters (checked above), copied recursively below
            _check_depth(name, _around_parameters(tool), "the definition", MAX_SCHEMA_DEPTH)
        self._definitions = tuple(_frozen(tool) for tool in copied)
        self._tools = MappingProxyType(compiled)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._definitions[index]

    def __len__(self) -> int:
        return len(self._definitions)

    def __repr__(self) -> str:
        return f"Tools({list(self._tools)!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its plain definitions (compiled again, once, where it is unpickled: a worker)."""
        return (compiled_tools, ([_thawed(tool) for tool in self._definitions],))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tools):
            return other._definitions == self._definitions
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.names)

    def schema(self, name: str) -> Any:
        """The parameters schema of tool `name` as given, or None when no tool has that name."""
        tool = self._tools.get(name)
        return tool.schema if tool is not None else None


def _around_parameters(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition with its `parameters` left out (in `function`, for the OpenAI shape)."""
    inner = tool.get("function")
    if isinstance(inner, Mapping):
        return {**tool, "function": {k: v for k, v in inner.items() if k != "parameters"}}
    return {k: v for k, v in tool.items() if k != "parameters"}


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return value


def _check_list(tools: object) -> None:
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a list of tool definitions (OpenAI 'tools' or "
                        "{'name', 'parameters'} dicts), a streamparse.Tools, or None")


def _name_of(tool: Any) -> Any:
    if type(tool) is dict:  # what a decoded request holds: no abstract-class check
        inner = tool.get("function", tool)
    else:
        inner = tool.get("function", tool) if isinstance(tool, Mapping) else None
    return inner.get("name") if type(inner) is dict or isinstance(inner, Mapping) else None


def _names(tools: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """The cache's key: the list's length and its first and last tool names, cheap to compute
    whatever the list's size; equal content is checked after (`_Cached.matches`)."""
    if not tools:
        return (0,)
    return len(tools), _name_of(tools[0]), _name_of(tools[-1])


def _typed_scalars(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (bool, int, float)):
            return True
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _sensitive(copied: Any) -> tuple[tuple[tuple[Any, ...], str], ...]:
    """Where `==` is not enough to tell two tool lists apart: Python has 1 == 1.0 == True, so an
    `enum`/`const` holding numbers or booleans is compared by its canonical JSON as well."""
    found = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(copied, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("enum", "const") and _typed_scalars(value):
                    found.append(((*path, key), json.dumps(value, sort_keys=True)))
                stack.append((value, (*path, key)))
        elif isinstance(node, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(node))
    return tuple(found)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _estimated_bytes(text: str, copied: Any) -> int:
    """The memory a compiled list of JSON text `text` (decoded: `copied`) is estimated to hold:
    the text's length plus `BYTES_PER_CONTAINER` per JSON object and array in it."""
    containers, stack = 0, [copied]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            containers += 1
            stack.extend(node.values())
        elif isinstance(node, list):
            containers += 1
            stack.extend(node)
    return len(text) + BYTES_PER_CONTAINER * containers


class _Cached:
    __slots__ = ("compiled", "copied", "sensitive", "size")

    def __init__(self, copied: Any, compiled: Tools, size: int) -> None:
        self.copied, self.compiled, self.sensitive, self.size = copied, compiled, _sensitive(copied), size

    def matches(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        try:
            return bool(tools == self.copied) and all(
                json.dumps(_at(tools, path), sort_keys=True) == canonical for path, canonical in self.sensitive)
        except Exception:  # a list that cannot even be compared is compiled (and judged) afresh
            return False


class _Lru(OrderedDict[tuple[Any, ...], _Cached]):
    """The cached lists by key, least recently used first, with their estimated bytes in all."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0


_CACHE = _Lru()
_CACHE_LOCK = threading.Lock()


def compiled_tools(tools: Sequence[Mapping[str, Any]] | Tools) -> Tools:
    """The compiled form of `tools`: itself for a `Tools`; for a list, the compiled form of an equal
    list seen before (an LRU of at most `CACHE_SIZE` lists and `CACHE_BYTES` of estimated memory,
    keyed by the tool names, then compared whole: `==` at C speed, plus canonical JSON where `==`
    confuses 1 and true); else compiled now, and kept unless it is estimated over
    `CACHE_MAX_LIST_BYTES`."""
    if isinstance(tools, Tools):
        return tools
    _check_list(tools)
    key = _names(tools)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
    if found is not None and found.matches(tools):
        return found.compiled
    made = Tools(tools)
    try:
        text = json.dumps(tools, allow_nan=False)
        copied = json.loads(text)
    except (TypeError, ValueError, RecursionError):  # not plain JSON data: not cached
        return made
    size = _estimated_bytes(text, copied)
    if size > CACHE_MAX_LIST_BYTES:
        return made
    entry = _Cached(copied, made, size)
    with _CACHE_LOCK:
        replaced = _CACHE.pop(key, None)
        _CACHE.size += size - (replaced.size if replaced is not None else 0)
        _CACHE[key] = entry
        while len(_CACHE) > CACHE_SIZE or _CACHE.size > CACHE_BYTES:
            _CACHE.size -= _CACHE.popitem(last=False)[1].size
    return made


# ----------------------------------------------------------------- judging calls


def _strict_data_problem(name: str, arguments: dict[str, Any], arguments_json: str | None = None) -> str | None:
    """Why a call's name or arguments are not strict JSON data, or None. The formats' readers
    already refuse these; this is the last check every call passes, whatever read it. Given the
    call's `arguments_json` (which the body kinds make with the strict decoder, or with
    `json.dumps(allow_nan=False)`), one UTF-8 check of that text; otherwise one `json.dumps` at C
    speed (NaN and infinities refused) and one UTF-8 check."""
    if not (name.isascii() or encodable(name)):  # (ASCII, the common case, without the call)
        return "the tool name holds a lone surrogate (not a Unicode character)"
    for value in arguments.values():
        if isinstance(value, TooDeepText):
            return f"a parameter value nests too deeply (more than {MAX_DEPTH} levels)"
    if arguments_json is not None:
        if arguments_json.isascii() or encodable(arguments_json):
            return None
        return "a lone surrogate (not a Unicode character) in the arguments"
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False, check_circular=False)
    except RecursionError:
        return "the arguments are nested too deeply"
    except (ValueError, TypeError) as error:
        return f"the arguments are not JSON data: {error}"
    if not encodable(text):
        return "a lone surrogate (not a Unicode character) in the arguments"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _optional_null(error: jsonschema_rs.ValidationError, schema: Any) -> bool:
    """A `null` written for a property its object does not require means "not given".

    Models write it often for optional parameters (and templates that cannot describe a
    nullable type still show them an optional one), so it does not reject the call. (The error's
    `schema_path` is where the failing keyword is in the tool's schema, also behind a `$ref`.)"""
    path, where = error.schema_path, error.instance_path
    if len(path) < 3 or path[-3] != "properties" or not where or where[-1] != path[-2]:
        return False
    parent: Any = schema
    for step in path[:-3]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(parent, Mapping) and path[-2] not in parent.get("required", ()) and error.instance is None


def _json_path(where: Sequence[str | int]) -> str:
    """`$.a[0].b`, as jsonschema writes an error's place in the instance."""
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in where)


def _amount(edge: int, edge_words: str, words: str) -> Callable[[Any, str], str]:
    """jsonschema's words for a length, item or property count out of bounds (`edge` has its own)."""
    return lambda kind, shown: f"{shown} {edge_words if kind.limit == edge else words}"


def _bound(words: str) -> Callable[[Any, str], str]:
    return lambda kind, shown: f"{shown} is {words} of {kind.limit!r}"


def _extras(which: str) -> Callable[[Any, str], str]:
    def message(kind: Any, shown: str) -> str:
        listed = ", ".join(_short(extra, 40) for extra in sorted(kind.unexpected)[:10])
        verb = "was" if len(kind.unexpected) == 1 else "were"
        return f"{which} properties are not allowed ({listed} {verb} unexpected)"

    return message


# What is wrong, by the kind of error, in jsonschema's words (Python reprs, as users of the previous
# validator read them): `(kind, the failing value's short repr) -> text`.
_MESSAGES: dict[type[Any], Callable[[Any, str], str]] = {
    _KIND.Type: lambda kind, shown: f"{shown} is not of type {', '.join(map(repr, kind.types))}",
    _KIND.Required: lambda kind, shown: f"{kind.property!r} is a required property",
    _KIND.Enum: lambda kind, shown: f"{shown} is not one of {_short(kind.options, 200)}",
    _KIND.Constant: lambda kind, shown: f"{_short(kind.expected_value)} was expected",
    _KIND.Minimum: _bound("less than the minimum"),
    _KIND.Maximum: _bound("greater than the maximum"),
    _KIND.ExclusiveMinimum: _bound("less than or equal to the minimum"),
    _KIND.ExclusiveMaximum: _bound("greater than or equal to the maximum"),
    _KIND.MinLength: _amount(1, "should be non-empty", "is too short"),
    _KIND.MinItems: _amount(1, "should be non-empty", "is too short"),
    _KIND.MinProperties: _amount(1, "should be non-empty", "does not have enough properties"),
    _KIND.MaxLength: _amount(0, "is expected to be empty", "is too long"),
    _KIND.MaxItems: _amount(0, "is expected to be empty", "is too long"),
    _KIND.MaxProperties: _amount(0, "is expected to be empty", "has too many properties"),
    _KIND.Pattern: lambda kind, shown: f"{shown} does not match {kind.pattern!r}",
    _KIND.BacktrackLimitExceeded: lambda kind, shown: (
        f"matching {shown} against the schema's pattern took more than the {BACKTRACK_LIMIT} "
        "backtracking steps a match may take; the call is rejected"),
    _KIND.Format: lambda kind, shown: f"{shown} is not a {kind.format!r}",
    _KIND.MultipleOf: lambda kind, shown: f"{shown} is not a multiple of {kind.multiple_of}",
    _KIND.UniqueItems: lambda kind, shown: f"{shown} has non-unique elements",
    _KIND.AdditionalProperties: _extras("Additional"),
    _KIND.UnevaluatedProperties: _extras("Unevaluated"),
    _KIND.AnyOf: lambda kind, shown: f"{shown} is not valid under any of the given schemas",
    _KIND.OneOfNotValid: lambda kind, shown: f"{shown} is not valid under any of the given schemas",
    _KIND.OneOfMultipleValid: lambda kind, shown: f"{shown} is valid under more than one of the given schemas",
    _KIND.Not: lambda kind, shown: f"{shown} should not be valid under {_short(kind.schema, 200)}",
    _KIND.FalseSchema: lambda kind, shown: f"False schema does not allow {shown}",
}


def _message(error: jsonschema_rs.ValidationError, instance: Any) -> str:
    """What is wrong with `instance`; jsonschema-rs's own words for the rarer kinds of error."""
    words = _MESSAGES.get(type(error.kind))
    return words(error.kind, _short(instance)) if words is not None else error.message


def _instance_at(arguments: Any, where: Sequence[str | int], error: jsonschema_rs.ValidationError) -> Any:
    """The failing value as the call holds it (its Python repr is what errors show)."""
    try:
        return _at(arguments, tuple(where))
    except (KeyError, IndexError, TypeError):
        return error.instance


def _violations(tool: _Tool, arguments: dict[str, Any]) -> list[str]:
    """The texts of what makes `arguments` invalid, by JSON path (none: a null for an optional
    property is all that is wrong); stops at a pattern over its backtracking bound."""
    errors = []
    for error in tool.validator.iter_errors(arguments):
        if _optional_null(error, tool.schema):
            continue
        errors.append(error)
        if isinstance(error.kind, _KIND.BacktrackLimitExceeded):
            break
    errors.sort(key=lambda e: [str(p) for p in e.instance_path])
    shown = [f"{_json_path(e.instance_path)}: {_message(e, _instance_at(arguments, e.instance_path, e))}"
             for e in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        shown.append(f"... and {len(errors) - MAX_ERRORS} more errors")
    return shown


_TOO_DEEP = "$: the arguments nest too deeply to be checked against the schema"


def _is_panic(error: BaseException) -> bool:
    """A Rust panic surfacing from a compiled dependency (pyo3's `PanicException`, a BaseException)."""
    return type(error).__name__ == "PanicException"


def _from_validation(error: BaseException) -> bool:
    """Errors validation may raise, as opposed to interrupts and exits, which must propagate."""
    return isinstance(error, Exception) or _is_panic(error)


class ToolSet:
    """The tools one parser checks calls against: a compiled `Tools` (shared), or none."""

    __slots__ = ("_tools", "given")

    def __init__(self, tools: Sequence[Mapping[str, Any]] | Tools | None) -> None:
        self.given = tools is not None
        self._tools = compiled_tools(tools) if tools is not None else None

    @property
    def tools(self) -> Tools | None:
        return self._tools

    def schema(self, name: str) -> Any:
        """What XML formats type the parameters of tool `name` by (`Tools` docs: every parameter
        named at the top of its schema, with the types its schema allows); None when it is
        unknown or no tools were given."""
        tool = self._tools._tools.get(name) if self._tools is not None else None
        return tool.typing if tool is not None else None

    def parameters(self, name: str) -> Any:
        """The parameters schema of tool `name` as given (nested tags are typed along its paths);
        None when it is unknown or no tools were given."""
        tool = self._tools._tools.get(name) if self._tools is not None else None
        return tool.schema if tool is not None else None

    def known(self, name: str) -> bool:
        return self._tools is None or name in self._tools._tools

    def check(self, name: str, arguments: dict[str, Any],
              arguments_json: str | None = None) -> tuple[str, list[str]] | None:
        """`(status, errors)` when the call fails a check, else None. Never raises."""
        problem = _strict_data_problem(name, arguments, arguments_json)
        if problem is not None:
            return INVALID_JSON, [f"$: {problem}"]
        if self._tools is None:
            return None
        tool = self._tools._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools._tools)) or "none"
            return UNKNOWN_TOOL, [f"no tool named {_short(name)} was offered (offered: {known})"]
        if tool.recursive and deeper_than(arguments, MAX_DEPTH, arguments_json):
            return SCHEMA_VIOLATION, [_TOO_DEEP]  # the validator recurses as deep as the arguments go
        try:
            if tool.validator.is_valid(arguments):
                return None
            shown = _violations(tool, arguments)
        except BaseException as error:  # whatever the validator raises is this call's verdict
            if not _from_validation(error):
                raise
            if isinstance(error, RecursionError) or "Recursion limit reached" in str(error):  # jsonschema-rs's
                return SCHEMA_VIOLATION, [_TOO_DEEP]
            return SCHEMA_VIOLATION, [f"$: the arguments could not be checked against the schema: "
                                      f"{type(error).__name__}: {_short(str(error), 200)}"]
        return (SCHEMA_VIOLATION, shown) if shown else None
