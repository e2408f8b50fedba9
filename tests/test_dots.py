"""rednote dots.llm (`dots`): the format, and the fourth-wave Decisions for it, by example.

`<dots_function_call>` blocks of `<invoke name=…>` elements or one JSON call object (no template stored:
the examples are vLLM's `dots` parser tests, SGLang's `DotsToolDetector` tests and FORMATS.md's wire
block; fourth-wave Decisions 1, 2, 12, 20, 22)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FIXTURES, agreeing, named_calls
from grammar_engines import format_accepts

import streamparse
from streamparse import Message, ToolCall

FMT = "dots"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}


SEARCH = [tool("search", {"query": {"type": "string"}}), tool("open", {"id": {"type": "integer"}})]


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 2, 3 and 7 characters in both emit modes, agree; the parsed
    message is returned."""
    return agreeing(text, FMT, sizes=(1, 2, 3, 7), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


# ----------------------------------------------------------------- peers' examples


def test_the_wire_block_reasoning_content_and_two_invokes() -> None:
    msg = both_modes((FIXTURES / FMT / "dots_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning == "The user wants the weather and the time in Paris."
    assert msg.content == "Let me check both."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


def test_values_are_typed_by_the_schema_with_local_refs_resolved() -> None:
    # vLLM's and SGLang's `test_non_stream_xml_converts_schema_types_and_resolves_ref`.
    tools = [{"type": "function", "function": {"name": "set_location", "parameters": {
        "type": "object",
        "properties": {"location": {"$ref": "#/$defs/Location"}, "days": {"type": "integer"},
                       "include_weather": {"type": "boolean"}},
        "$defs": {"Location": {"type": "object", "properties": {"city": {"type": "string"}}}}}}}]
    text = ('ok<dots_function_call><invoke name="set_location"><parameter name="location">{"city": "Shanghai"}'
            '</parameter><parameter name="days">3</parameter><parameter name="include_weather">true</parameter>'
            "</invoke></dots_function_call>")
    msg = both_modes(text, tools=tools)
    assert msg.content == "ok"
    assert named_calls(msg) == [
        ("set_location", {"location": {"city": "Shanghai"}, "days": 3, "include_weather": True})]


def test_several_invokes_per_block_and_a_json_block_are_parallel_calls() -> None:
    # vLLM's and SGLang's `test_non_stream_supports_multiple_invokes_and_json_fallback`.
    text = ('<dots_function_call><invoke name="search"><parameter name="query">chairs</parameter></invoke>'
            '<invoke name="open"><parameter name="id">7</parameter></invoke></dots_function_call>'
            '<dots_function_call>{"name":"search","arguments":{"query":"tables"}}</dots_function_call>')
    msg = both_modes(text, tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "chairs"}), ("open", {"id": 7}), ("search", {"query": "tables"})]
    assert msg.content == "" and msg.rejected == []


def test_blocks_split_anywhere_stream_to_the_same_calls() -> None:
    # `test_streaming_buffers_partial_marker_and_emits_all_complete_calls`: content, then two blocks.
    text = ('visible<dots_function_call><invoke name="search"><parameter name="query">chairs</parameter></invoke>'
            '</dots_function_call><dots_function_call><invoke name="search"><parameter name="query">tables'
            "</parameter></invoke></dots_function_call>")
    msg = both_modes(text, tools=SEARCH)
    assert msg.content == "visible"
    assert named_calls(msg) == [("search", {"query": "chairs"}), ("search", {"query": "tables"})]


def test_names_may_be_single_quoted_or_bare_and_values_are_byte_exact() -> None:
    text = ("<dots_function_call>\n<invoke name='search'>\n<parameter name=query>  two  words \n</parameter>\n"
            "</invoke>\n<invoke name=open>\n<parameter name='id'> 7 </parameter>\n</invoke>\n</dots_function_call>")
    msg = both_modes(text, tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "  two  words \n"}), ("open", {"id": 7})]


# ----------------------------------------------------------------- Decision 12


def test_text_between_invokes_rejects_the_call_it_follows_and_the_others_stand() -> None:
    text = ('<dots_function_call>\n<invoke name="search"><parameter name="query">a</parameter></invoke>\nnote\n'
            '<invoke name="open"><parameter name="id">7</parameter></invoke>\n</dots_function_call>')
    msg = both_modes(text, tools=SEARCH)
    assert named_calls(msg) == [("open", {"id": 7})] and statuses(msg) == ["invalid_json"]
    assert msg.rejected[0].raw == '<invoke name="search"><parameter name="query">a</parameter></invoke>\nnote'
    assert msg.content == ""


@pytest.mark.parametrize("body", ["garbage", "", "\n  \n", "[1, 2]", "<invoke=\"search\"></invoke>"])
def test_any_other_body_and_an_empty_block_are_invalid_json(body: str) -> None:
    # vLLM surfaces `garbage` as content (`test_streaming_malformed_block_does_not_block_later_valid_call`):
    # here it is a rejected call, and the valid block after it stands.
    text = (f"<dots_function_call>{body}</dots_function_call><dots_function_call><invoke name=\"search\">"
            '<parameter name="query">chairs</parameter></invoke></dots_function_call>')
    msg = both_modes(text, tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "chairs"})] and statuses(msg) == ["invalid_json"]
    assert msg.rejected[0].raw == f"<dots_function_call>{body}</dots_function_call>" and msg.content == ""


