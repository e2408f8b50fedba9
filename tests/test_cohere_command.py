"""Cohere Command A and Cohere2 MoE (`cohere_command`): Command R7B's plan and action list, with
`<|START_TEXT|>`/`<|END_TEXT|>` and `<|START_RESPONSE|>`/`<|END_RESPONSE|>` framing (third-wave
Decisions 9 and 10)."""

from __future__ import annotations

import json
from dataclasses import replace

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "cohere_command"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
ACTION = '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"location": "Paris"}}'


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_the_real_render_forced_open_plan_then_an_action_whose_ids_are_kept() -> None:
    text = (FIXTURES / FMT / "cohere2_moe_reasoning_call.txt").read_text()
    prompt = (FIXTURES / FMT / "cohere2_moe_reasoning_call.prompt").read_text()
    assert streamparse.thinking_forced_open(prompt, FMT)
    msg = both_modes(text, tools=TOOLS, prompt=prompt)
    assert msg.reasoning.startswith("I need live data.") and msg.content == ""
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [
        ("0", "get_weather", {"location": "Paris, France", "unit": "celsius"})]


def test_text_and_response_markers_are_framing_wherever_they_are_and_may_be_left_open() -> None:
    msg = both_modes("Plan.<|END_THINKING|><|START_TEXT|>It is 18°C.<|END_TEXT|>", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("Plan.", "It is 18°C.")
    msg = both_modes("<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>foo <|END_RESPONSE|> and "
                     "<|START_TEXT|>bar")
    assert (msg.reasoning, msg.content) == ("plan", "foo  and bar")


def test_citations_stay_in_the_text_verbatim() -> None:
    # Decision 9.
    msg = both_modes("<|START_RESPONSE|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>")
    assert msg.content == "foo <co>bar</co: 0:[1,2],1:[3,4]>"


def test_an_unclosed_action_keeps_its_complete_calls_and_truncates_the_rest() -> None:
    msg = both_modes(ACTION + ',\n    {"tool_call_id": "1", "tool_name": "get_ti')
    assert [(c.id, c.name) for c in msg.tool_calls] == [("0", "get_weather")]
    assert [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes(ACTION + "\n]")  # the closer alone missing at the end: tolerated
    assert named_calls(msg) == [("get_weather", {"location": "Paris"})] and msg.rejected == []


def test_a_broken_action_is_invalid_json() -> None:
    msg = both_modes('<|START_ACTION|>[{"tool_name": "get_weather", "parameters": {bad}}]<|END_ACTION|>')
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]


def test_render_reads_back_and_the_template_is_not_taken_for_command_r7b() -> None:
    message = streamparse.parse((FIXTURES / FMT / "cohere2_moe_reasoning_call.txt").read_text(), FMT,
                                thinking_forced_open=True)
    message = replace(message, content="Checking.")
    again = both_modes(streamparse.render(message, FMT))
    assert (again.reasoning, again.content) == (message.reasoning, "Checking.")
    assert [(c.id, c.name, c.arguments) for c in again.tool_calls] == [
        (c.id, c.name, c.arguments) for c in message.tool_calls]
    template = "{% for m in messages %}<|START_TEXT|>{{ m }}<|END_TEXT|><|START_ACTION|>{% endfor %}"
    assert streamparse.detect_format(template) == FMT
