"""AllenAI OLMo 3 (`olmo3`): Python calls one per line in `<function_calls>` (Decision 16), by example.
No template is stored: the wire is vLLM's `olmo3` parser tests' (`fixtures/olmo3/vllm_two_calls.txt`).

Every example is checked in both emit modes and under 1- and 5-character chunks (`read`).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message, ToolCall, parse

FMT = "olmo3"
OPEN, CLOSE = "<function_calls>", "</function_calls>"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 5), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def test_vllm_example_reasoning_content_and_two_calls() -> None:
    msg = read((FIXTURES / FMT / "vllm_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning == "The user wants the weather and to register." and msg.content == "I'll do both."
    assert named_calls(msg) == [
        ("get_weather", {"city": "San Francisco", "metric": "celsius"}),
        ("register_user", {"name": "John Doe", "age": 37, "email": "john@example.com", "role": None,
                           "passed_test": True, "tags": ["a", "b"]})]


def test_a_bad_line_is_rejected_on_its_own_and_its_siblings_stand() -> None:
    text = f"{OPEN}f(a=1)\nnot a call\ng(b=[1, 2])\n\nh(x=b'z')\nk(y=1e999)\nm(1)\nn() o()\np(){CLOSE} after"
    msg = read(text)
    assert named_calls(msg) == [("f", {"a": 1}), ("g", {"b": [1, 2]}), ("p", {})]
    assert statuses(msg) == ["invalid_json"] * 5
    assert [r.raw for r in msg.rejected] == ["not a call", "h(x=b'z')", "k(y=1e999)", "m(1)", "n() o()"]
    assert msg.content == "after"


def test_with_no_call_accepted_the_first_and_last_bad_lines_carry_the_opener_and_closer() -> None:
    # An accepted call's raw is the whole envelope; with none, nothing else would hold its tags.
    text = f"{OPEN}\n not a call \n\nm(1)\n{CLOSE} after"
    msg = read(text)
    assert [r.raw for r in msg.rejected] == [f"{OPEN}\n not a call ", f"m(1)\n{CLOSE}"]
    assert read(f"{OPEN}<think>{CLOSE}").rejected[0].raw == f"{OPEN}<think>{CLOSE}"
    assert read(text, on_rejected="content").content == f"{OPEN}\n not a call m(1)\n{CLOSE} after"


def test_a_call_may_span_lines_inside_its_parentheses() -> None:
    msg = read(f"{OPEN}\n  f(a='x',\n    b=2)\n  g(s='line\\nbreak')\n{CLOSE}")
    assert named_calls(msg) == [("f", {"a": "x", "b": 2}), ("g", {"s": "line\nbreak"})]


@pytest.mark.parametrize("tail", ["", "\n", CLOSE])
def test_the_closer_is_optional_at_the_end(tail: str) -> None:
    assert named_calls(read(f"{OPEN}f(a=1)\ng(){tail}")) == [("f", {"a": 1}), ("g", {})]


@pytest.mark.parametrize("cut", ["g(b=", "g(b='x", "weather.g"])
def test_the_last_line_cut_off_is_truncated(cut: str) -> None:
    msg = read(f"{OPEN}f(a=1)\n{cut}")
    assert named_calls(msg) == [("f", {"a": 1})] and statuses(msg) == ["truncated"] and msg.rejected[0].raw == cut


def test_empty_block_and_tools_check() -> None:
    assert statuses(read(OPEN + CLOSE)) == ["invalid_json"]
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]
    assert statuses(read(f"{OPEN}f(a='x')\nzz(){CLOSE}", tools=tools)) == ["schema_violation", "unknown_tool"]


def test_progressive_mode_names_each_call_when_its_parenthesis_opens() -> None:
    parser = streamparse.StreamParser(FMT, emit_calls="progressive")
    parser.feed(OPEN + "bad line\nget_time")
    started = [d.tool_calls[0] for d in parser.feed("(tz='UTC')") if d.tool_calls]
    assert started[0].name == "get_time" and started[0].index == 0  # `index` counts started calls
    parser.feed(CLOSE)
    parser.close()
    assert named_calls(parser.message) == [("get_time", {"tz": "UTC"})] and statuses(parser.message) == ["invalid_json"]


def test_render_reads_back_and_detection() -> None:
    message = Message(content="Sure.", reasoning="r", tool_calls=[ToolCall("a", "f", {"k": [1, "é"], "n": None}, ""),
                                                                   ToolCall("b", "g", {}, "")])
    text = streamparse.render(message, FMT)
    assert text == "<think>r</think>Sure.<function_calls>f(k=[1, \"é\"], n=None)\ng()</function_calls>"
    parsed = parse(text, FMT)
    assert named_calls(parsed) == [("f", {"k": [1, "é"], "n": None}), ("g", {})] and parsed.content == "Sure."
    assert streamparse.detect_format("{{ '<think>' }}<function_calls>{{ c }}</function_calls>") == FMT