def test_a_json_block_keeps_hermes_rules() -> None:
    msg = both_modes('<dots_function_call>\n{"name": "search", "parameters": {"query": "x"}}}\n</dots_function_call>',
                     tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "x"})] and msg.rejected == []
    msg = both_modes('<dots_function_call>{"name": "search", "arguments": {"query": "x"}} tail</dots_function_call>',
                     tools=SEARCH)
    assert statuses(msg) == ["invalid_json"]


def test_a_stray_block_closer_is_content() -> None:
    # vLLM drops it (`test_streaming_strips_stray_end_marker`): conflict.
    msg = both_modes("some text </dots_function_call>")
    assert msg.content == "some text </dots_function_call>" and msg.tool_calls == []


def test_an_unknown_tool_is_rejected_by_name() -> None:
    # Both peers leave the block as content (conflict).
    text = ('<dots_function_call><invoke name="ghost"><parameter name="query">chairs</parameter></invoke>'
            "</dots_function_call>")
    msg = both_modes(text, tools=SEARCH)
    assert msg.tool_calls == [] and [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "ghost")]


# ----------------------------------------------------------------- Decisions 1 and 2


def test_closers_are_optional_at_the_end_once_the_last_value_is_closed() -> None:
    head = '<dots_function_call>\n<invoke name="search">\n<parameter name="query">chairs</parameter>\n'
    assert named_calls(both_modes(head, tools=SEARCH)) == [("search", {"query": "chairs"})]
    assert named_calls(both_modes(head + "</invoke>\n", tools=SEARCH)) == [("search", {"query": "chairs"})]
    msg = both_modes(head + '</invoke>\n<invoke name="open">\n<parameter name="id">7', tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "chairs"})] and statuses(msg) == ["truncated"]
    assert msg.rejected[0].raw == '<invoke name="open">\n<parameter name="id">7'
    msg = both_modes('Checking.<dots_function_call>{"name": "search", "arguments": {"query": "x"}}', tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "x"})] and msg.content == "Checking."
    msg = both_modes('Checking.<dots_function_call>{"name": "search", "argu', tools=SEARCH)
    assert statuses(msg) == ["truncated"] and msg.content == "Checking."


def test_a_block_without_its_closer_ends_at_the_next_block() -> None:
    text = ('<dots_function_call>\n<invoke name="search"><parameter name="query">a</parameter></invoke>\n'
            '<dots_function_call>{"name": "open", "arguments": {"id": 7}}</dots_function_call>')
    msg = both_modes(text, tools=SEARCH)
    assert named_calls(msg) == [("search", {"query": "a"}), ("open", {"id": 7})] and msg.rejected == []


def test_text_around_blocks_is_content_and_a_call_in_reasoning_stays_reasoning() -> None:
    text = ('<think>maybe <dots_function_call>{"name": "open", "arguments": {"id": 1}}</dots_function_call></think>'
            'A\n<dots_function_call>{"name": "open", "arguments": {"id": 2}}</dots_function_call>\nB')
    msg = both_modes(text, tools=SEARCH)
    assert msg.reasoning.startswith("maybe <dots_function_call>") and msg.content == "A\n\nB"
    assert named_calls(msg) == [("open", {"id": 2})]


# ----------------------------------------------------------------- render, detection, grammars


def test_render_reads_back() -> None:
    message = Message(content="Checking.", reasoning="Think.", tool_calls=[
        ToolCall("a", "search", {"query": "a < b"}, ""), ToolCall("b", "open", {"id": 7}, "")])
    again = both_modes(streamparse.render(message, FMT), tools=SEARCH)
    assert (again.reasoning, again.content, named_calls(again)) == (
        "Think.", "Checking.", [("search", {"query": "a < b"}), ("open", {"id": 7})])


def test_the_block_marker_names_the_format() -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}<dots_function_call>\n<invoke name=\"{{ n }}\">"
    assert streamparse.detect_format(template) == FMT


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
def test_grammars_write_invoke_blocks_and_json_blocks_the_parser_accepts(syntax: str) -> None:
    invokes = (FIXTURES / FMT / "dots_reasoning_two_calls.txt").read_text().split("</think>")[1]
    json_block = (FIXTURES / FMT / "dots_json_call.txt").read_text()
    for text in (invokes, json_block):
        assert format_accepts(FMT, syntax, text, TOOLS), text
        assert streamparse.parse(text, FMT, tools=TOOLS).rejected == []
    assert not format_accepts(FMT, syntax, invokes, TOOLS, parallel_tool_calls=False)
    assert not format_accepts(FMT, syntax, invokes.replace("get_time", "get_tme"), TOOLS)
    assert format_accepts(FMT, syntax, invokes.split("<dots")[1].join(("<dots", "")), TOOLS, tool_choice="required")
