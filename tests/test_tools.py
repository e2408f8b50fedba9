"""Tools compiled once, validation that cannot raise or stall, typing that follows the schema (issue #12).

Every case is checked on every format it applies to: `parse()` and 1-char streams in both emit modes
agree, and nothing raises.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import streamparse
from streamparse import Message, Options, ToolCall, Tools
from streamparse.families import FAMILIES
from streamparse.registry import get_format
from streamparse.validation import BACKTRACK_LIMIT, CACHE_SIZE, ToolSet, compiled_tools

FORMATS = [spec.name for spec in FAMILIES]
JSON_FORMATS = [spec.name for spec in FAMILIES if not spec.untyped_values]
XML_FORMATS = [spec.name for spec in FAMILIES if spec.untyped_values]


def tool(properties: dict[str, Any], name: str = "f", **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": properties, **extra}}}


def wire(fmt: str, arguments: dict[str, Any]) -> str:
    """One call to `f`; XML formats carry non-string values as their JSON text."""
    if fmt in XML_FORMATS:
        arguments = {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
    return streamparse.render(Message(tool_calls=[ToolCall("c", "f", arguments, "")]), fmt)


def outcome(text: str, fmt: str, tools: Any) -> Message:
    options: dict[str, Any] = {"tools": tools, "id_factory": lambda k: f"call{k}"}
    message = streamparse.parse(text, fmt, **options)
    for emit in ("validated", "progressive"):
        parser = streamparse.StreamParser(format=fmt, emit_calls=emit, **options)
        for chunk in text:
            parser.feed(chunk)
        parser.close()
        assert parser.message == message
    return message


def statuses(message: Message) -> list[str]:
    return ["accepted"] * len(message.tool_calls) + [r.status for r in message.rejected]


# ----------------------------------------------------------------- compiled once


def test_tools_is_accepted_wherever_tools_is() -> None:
    tools = Tools([tool({"a": {"type": "integer"}})])
    text = '<tool_call>\n{"name": "f", "arguments": {"a": "x"}}\n</tool_call>'
    assert statuses(streamparse.parse(text, tools=tools)) == ["schema_violation"]
    parser = streamparse.StreamParser.from_options(Options(tools=tools))
    parser.feed(text)
    parser.close()
    assert statuses(parser.message) == ["schema_violation"]
    assert ToolSet(tools).tools is tools
    assert len(tools) == 1 and tools.names == ("f",) and tools[0]["function"]["name"] == "f"


def test_an_equal_list_reuses_the_compiled_form() -> None:
    definitions = [tool({"a": {"type": "integer"}}, name=f"cache_{i}") for i in range(3)]
    first = compiled_tools(definitions)
    again = compiled_tools(json.loads(json.dumps(definitions)))  # new objects, equal content
    assert again is first
    changed = json.loads(json.dumps(definitions))
    changed[1]["function"]["parameters"]["properties"]["a"]["type"] = "string"
    assert compiled_tools(changed) is not first


def test_one_and_true_are_not_confused_by_the_cache() -> None:
    """Python has 1 == True; JSON Schema's `const`/`enum` does not."""
    as_int = [tool({"a": {"const": 1}}, name="const_case")]
    as_bool = [tool({"a": {"const": True}}, name="const_case")]
    assert compiled_tools(as_int) is not compiled_tools(as_bool)
    text = '<tool_call>\n{"name": "const_case", "arguments": {"a": true}}\n</tool_call>'
    assert statuses(streamparse.parse(text, tools=as_int)) == ["schema_violation"]
    assert statuses(streamparse.parse(text, tools=as_bool)) == ["accepted"]


def test_changing_the_list_afterwards_changes_nothing() -> None:
    definitions = [tool({"a": {"type": "integer"}}, name="mutated")]
    tools = Tools(definitions)
    definitions[0]["function"]["parameters"]["properties"]["a"]["type"] = "string"
    text = '<tool_call>\n{"name": "mutated", "arguments": {"a": 3}}\n</tool_call>'
    assert statuses(streamparse.parse(text, tools=tools)) == ["accepted"]
    assert statuses(streamparse.parse(text, tools=definitions)) == ["schema_violation"]


def test_the_cache_is_bounded() -> None:
    from streamparse import validation

    for i in range(CACHE_SIZE + 5):
        compiled_tools([tool({}, name=f"bounded_{i}")])
    assert len(validation._CACHE) <= CACHE_SIZE


@pytest.mark.parametrize("ref", ["#/$defs/missing", "https://example.com/schema.json", "other.json#/x",
                                 "#/properties/nope"])
def test_unresolvable_refs_raise_when_compiled(ref: str) -> None:
    definitions = [tool({"a": {"$ref": ref}}, name="refs")]
    for build in (lambda: Tools(definitions), lambda: streamparse.StreamParser(tools=definitions),
                  lambda: streamparse.parse("x", tools=definitions)):
        with pytest.raises(ValueError, match=r"tool 'refs'.*does not resolve"):
            build()


