"""llama3_json (Llama 3.1 / 3.2 / 3.3, Llama 4 JSON): the spec, as FORMATS.md and its decisions 14-18 state it.

A call is a JSON object whose first key is "name" (or "type" then "name"), where the output starts,
right after `<|python_tag|>` or Llama 4's `<|python_end|>`, or after another call (`;`, newlines or
nothing between them). Anything else is content. Every example is checked with `parse`, and streamed
one character at a time in both emit modes.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED, agreeing, ids

import streamparse
from streamparse import Message, StreamParser, Token

FMT = "llama3_json"
TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}},
    {"name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}},
    {"name": "brave_search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
]
WEATHER = '{"name": "get_weather", "parameters": {"location": "Paris, France"}}'
TIME = '{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}'


def read(text: str, **options: object) -> Message:
    """parse(text), checked against 1-character streams in both emit modes."""
    return agreeing(text, FMT, **options)


def calls(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


# ----------------------------------------------------------------- real outputs

def test_llama3_call_is_the_whole_turn() -> None:
    message = read(WEATHER)
    assert calls(message) == [("get_weather", {"location": "Paris, France"})] and message.content == ""


def test_llama4_text_between_python_start_and_end_is_content_then_calls_back_to_back() -> None:
    text = f"<|python_start|>Let me check the weather.<|python_end|>{WEATHER}{TIME}"
    message = read(text)
    assert message.content == "Let me check the weather."
    assert [c.name for c in message.tool_calls] == ["get_weather", "get_time"]
    assert read(f"<|python_start|><|python_end|>{WEATHER}").content == ""


def test_builtin_call_after_python_tag() -> None:
    message = read('<|python_tag|>brave_search.call(query="current weather in Paris")', tools=TOOLS)
    assert calls(message) == [("brave_search", {"query": "current weather in Paris"})]


def test_plain_answers_and_json_in_prose_are_content() -> None:
    prose = 'Here is an example payload:\n\n```json\n{"name": "value", "n": [1, 2]}\n```'
    assert read(prose).content == prose and read(prose).tool_calls == []


# ----------------------------------------------------------------- JSON answer vs call

@pytest.mark.parametrize("text", ['{"answer": 42}', "[1, 2, 3]", "{curly} prose {braces}", '{"parameters": {}}',
                                  '{"name": 1}', '{ "type": "object", "properties": {} }',
                                  '{"name": "Alice", "age": 30}', 'Hello {"name": "f", "parameters": {}}'])
def test_json_answers_are_content(text: str) -> None:
    message = read(text)
    assert message.content == text and message.tool_calls == [] and message.rejected == []


@pytest.mark.parametrize("text", ['{"answer": 42, "unit": "C"}', '[{"name": "x"}]', '{ \n "kind": "object"}',
                                  "{no quotes here}"])
def test_a_json_answer_streams_with_at_most_its_first_key_held_back(text: str) -> None:
    parser = StreamParser(FMT)
    sent = ""
    first_key = len(text.split(":", maxsplit=1)[0]) + 1
    for i, char in enumerate(text):
        sent += "".join(d.content for d in parser.feed(char))
        assert parser.held_back <= first_key, (text[: i + 1], parser.held_back)
        assert len(sent) + parser.held_back >= len(text[: i + 1].rstrip()), text[: i + 1]
    sent += "".join(d.content for d in parser.close())
    assert sent == text


def test_decision_15_an_object_with_another_key_is_content_verbatim() -> None:
    text = '{"name": "Alice", "age": 30};\n' + WEATHER
    message = read(text)
    assert message.tool_calls == [] and message.content == text  # the second object no longer starts the output


def test_type_function_first_is_tolerated() -> None:
    text = '{"type": "function", "name": "get_time", "parameters": {"timezone": "UTC"}}'
    assert calls(read(text)) == [("get_time", {"timezone": "UTC"})]


def test_arguments_is_accepted_for_parameters_and_no_key_means_empty() -> None:
    assert calls(read('{"name": "f", "arguments": {"a": 1}}')) == [("f", {"a": 1})]
    assert calls(read('{"name": "f"}')) == [("f", {})]


def test_bad_bodies_are_rejected_not_content() -> None:
    assert [r.status for r in read('{"name": "f", "parameters": [1]}').rejected] == ["invalid_json"]
    assert [r.status for r in read('{"name": "f", "parameters": {"a": 1} oops}').rejected] == ["invalid_json"]
    assert [r.status for r in read('{"name": "f", "parameters": {"a": ').rejected] == ["truncated"]
    assert [r.status for r in read('{"name": "f", "parameters": "{\\"a\\": 1}"}').rejected] == []


# ----------------------------------------------------------------- several calls

@pytest.mark.parametrize("between", [";", "; ", " ; ", ";\n", "\n", "", "\r\n\r\n"])
def test_parallel_calls_and_their_separators(between: str) -> None:
    message = read(WEATHER + between + TIME)
    assert [c.name for c in message.tool_calls] == ["get_weather", "get_time"] and message.content == ""
    assert between in message.tool_calls[0].raw  # separators are framing of the call before them


def test_text_after_calls_is_content_and_a_trailing_separator_is_framing() -> None:
    message = read(WEATHER + "; " + TIME + ";\nHope that helps.")
    assert [c.name for c in message.tool_calls] == ["get_weather", "get_time"]
    assert message.content == "Hope that helps."
    assert read(WEATHER + ";").content == ""


def test_decision_17_concatenated_objects_in_llama3_output() -> None:
    assert len(read(WEATHER + WEATHER).tool_calls) == 2


# ----------------------------------------------------------------- python_tag, built-ins, python code

def test_decision_16_python_tag_after_prose_is_a_call() -> None:
    message = read("Let me search. <|python_tag|>" + WEATHER)
    assert message.content == "Let me search." and calls(message) == [("get_weather", {"location": "Paris, France"})]


def test_decision_14_builtins_are_validated_like_any_call() -> None:
    text = '<|python_tag|>wolfram_alpha.call(query="x^2")'
    assert calls(read(text)) == [("wolfram_alpha", {"query": "x^2"})]
    assert [r.status for r in read(text, tools=TOOLS).rejected] == ["unknown_tool"]


def test_decision_18_builtin_syntax_and_the_python_fallback() -> None:
    assert [r.status for r in read('<|python_tag|>brave_search.call("positional")').rejected] == ["invalid_json"]
    assert [r.status for r in read("<|python_tag|>brave_search.call(q=os.environ)").rejected] == ["invalid_json"]
    message = read("<|python_tag|>\nimport math\nprint(math.pi)\n  ")
    assert calls(message) == [("python", {"code": "import math\nprint(math.pi)"})]


def test_turn_end_tokens_left_in_are_dropped() -> None:
    message = read('<|python_tag|>brave_search.call(query="x")<|eom_id|>')
    assert calls(message) == [("brave_search", {"query": "x"})] and message.content == ""
    assert read("Hello.<|eot_id|>").content == "Hello."


def test_thinking_forced_open_is_ignored() -> None:
    assert read(WEATHER, thinking_forced_open=True).tool_calls[0].name == "get_weather"


def test_progressive_mode_sends_a_json_call_whole_when_it_is_certain() -> None:
    parser = StreamParser(FMT, emit_calls="progressive", id_factory=ids)
    deltas = [d for char in WEATHER for d in parser.feed(char)]
    assert not any(d.tool_calls for d in deltas)  # an extra key could still make it content
    deltas += parser.close()
    pieces = [p for d in deltas for p in d.tool_calls]
    assert len(pieces) == 1 and json.loads(pieces[0].arguments) == {"location": "Paris, France"}


def test_builtin_calls_stream_progressively() -> None:
    text = '<|python_tag|>brave_search.call(query="x")'
    parser = StreamParser(FMT, emit_calls="progressive", id_factory=ids)
    names = []
    for i, char in enumerate(text):
        for delta in parser.feed(char):
            names += [(i, p.name) for p in delta.tool_calls if p.name]
    assert names == [(text.index("(") , "brave_search")]


# ----------------------------------------------------------------- token-aware mode

def test_special_tokens_python_tag_and_llama4_markers() -> None:
    tokens = [Token("<|python_start|>", special=True), Token("Checking."), Token("<|python_end|>", special=True),
              Token('{"name": "get_time", '), Token('"parameters": {}}')]
    message = streamparse.parse(tokens, FMT, special_tokens="require", id_factory=ids)
    assert message.content == "Checking." and [c.name for c in message.tool_calls] == ["get_time"]
    tag = [Token("<|python_tag|>", special=True), Token('brave_search.call(query="q")'),
           Token("<|eom_id|>", special=True)]
    assert calls(streamparse.parse(tag, FMT, special_tokens="require")) == [("brave_search", {"query": "q"})]
    spelled = streamparse.parse([Token("Hi <|python_tag|>"), Token(WEATHER)], FMT, special_tokens="require")
    assert spelled.tool_calls == [] and spelled.content == "Hi <|python_tag|>" + WEATHER


# ----------------------------------------------------------------- the real renders

@pytest.mark.skipif(not (SHARED / "templates" / "cases_more.json").exists(),
                    reason="../shared is not beside this checkout")
def test_every_real_render() -> None:
    cases = [c for c in json.loads((SHARED / "templates" / "cases_more.json").read_text()) if c["format"] == FMT]
    assert len(cases) == 22
    for case in cases:
        message = read(case["output"], tools=case["tools"])
        expected = case["expected"]
        assert message.content == (expected["content"] or "")
        assert calls(message) == [(c["name"], c["arguments"]) for c in expected["tool_calls"]]


@pytest.mark.parametrize(("text", "status"), [
    ('{"name": "get_weather", "parameters": {invalid json}', "invalid_json"),  # brackets never balance
    ('{"name": "get_weather", "parameters": {"a": 1} x', "invalid_json"),
    ('{"name": "get_weather", "parameters": {"a": 1', "truncated"),  # a JSON prefix: cut off
])
def test_json_invalid_before_the_output_ends_is_invalid_json_a_cut_prefix_is_truncated(text: str, status: str) -> None:
    # FORMATS.md, llama3_json: "Invalid JSON after the {"name" prefix: rejected invalid_json"; "Cut off: truncated".
    msg = agreeing(text, FMT, sizes=(1, 2, 5))
    assert msg.tool_calls == [] and [(r.status, r.raw) for r in msg.rejected] == [(status, text)]
