"""Upstage Solar Open 100B (`solar_open`): the format and its Decisions (14, 1, 2, 23), by example.

Every example is checked in both emit modes and under 1- and 5-character chunks (`read`): the
streamed message is `parse()`'s and the deltas add up to it.
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, run_stream

import streamparse
from streamparse import Message, Token, ToolCall, parse

FMT = "solar_open"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
BEGIN, THINK, CONTENT, END = "<|begin|>assistant", "<|think|>", "<|content|>", "<|end|>"
CALLS, CALLS_END = "<|tool_calls|>", "<|calls|>"


def call(call_id: str, name: str, arguments: str = "{}", end: str = "<|tool_call:end|>") -> str:
    return f"<|tool_call:begin|>{call_id}<|tool_call:name|>{name}<|tool_call:args|>{arguments}{end}"


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 5), **options)


def calls_of(message: Message) -> list[tuple[str, str, dict[str, object]]]:
    return [(c.id, c.name, c.arguments) for c in message.tool_calls]


def test_reasoning_then_a_call_with_the_models_id() -> None:
    msg = read((FIXTURES / FMT / "reasoning_tool_call.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("I need live data.") and msg.content == ""
    assert calls_of(msg) == [("X7kP2mQ9z", "get_weather", {"location": "Paris, France", "unit": "celsius"})]


def test_parallel_calls_keep_their_ids_and_complex_arguments_read_exactly() -> None:
    msg = read((FIXTURES / FMT / "tool_calls_parallel.txt").read_text(), tools=TOOLS)
    assert [(c.id, c.name) for c in msg.tool_calls] == [("X7kP2mQ9z", "get_weather"), ("Hq3Lw8Rt5", "get_time")]
    msg = read((FIXTURES / FMT / "tool_call_complex_args.txt").read_text(), tools=TOOLS)
    assert msg.tool_calls[0].arguments["title"] == 'Team "sync" — Q3 planning'
    assert msg.tool_calls[0].id == "Bn6Vc1Zx4"


def test_progressive_mode_sends_the_written_id_with_the_name() -> None:
    text = CALLS + call("Ab3", "get_time", '{"timezone": "Europe/Paris"}') + CALLS_END
    parser = streamparse.StreamParser(FMT, emit_calls="progressive")
    first = [d for ch in text for d in parser.feed(ch) if d.tool_calls]
    assert first[0].tool_calls[0].id == "Ab3" and first[0].tool_calls[0].name == "get_time"


def test_messages_framing_and_a_later_think_message_joined_in_output_order() -> None:
    text = (f"{THINK}one{END}{BEGIN}{CONTENT}Hi{END}{BEGIN}{THINK} two{END}{BEGIN}{CONTENT} there{END}"
            + BEGIN + CALLS + call("i1", "get_time", '{"timezone": "UTC"}') + CALLS_END)
    msg = read(text)
    assert (msg.reasoning, msg.content) == ("one two", "Hi there")
    assert calls_of(msg) == [("i1", "get_time", {"timezone": "UTC"})]


def test_content_after_calls_and_text_inside_the_calls_message() -> None:
    msg = read(f"{CALLS} note {call('a', 'f')}\n{CALLS_END}{BEGIN}{CONTENT}done")
    assert msg.content == "note done" and calls_of(msg) == [("a", "f", {})]


def test_empty_id_is_generated_and_whitespace_around_it_is_framing() -> None:
    msg = read(CALLS + call("  ", "f") + call(" k9 ", "g"))
    assert [c.id for c in msg.tool_calls] == ["call_0", "k9"]


@pytest.mark.parametrize("tail", ["", "<|tool_call:end|>", "<|tool_call:end|><|calls|>"])
def test_closers_are_optional_at_the_end_when_the_call_is_complete(tail: str) -> None:
    msg = read(CALLS + call("a", "f", '{"x": 1}', end="") + tail)
    assert calls_of(msg) == [("a", "f", {"x": 1})] and msg.rejected == []


@pytest.mark.parametrize("cut", ['<|tool_call:begin|>', '<|tool_call:begin|>a<|tool_call:name|>f',
                                 '<|tool_call:begin|>a<|tool_call:name|>f<|tool_call:args|>{"x": [1'])
def test_a_call_cut_off_is_truncated_and_earlier_calls_stand(cut: str) -> None:
    msg = read(CALLS + call("a", "f") + cut)
    assert calls_of(msg) == [("a", "f", {})]
    assert [r.status for r in msg.rejected] == ["truncated"] and msg.rejected[0].raw == cut


def test_malformed_calls_are_rejected_with_their_text() -> None:
    bad = call("a", "f", "{not json}")
    no_name = "<|tool_call:begin|>a<|tool_call:args|>{}<|tool_call:end|>"
    msg = read(CALLS + bad + no_name + call("b", "g"))
    assert [r.status for r in msg.rejected] == ["invalid_json", "invalid_json"]
    assert [r.raw for r in msg.rejected] == [bad, no_name] and calls_of(msg) == [("b", "g", {})]


def test_unknown_tools_and_schema_checks() -> None:
    msg = read(CALLS + call("a", "nope") + call("b", "get_weather", '{"unit": "kelvin"}'), tools=TOOLS)
    assert [r.status for r in msg.rejected] == ["unknown_tool", "schema_violation"]


def test_a_closer_inside_a_json_string_does_not_end_the_call() -> None:
    args = '{"q": "<|tool_call:end|><|calls|>"}'
    assert calls_of(read(CALLS + call("a", "f", args))) == [("a", "f", {"q": "<|tool_call:end|><|calls|>"})]


def test_render_reads_back_and_token_aware_mode() -> None:
    message = Message(content="c", reasoning="r", tool_calls=[ToolCall("x1", "f", {"k": [1, "é"]}, "")])
    text = streamparse.render(message, FMT)
    parsed = parse(text, FMT)
    assert (parsed.content, parsed.reasoning, calls_of(parsed)) == ("c", "r", [("x1", "f", {"k": [1, "é"]})])
    # Spelled by ordinary tokens the markers are text; as special tokens they count.
    assert parse(text, FMT, special_tokens="require").tool_calls == []
    tokens = [Token(p, special=p.startswith("<|") and p != BEGIN) for p in
              [THINK, "r", END, BEGIN, CONTENT, "c", END, BEGIN, CALLS, "<|tool_call:begin|>", "x1",
               "<|tool_call:name|>", "f", "<|tool_call:args|>", '{"k": [1, "é"]}', "<|tool_call:end|>", CALLS_END]]
    _, streamed = run_stream([tokens], format=FMT, special_tokens="require", id_factory=lambda k: f"c{k}")
    assert calls_of(streamed) == [("x1", "f", {"k": [1, "é"]})] and streamed.content == "c"


def test_no_prompt_ends_inside_reasoning_and_the_flag_is_ignored() -> None:
    # The low-effort prompt writes an empty, closed think message (Decision 22: the flag is ignored).
    assert read(f"{CONTENT}Hi", thinking_forced_open=True).content == "Hi"
    assert streamparse.thinking_forced_open("<|begin|>assistant", FMT) is False
    assert streamparse.thinking_forced_open("<|begin|>assistant<|think|><|end|><|begin|>assistant", FMT) is False
