"""The compiled schema check is a fast yes that never disagrees with jsonschema on what it compiles."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import given

from streamparse.fast_schema import compile_schema
from streamparse.validation import ToolSet, _all_unique, _search

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.0, 1.0, 1.5, -2.5]),
                    st.sampled_from(["", "a", "ab", "abc", "é"]))
INSTANCES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)), max_leaves=12)
TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
NUMBER = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.0, -1.5]))


def schemas() -> st.SearchStrategy[Any]:
    def node(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keywords = {
            "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
            "enum": st.lists(SCALARS, min_size=1, max_size=3), "const": INSTANCES,
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2),
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            "additionalProperties": inner, "items": inner,
            "minItems": st.integers(0, 3), "maxItems": st.integers(0, 3), "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3), "minimum": NUMBER, "maximum": NUMBER, "exclusiveMinimum": NUMBER,
            "exclusiveMaximum": NUMBER, "anyOf": st.lists(inner, min_size=1, max_size=2),
            "allOf": st.lists(inner, min_size=1, max_size=2), "oneOf": st.lists(inner, min_size=1, max_size=2),
            "not": inner, "$ref": st.just("#/$defs/d"), "description": st.just("annotation"), "x-vendor": INSTANCES,
            "pattern": st.sampled_from(["^a", "b$", "^$", "[é]"]), "uniqueItems": st.booleans(),
        }
        return st.dictionaries(st.sampled_from(sorted(keywords)), st.none(), max_size=4).flatmap(
            lambda chosen: st.fixed_dictionaries({k: keywords[k] for k in chosen}))

    leaf = st.one_of(st.booleans(), st.fixed_dictionaries({"type": TYPES}))
    body = st.recursive(leaf, node, max_leaves=6)
    return st.tuples(body, body).map(lambda pair: {"$defs": {"d": pair[1]}, "allOf": [pair[0]]})


@given(schemas(), st.lists(INSTANCES, min_size=1, max_size=5))
def test_the_compiled_check_agrees_with_jsonschema(schema: Any, instances: list[Any]) -> None:
    check = compile_schema(schema, _search, _all_unique)
    assert check is not None  # every keyword drawn is in the compiled subset
    validator = ToolSet([{"name": "f", "parameters": schema}]).tools._tools["f"].validator  # type: ignore[union-attr]
    for instance in instances:
        try:
            expected = validator.is_valid(instance)
        except BaseException as error:  # a $ref cycle that never reaches a keyword: ToolSet.check reports it
            if not isinstance(error, RecursionError) and type(error).__name__ != "PanicException":
                raise
            continue
        assert check(instance) == expected, (schema, instance)


def test_schemas_outside_the_subset_are_left_to_jsonschema() -> None:
    assert compile_schema({"pattern": "a+"}) is None and compile_schema({"uniqueItems": True}) is None
    for schema in ({"properties": {"a": {"format": "email"}}}, {"multipleOf": 2},
                   {"$ref": "https://example.com/s.json"}, {"items": [{"type": "string"}]}, {"$id": "x"},
                   {"patternProperties": {"^a": {}}}, {"if": {}, "then": {}}):
        assert compile_schema(schema) is None, schema


def test_a_recursive_schema_compiles_and_checks() -> None:
    kids = {"type": "array", "items": {"$ref": "#/$defs/node"}}
    tree = {"$defs": {"node": {"type": "object", "properties": {"kids": kids}, "required": ["kids"]}},
            "$ref": "#/$defs/node"}
    check = compile_schema(tree)
    assert check is not None
    assert check({"kids": [{"kids": []}, {"kids": [{"kids": []}]}]})
    assert not check({"kids": [{"kid": []}]})


def test_a_ref_cycle_is_a_schema_violation_not_an_exception() -> None:
    import streamparse

    tools = [{"name": "f", "parameters": {"$defs": {"d": {"$ref": "#/$defs/d"}}, "not": {"$ref": "#/$defs/d"}}}]
    message = streamparse.parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>', "hermes", tools)
    assert [r.status for r in message.rejected] == ["schema_violation"]


@given(st.lists(st.one_of(INSTANCES, st.dictionaries(st.sampled_from(["a", "b", "c"]), SCALARS)), max_size=5),
       st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2, unique=True))
def test_an_array_of_objects_with_required_keys_agrees_with_jsonschema(items: list[Any], required: list[str]) -> None:
    """The items of `{"type": "object", "required": [...]}` are checked in two C-speed passes."""
    item = {"type": "object", "required": required}
    schema = {"type": "object", "properties": {"v": {"type": "array", "items": item}}}
    check = compile_schema(schema)
    assert check is not None
    validator = ToolSet([{"name": "f", "parameters": schema}]).tools._tools["f"].validator  # type: ignore[union-attr]
    for instance in ({"v": items}, {"v": items[:1]}, {"v": [*items, {k: 1 for k in required}]}, {"v": "x"}):
        assert check(instance) == validator.is_valid(instance), instance