def test_local_refs_compile_and_validate() -> None:
    definitions = [tool({"a": {"$ref": "#/$defs/point"}}, name="g",
                        **{"$defs": {"point": {"type": "object", "required": ["x"]}}})]
    text = '<tool_call>\n{"name": "g", "arguments": {"a": {"y": 1}}}\n</tool_call>'
    assert statuses(streamparse.parse(text, tools=definitions)) == ["schema_violation"]


def test_a_pattern_that_does_not_compile_raises_naming_the_tool() -> None:
    with pytest.raises(ValueError, match="tool 'p'"):
        Tools([tool({"a": {"type": "string", "pattern": "(unclosed"}}, name="p")])


# ----------------------------------------------------------------- validation cannot raise or stall


@pytest.mark.parametrize("fmt", FORMATS)
def test_multiple_of_with_a_400_digit_integer(fmt: str) -> None:
    tools = [tool({"n": {"type": "number", "multipleOf": 0.01}})]
    assert statuses(outcome(wire(fmt, {"n": int("9" * 400)}), fmt, tools)) == ["accepted"]
    assert statuses(outcome(wire(fmt, {"n": 1.005}), fmt, tools)) == ["schema_violation"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_regex_with_a_huge_repeat(fmt: str) -> None:
    tools = [tool({"r": {"type": "string", "format": "regex"}})]
    message = outcome(wire(fmt, {"r": "a{4294967296}"}), fmt, tools)
    assert statuses(message) == ["schema_violation"]
    assert "regex" in message.rejected[0].errors[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_unique_items_over_many_objects_is_linear(fmt: str) -> None:
    tools = [tool({"u": {"type": "array", "uniqueItems": True}})]
    items = [{"id": i, "tags": ["a", i]} for i in range(20_000)]
    started = time.perf_counter()
    assert statuses(streamparse.parse(wire(fmt, {"u": items}), fmt, tools=tools)) == ["accepted"]
    assert statuses(streamparse.parse(wire(fmt, {"u": [*items, {"tags": ["a", 7], "id": 7.0}]}), fmt,
                                      tools=tools)) == ["schema_violation"]
    assert time.perf_counter() - started < 30  # jsonschema's pairwise check took minutes


def test_unique_items_follows_json_schema_equality() -> None:
    tools = [tool({"u": {"type": "array", "uniqueItems": True}})]
    cases = {"[1, 1.0]": "schema_violation", "[1, true]": "accepted", "[0, false]": "accepted",
             '[{"a": 1, "b": 2}, {"b": 2, "a": 1}]': "schema_violation", '[[1], [1.0]]': "schema_violation",
             '[null, 0, "", [], {}]': "accepted"}
    for items, expected in cases.items():
        text = f'<tool_call>\n{{"name": "f", "arguments": {{"u": {items}}}}}\n</tool_call>'
        assert statuses(streamparse.parse(text, tools=tools)) == [expected], items


_CATASTROPHIC = "^(a|a)*$"  # exponential for a backtracking engine; linear on the regex crate's
_BACKREFERENCE = r"^(\w+\s?)+\1$"  # needs fancy-regex (a backreference), and backtracks there


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_backtracking_pattern_runs_in_linear_time(fmt: str) -> None:
    tools = [tool({"s": {"type": "string", "pattern": _CATASTROPHIC}})]
    started = time.perf_counter()
    message = outcome(wire(fmt, {"s": "a" * 10_000 + "!"}), fmt, tools)
    assert statuses(message) == ["schema_violation"]
    assert "does not match '^(a|a)*$'" in message.rejected[0].errors[0]
    assert statuses(outcome(wire(fmt, {"s": "a" * 10_000}), fmt, tools)) == ["accepted"]
    assert time.perf_counter() - started < 30  # Python's re took minutes at 40 characters


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_backreference_pattern_is_cut_by_the_backtracking_bound(fmt: str) -> None:
    tools = [tool({"s": {"type": "string", "pattern": _BACKREFERENCE}})]
    message = outcome(wire(fmt, {"s": "a" * 40 + "!"}), fmt, tools)
    assert statuses(message) == ["schema_violation"]
    assert f"more than the {BACKTRACK_LIMIT} backtracking steps" in message.rejected[0].errors[0]
    assert statuses(outcome(wire(fmt, {"s": "abab"}), fmt, tools)) == ["accepted"]


@pytest.mark.parametrize("keywords", [{"patternProperties": {_CATASTROPHIC: {"type": "string"}}},
                                      {"patternProperties": {_CATASTROPHIC: {}}, "additionalProperties": False},
                                      {"propertyNames": {"pattern": _CATASTROPHIC}}])
def test_backtracking_patterns_on_keys_run_in_linear_time(keywords: dict[str, Any]) -> None:
    tools = [{"name": "f", "parameters": {"type": "object", **keywords}}]
    key = "a" * 10_000 + "!"
    text = '<tool_call>\n{"name": "f", "arguments": {"' + key + '": "v", "aaa": 1}}\n</tool_call>'
    started = time.perf_counter()
    message = streamparse.parse(text, tools=tools)
    assert statuses(message) == ["schema_violation"]
    assert time.perf_counter() - started < 10


def test_a_backreference_pattern_on_keys_is_cut_too() -> None:
    tools = [{"name": "f", "parameters": {"type": "object", "propertyNames": {"pattern": _BACKREFERENCE}}}]
    text = '<tool_call>\n{"name": "f", "arguments": {"' + "a" * 40 + '!": "v"}}\n</tool_call>'
    message = streamparse.parse(text, tools=tools)
    assert statuses(message) == ["schema_violation"]
    assert "backtracking steps" in " ".join(message.rejected[0].errors)


def test_a_backreference_in_pattern_properties_is_refused_when_compiled() -> None:
    """jsonschema-rs takes a match cut short for "no match", which would leave the value unchecked."""
    with pytest.raises(ValueError, match=r"tool 'f'.*patternProperties.*not supported"):
        Tools([{"name": "f", "parameters": {"patternProperties": {_BACKREFERENCE: {"type": "string"}}}}])
    assert Tools([{"name": "f", "parameters": {"patternProperties": {_CATASTROPHIC: {"type": "string"}}}}])


def test_any_exception_in_validation_is_a_schema_violation() -> None:
    tools = Tools([tool({"a": {}})])
    toolset = ToolSet(tools)

    class Broken:
        def is_valid(self, instance: Any) -> bool:
            raise OverflowError("integer division result too large for a float")

    tools._tools["f"].validator = Broken()  # type: ignore[assignment]
    verdict = toolset.check("f", {"a": 1})
    assert verdict is not None and verdict[0] == "schema_violation" and "OverflowError" in verdict[1][0]


# ----------------------------------------------------------------- typing follows the schema

TYPED = [{"name": "f", "parameters": {
    "type": "object",
    "$defs": {"opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}}},
    "anyOf": [
        {"properties": {"path": {"type": "string"}, "opts": {"$ref": "#/$defs/opts"}}, "required": ["path"]},
        {"properties": {"count": {"type": ["integer", "null"]}, "flag": {"anyOf": [{"type": "boolean"},
                                                                                    {"type": "null"}]}}},
    ],
    "properties": {"mode": {"type": "string", "nullable": True}},
}}]


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_typing_reads_top_level_branches_refs_and_nullable(fmt: str) -> None:
    arguments = {"path": "03106", "opts": {"deep": True}, "count": 5, "flag": None, "mode": "null"}
    message = outcome(wire(fmt, arguments), fmt, TYPED)
    assert statuses(message) == ["accepted"]
    # DSML writes string values with string="true", Kimi K3 with type="string": a string whenever the
    # schema allows one (FORMATS.md); so does every dialect whose tags carry such a typing word
    typing_word = any(getattr(envelope.body, "type_words", ()) for envelope in get_format(fmt).envelopes)
    mode = "null" if typing_word else None
    assert message.tool_calls[0].arguments == {"path": "03106", "opts": {"deep": True}, "count": 5, "flag": None,
                                               "mode": mode}


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_typing_with_a_ref_at_the_top(fmt: str) -> None:
    tools = [{"name": "f", "parameters": {"$ref": "#/$defs/args", "$defs": {"args": {
        "type": "object", "properties": {"limit": {"type": "integer"}, "where": {"type": "object"}}}}}}]
    message = outcome(wire(fmt, {"limit": 3, "where": {"a": [1]}}), fmt, tools)
    assert [c.arguments for c in message.tool_calls] == [{"limit": 3, "where": {"a": [1]}}]


def test_lists_that_share_their_cache_key_are_still_told_apart() -> None:
    """The cache is keyed by length and first/last names; content decides, so a list that differs in
    the middle is compiled for itself, and each list validates by its own schemas."""
    from streamparse.validation import compiled_tools

    def tools(middle: str) -> list[dict[str, Any]]:
        return [{"name": "a", "parameters": {}}, {"name": "m", "parameters": {"type": "object", "properties": {
            "x": {"type": middle}}}}, {"name": "z", "parameters": {}}]

    strings, numbers = compiled_tools(tools("string")), compiled_tools(tools("integer"))
    assert strings is not numbers
    assert compiled_tools(tools("string")) is not numbers
    call = '<tool_call>{"name": "m", "arguments": {"x": 1}}</tool_call>'
    assert [r.status for r in streamparse.parse(call, tools=tools("string")).rejected] == ["schema_violation"]
    assert streamparse.parse(call, tools=tools("integer")).rejected == []
