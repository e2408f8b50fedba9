"""The tools a caller offers: checked and compiled once (`Tools`), then used to judge each call.

Compiling a tool list costs about a millisecond per tool (the schemas are checked against their
meta-schema); a server builds a parser per request, so compiled lists are kept: pass a `Tools`
(nothing to do per parser), or a plain list, which is recognised by its content in a bounded LRU
cache of compiled lists (found by its length and first and last tool names, then compared whole
with `==` at C speed; about 1 µs per tool of the benchmark's shape).

Validation of a call cannot raise and cannot stall: jsonschema's quadratic `uniqueItems` is
replaced by a hash-based check, the regular-expression keywords (`pattern`, `patternProperties`,
`additionalProperties` next to `patternProperties`, `format: regex`) run on the `regex` engine
under one time budget per call (`PATTERN_BUDGET_SECONDS`), integers too large for a double are
checked against `multipleOf` exactly, and anything that still goes wrong inside the validator
is a `schema_violation` that says so.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from functools import cache
from itertools import repeat
from types import MappingProxyType
from typing import Any, overload

import jsonschema
import regex  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from .fast_schema import compile_schema
from .grammar import encodable
from .schema_typing import MAX_DEPTH, TooDeepText, property_schema, schema_types, top_level_schemas
from .types import INVALID_JSON, SCHEMA_VIOLATION, UNKNOWN_TOOL

# All the regular-expression work of one call's validation shares this budget; a call that needs
# more is rejected `schema_violation` saying so. Linear patterns on a 200 KB argument take ~1 ms.
PATTERN_BUDGET_SECONDS = 0.25
# Compiled tool lists kept for plain lists seen before (equal content), least recently used first out.
CACHE_SIZE = 256
# At most this many validation errors are reported for one call (the first, by JSON path).
MAX_ERRORS = 20

_budget = threading.local()


# ----------------------------------------------------------------- bounded keywords


class _PatternBudgetExceeded(Exception):
    pass


@cache
def _compiled_pattern(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    """`re.search(pattern, text)` as jsonschema does it, within what is left of the call's budget."""
    deadline: float | None = getattr(_budget, "deadline", None)
    if deadline is None:
        deadline = time.monotonic() + PATTERN_BUDGET_SECONDS
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _PatternBudgetExceeded(pattern)
    try:
        return _compiled_pattern(pattern).search(text, timeout=remaining) is not None
    except TimeoutError:
        raise _PatternBudgetExceeded(pattern) from None


