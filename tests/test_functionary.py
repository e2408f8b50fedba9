"""MeetKai Functionary medium v3.1 (`functionary_v3_1`) and v3.2 (`functionary_v3_2`): the formats
and Decision 20, by example.

Every example is checked in both emit modes and under 1- and 5-character chunks (`read`): the
streamed message is `parse()`'s and the deltas add up to it.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message, ToolCall, parse

V31, V32 = "functionary_v3_1", "functionary_v3_2"
TOOLS = json.loads((FIXTURES / V31 / "tools.json").read_text())


def read(text: str, fmt: str, **options: object) -> Message:
    return agreeing(text, fmt, sizes=(1, 5), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


# ----------------------------------------------------------------- v3.1

def test_v3_1_real_outputs() -> None:
    msg = read((FIXTURES / V31 / "content_then_tool_call.txt").read_text(), V31, tools=TOOLS)
    assert msg.content == "Let me check the current weather in Paris for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]
    msg = read((FIXTURES / V31 / "tool_calls_parallel.txt").read_text(), V31, tools=TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_time"]
    msg = read((FIXTURES / V31 / "tool_call_complex_args.txt").read_text(), V31, tools=TOOLS)
    assert msg.tool_calls[0].arguments["notes"].startswith("Agenda:\n1. Review \"KPIs\"")


def test_v3_1_python_tag_is_a_python_call_with_the_code() -> None:
    msg = read("Running it.<|python_tag|>import math\nprint(math.pi)\n", V31)
    assert msg.content == "Running it." and named_calls(msg) == [("python", {"code": "import math\nprint(math.pi)"})]


def test_v3_1_text_between_and_after_calls_is_content_and_a_closer_inside_a_string_is_not_one() -> None:
    text = 'A <function=f>{"s": "</function>"}</function> B <function=g>{}</function> C'
    msg = read(text, V31)
    assert msg.content == "A  B  C" and named_calls(msg) == [("f", {"s": "</function>"}), ("g", {})]


def test_v3_1_a_missing_closer_at_the_end_is_accepted_when_the_object_is_complete() -> None:
    assert named_calls(read('<function=f>{"a": 1}', V31)) == [("f", {"a": 1})]
    msg = read('<function=f>{"a": 1}<function=g>{}', V31)  # the next opener ends the call too
    assert named_calls(msg) == [("f", {"a": 1}), ("g", {})]


@pytest.mark.parametrize("cut", ["<function=", "<function=get_wea", '<function=f>{"a": [1'])
def test_v3_1_cut_off_calls_are_truncated_and_earlier_calls_stand(cut: str) -> None:
    msg = read("<function=g>{}</function>" + cut, V31)
    assert named_calls(msg) == [("g", {})] and statuses(msg) == ["truncated"] and msg.rejected[0].raw == cut


def test_v3_1_malformed_calls_are_rejected_with_their_text() -> None:
    for bad in ["<function=f>{a: 1}</function>", "<function=f>[1]</function>", "<function=f{}</function>",
                '<function=f>{"a": 1} extra</function>']:
        msg = read(bad + "<function=g>{}</function>", V31)
        assert statuses(msg) == ["invalid_json"] and msg.rejected[0].raw == bad, bad
        assert named_calls(msg) == [("g", {})]


def test_v3_1_tools_check() -> None:
    msg = read('<function=nope>{}</function><function=get_time>{"timezone": 3}</function>', V31, tools=TOOLS)
    assert statuses(msg) == ["unknown_tool", "schema_violation"]


# ----------------------------------------------------------------- v3.2

def test_v3_2_real_outputs() -> None:
    msg = read((FIXTURES / V32 / "content_then_tool_call.txt").read_text(), V32, tools=TOOLS)
    assert msg.content == "Let me check the current weather in Paris for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]
    msg = read((FIXTURES / V32 / "tool_calls_parallel.txt").read_text(), V32, tools=TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_time"]
    msg = read((FIXTURES / V32 / "tool_call_complex_args.txt").read_text(), V32, tools=TOOLS)
    assert msg.tool_calls[0].arguments["attendees"][1]["name"] == "李雷"


def test_v3_2_recipients_route_messages_and_content_messages_join() -> None:
    msg = read('all\nFirst. >>> get_time \n{"timezone": ">>>UTC"}\n>>>all\nSecond.', V32)
    assert msg.content == "First. Second." and named_calls(msg) == [("get_time", {"timezone": ">>>UTC"})]


def test_v3_2_a_header_cut_off_is_a_truncated_call_or_nothing_for_all() -> None:
    msg = read("all\nHi>>>get_ti", V32)
    assert msg.content == "Hi" and statuses(msg) == ["truncated"] and msg.rejected[0].name == "get_ti"
    for tail in (">>>", ">>>al", ">>>all"):
        msg = read("all\nHi" + tail, V32)
        assert msg.content == "Hi" and msg.rejected == [] and msg.tool_calls == [], tail


def test_v3_2_a_body_cut_off_is_truncated_and_earlier_calls_stand() -> None:
    msg = read('f\n{}>>>g\n{"a": "b', V32)
    assert named_calls(msg) == [("f", {})] and statuses(msg) == ["truncated"]


def test_v3_2_a_body_that_is_not_one_object_is_invalid_json() -> None:
    for bad in ["f\nnot json", "f\n[1, 2]", 'f\n{"a": 1} and more', "f\n"]:
        msg = read(bad + ">>>g\n{}", V32)
        assert statuses(msg) == ["invalid_json"] and named_calls(msg) == [("g", {})], bad


def test_v3_2_progressive_mode_names_the_call_at_its_newline() -> None:
    parser = streamparse.StreamParser(V32, emit_calls="progressive")
    assert parser.feed("get_time") == []
    started = [d for d in parser.feed('\n{"timezone": "U') if d.tool_calls]
    assert started and started[0].tool_calls[0].name == "get_time"


@pytest.mark.parametrize("fmt", [V31, V32])
def test_render_reads_back(fmt: str) -> None:
    message = Message(content="Checking.", tool_calls=[ToolCall("a", "f", {"k": [1, "é"]}, ""),
                                                        ToolCall("b", "python", {"code": "print(1)"}, "")])
    parsed = parse(streamparse.render(message, fmt), fmt)
    assert parsed.content == "Checking."
    assert named_calls(parsed) == [("f", {"k": [1, "é"]}), ("python", {"code": "print(1)"})]


def test_render_writes_the_templates_wire() -> None:
    message = Message(content="Hi", tool_calls=[ToolCall("a", "f", {"k": 1}, "")])
    assert streamparse.render(message, V31) == 'Hi<function=f>{"k": 1}</function>'
    assert streamparse.render(message, V32) == 'all\nHi>>>f\n{"k": 1}'
