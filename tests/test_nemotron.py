"""Nemotron Nano v2: the format, and the Decisions of FORMATS.md for it, by example.

Its prompts end `<think>⏎` (forced open) unless `/no_think`; calls are `<TOOLCALL>[{"name",
"arguments"}, …]</TOOLCALL>`, plain text. Nemotron 3 Nano is `qwen3_coder` (alias `nemotron3`)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing

import streamparse
from streamparse import Message, parse
from streamparse.registry import get_format

FMT = "nemotron"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
PROMPT = (FIXTURES / FMT / "nano_v2_reasoning_two_calls.prompt").read_text()


def both_modes(text: str, **options: object) -> Message:
    """parse(), and 1-character streams in both emit modes, agree; the parsed message is returned."""
    return agreeing(text, FMT, **options)


def test_reasoning_content_and_two_calls_after_a_thinking_prompt() -> None:
    text = (FIXTURES / FMT / "nano_v2_reasoning_two_calls.txt").read_text()
    msg = both_modes(text, tools=TOOLS, prompt=PROMPT)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("both at once.")
    assert msg.content == "Let me check both for you."
    # The second call's arguments are a JSON string holding the object (decision 3): accepted.
    assert [(c.name, c.arguments_json) for c in msg.tool_calls] == [
        ("get_weather", '{"location": "Paris, France", "unit": "celsius"}'),
        ("get_time", '{"timezone": "Europe/Paris"}')]


@pytest.mark.parametrize(("prompt", "forced"), [
    ("<SPECIAL_11>Assistant\n<think>\n", True), ("<SPECIAL_11>Assistant\n<think></think>", False)])
def test_thinking_prompts_leave_reasoning_open_and_no_think_prompts_do_not(prompt: str, forced: bool) -> None:
    assert streamparse.thinking_forced_open(prompt, FMT) is forced


def test_forced_open_output_that_never_closes_its_reasoning_is_the_answer() -> None:
    # The template writes a turn without reasoning as bare text after the `<think>⏎` prompt.
    msg = both_modes("It is currently 18°C and partly cloudy in Paris.\n", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("", "It is currently 18°C and partly cloudy in Paris.")
    msg = both_modes("R.\n</think>\nIt is 18°C.\n", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("R.", "It is 18°C.")


def test_forced_open_reasoning_is_held_until_its_closer() -> None:
    parser = streamparse.StreamParser(FMT, thinking_forced_open=True)
    assert parser.feed("Thinking about it") == [] and parser.held_back == len("Thinking about it")
    deltas = parser.feed(".\n</think>\nHi")
    assert [(d.reasoning, d.content) for d in deltas] == [("Thinking about it.", ""), ("", "Hi")]


def test_without_a_forced_prompt_reasoning_streams_as_usual() -> None:
    parser = streamparse.StreamParser(FMT)
    assert [d.reasoning for d in parser.feed("<think>\nThinking")] == ["Thinking"]


def test_the_envelope_ends_at_the_first_closer_outside_a_json_string() -> None:
    # Decision 27.
    text = '<TOOLCALL>[{"name": "f", "arguments": {"s": "</TOOLCALL>"}}]</TOOLCALL> Done.'
    msg = both_modes(text)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("f", {"s": "</TOOLCALL>"})] and msg.content == "Done."


def test_a_complete_list_at_the_end_needs_no_closer_a_cut_one_is_truncated() -> None:
    # Decisions 27 and 21.
    msg = both_modes('Sure.\n<TOOLCALL>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]\n')
    assert [c.name for c in msg.tool_calls] == ["f", "g"] and msg.rejected == [] and msg.content == "Sure."
    msg = both_modes('<TOOLCALL>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"a": ')
    assert [c.name for c in msg.tool_calls] == ["f"] and [r.status for r in msg.rejected] == ["truncated"]


def test_text_after_the_list_inside_the_envelope_is_rejected_the_calls_stand() -> None:
    msg = both_modes('<TOOLCALL>[{"name": "f", "arguments": {}}] oops</TOOLCALL>')
    assert [c.name for c in msg.tool_calls] == ["f"]
    assert [(r.status, r.errors) for r in msg.rejected] == [("invalid_json", ["text after the call list: 'oops'"])]


def test_non_object_arguments_are_rejected() -> None:
    msg = both_modes('<TOOLCALL>[{"name": "f", "arguments": "not json"}, {"name": "g", "arguments": 5}]</TOOLCALL>')
    assert msg.tool_calls == [] and [(r.status, r.name) for r in msg.rejected] == [("invalid_json", "f"),
                                                                                  ("invalid_json", "g")]


def test_a_partial_marker_is_held_back_then_released_as_content() -> None:
    parser = streamparse.StreamParser(FMT)
    assert [d.content for d in parser.feed("See <TOOLC")] == ["See"]
    assert parser.held_back == len(" <TOOLC")
    assert [d.content for d in parser.feed("ALLS x") + parser.close()] == [" <TOOLCALLS x"]


def test_no_special_tokens_so_no_token_aware_mode() -> None:
    assert get_format(FMT).special == ()
    with pytest.raises(ValueError, match="declares no special tokens"):
        streamparse.StreamParser(FMT, special_tokens="require")


def test_render_writes_the_template_s_call_list() -> None:
    msg = parse('<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]</TOOLCALL>', FMT)
    assert streamparse.render(msg, FMT) == \
        '<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]</TOOLCALL>'


def test_nemotron_3_is_qwen3_coder() -> None:
    assert get_format("nemotron3").name == "qwen3_coder"
    text = "R\n</think>\n<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call>\n"
    msg = parse(text, "nemotron3", thinking_forced_open=True)
    assert (msg.reasoning, [(c.name, c.arguments) for c in msg.tool_calls]) == ("R", [("f", {"a": "x"})])
