"""Deep inputs to the grammar writers and the tools' compilation (issue 39): a schema nested or
`$ref`-chained deeper than Python's stack is a grammar (the GBNF JSON rules are written from a work
list), a `GrammarUnsupported` that says what to do, or a `ValueError` naming the tool; never a
`RecursionError`. Before the fix a 1,500-deep `$ref` chain in a `response_format` schema, and a
1,000-long one in a tool under `tool_choice: "required"`, raised `RecursionError` in `json_gbnf._ref`
(`grammar_for(..., syntax="gbnf")` on every format with JSON arguments)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from grammar_engines import gbnf_accepts

import streamparse
from streamparse.constrain import GrammarUnsupported, grammar_for, grammar_triggers
from streamparse.constrain.gbnf import gbnf
from streamparse.constrain.lark import lark
from streamparse.constrain.structural_tag import structural_tag
from streamparse.families import FAMILIES
from streamparse.grammar_ir import JSON_DEPTH, Alt, Json, Lit, Node, Regex, Seq
from streamparse.validation import MAX_SCHEMA_DEPTH

FORMATS = [spec.name for spec in FAMILIES]
SYNTAXES = ("structural_tag", "lark", "gbnf")
WRITERS: dict[str, Callable[[Node], Any]] = {"gbnf": gbnf, "lark": lark, "structural_tag": structural_tag}


def ref_chain(length: int) -> dict[str, Any]:
    """An object whose one property is a string behind `length` `$ref`s, each to the next."""
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(length)}
    defs[f"d{length}"] = {"type": "string"}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "required": ["a"], "$defs": defs}


def nested(levels: int) -> dict[str, Any]:
    """An object schema `levels` properties deep (two containers a level)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def built_or_refused(build: Callable[[], Any]) -> Any:
    """The grammar `build` gives, or None where it raised `GrammarUnsupported` saying what to do; a
    `RecursionError` (or any other error) fails the test."""
    try:
        return build()
    except GrammarUnsupported as refused:
        assert str(refused), "GrammarUnsupported without a message"
        return None


def test_a_response_format_schema_chained_1500_refs_deep_is_a_gbnf_grammar() -> None:
    """The issue's `response_format` (60 KB, llama.cpp upstream): the chain is followed to the string
    it ends at (one rule, not 1,500 rules each naming the next, which an engine would then follow as
    deep), and llama.cpp's GBNF (llguidance's reader) takes a value of the schema."""
    grammar = gbnf(Json(ref_chain(1500)))
    assert grammar.count("::=") < 20
    assert gbnf_accepts(grammar, '{"a": "text"}') and not gbnf_accepts(grammar, '{"a": 1}')


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_schema_nested_past_the_bound_is_refused_saying_what_to_do(syntax: str) -> None:
    too_deep = nested(JSON_DEPTH)  # 2 * JSON_DEPTH containers
    with pytest.raises(GrammarUnsupported, match=r"nests deeper than 256 .*flatten it"):
        WRITERS[syntax](Json(too_deep))
    assert WRITERS[syntax](Json(nested(JSON_DEPTH // 2 - 1))) is not None  # within the bound: written


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_an_ir_nested_deeper_than_the_stack_is_refused(syntax: str) -> None:
    """The writers recurse along the IR, which the layouts build shallow; past Python's stack, a
    `GrammarUnsupported` all the same."""
    node: Node = Lit("x")
    for i in range(5000):
        node = Alt((Lit(str(i)), Seq((Lit("("), node, Lit(")")))))
    with pytest.raises(GrammarUnsupported, match="nests too deeply to be written"):
        WRITERS[syntax](node)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_with_a_1000_ref_chain_under_required_has_a_grammar_or_says_why(fmt: str) -> None:
    tools = streamparse.Tools([{"name": "f", "parameters": ref_chain(1000)}])
    written = {syntax: built_or_refused(lambda syntax=syntax: grammar_for(fmt, tools, tool_choice="required",
                                                                          syntax=syntax))
               for syntax in SYNTAXES}
    triggers = built_or_refused(lambda: grammar_triggers(fmt, tools, tool_choice="auto"))
    plain = streamparse.Tools([{"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "string"}}, "required": ["a"]}}])
    if built_or_refused(lambda: grammar_for(fmt, plain, tool_choice="required", syntax="gbnf")) is not None \
            and written["structural_tag"] is not None:  # a JSON-arguments layout: GBNF follows the chain too
        assert written["gbnf"] is not None and triggers is not None


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_nested_to_the_compiled_bound_has_a_grammar_or_says_why(fmt: str) -> None:
    tools = streamparse.Tools([{"name": "f", "parameters": nested(MAX_SCHEMA_DEPTH // 2 - 1)}])
    for syntax in SYNTAXES:
        built_or_refused(lambda syntax=syntax: grammar_for(fmt, tools, tool_choice="required", syntax=syntax))


def test_a_pattern_nested_deeper_than_the_regex_parser_goes() -> None:
    """In a schema, such a pattern leaves the string unconstrained (the tools check still applies
    it); as a grammar's own pattern, it is refused saying so."""
    pattern = "(" * 3000 + "a" + ")" * 3000
    grammar = gbnf(Json({"type": "string", "pattern": f"^{pattern}$"}))
    assert "char" in grammar and "(((" not in grammar
    with pytest.raises(GrammarUnsupported, match="nests its groups too deeply"):
        gbnf(Regex(pattern))


def test_references_that_only_lead_to_each_other_are_refused() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "required": ["a"],
              "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": "#/$defs/x"}}}
    with pytest.raises(GrammarUnsupported, match="leads back to itself through references alone"):
        gbnf(Json(schema))


def deep_list(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("where", ["beside the function", "beside the parameters", "in the parameters"])
def test_a_tool_nested_deeply_anywhere_is_a_value_error_naming_it(where: str) -> None:
    deep = deep_list(100_000)
    tool: dict[str, Any] = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    if where == "beside the function":
        tool["x-vendor"] = deep
    elif where == "beside the parameters":
        tool["function"]["x-examples"] = deep
    else:
        tool["function"]["parameters"]["examples"] = deep
    with pytest.raises(ValueError, match=r"tool 'f': .* nests deeper than \d+ levels"):
        streamparse.Tools([tool])
    with pytest.raises(ValueError, match=r"tool 'f': .* nests deeper than \d+ levels"):
        streamparse.parse("x", tools=[tool])


def test_json_depth_is_above_the_compiled_schemas_bound() -> None:
    """Every tool schema `Tools` compiles fits in a `Json` node (a tool's parameters sit two levels
    down in a call object's schema)."""
    assert MAX_SCHEMA_DEPTH + 2 < JSON_DEPTH
    assert json.dumps(nested(JSON_DEPTH // 2 - 1))  # and Python's encoder writes such a schema
