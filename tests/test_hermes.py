"""Hermes / Qwen 2.5 / QwQ / Qwen3: the format, and the Decisions of FORMATS.md, by example."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, assert_stream_matches, ids, run_stream
from hypothesis import given, settings
from hypothesis import strategies as st
from parsimonious.exceptions import ParseError

import streamparse
from streamparse import parse
from streamparse.grammar import load_grammar

TOOLS = json.loads((FIXTURES / "hermes" / "tools.json").read_text())


def call(name: str, arguments: dict[str, object]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_reasoning_content_and_parallel_calls_from_a_qwen3_output() -> None:
    text = (FIXTURES / "hermes" / "qwen3_reasoning_two_calls.txt").read_text()
    msg = parse(text, tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("in parallel.")
    assert msg.content == "Let me check both for you."
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [
        ("get_weather", {"location": "Paris, France", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    assert msg.rejected == []


def test_an_empty_think_block_is_no_reasoning() -> None:
    msg = parse("<think>\n\n</think>\n\nHello.")
    assert (msg.reasoning, msg.content) == ("", "Hello.")


def test_forced_open_thinking_starts_in_reasoning_and_drops_a_repeated_opener() -> None:
    assert parse("I think.\n</think>\n\nAnswer.", thinking_forced_open=True).reasoning == "I think."
    msg = parse("  <think>\nI think.\n</think>Answer.", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("I think.", "Answer.")


def test_reasoning_that_never_closes_runs_to_the_end_and_keeps_calls_as_text() -> None:
    msg = parse("<think>\nplan: " + call("f", {}) + "\n")
    assert msg.tool_calls == [] and msg.content == ""
    assert msg.reasoning == "plan: " + call("f", {})


def test_calls_inside_reasoning_are_extracted_on_request() -> None:
    text = "<think>\nplan " + call("f", {"a": 1}) + " done\n</think>\nok"
    msg = parse(text, tool_calls_in_reasoning="extract")
    assert msg.reasoning == "plan  done" and msg.content == "ok"
    assert [c.name for c in msg.tool_calls] == ["f"]


def test_a_later_think_tag_and_a_closing_tag_without_opener_are_content() -> None:
    assert parse("Hi <think>x</think>").content == "Hi <think>x</think>"
    assert parse("a </think> b </tool_call> c").content == "a </think> b </tool_call> c"


def test_content_around_calls_is_joined_as_written_then_stripped() -> None:
    assert parse("A\n" + call("f", {}) + "\nB").content == "A\n\nB"
    assert parse("Checking:" + call("f", {}) + "Done.").content == "Checking:Done."
    assert parse("  \n  inner  space \n ").content == "inner  space"


def test_a_closing_tag_inside_a_json_string_does_not_end_the_call() -> None:
    msg = parse(call("write_file", {"path": "a", "content": "x </tool_call> y"}) + " after")
    assert msg.tool_calls[0].arguments["content"] == "x </tool_call> y"
    assert msg.content == "after"


def test_arguments_as_a_json_string_and_the_parameters_key_are_accepted() -> None:
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>'
    text += '<tool_call>{"name": "g", "parameters": {"b": 2}}</tool_call><tool_call>{"name": "h"}</tool_call>'
    msg = parse(text)
    assert [(c.name, c.arguments, c.arguments_json) for c in msg.tool_calls] == [
        ("f", {"a": 1}, '{"a": 1}'), ("g", {"b": 2}, '{"b": 2}'), ("h", {}, "{}"),
    ]


@pytest.mark.parametrize("text", [
    '<tool_call>{{"name": "f", "arguments": {"city": "Paris"}}}</tool_call>',
    '<tool_call>{{"name": "f", "arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>{"name": "f", "arguments": {"city": "Paris"}}}}\n</tool_call>',
])
def test_qwen25_doubled_braces_are_the_same_call(text: str) -> None:
    msg = parse(text)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("f", {"city": "Paris"})]
    assert msg.content == "" and msg.rejected == []


def test_arguments_json_is_the_text_the_model_wrote() -> None:
    msg = parse('<tool_call>{"name":"f","arguments":{"b":2,  "a":[1,2]}}</tool_call>')
    assert msg.tool_calls[0].arguments_json == '{"b":2,  "a":[1,2]}'


@pytest.mark.parametrize(("text", "status"), [
    ("<tool_call>", "truncated"),
    ('<tool_call>\n{"name": "f", "argu', "truncated"),
    ("<tool_call></tool_call>", "invalid_json"),
    ("<tool_call>{'name': 'f'}</tool_call>", "invalid_json"),
    ('<tool_call>{"name": "f", "arguments": {}} trailing</tool_call>', "invalid_json"),
    ('<tool_call>{"arguments": {}}</tool_call>', "invalid_json"),
    ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "invalid_json"),
])
def test_bad_calls_are_rejected_with_their_raw_text(text: str, status: str) -> None:
    msg = parse(text)
    assert msg.tool_calls == []
    assert [(r.status, r.raw) for r in msg.rejected] == [(status, text)]
    assert msg.rejected[0].errors


def test_a_complete_call_without_closing_tag_at_the_end_is_accepted() -> None:
    msg = parse('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n')
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("f", {"a": 1})]


def test_tools_check_names_and_schemas_with_json_paths() -> None:
    text = call("nope", {}) + call("get_weather", {"location": 3}) + call("get_time", {"timezone": "UTC"})
    msg = parse(text, tools=TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_time"]
    assert [r.status for r in msg.rejected] == ["unknown_tool", "schema_violation"]
    assert "get_time" in msg.rejected[0].errors[0]
    assert msg.rejected[1].errors == ["$.location: 3 is not of type 'string'"]
    assert msg.rejected[1].name == "get_weather"


def test_a_null_for_an_optional_property_is_not_a_violation() -> None:
    msg = parse(call("get_weather", {"location": "Paris", "unit": None}), tools=TOOLS)
    assert msg.rejected == [] and msg.tool_calls[0].arguments == {"location": "Paris", "unit": None}
    assert parse(call("get_weather", {"location": None}), tools=TOOLS).rejected[0].status == "schema_violation"


def test_without_tools_any_name_is_accepted() -> None:
    assert parse(call("anything", {"x": [1]})).tool_calls[0].arguments == {"x": [1]}


def test_progressive_mode_streams_the_name_first_then_raw_argument_text() -> None:
    text = ('Hi<tool_call>{"arguments": {"a": "x"}, "name": "f"}</tool_call>'
            '<tool_call>{"name": "g", "arguments": {"b": 1}}')
    parser = streamparse.StreamParser(emit_calls="progressive", id_factory=ids)
    pieces = [d for ch in text for d in parser.feed(ch)] + parser.close()
    calls = [tc for d in pieces for tc in d.tool_calls]
    assert calls[0].name == "f" and calls[0].id == "call_0"
    first_g = next(i for i, tc in enumerate(calls) if tc.name == "g")
    assert calls[first_g].index == 1
    assert any(tc.index == 1 and tc.arguments == "{" for tc in calls[first_g:])  # streamed, not in one burst
    folded, message = run_stream(list(text), emit_calls="progressive", id_factory=ids)
    assert_stream_matches(folded, message)


def test_progressive_mode_marks_a_started_call_that_is_rejected_later() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"location": 5}}</tool_call>'
    folded, message = run_stream(list(text), emit_calls="progressive", tools=TOOLS, id_factory=ids)
    assert folded.calls[0]["status"] == "schema_violation" and folded.calls[0]["name"] == "get_weather"
    assert message.tool_calls == [] and message.rejected[0].status == "schema_violation"


def test_progressive_mode_does_not_start_an_unknown_tool() -> None:
    text = '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
    folded, message = run_stream(list(text), emit_calls="progressive", tools=TOOLS)
    assert folded.calls == {} and message.rejected[0].status == "unknown_tool"


def test_tag_prefixes_are_held_back_and_then_released_as_content() -> None:
    parser = streamparse.StreamParser()
    assert parser.feed("a <tool_") == [streamparse.Delta(content="a")]
    assert parser.held_back == len(" <tool_")
    assert parser.feed("x") == [streamparse.Delta(content=" <tool_x")]
    assert parser.close() == []


def test_token_aware_mode_counts_only_special_token_delimiters() -> None:
    from streamparse import Token

    call_text = '{"name": "f", "arguments": {}}'
    real = [Token("<think>", True), Token("plan"), Token("</think>", True), Token("Hi"),
            Token("<tool_call>", True), Token(call_text), Token("</tool_call>", True)]
    msg = parse(real, special_tokens="require", id_factory=ids)
    assert (msg.reasoning, msg.content, [c.name for c in msg.tool_calls]) == ("plan", "Hi", ["f"])
    # The same text spelled by ordinary tokens (quoted from a web page, say) is content.
    look_alike = "Page says: <tool_call>" + call_text + "</tool_call>"
    assert parse([Token(look_alike)], special_tokens="require").content == look_alike
    assert parse(look_alike, special_tokens="require").tool_calls == []
    # An ordinary "</tool_call>" inside a call that a special token opened does not close it.
    tricky = [Token("<tool_call>", True), Token('{"name": "f", "arguments": {"x": "'), Token("</tool_call>"),
              Token('"}}'), Token("</tool_call>", True)]
    assert parse(tricky, special_tokens="require").tool_calls[0].arguments == {"x": "</tool_call>"}


def test_a_member_written_twice_rejects_the_call() -> None:
    text = '<tool_call>{"name": "f", "name": "g", "arguments": {}}</tool_call>'
    assert [r.status for r in parse(text).rejected] == ["invalid_json"]
    folded, message = run_stream(list(text), emit_calls="progressive", id_factory=ids)
    assert message.tool_calls == [] and folded.accepted() == []


@settings(max_examples=300)
@given(st.lists(st.sampled_from(['{', '}', '"name"', '"arguments"', '"f"', ':', ',', ' ', '\n', '[1]', '{}',
                                 '"a\\"b"', 'null', '1.5', '"}"', 'x']), max_size=16))
def test_the_fast_path_reads_exactly_what_the_grammar_reads(pieces: list[str]) -> None:
    from streamparse.bodies import json_call
    from streamparse.families import hermes
    from streamparse.spec import Envelope
    from streamparse.validation import ToolSet

    body = "".join(pieces)
    envelope = Envelope("<tool_call>", body, "</tool_call>", True, False)
    fast = hermes.HERMES.envelopes[0].body.parse(envelope, ToolSet(None))
    try:
        tree = load_grammar("hermes").parse(body)
    except ParseError:
        assert fast[0].status == "invalid_json"  # type: ignore[union-attr]
    else:
        assert fast == [json_call.call_of(json_call._VISITOR.visit(tree), id_keys=())]
