"""Granite 3.x: the format, and the Decisions of FORMATS.md for it, by example.

`<think>R</think><response>C</response>` (thinking system prompt), and `<|tool_call|>[{"name",
"arguments"}, …]`, which runs to where its JSON list ends. Granite 4 is `hermes` (alias `granite4`)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, ids

import streamparse
from streamparse import Message, Token, ToolCall, parse
from streamparse.registry import get_format

FMT = "granite"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
WEATHER = {"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}
TIME = {"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}


def calls(*objects: object) -> str:
    return "<|tool_call|>" + json.dumps(list(objects))


def both_modes(text: str, **options: object) -> Message:
    """parse(), and 1-character streams in both emit modes, agree; the parsed message is returned."""
    return agreeing(text, FMT, **options)


def named(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def test_reasoning_then_a_list_of_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "granite33_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.content == ""
    assert named(msg) == [("get_weather", WEATHER["arguments"]), ("get_time", TIME["arguments"])]
    assert [c.id for c in msg.tool_calls] == ["call_0", "call_1"]  # Granite writes no ids: generated


def test_the_response_block_after_reasoning_is_framing() -> None:
    msg = both_modes((FIXTURES / FMT / "granite33_thinking_response.txt").read_text())
    assert msg.reasoning == "The tool returned 18°C and partly cloudy, and the local time is 14:05. I can answer now."
    assert msg.content == "It is 18°C and partly cloudy in Paris, where the local time is 14:05."


def test_a_real_render_reads_back_and_render_writes_it() -> None:
    text = ("<think>The tool returned 18°C and partly cloudy. I can answer now.</think>"
            "<response>It is 18°C and partly cloudy in Paris right now.</response>")
    msg = both_modes(text)
    assert msg.reasoning == "The tool returned 18°C and partly cloudy. I can answer now."
    assert msg.content == "It is 18°C and partly cloudy in Paris right now."
    assert streamparse.render(msg, FMT) == text


def test_response_is_framing_only_right_after_the_reasoning_block() -> None:
    # Decision 25: after the reasoning block and optional whitespace; a missing </response> is tolerated.
    assert both_modes("<think>R</think>\n\n  <response>C").content == "C"
    assert both_modes("<think>R</think><response>C</response>\nmore").content == "C\nmore"
    # Without a reasoning block, or not right after it, it is content.
    assert both_modes("<response>C</response>").content == "<response>C</response>"
    assert both_modes("<think>R</think>Hi <response>C</response>").content == "Hi <response>C</response>"
    # Only the first closer after a framing opener is framing.
    assert both_modes("<think>R</think><response>a</response>b</response>").content == "ab</response>"


def test_text_before_the_list_and_after_it_is_content() -> None:
    # Decision 24: the envelope ends where the JSON list ends.
    msg = both_modes("Checking." + calls(WEATHER) + " Done.", tools=TOOLS)
    assert msg.content == "Checking. Done." and named(msg) == [("get_weather", WEATHER["arguments"])]


def test_a_single_object_instead_of_a_list_is_one_call() -> None:
    msg = both_modes("<|tool_call|>" + json.dumps(WEATHER) + "\nDone.")
    assert named(msg) == [("get_weather", WEATHER["arguments"])] and msg.content == "Done."


def test_lenient_keys() -> None:
    # Decision 24: `parameters` for `arguments`; no arguments key means {}.
    msg = both_modes('<|tool_call|>[{"name": "f", "parameters": {"a": 1}}, {"name": "g"}]')
    assert named(msg) == [("f", {"a": 1}), ("g", {})]


def test_arguments_that_are_a_json_string_holding_an_object_are_accepted_others_are_not() -> None:
    # Decision 3.
    msg = both_modes('<|tool_call|>[{"name": "f", "arguments": "{\\"a\\": 1}"}, {"name": "g", "arguments": [1]}]')
    assert named(msg) == [("f", {"a": 1})] and msg.tool_calls[0].arguments_json == '{"a": 1}'
    assert [(r.status, r.name) for r in msg.rejected] == [("invalid_json", "g")]
    assert msg.rejected[0].errors[0].startswith("$[1].arguments:")


def test_each_element_is_checked_on_its_own() -> None:
    msg = both_modes('<|tool_call|>[{"arguments": {}}, 3, {"name": "f", "arguments": {}}]')
    assert named(msg) == [("f", {})]
    assert [r.status for r in msg.rejected] == ["invalid_json", "invalid_json"]
    assert msg.rejected[0].errors == ['$[0].name: the call object has no "name" string']
    assert msg.rejected[1].errors == ["$[1]: a call must be a JSON object, got a number"]


def test_an_unclosed_list_keeps_its_complete_calls_and_the_rest_is_truncated() -> None:
    # Decision 21: a missing `]` alone at the end is tolerated; a cut-off element is `truncated`.
    msg = both_modes('<|tool_call|>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}')
    assert named(msg) == [("f", {}), ("g", {})] and msg.rejected == []
    msg = both_modes('<|tool_call|>[{"name": "f", "arguments": {}}, {"name": "g", "argu')
    assert named(msg) == [("f", {})]
    assert [(r.status, r.errors) for r in msg.rejected] == [
        ("truncated", ["$[1]: the output ended inside the call list"])]
    assert [r.status for r in both_modes("Hi <|tool_call|>").rejected] == ["truncated"]


def test_a_broken_element_ends_the_list_in_a_rejection_the_calls_before_it_stand() -> None:
    msg = both_modes('<|tool_call|>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {]}] ok')
    assert named(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["invalid_json"]


def test_an_empty_list_is_rejected() -> None:
    msg = both_modes("<|tool_call|>[] Sorry.")
    assert [r.status for r in msg.rejected] == ["invalid_json"] and msg.content == "Sorry."


def test_arguments_stream_as_the_model_writes_them() -> None:
    text = calls(WEATHER, TIME)
    parser = streamparse.StreamParser(FMT, emit_calls="progressive", id_factory=ids)
    pieces = [p for ch in text[:-25] for d in parser.feed(ch) for p in d.tool_calls]
    assert [(p.index, p.name) for p in pieces if p.name] == [(0, "get_weather"), (1, "get_time")]
    assert "".join(p.arguments for p in pieces if p.index == 0) == json.dumps(WEATHER["arguments"])


def test_the_tool_call_token_in_token_aware_mode() -> None:
    text = "<think>R</think><response>Hi.</response>" + calls(WEATHER)
    tokens = [Token("<think>R</think><response>Hi.</response>"), Token("<|tool_call|>", special=True),
              Token(text[len("<think>R</think><response>Hi.</response><|tool_call|>"):])]
    real = parse(tokens, FMT, special_tokens="require", id_factory=ids)
    assert real == parse(text, FMT, id_factory=ids) and real.content == "Hi."
    look_alike = parse(text, FMT, special_tokens="require")
    assert look_alike.tool_calls == [] and look_alike.content.endswith(json.dumps([WEATHER]))
    assert get_format(FMT).special == ("<|tool_call|>",)


def test_render_writes_what_the_system_prompt_asks_for() -> None:
    message = Message(content="", reasoning="", tool_calls=[ToolCall("x", "get_weather", WEATHER["arguments"], "")])
    assert streamparse.render(message, FMT) == calls(WEATHER)


def test_granite_4_is_hermes() -> None:
    assert get_format("granite4").name == "hermes"
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris, France"}}\n</tool_call>'
    assert named(parse(text, "granite4")) == [("get_weather", {"location": "Paris, France"})]


@pytest.mark.parametrize("prompt", ["<|start_of_role|>assistant<|end_of_role|>", "…<|end_of_text|>\n"])
def test_granite_prompts_never_leave_reasoning_open(prompt: str) -> None:
    assert not streamparse.thinking_forced_open(prompt, FMT)


def test_a_list_invalid_before_the_output_ends_is_invalid_json_after_its_complete_calls() -> None:
    text = '<|tool_call|>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {bad}'
    msg = agreeing(text, FMT, sizes=(1, 2, 5))
    assert [c.name for c in msg.tool_calls] == ["f"] and [r.status for r in msg.rejected] == ["invalid_json"]
    msg = agreeing(text[:-5], FMT, sizes=(1, 2, 5))  # ... "arguments": (a JSON prefix): cut off
    assert [c.name for c in msg.tool_calls] == ["f"] and [r.status for r in msg.rejected] == ["truncated"]
