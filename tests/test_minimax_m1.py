"""MiniMax M1 (`minimax_m1`): `{"name", "arguments"}` objects separated by whitespace in one
`<tool_calls>` block (no template stored: vLLM's `minimax` parser tests; Decision 17)."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "minimax_m1"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_reasoning_content_and_two_calls_one_per_line() -> None:
    msg = both_modes((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.content == "Checking both."
    assert named_calls(msg) == [("get_weather", {"city": "Dallas", "days": 3}), ("get_time", {})]


def test_pretty_printed_objects_are_read_and_a_broken_one_is_rejected_on_its_own() -> None:
    # Decision 17 (vLLM finds no call in pretty-printed JSON: conflict).
    text = ('<tool_calls>\n{\n  "name": "f",\n  "arguments": {"a": [1, 2]}\n}\n{"name": oops}\n  {"name": "g"}\n'
            "</tool_calls> After.")
    msg = both_modes(text)
    assert named_calls(msg) == [("f", {"a": [1, 2]}), ("g", {})] and msg.content == "After."
    assert [(r.status, r.raw) for r in msg.rejected] == [("invalid_json", '{"name": oops}')]


def test_the_closer_is_optional_at_the_end_and_a_cut_object_is_truncated() -> None:
    # Decision 1.
    msg = both_modes('<tool_calls>\n{"name": "f", "arguments": {}}\n')
    assert named_calls(msg) == [("f", {})] and msg.rejected == []
    msg = both_modes('<tool_calls>\n{"name": "f", "arguments": {}}\n{"name": "g", "argu')
    assert named_calls(msg) == [("f", {})] and [(r.status, r.raw) for r in msg.rejected] == [
        ("truncated", '{"name": "g", "argu')]


def test_a_call_inside_reasoning_stays_reasoning() -> None:
    msg = both_modes('<think>maybe <tool_calls>\n{"name": "f", "arguments": {}}\n</tool_calls></think>Done.')
    assert msg.tool_calls == [] and "<tool_calls>" in msg.reasoning and msg.content == "Done."


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), FMT, tools=TOOLS)
    again = both_modes(streamparse.render(message, FMT), tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
