"""A fast yes for the common case: JSON Schema compiled into plain Python closures.

`jsonschema` pays several microseconds per instance node (a new validator per `descend`, a
referencing resource per subschema), so checking a 1,000-item argument costs milliseconds. Most
tool schemas use a small subset of keywords; `compile_schema` turns such a schema into closures that
say whether an instance is valid at a fraction of that cost.

It is only ever a fast *yes*: `validation.ToolSet.check` accepts a call when the compiled check says
valid, and otherwise asks `jsonschema` (for the errors, the "null for an optional property" rule,
and the keywords compiled here do not handle). So it must never say valid where `jsonschema` would
not: a schema that uses any keyword outside `_SUPPORTED` (besides annotations and keywords the
draft does not know, which `jsonschema` ignores too) is not compiled at all, and a property test
checks the two agree on every schema this module compiles.

Cost: one closure call per schema node the instance reaches; no allocation beyond the recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import repeat
from operator import ge
from typing import Any
from weakref import WeakKeyDictionary

Check = Callable[[Any], bool]

# Keywords with no effect on validity (annotations, containers of subschemas reached by $ref).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "$schema", "deprecated",
                          "readOnly", "writeOnly", "$defs", "definitions"})
_SUPPORTED = frozenset({"type", "enum", "const", "properties", "required", "additionalProperties", "items",
                        "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                        "exclusiveMaximum", "anyOf", "allOf", "oneOf", "not", "$ref", "pattern", "uniqueItems"})
# Every other keyword of Draft 2019-09 and 2020-12: a schema that uses one is left to jsonschema.
_UNSUPPORTED = frozenset({"patternProperties", "format", "multipleOf", "prefixItems",
                          "contains", "minContains", "maxContains", "dependentRequired", "dependentSchemas",
                          "dependencies", "propertyNames", "if", "then", "else", "unevaluatedProperties",
                          "unevaluatedItems", "$dynamicRef", "$dynamicAnchor", "$anchor", "$recursiveRef",
                          "$recursiveAnchor", "$id", "minProperties", "maxProperties", "additionalItems",
                          "$vocabulary", "contentMediaType", "contentEncoding", "contentSchema"})


class _Unsupported(Exception):
    """The schema uses something this module does not compile."""


def _is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
# The type checks that are exactly `isinstance(v, CLASS)`: a container's items or values are then
# checked by `map(isinstance, …)`, at C speed, instead of one Python call per item.
_CLASS_OF: dict[Check, type] = {_TYPES["null"]: type(None), _TYPES["boolean"]: bool, _TYPES["string"]: str,
                                _TYPES["array"]: list, _TYPES["object"]: dict}


# The `required` checks made, with their names: next to an "object" type check they fuse into one.
# (Weak keys: a compiled schema that is dropped takes its entries with it.)
_REQUIRED: WeakKeyDictionary[Check, frozenset[str]] = WeakKeyDictionary()
# The fused checks "an object with these keys": the items of an array are checked so at C speed.
_OBJECT_WITH: WeakKeyDictionary[Check, frozenset[str]] = WeakKeyDictionary()


def _always(v: Any) -> bool:
    """The check of a schema that accepts everything (`true`, `{}`, annotations only)."""
    return True


def _never(v: Any) -> bool:
    """The check of the `false` schema."""
    return False


def _each(check: Check) -> Callable[[Any], bool]:
    """Whether every item of an iterable passes `check` (C-speed iteration; C-speed checks for classes)."""
    cls = _CLASS_OF.get(check)
    if cls is not None:
        return lambda items: all(map(isinstance, items, repeat(cls)))
    return lambda items: all(map(check, items))


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema has it: true is not 1, 1 is 1.0, containers compared deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(_equal(a[k], b[k]) for k in a))
    return bool(a == b)


Search = Callable[[str, str], bool]  # (pattern, text) -> whether it matches: the validator's own engine
Unique = Callable[[list[Any]], bool]  # whether an array's items are unique: the validator's own check


def _all_of(checks: list[Check]) -> Check:
    """One check that passes when every one of `checks` does (no generator per instance node)."""
    checks = [check for check in checks if check is not _always]
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    cls = next((_CLASS_OF[check] for check in checks if check in _CLASS_OF), None)
    if cls is not None:  # a type check, inlined: one Python call less per instance node
        others = [check for check in checks if _CLASS_OF.get(check) is not cls]
        if cls is dict and others and all(check in _REQUIRED for check in others):  # "object" + "required"
            required = frozenset().union(*(_REQUIRED[check] for check in others))
            fused: Check = lambda v: isinstance(v, dict) and v.keys() >= required  # noqa: E731
            _OBJECT_WITH[fused] = required
            return fused
        rest = _all_of(others)
        if rest is _always:
            return next(check for check in checks if check in _CLASS_OF)
        return lambda v: isinstance(v, cls) and rest(v)
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    if len(checks) == 3:
        first, second, third = checks
        return lambda v: first(v) and second(v) and third(v)
    every = tuple(checks)

    def check(v: Any) -> bool:
        for one in every:  # noqa: SIM110 (a loop: no generator per instance node)
            if not one(v):
                return False
        return True

    return check


class _Compiler:
    def __init__(self, root: Any, search: Search | None, unique: Unique | None) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}
        self.search = search
        self.unique = unique

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, Mapping):
            raise _Unsupported("a schema must be an object or a boolean")
        if any(key in _UNSUPPORTED for key in schema):
            raise _Unsupported("a keyword this module does not compile")
        checks: list[Check] = []
        for key in schema:
            if key in _SUPPORTED:
                checks.append(getattr(self, "_" + key.lstrip("$"))(schema[key], schema))
        return _all_of(checks)

    # ----------------------------------------------------------------- keywords

    def _type(self, value: Any, schema: Mapping[str, Any]) -> Check:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) and n in _TYPES for n in names):
            raise _Unsupported("type")
        tests = [_TYPES[n] for n in names]
        if len(tests) == 1:
            return tests[0]
        if len(tests) == 2:
            first, second = tests
            return lambda v: first(v) or second(v)
        return lambda v: any(test(v) for test in tests)

    def _enum(self, value: Any, schema: Mapping[str, Any]) -> Check:
        if not isinstance(value, list):
            raise _Unsupported("enum")
        return lambda v: any(_equal(v, option) for option in value)

    def _const(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return lambda v: _equal(v, value)

    def _properties(self, value: Any, schema: Mapping[str, Any]) -> Check:
        if not isinstance(value, Mapping):
            raise _Unsupported("properties")
        compiled = {key: self.compile(sub) for key, sub in value.items()}
        pairs = tuple((key, sub) for key, sub in compiled.items() if sub is not _always)
        if not pairs:
            return _always

        def check(v: Any) -> bool:
            if type(v) is not dict:
                return True
            for key, sub in pairs:  # noqa: SIM110 (a loop: no generator per instance node)
                if key in v and not sub(v[key]):
                    return False
            return True

        return check

    def _required(self, value: Any, schema: Mapping[str, Any]) -> Check:
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            raise _Unsupported("required")
        required = frozenset(value)
        check: Check = lambda v: not isinstance(v, dict) or v.keys() >= required  # noqa: E731
        _REQUIRED[check] = required
        return check

    def _additionalProperties(self, value: Any, schema: Mapping[str, Any]) -> Check:
        declared = schema.get("properties", {})
        if not isinstance(declared, Mapping):
            raise _Unsupported("properties")
        known = frozenset(declared)
        extra = self.compile(value)
        if extra is _always:
            return _always
        if extra is _never:
            return lambda v: not isinstance(v, dict) or v.keys() <= known
        each = _each(extra)
        if not known:
            return lambda v: not isinstance(v, dict) or each(v.values())
        return lambda v: not isinstance(v, dict) or each(map(v.__getitem__, v.keys() - known))

    def _items(self, value: Any, schema: Mapping[str, Any]) -> Check:
        if isinstance(value, list):
            raise _Unsupported("items as a list")
        item = self.compile(value)
        if item is _always:
            return _always
        required = _OBJECT_WITH.get(item)
        if required is not None:  # `item` on each, in two C-speed passes
            return lambda v: not isinstance(v, list) or (all(map(isinstance, v, repeat(dict)))
                                                         and all(map(ge, map(dict.keys, v), repeat(required))))
        each = _each(item)
        return lambda v: not isinstance(v, list) or each(v)

    def _bound(self, value: Any, applies: Check, holds: Callable[[Any, Any], bool]) -> Check:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unsupported("a bound that is not a number")
        return lambda v: not applies(v) or holds(v, value)

    def _minItems(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _TYPES["array"], lambda v, n: len(v) >= n)

    def _maxItems(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _TYPES["array"], lambda v, n: len(v) <= n)

    def _minLength(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _TYPES["string"], lambda v, n: len(v) >= n)

    def _maxLength(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _TYPES["string"], lambda v, n: len(v) <= n)

    def _minimum(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _is_number, lambda v, n: v >= n)

    def _maximum(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _is_number, lambda v, n: v <= n)

    def _exclusiveMinimum(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _is_number, lambda v, n: v > n)

    def _exclusiveMaximum(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return self._bound(value, _is_number, lambda v, n: v < n)

    def _pattern(self, value: Any, schema: Mapping[str, Any]) -> Check:
        search = self.search
        if search is None or not isinstance(value, str):
            raise _Unsupported("pattern")
        return lambda v: not isinstance(v, str) or search(value, v)

    def _uniqueItems(self, value: Any, schema: Mapping[str, Any]) -> Check:
        unique = self.unique
        if unique is None or not isinstance(value, bool):
            raise _Unsupported("uniqueItems")
        if not value:
            return _always
        return lambda v: not isinstance(v, list) or unique(v)

    def _subschemas(self, value: Any) -> list[Check]:
        if not isinstance(value, list) or not value:
            raise _Unsupported("a list of subschemas")
        return [self.compile(sub) for sub in value]

    def _allOf(self, value: Any, schema: Mapping[str, Any]) -> Check:
        return _all_of(self._subschemas(value))

    def _anyOf(self, value: Any, schema: Mapping[str, Any]) -> Check:
        subs = self._subschemas(value)
        return lambda v: any(sub(v) for sub in subs)

    def _oneOf(self, value: Any, schema: Mapping[str, Any]) -> Check:
        subs = self._subschemas(value)
        return lambda v: sum(1 for sub in subs if sub(v)) == 1

    def _not(self, value: Any, schema: Mapping[str, Any]) -> Check:
        sub = self.compile(value)
        return lambda v: not sub(v)

    def _ref(self, value: Any, schema: Mapping[str, Any]) -> Check:
        if not isinstance(value, str) or not (value == "#" or value.startswith("#/")):
            raise _Unsupported("a $ref that is not a local JSON pointer")
        found = self.refs.get(value)
        if found is not None:
            return found
        target: Any = self.root
        for escaped in value[2:].split("/") if value != "#" else ():
            part = escaped.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise _Unsupported("a $ref that does not resolve")
        slot: list[Check] = []
        self.refs[value] = lambda v: slot[0](v)  # noqa: PLW0108 (recursive schemas reach themselves through it)
        slot.append(self.compile(target))
        return self.refs[value]


def compile_schema(schema: Any, search: Search | None = None, unique: Unique | None = None) -> Check | None:
    """A function that says whether an instance is valid, for schemas in the supported subset of
    Draft 2019-09 / 2020-12; None for any other schema (then only jsonschema judges). `pattern` and
    `uniqueItems` are compiled only when the validator's own `search` and `unique` are given, so the
    two cannot disagree; an exception from them (a pattern over its time budget) means "ask jsonschema"."""
    try:
        return _Compiler(schema, search, unique).compile(schema)
    except (_Unsupported, RecursionError):
        return None
