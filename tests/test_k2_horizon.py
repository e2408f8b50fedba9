"""MBZUAI IFM K2 Horizon (`k2_horizon`): the format, and the fourth-wave Decisions for it, by example.

`<ifm|tool_calls>` around `<ifm|tool_call>` calls, each glm45's layout with `ifm|` tags and an optional
type element, or JSON (no template stored: the examples are vLLM's `k2_horizon` parser tests, SGLang's
`K2V3Detector` tests and FORMATS.md's wire block; fourth-wave Decisions 1, 2, 11, 20, 21, 22)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls
from grammar_engines import format_accepts

import streamparse
from streamparse import Message, Token, ToolCall

FMT = "k2_horizon"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
LOOKUP = [  # vLLM's tools
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "enabled": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]
STUDY = [{"type": "function", "function": {"name": "study_args", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}}]  # SGLang's: the other keys are not in the schema


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 2, 3 and 7 characters in both emit modes, agree; the parsed
    message is returned."""
    return agreeing(text, FMT, sizes=(1, 2, 3, 7), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def xml_call(name: str, *pairs: tuple[str, str], typed: dict[str, str] | None = None) -> str:
    types = typed or {}
    return (f"<ifm|tool_call>{name}" + "".join(
        f"<ifm|arg_key>{key}</ifm|arg_key>"
        + (f"<ifm|arg_type>{types[key]}</ifm|arg_type>" if key in types else "")
        + f"<ifm|arg_value>{value}</ifm|arg_value>" for key, value in pairs) + "</ifm|tool_call>")


def block(*calls: str) -> str:
    return "<ifm|tool_calls>" + "\n".join(calls) + "</ifm|tool_calls>"


# ----------------------------------------------------------------- peers' examples


def test_the_wire_block_reasoning_content_and_two_calls_with_a_type_element() -> None:
    msg = both_modes((FIXTURES / FMT / "k2_horizon_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning == "The user wants the weather for three days and the time in Paris."
    assert msg.content == "Let me check both."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "days": 3}),
                                ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


def test_xml_calls_typed_by_the_schema_and_the_text_around_the_block_is_content() -> None:
    # vLLM's `test_xml_default_parses_multiple_calls_and_coerces_schema`.
    text = "Before " + block(xml_call("lookup", ("query", "123"), ("limit", "3")), xml_call("ping")) + " after."
    msg = both_modes(text, tools=LOOKUP)
    assert named_calls(msg) == [("lookup", {"query": "123", "limit": 3}), ("ping", {})]
    assert msg.content == "Before  after." and msg.rejected == []


def test_json_bodies_are_read_whatever_the_request_named_and_never_retyped() -> None:
    # vLLM retypes `"2"` to 2 and fails a body of the other layout closed (conflicts); SGLang reads lists.
    msg = both_modes(block('<ifm|tool_call>{"name": "lookup", "arguments": {"limit": "2"}}</ifm|tool_call>'),
                     tools=LOOKUP)
    assert named_calls(msg) == [] and statuses(msg) == ["schema_violation"]
    text = ('<ifm|tool_call>[{"name": "lookup", "arguments": {"query": "Tokyo"}},'
            ' {"name": "lookup", "arguments": {"query": "Osaka"}}]</ifm|tool_call>')
    msg = both_modes(text, tools=LOOKUP)
    assert named_calls(msg) == [("lookup", {"query": "Tokyo"}), ("lookup", {"query": "Osaka"})]
    text = '<ifm|tool_call>{"name": "lookup", "arguments": "{\\"query\\": \\"Tokyo\\"}"}</ifm|tool_call>'
    assert named_calls(both_modes(text, tools=LOOKUP)) == [("lookup", {"query": "Tokyo"})]


def test_each_element_of_a_json_list_is_checked_on_its_own() -> None:
    text = '<ifm|tool_call>[{"name": "ping", "arguments": {}}, {"arguments": {}}]</ifm|tool_call>'
    msg = both_modes(text, tools=LOOKUP)
    assert named_calls(msg) == [("ping", {})] and statuses(msg) == ["invalid_json"]


# ----------------------------------------------------------------- the type element (Decision 11)


def test_a_string_type_keeps_the_text_and_other_types_parse_the_trimmed_text_as_json() -> None:
    # SGLang's `TestK2V3XmlTyped`.
    text = xml_call("study_args", ("user_id", "12345"), ("enabled", "\ntrue\n"), ("notes", "\nkeep me\n"),
                    ("page", "2"), typed={"user_id": "string", "enabled": "boolean", "notes": "any", "page": "integer"})
    msg = both_modes(text, tools=STUDY)
    assert named_calls(msg) == [
        ("study_args", {"user_id": "12345", "enabled": True, "notes": "\nkeep me\n", "page": 2})]


def test_a_string_type_gives_way_to_a_schema_that_allows_no_string() -> None:
    text = xml_call("lookup", ("limit", "4"), ("query", "5"), typed={"limit": "string", "query": "string"})
    assert named_calls(both_modes(text, tools=LOOKUP)) == [("lookup", {"limit": 4, "query": "5"})]


def test_without_a_type_the_schema_types_the_value_and_strings_keep_their_whitespace() -> None:
    text = xml_call("lookup", ("query", "\nTokyo\n"), ("limit", "\n3\n"), ("enabled", "true"))
    assert named_calls(both_modes(text, tools=LOOKUP)) == [
        ("lookup", {"query": "\nTokyo\n", "limit": 3, "enabled": True})]


def test_the_last_repeated_key_wins() -> None:
    text = xml_call("lookup", ("limit", "1"), ("limit", "2"))
    assert named_calls(both_modes(text, tools=LOOKUP)) == [("lookup", {"limit": 2})]


# ----------------------------------------------------------------- reasoning (Decisions 11, 21)


@pytest.mark.parametrize("opener", ["think", "think_fast", "think_faster"])
@pytest.mark.parametrize("own_closer", [True, False])
def test_each_effort_opener_closes_at_its_own_closer_or_at_the_think_closer(opener: str, own_closer: bool) -> None:
    closer = f"</ifm|{opener}>" if own_closer else "</ifm|think>"
    msg = both_modes(f"<ifm|{opener}>reasoning{closer}Answer.")
    assert (msg.reasoning, msg.content) == ("reasoning", "Answer.")


def test_another_openers_closer_is_reasoning_text_and_think_tags_are_content() -> None:
    msg = both_modes("<ifm|think>a</ifm|think_fast>b</ifm|think>c")
    assert (msg.reasoning, msg.content) == ("a</ifm|think_fast>b", "c")
    msg = both_modes("<think>legacy</think>\n" + xml_call("ping"), tools=LOOKUP)
    assert msg.content == "<think>legacy</think>" and named_calls(msg) == [("ping", {})]


def test_the_empty_thinking_off_block_is_no_reasoning_and_forced_open_is_ignored() -> None:
    msg = both_modes("<ifm|think></ifm|think>Hello.", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("", "Hello.")
    assert not streamparse.thinking_forced_open("<|ifm|im_start|>assistant\n<ifm|think>", FMT)


# ----------------------------------------------------------------- blocks and cut-offs (Decisions 1, 2, 11)


def test_an_empty_block_is_framing_text_in_a_block_is_content_and_a_bare_call_is_a_call() -> None:
    msg = both_modes("A<ifm|tool_calls></ifm|tool_calls>B")
    assert msg.content == "AB" and msg.tool_calls == [] and msg.rejected == []
    msg = both_modes(block(xml_call("ping"), "junk", xml_call("ping")), tools=LOOKUP)
    assert named_calls(msg) == [("ping", {}), ("ping", {})] and msg.content == "junk"
    msg = both_modes("Calling. " + xml_call("ping") + " Done.", tools=LOOKUP)
    assert named_calls(msg) == [("ping", {})] and msg.content == "Calling.  Done."


def test_closers_are_optional_at_the_end_once_the_last_value_is_closed() -> None:
    head = "<ifm|tool_calls><ifm|tool_call>lookup\n<ifm|arg_key>query</ifm|arg_key><ifm|arg_value>x</ifm|arg_value>"
    assert named_calls(both_modes(head, tools=LOOKUP)) == [("lookup", {"query": "x"})]
    assert named_calls(both_modes("<ifm|tool_calls><ifm|tool_call>ping\n", tools=LOOKUP)) == [("ping", {})]
    msg = both_modes(head + "</ifm|tool_call><ifm|tool_call>lookup\n<ifm|arg_key>limit</ifm|arg_key><ifm|arg_value>1",
                     tools=LOOKUP)
    assert named_calls(msg) == [("lookup", {"query": "x"})] and statuses(msg) == ["truncated"]
    msg = both_modes("Before<ifm|tool_calls><ifm|tool_call>ping", tools=LOOKUP)  # vLLM: all content (conflict)
    assert msg.content == "Before" and statuses(msg) == ["truncated"]


def test_a_call_without_its_closer_ends_at_the_next_call() -> None:
    text = "<ifm|tool_calls><ifm|tool_call>ping\n<ifm|tool_call>ping\n</ifm|tool_call></ifm|tool_calls>"
    assert named_calls(both_modes(text, tools=LOOKUP)) == [("ping", {}), ("ping", {})]


def test_text_between_the_elements_of_a_call_is_invalid_json_and_an_unknown_tool_is_rejected() -> None:
    msg = both_modes(block("<ifm|tool_call>lookup\nnote<ifm|arg_key>query</ifm|arg_key>"
                           "<ifm|arg_value>x</ifm|arg_value></ifm|tool_call>"), tools=LOOKUP)
    assert statuses(msg) == ["invalid_json"]
    msg = both_modes(block(xml_call("not_registered", ("city", "Tokyo"))), tools=LOOKUP)
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "not_registered")]


