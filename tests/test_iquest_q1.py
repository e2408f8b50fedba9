"""IQuest Q1 (`iquest_q1`): the format, and the fourth-wave Decisions for it (1, 2, 13, 20, 22), by example.

GLM-4.7's body in its own `<iquest_tool_call>` envelope, one block per call; the turn ends `<|iquest_end|>`.
No template is stored: the wire is FORMATS.md's block and SGLang's `iquest_q1` fixtures."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "iquest_q1"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
TYPED = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "code": {"type": "string"}, "count": {"type": "integer"}, "enabled": {"type": "boolean"}}}}}]

# FORMATS.md's wire block.
WIRE = ("<think>reasoning</think>content<iquest_tool_call>get_weather\n<arg_key>location</arg_key>"
        "<arg_value>Paris, France</arg_value>\n<arg_key>days</arg_key> <arg_value>3</arg_value></iquest_tool_call>"
        "<iquest_tool_call>get_current_date\n</iquest_tool_call>")
CALLS = [("get_weather", {"location": "Paris, France", "days": 3}), ("get_current_date", {})]


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 3 and 7 characters in both emit modes, agree; the message is returned."""
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_the_wire_block_and_the_trailing_stop_token_is_framing() -> None:
    msg = both_modes(WIRE + "<|iquest_end|>", tools=TOOLS)
    assert (msg.reasoning, msg.content, named_calls(msg), msg.rejected) == ("reasoning", "content", CALLS, [])
    # Anywhere else the stop token is text (SGLang keeps it in content: conflict, Decision 13).
    assert both_modes("a<|iquest_end|>b").content == "a<|iquest_end|>b"


def test_the_real_fixture() -> None:
    msg = both_modes((FIXTURES / FMT / "iquest_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.content == "Checking both." and named_calls(msg) == CALLS


def test_sglang_values_byte_exact_strings_and_typed_others() -> None:
    text = ("<iquest_tool_call>run\n<arg_key>code</arg_key><arg_value>  \"123\"\n</arg_value>"
            "<arg_key>count</arg_key> <arg_value>42</arg_value>\n<arg_key>enabled</arg_key><arg_value>true"
            "</arg_value></iquest_tool_call>")
    msg = both_modes(text, tools=TYPED)
    assert named_calls(msg) == [("run", {"code": '  "123"\n', "count": 42, "enabled": True})]


def test_the_thinking_prompt_opens_reasoning_and_a_call_ends_it() -> None:
    # Decision 13: `calls_end_reasoning` ("adaptive thinking").
    assert streamparse.thinking_forced_open("<|iquest_assistant|><think>", FMT)
    msg = both_modes("plan <iquest_tool_call>get_current_date</iquest_tool_call> done", tools=TOOLS,
                     prompt="<|iquest_assistant|><think>")
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("plan", "done", [("get_current_date", {})])
    # The model's own <think> ends at the call too.
    msg = both_modes("<think>plan<iquest_tool_call>get_current_date</iquest_tool_call>", tools=TOOLS)
    assert (msg.reasoning, named_calls(msg)) == ("plan", [("get_current_date", {})])


def test_a_value_without_its_closer_ends_at_the_call_closer() -> None:
    # Decision 13: glm45's tolerance (SGLang keeps such a block as text: conflict).
    msg = both_modes("<iquest_tool_call>run<arg_key>count</arg_key><arg_value>1</iquest_tool_call>", tools=TYPED)
    assert named_calls(msg) == [("run", {"count": 1})]


@pytest.mark.parametrize("call", [
    "<iquest_tool_call><arg_key>count</arg_key><arg_value>1</arg_value></iquest_tool_call>",  # an empty name
    "<iquest_tool_call>run<arg_key>count</arg_key></iquest_tool_call>",  # a key without its value
    "<iquest_tool_call>run<arg_key>count</arg_key><arg_value>1</arg_value>x</iquest_tool_call>",  # text between
])
def test_malformed_calls_are_invalid_json_and_their_siblings_stand(call: str) -> None:
    good = "<iquest_tool_call>run</iquest_tool_call>"
    msg = both_modes(good + call + good, tools=TYPED)
    assert named_calls(msg) == [("run", {}), ("run", {})] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == call and msg.content == ""


def test_a_cut_off_call_is_truncated_and_the_closer_is_optional_when_complete() -> None:
    # Decision 1.
    msg = both_modes("A<iquest_tool_call>run<arg_key>count</arg_key><arg_value>1</arg_value>", tools=TYPED)
    assert named_calls(msg) == [("run", {"count": 1})] and msg.content == "A"
    msg = both_modes("A<iquest_tool_call>run<arg_key>count</arg_key><arg_value>1", tools=TYPED)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_text_between_and_after_calls_is_content_and_unknown_tools_are_rejected() -> None:
    # Decisions 2 and 20.
    msg = both_modes("A<iquest_tool_call>run</iquest_tool_call> B <iquest_tool_call>nope</iquest_tool_call>C",
                     tools=TYPED)
    assert named_calls(msg) == [("run", {})] and msg.content == "A B C"
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "nope")]


def test_detection_and_grammars() -> None:
    # Decision 22.
    template = ("{%- for m in messages %}{{ '<iquest_tool_call>' + m.name + '<arg_key>k</arg_key>"
                "<arg_value>v</arg_value></iquest_tool_call>' }}{% endfor %}<|iquest_assistant|><think>")
    assert streamparse.detect_format(template) == FMT
    for syntax in ("structural_tag", "lark", "gbnf"):
        assert streamparse.grammar_for(FMT, TOOLS, tool_choice="required", syntax=syntax)


def test_render_reads_back() -> None:
    message = streamparse.parse(WIRE, FMT, tools=TOOLS)
    again = both_modes(streamparse.render(message, FMT), tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == ("reasoning", "content", CALLS)
