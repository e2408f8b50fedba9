"""ServiceNow Apriel 1.5 / 1.6 (`apriel`): reasoning with no opener up to `[BEGIN FINAL RESPONSE]`,
whatever `thinking_forced_open` says; `<tool_calls>[…]</tool_calls>` (Decision 15)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "apriel"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
CALLS = '<tool_calls>[{"name": "f", "arguments": {"a": 1}, "id": "x1"}]</tool_calls>'


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_the_real_1_5_render_reasoning_answer_end_marker_and_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "apriel15_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("I need live data.") and msg.reasoning.endswith("get_time.")
    assert msg.content == "Let me check the current weather in Paris for you."  # [END FINAL RESPONSE]: framing
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_time"]


@pytest.mark.parametrize("forced", [False, True])
def test_reasoning_is_read_whatever_the_flag_says_and_an_output_without_the_marker_is_the_answer(
        forced: bool) -> None:
    msg = both_modes("Thinking.\n[BEGIN FINAL RESPONSE]\nAnswer.", thinking_forced_open=forced)
    assert (msg.reasoning, msg.content) == ("Thinking.", "Answer.")
    msg = both_modes("Just an answer.\n", thinking_forced_open=forced)
    assert (msg.reasoning, msg.content) == ("", "Just an answer.")


def test_the_answer_is_held_until_the_marker_shows_what_it_is() -> None:
    parser = streamparse.StreamParser(FMT)
    assert parser.feed("Thinking about it") == [] and parser.held_back == len("Thinking about it")
    deltas = parser.feed(".\n[BEGIN FINAL RESPONSE]\nHi")
    assert [(d.reasoning, d.content) for d in deltas] == [("Thinking about it.", ""), ("", "Hi")]


def test_a_call_ends_prompt_opened_reasoning_and_the_text_before_it_is_reasoning() -> None:
    # Fourth-wave Decision 24 (third-wave 15): the 1.6 prompt opens the reasoning, and the model may
    # call without answering.
    prompt = "\n<|begin_assistant|>\nHere are my reasoning steps:\n"
    for options in ({"thinking_forced_open": True}, {"prompt": prompt}):
        msg = both_modes("Let me check.\n" + CALLS, **options)
        assert (msg.reasoning, msg.content) == ("Let me check.", "")
        # The model's "id" is kept (Decision 23).
        assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [("x1", "f", {"a": 1})]
        msg = both_modes("Let me check.\n" + CALLS + "\nDone.", **options)
        assert (msg.reasoning, msg.content, len(msg.tool_calls)) == ("Let me check.", "Done.", 1)


def test_without_a_reasoning_prompt_the_text_before_a_call_with_no_marker_is_the_answer() -> None:
    # Apriel 1.5 (prompt `<|assistant|>⏎`) writes a turn without reasoning as its answer, then the calls.
    msg = both_modes("Let me check.\n" + CALLS)
    assert (msg.reasoning, msg.content, len(msg.tool_calls)) == ("", "Let me check.", 1)


def test_the_reasoning_held_back_is_sent_as_reasoning_when_a_call_ends_it() -> None:
    parser = streamparse.StreamParser(FMT, thinking_forced_open=True)
    assert parser.feed("Let me check.\n") == []
    deltas = parser.feed(CALLS)
    assert [d.reasoning for d in deltas if d.reasoning] == ["Let me check."]
    assert not any(d.content for d in deltas)


def test_the_1_6_prefill_is_prompt_text_and_is_dropped_when_repeated() -> None:
    prompt = "\n<|begin_assistant|>\nHere are my reasoning steps:\n"
    assert streamparse.thinking_forced_open(prompt, FMT)
    assert not streamparse.thinking_forced_open("<|assistant|>\n", FMT)
    msg = both_modes("Here are my reasoning steps:\nR.\n[BEGIN FINAL RESPONSE]\nC.", prompt=prompt)
    assert (msg.reasoning, msg.content) == ("R.", "C.")


def test_lists_follow_the_nemo_rule() -> None:
    msg = both_modes('R\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "f", "arguments": {}}, {"name"')
    assert named_calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes('R\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "f", "arguments": {}}, 7]</tool_calls>')
    assert named_calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["invalid_json"]


def test_render_reads_back_and_apriel_1_5_is_not_taken_for_hermes() -> None:
    message = streamparse.parse((FIXTURES / FMT / "apriel15_reasoning_two_calls.txt").read_text(), FMT)
    again = both_modes(streamparse.render(message, FMT))
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
    template = "{% if tools %}<tool_call>{% endif %}[BEGIN FINAL RESPONSE]{{ '<tool_calls>' }}"
    assert streamparse.detect_format(template) == FMT
