"""Meituan LongCat-Flash (`longcat`): Hermes calls as `<longcat_tool_call>…</longcat_tool_call>` and
`<longcat_think>` reasoning."""

from __future__ import annotations

import json
from dataclasses import replace

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "longcat"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_the_real_render_of_two_calls_back_to_back() -> None:
    msg = both_modes((FIXTURES / FMT / "longcat_two_calls.txt").read_text(), tools=TOOLS)
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.content == "" and msg.rejected == []


def test_reasoning_then_calls_without_the_newlines_vllm_writes() -> None:
    text = ('\n<longcat_think>\nR.\n</longcat_think>\nC.<longcat_tool_call>{"name": "f", "arguments": {"a": 1}}'
            '</longcat_tool_call>')
    msg = both_modes(text)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("R.", "C.", [("f", {"a": 1})])


def test_a_thinking_prompt_opens_the_reasoning() -> None:
    prompt = " /think_on ASSISTANT:<longcat_think>\n"
    assert streamparse.thinking_forced_open(prompt, FMT)
    assert not streamparse.thinking_forced_open(" /think_off ASSISTANT:<longcat_think>\n\n</longcat_think>\n", FMT)
    msg = both_modes("Plan.\n</longcat_think>\nDone.", prompt=prompt)
    assert (msg.reasoning, msg.content) == ("Plan.", "Done.")


def test_cut_off_and_malformed_calls_are_rejected_with_their_text() -> None:
    msg = both_modes('<longcat_tool_call>\n{"name": "f", "argu')
    assert [(r.status, r.raw) for r in msg.rejected] == [("truncated", '<longcat_tool_call>\n{"name": "f", "argu')]
    msg = both_modes('<longcat_tool_call>\n{"name": "f"} junk\n</longcat_tool_call>')
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]


def test_render_reads_back_and_detection() -> None:
    message = streamparse.parse((FIXTURES / FMT / "longcat_two_calls.txt").read_text(), FMT)
    message = replace(message, reasoning="Think.", content="Sure.")
    again = both_modes(streamparse.render(message, FMT))
    assert (again.reasoning, again.content, named_calls(again)) == ("Think.", "Sure.", named_calls(message))
    assert streamparse.detect_format("{% if tools %}<longcat_tool_call>{% endif %}") == FMT
