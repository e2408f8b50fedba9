"""llama.cpp's generic JSON envelope (`generic`, alias `gemma3`): the format and Decision 18 of the fourth
wave, by example. No template renders it: the examples are FORMATS.md's wire block, llama.cpp's rendering
of a `tool_calls` turn (pretty-printed, with the model's id) and the Decision's cases.

Every example goes through `read`: `parse()` checked against streaming it in both emit modes, 1 and 3
characters at a time.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing
from conftest import named_calls as named

import streamparse
from streamparse import Message

FMT = "generic"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
CALLS = ('{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}, "id": "call_0001"}, '
         '{"name": "get_time", "arguments": {"timezone": "UTC"}, "id": "call_0002"}]}')
CALL = '{"tool_call": {"name": "get_weather", "arguments": {"location": "Paris"}}}'
ANSWER = '{"response": "It is 18°C and partly cloudy in Paris."}'


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def test_the_three_shapes_of_the_wire_block() -> None:
    message = read(CALLS, tools=TOOLS)
    assert named(message) == [("get_weather", {"location": "Paris"}), ("get_time", {"timezone": "UTC"})]
    assert [c.id for c in message.tool_calls] == ["call_0001", "call_0002"]  # the model's ids are kept
    assert (message.content, message.rejected) == ("", [])
    message = read(CALL, tools=TOOLS)
    assert named(message) == [("get_weather", {"location": "Paris"})] and message.content == ""
    assert message.tool_calls[0].id.startswith("call_")  # none written: generated
    assert read(ANSWER).content == "It is 18°C and partly cloudy in Paris."


def test_fixtures_reasoning_then_calls_and_llama_cpps_pretty_printed_turn() -> None:
    message = read((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert message.reasoning == "The user wants the weather in Paris and the local time there."
    assert [(c.id, c.name) for c in message.tool_calls] == [("call_0001", "get_weather"), ("call_0002", "get_time")]
    message = read((FIXTURES / FMT / "llamacpp_pretty_tool_calls.txt").read_text(), tools=TOOLS)
    assert [(c.id, c.name) for c in message.tool_calls] == [("fc_101", "compile_c_source_and_run_program")]
    assert message.tool_calls[0].arguments["source"].startswith("#include <float.h>\n")


@pytest.mark.parametrize("text", [
    "It is sunny.",
    '```json\n{"tool_call": {"name": "get_weather", "arguments": {}}}\n```',  # a fenced block
    '{"name": "get_weather", "arguments": {}}',  # a JSON object with other keys
    '{"response": "a", "tool_call": {"name": "f", "arguments": {}}}',  # two of the keys
    '{"tool_call": {"name": "f", "arguments": {}}, "note": 1}',
    '{"tool_calls": [], "tool_calls": []}',  # a key written twice
    'Sure: {"tool_call": {"name": "f", "arguments": {}}}',  # an envelope inside prose (llamadart: conflict)
    '{"response": "x"} and more',  # text after the object
    '{"tool_call": {"name": "f", "arguments": {}}}\n{"tool_call": {"name": "g", "arguments": {}}}',
    "[1, 2]", '{"respons": 1}', '{ }',
])
def test_anything_else_is_content_verbatim(text: str) -> None:
    message = read(text)
    assert (message.content, message.tool_calls, message.rejected) == (text.strip(), [], [])


def test_trailing_whitespace_and_whitespace_inside_are_allowed() -> None:
    message = read('\n  {\n "tool_call" :\n {"name": "get_time", "arguments": {"timezone": "UTC"}}\n}\n\n', tools=TOOLS)
    assert named(message) == [("get_time", {"timezone": "UTC"})] and message.content == ""


def test_each_listed_call_is_checked_on_its_own_and_an_empty_list_is_no_call() -> None:
    text = ('{"tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}, 7, '
            '{"name": "nope", "arguments": {}}, {"name": "get_weather", "parameters": {"location": "Rome"}}]}')
    message = read(text, tools=TOOLS)
    assert named(message) == [("get_time", {"timezone": "UTC"}), ("get_weather", {"location": "Rome"})]
    assert statuses(message) == ["invalid_json", "unknown_tool"]
    message = read('{"tool_calls": []}')
    assert (message.content, message.tool_calls, message.rejected) == ("", [], [])
    # No arguments key: `{}` (lenient keys).
    assert named(read('{"tool_call": {"name": "ping"}}')) == [("ping", {})]


@pytest.mark.parametrize("text", ['{"tool_calls": {"name": "f", "arguments": {}}}', '{"tool_call": [1]}',
                                  '{"tool_call": "f"}', '{"tool_call": {"name": "f", "arguments": {x}}}',
                                  '{"tool_calls": [{"name": "f", "arguments": {}}] x}'])
def test_a_malformed_envelope_is_a_rejected_call_not_content(text: str) -> None:
    message = read(text)
    assert statuses(message) == ["invalid_json"] and message.content == "" and message.tool_calls == []
    assert message.rejected[0].raw == text


def test_a_response_that_is_not_a_string_is_its_json_text_as_written() -> None:
    assert read('{"response": {"temp_c": 18,  "sky": "cloudy"}}').content == '{"temp_c": 18,  "sky": "cloudy"}'
    assert read('{"response": 42}').content == "42"
    assert read('{"response": "line\\nbreak \\"quoted\\" \\u00e9"}').content == 'line\nbreak "quoted" é'


def test_cut_off_by_the_end() -> None:
    # Inside the calls: the unfinished one is truncated, complete elements stand.
    message = read('{"tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}, {"name": "get_w',
                   tools=TOOLS)
    assert named(message) == [("get_time", {"timezone": "UTC"})] and statuses(message) == ["truncated"]
    message = read('{"tool_call": {"name": "get_time", "arguments": {"timez')
    assert statuses(message) == ["truncated"] and message.content == ""
    # Inside the response string: the text decoded so far (an escape cut in two left out).
    assert read('{"response": "It is 18\\u00b').content == "It is 18"
    assert read('{"response": "Say \\"hi\\" to').content == 'Say "hi" to'
    assert read('{"response": "done"').content == "done"
    # Before the first key is known: held back, then content.
    for text in ("{", '{"tool_c', '{ "respo'):
        assert read(text).content == text


def test_the_text_is_held_back_only_until_the_first_key_is_known() -> None:
    parser = streamparse.StreamParser(FMT)
    assert parser.feed('{  "tool_c') == [] and parser.held_back == len('{  "tool_c')
    parser.feed('alls": [')  # the key is known: an envelope, read whole (nothing outside it is held)
    assert parser.held_back == 0
    parser = streamparse.StreamParser(FMT)
    deltas = parser.feed('{"name": "f", ')  # no such key: content at once
    assert "".join(d.content for d in deltas) == '{"name": "f",' and parser.held_back == 1
    # The bound: `{`, 64 whitespace characters, the longest key, 64 more; past it, content.
    parser = streamparse.StreamParser(FMT)
    assert parser.feed("{" + " " * 64 + '"tool_calls"' + " " * 64) == []
    assert parser.held_back == 1 + 64 + len('"tool_calls"') + 64
    assert [d.content for d in parser.feed(" " * 2)] != []


def test_reasoning_first_and_thinking_forced_open_is_ignored() -> None:
    message = read("<think>\nPlan.\n</think>\n\n" + ANSWER)
    assert (message.reasoning, message.content) == ("Plan.", "It is 18°C and partly cloudy in Paris.")
    message = read("Plan." + CALL, thinking_forced_open=True)
    assert (message.reasoning, message.content) == ("", "Plan." + CALL)
    assert not streamparse.thinking_forced_open("<start_of_turn>model\n<think>\n", FMT)  # Decision 21


def test_progressive_mode_sends_the_calls_whole_when_the_envelope_is_settled() -> None:
    parser = streamparse.StreamParser(FMT, tools=TOOLS, emit_calls="progressive")
    assert not any(d.tool_calls for d in parser.feed(CALLS[:-1]))
    deltas = parser.feed(CALLS[-1:]) + parser.close()
    assert [tc.name for d in deltas for tc in d.tool_calls if tc.name] == ["get_weather", "get_time"]


def test_gemma3_is_an_alias_and_render_reads_back() -> None:
    assert named(streamparse.parse(CALL, "gemma3")) == [("get_weather", {"location": "Paris"})]
    from streamparse import ToolCall
    for message in (Message(content="Hi.", reasoning="R"), Message(content="", reasoning="", tool_calls=[
            ToolCall("call_a1", "get_time", {"timezone": "UTC"}, "")]), Message(content="", reasoning="", tool_calls=[
            ToolCall("c1", "f", {}, ""), ToolCall("c2", "g", {"x": [1]}, "")])):
        again = read(streamparse.render(message, FMT))
        assert (again.content, again.reasoning, named(again)) == (message.content, message.reasoning, named(message))


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
def test_grammars_accept_the_wire(syntax: str) -> None:
    from test_grammar_for import accepts
    tools = [{"name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]},
             {"name": "get_time", "parameters": TOOLS[1]["function"]["parameters"]}]
    assert accepts(FMT, syntax, CALL, tools)
    assert accepts(FMT, syntax, CALLS, tools)
    assert accepts(FMT, syntax, "It is sunny.", tools)
    assert accepts(FMT, syntax, CALL, tools, tool_choice="required")
    assert not accepts(FMT, syntax, "It is sunny.", tools, tool_choice="required")


def test_envelope_like_texts_read_alike_under_any_chunking() -> None:
    from conftest import assert_every_mode_agrees
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(["{", "}", "[", "]", ",", ":", " ", "\n", '"tool_calls"', '"tool_call"', '"response"',
                              '"x"', '"a\\"b\\\\"', "\\u00e9", '"\\u00', "7", "null", '{"name": "f", "arguments": {}}',
                              '{"name": "f"', '"id": "c1"', "<think>", "</think>", "é"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces, max_size=14).map("".join), st.data())
    def check(text: str, data: st.DataObject) -> None:
        message = assert_every_mode_agrees(data, text, FMT, None)
        if not text.lstrip().startswith(("{", "<think>")):  # no envelope can start: all of it is content
            assert message.content == text.strip()

    check()