def _budget_error(pattern: str) -> ValidationError:
    return ValidationError(f"checking the pattern {_short(pattern)} took more than the "
                           f"{PATTERN_BUDGET_SECONDS} s this call may spend on patterns; the call is rejected")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        if not _search(pattern, instance):
            yield ValidationError(f"{_short(instance)} does not match {pattern!r}")
    except _PatternBudgetExceeded:
        yield _budget_error(pattern)


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = _search(pattern, key)
            except _PatternBudgetExceeded:
                yield _budget_error(pattern)
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in properties] if not patterns else []
    for key in instance if patterns else ():
        if key in properties:
            continue
        try:
            if any(_search(pattern, key) for pattern in patterns):
                continue
        except _PatternBudgetExceeded as exceeded:
            yield _budget_error(str(exceeded))
            return
        extras.append(key)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(_short(extra, 40) for extra in sorted(extras)[:10])
        if patterns:
            yield ValidationError(f"{shown} {'does' if len(extras) == 1 else 'do'} not match any of the "
                                  f"regexes: {', '.join(map(repr, sorted(patterns)))}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({shown} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


def _canonical(value: Any) -> Any:
    """A hashable form equal for values JSON Schema calls equal (1 == 1.0, key order ignored, true != 1).

    Numbers become their decimal text, so no crafted set of numbers can make hashing collide."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return ("n", str(value) if isinstance(value, int) else repr(value))
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("d", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("?", repr(value))


def _all_unique(items: list[Any]) -> bool:
    """Whether no item repeats an earlier one (JSON equality: the canonical keys of `_canonical`)."""
    if all(map(isinstance, items, repeat(str))):  # the common case: strings are equal as JSON when equal
        return len(set(items)) == len(items)
    seen: set[Any] = set()
    for item in items:
        key = _canonical(item)
        if key in seen:
            return False
        seen.add(key)
    return True


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for position, item in enumerate(instance):
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"the array has non-unique elements (item {position} repeats an earlier one)")
            return
        seen.add(key)


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "number"):
        return
    if isinstance(divisor, float) or isinstance(instance, float):
        # Decimal semantics: 0.01 is one hundredth, as written in the schema; exact for any size.
        failed = (Fraction(repr(instance) if isinstance(instance, float) else instance)
                  / Fraction(repr(divisor) if isinstance(divisor, float) else divisor)).denominator != 1
    else:
        failed = bool(instance % divisor)
    if failed:
        yield ValidationError(f"{_short(instance)} is not a multiple of {divisor}")


def _is_regex(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        re.compile(instance)
    except Exception:  # re.error, OverflowError ("a{4294967296}"), RecursionError
        return False
    return True


_BOUNDED_KEYWORDS = {"pattern": _pattern, "patternProperties": _pattern_properties,
                     "additionalProperties": _additional_properties, "uniqueItems": _unique_items,
                     "multipleOf": _multiple_of}


@cache
def _bounded(cls: type[Validator]) -> tuple[type[Validator], jsonschema.FormatChecker]:
    """The draft's validator class with the bounded keywords, and its format checker with a safe `regex`."""
    keywords = {k: v for k, v in _BOUNDED_KEYWORDS.items() if k in cls.VALIDATORS}
    bounded: type[Validator] = extend(cls, validators=keywords)  # type: ignore[no-untyped-call]
    checker = jsonschema.FormatChecker()
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checkers["regex"] = (_is_regex, ())
    return bounded, checker


# ----------------------------------------------------------------- compiling a tool list


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


_DATA_KEYWORDS = frozenset(("enum", "const", "default", "examples"))
_NAME_MAPS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))


def _check_refs(name: str, schema: Any, cls: type[Validator]) -> None:
    """Every `$ref` of the schema resolves within the schema itself; remote ones are never fetched."""
    if not isinstance(schema, Mapping):
        return
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
        if node is not schema and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(specification.create_resource(node))
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
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
    __slots__ = ("fast", "patterns", "schema", "typing", "validator")

    def __init__(self, name: str, schema: Any) -> None:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as error:
            path = "/".join(str(p) for p in error.path) or "(root)"
            raise ValueError(f"tool {name!r}: 'parameters' is not a valid JSON Schema "
                             f"({cls.__name__}): {error.message} at {path}") from None
        _check_refs(name, schema, cls)
        _check_patterns(name, schema)
        bounded, checker = _bounded(cls)
        self.schema = schema
        self.validator = bounded(schema, registry=Registry(), format_checker=checker)
        self.typing = _typing_schema(schema)
        self.patterns = _may_search(schema)
        # A fast yes for schemas in the common subset (fast_schema.py); only jsonschema says no.
        drafts = (jsonschema.Draft202012Validator, jsonschema.Draft201909Validator)
        self.fast = compile_schema(schema, _search, _all_unique) if cls in drafts else None


def _may_search(schema: Any) -> bool:
    """Whether checking a call against `schema` may search a regular expression (`pattern`,
    `patternProperties`, `format`), and so needs the call's pattern budget; True when unsure."""
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError, RecursionError):
        return True
    return '"pattern' in text or '"format"' in text