# ----------------------------------------------------------------- render, detection, grammars


def test_render_reads_back() -> None:
    message = Message(content="Checking.", reasoning="Think.", tool_calls=[
        ToolCall("a", "lookup", {"query": "a < b", "limit": 3}, ""), ToolCall("b", "ping", {}, "")])
    again = both_modes(streamparse.render(message, FMT), tools=LOOKUP)
    assert (again.reasoning, again.content, named_calls(again)) == (
        "Think.", "Checking.", [("lookup", {"query": "a < b", "limit": 3}), ("ping", {})])


def test_the_call_marker_names_the_format() -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}<ifm|tool_calls>\n<ifm|tool_call>{{ name }}"
    assert streamparse.detect_format(template) == FMT


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
def test_grammars_write_xml_and_json_calls_the_parser_accepts(syntax: str) -> None:
    message = Message(content="Checking.", reasoning="Think.", tool_calls=[
        ToolCall("a", "get_weather", {"location": "Paris", "days": 3}, ""),
        ToolCall("b", "get_time", {"timezone": "UTC"}, "")])
    xml = streamparse.render(message, FMT)
    json_text = (FIXTURES / FMT / "k2_horizon_json_call.txt").read_text()
    for text in (xml, json_text):
        assert format_accepts(FMT, syntax, text, TOOLS), text
        assert streamparse.parse(text, FMT, tools=TOOLS).rejected == []
    assert not format_accepts(FMT, syntax, xml, TOOLS, parallel_tool_calls=False)
    assert not format_accepts(FMT, syntax, xml.replace("get_time", "get_tme"), TOOLS)


def test_markers_count_only_as_special_tokens_in_token_aware_mode() -> None:
    # Every `<ifm|…>` marker is a preserved token in llama.cpp's handler.
    def special(text: str) -> Token:
        return Token(text, True)

    tokens = [special("<ifm|think_faster>"), Token("quick", False), special("</ifm|think>"),
              Token("<ifm|tool_call>x", False), special("<ifm|tool_calls>"), special("<ifm|tool_call>"),
              Token("ping\n", False), special("</ifm|tool_call>"), special("</ifm|tool_calls>")]
    msg = streamparse.parse(tokens, FMT, tools=LOOKUP, special_tokens="require")
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("quick", "<ifm|tool_call>x", [("ping", {})])
