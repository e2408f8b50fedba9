"""Upstage Solar Open 2 (`solar_open2`): glm45's shape with `<|tool_call:start|>` and `<|tool_arg:…|>`
tags (no template stored: vLLM's `solar_open2` parser tests)."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "solar_open2"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
CALL = "<|tool_call:start|>get_weather\n<|tool_arg:start|>city<|tool_arg:value|>Seoul<|tool_arg:end|>\n"


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_reasoning_content_and_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user asks") and msg.content == "Checking both."
    assert named_calls(msg) == [("get_weather", {"city": "Seoul", "days": 3}), ("get_time", {})]


def test_a_repeated_argument_keeps_its_last_value() -> None:
    # Decision 14 (vLLM keeps the first: conflict).
    msg = both_modes(CALL + "<|tool_arg:start|>city<|tool_arg:value|>Busan<|tool_arg:end|>\n<|tool_call:end|>")
    assert named_calls(msg) == [("get_weather", {"city": "Busan"})]


def test_the_end_tag_is_optional_at_the_end_a_cut_value_is_truncated_and_text_around_is_content() -> None:
    # Decisions 1 and 2 (vLLM puts an unterminated block back into the content; we reject it).
    assert named_calls(both_modes("Sure. " + CALL)) == [("get_weather", {"city": "Seoul"})]
    msg = both_modes(CALL + "<|tool_call:end|>\n" + CALL[:-20])
    assert named_calls(msg) == [("get_weather", {"city": "Seoul"})]
    assert [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes("A " + CALL + "<|tool_call:end|> B")
    assert msg.content == "A  B"


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), FMT, tools=TOOLS)
    again = both_modes(streamparse.render(message, FMT), tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