def _check_patterns(name: str, schema: Any) -> None:
    """Every `pattern`/`patternProperties` regex compiles (with the engine that will run it)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, Mapping):
            found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
            if isinstance(node.get("patternProperties"), Mapping):
                found.extend(k for k in node["patternProperties"] if isinstance(k, str))
            for pattern in found:
                try:
                    _compiled_pattern(pattern)
                except Exception as error:
                    raise ValueError(f"tool {name!r}: the pattern {pattern!r} is not a valid regular "
                                     f"expression: {error}") from None
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)


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


class _Cached:
    __slots__ = ("compiled", "copied", "sensitive")

    def __init__(self, copied: Any, compiled: Tools) -> None:
        self.copied, self.compiled, self.sensitive = copied, compiled, _sensitive(copied)

    def matches(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        try:
            return bool(tools == self.copied) and all(
                json.dumps(_at(tools, path), sort_keys=True) == canonical for path, canonical in self.sensitive)
        except Exception:  # a list that cannot even be compared is compiled (and judged) afresh
            return False


_CACHE: OrderedDict[tuple[Any, ...], _Cached] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def compiled_tools(tools: Sequence[Mapping[str, Any]] | Tools) -> Tools:
    """The compiled form of `tools`: itself for a `Tools`; for a list, the compiled form of an equal
    list seen before (an LRU of `CACHE_SIZE` lists, keyed by the tool names, then compared whole:
    `==` at C speed, plus canonical JSON where `==` confuses 1 and true); else compiled now."""
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
        copied = json.loads(json.dumps(tools, allow_nan=False))
    except (TypeError, ValueError, RecursionError):  # not plain JSON data: not cached
        return made
    with _CACHE_LOCK:
        _CACHE[key] = _Cached(copied, made)
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return made


# ----------------------------------------------------------------- judging calls


def _strict_data_problem(name: str, arguments: dict[str, Any], arguments_json: str | None = None) -> str | None:
    """Why a call's name or arguments are not strict JSON data, or None. The formats' readers
    already refuse these; this is the last check every call passes, whatever read it. Given the
    call's `arguments_json` (which the body kinds make with the strict decoder, or with
    `json.dumps(allow_nan=False)`), one UTF-8 check of that text; otherwise one `json.dumps` at C
    speed (NaN and infinities refused) and one UTF-8 check."""
    if not encodable(name):
        return "the tool name holds a lone surrogate (not a Unicode character)"
    for value in arguments.values():
        if isinstance(value, TooDeepText):
            return f"a parameter value nests too deeply (more than {MAX_DEPTH} levels)"
    if arguments_json is not None:
        return None if encodable(arguments_json) else "a lone surrogate (not a Unicode character) in the arguments"
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False, check_circular=False)
    except RecursionError:
        return "the arguments are nested too deeply"
    except (ValueError, TypeError) as error:
        return f"the arguments are not JSON data: {error}"
    if not encodable(text):
        return "a lone surrogate (not a Unicode character) in the arguments"
    return None


def _is_panic(error: BaseException) -> bool:
    """A Rust panic surfacing from a compiled dependency (`referencing`'s rpds raises pyo3's
    `PanicException`, a BaseException, when Python's stack runs out inside it)."""
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
        if tool.patterns:
            _budget.deadline = time.monotonic() + PATTERN_BUDGET_SECONDS  # one pattern budget for both checks
        if tool.fast is not None:
            try:
                if tool.fast(arguments):
                    _budget.deadline = None
                    return None
            except Exception:
                pass
        try:
            errors = [e for e in tool.validator.iter_errors(arguments) if not _optional_null(e, tool.schema)]
        except RecursionError:  # a recursive schema over arguments nested deeper than Python's stack
            return SCHEMA_VIOLATION, ["$: the arguments nest too deeply to be checked against the schema"]
        except BaseException as error:  # whatever the validator raises is this call's verdict
            if not _from_validation(error):
                raise
            if _is_panic(error) and "RecursionError" in str(error):
                return SCHEMA_VIOLATION, ["$: the arguments nest too deeply to be checked against the schema"]
            return SCHEMA_VIOLATION, [f"$: the arguments could not be checked against the schema: "
                                      f"{type(error).__name__}: {_short(str(error), 200)}"]
        finally:
            _budget.deadline = None
        if not errors:
            return None
        errors.sort(key=lambda e: [str(p) for p in e.path])
        shown = [f"{e.json_path}: {e.message}" for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            shown.append(f"... and {len(errors) - MAX_ERRORS} more errors")
        return SCHEMA_VIOLATION, shown
