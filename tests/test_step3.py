"""StepFun Step 3 (`step3`): `<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke …>` calls in a
`<｜tool_calls_begin｜>` block (no template stored: SGLang's detector and vLLM's tests; Decision 11)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "step3"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
BEGIN, END = "<｜tool_calls_begin｜><｜tool_call_begin｜>", "<｜tool_call_end｜><｜tool_calls_end｜>"
INVOKE = ('<steptml:invoke name="get_weather"><steptml:parameter name="city"> Tokyo </steptml:parameter>'
          "</steptml:invoke>")


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_reasoning_content_and_two_calls_typed_by_the_schema() -> None:
    msg = both_modes((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("Two calls") and msg.content == "Checking both."
    assert named_calls(msg) == [("get_weather", {"city": "Tokyo", "days": 3}), ("get_time", {})]


@pytest.mark.parametrize("head", ["function<｜tool_sep｜>", "", "get_weather\n", "function<｜tool_sep｜>get_weather\n"])
def test_the_call_head_may_omit_function_or_repeat_the_invoke_name(head: str) -> None:
    msg = both_modes(BEGIN + head + INVOKE + END, tools=TOOLS)
    assert named_calls(msg) == [("get_weather", {"city": " Tokyo "})]  # a string keeps its whitespace


@pytest.mark.parametrize("head", ["other\n", "code<｜tool_sep｜>"])
def test_other_text_or_type_before_the_invoke_rejects_the_call(head: str) -> None:
    msg = both_modes(BEGIN + head + INVOKE + END, tools=TOOLS)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]


def test_a_bare_invoke_is_a_call_and_a_cut_one_is_truncated() -> None:
    msg = both_modes("See " + INVOKE + " done.", tools=TOOLS)
    assert named_calls(msg) == [("get_weather", {"city": " Tokyo "})] and msg.content == "See  done."
    msg = both_modes(BEGIN + INVOKE[:-40], tools=TOOLS)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_a_tool_sep_between_calls_is_framing_other_text_in_the_block_is_content() -> None:
    text = (BEGIN + INVOKE + "<｜tool_call_end｜><｜tool_sep｜>\n<｜tool_call_begin｜>" + INVOKE
            + "<｜tool_call_end｜> note<｜tool_calls_end｜>")
    msg = both_modes(text, tools=TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_weather"] and msg.content == "note"


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), FMT, tools=TOOLS)
    again = both_modes(streamparse.render(message, FMT), tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
