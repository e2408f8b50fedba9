"""Tencent Hunyuan-A13B (`hunyuan_a13b`): `<think>` reasoning, `<answer>` framing right after it,
and a JSON call list in `<tool_calls>…</tool_calls>`."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "hunyuan_a13b"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_reasoning_an_answer_block_and_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "reasoning_answer_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.content == "Let me check both for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]


def test_answer_tags_are_framing_only_right_after_the_reasoning() -> None:
    msg = both_modes("<think>\n\n</think>\n<answer>\nHi.\n</answer>")
    assert (msg.reasoning, msg.content) == ("", "Hi.")
    msg = both_modes("Say <answer>x</answer>.")
    assert msg.content == "Say <answer>x</answer>."


def test_a_call_inside_unclosed_reasoning_stays_reasoning_and_lists_follow_the_nemo_rule() -> None:
    msg = both_modes('<think>maybe <tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>')
    assert msg.tool_calls == [] and "<tool_calls>" in msg.reasoning
    msg = both_modes('<tool_calls>[{"name": "f", "arguments": {}}, {"name": "g", "argum')
    assert named_calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes('<tool_calls>[{"name": "f", "arguments": {}}]')  # `</tool_calls>` optional at the end
    assert named_calls(msg) == [("f", {})] and msg.rejected == []
    msg = both_modes('Text <tool_calls>[{"name": "f", "arguments": {}}]</tool_calls> after.')
    assert msg.content == "Text  after."


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "reasoning_answer_two_calls.txt").read_text(), FMT)
    again = both_modes(streamparse.render(message, FMT))
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
