"""Apertus: the format, and the Decisions of FORMATS.md for it, by example.

`<|inner_prefix|>R<|inner_suffix|>C<|tools_prefix|>[{"NAME": {arguments}}, …]<|tools_suffix|>`; the
call token ends unclosed reasoning."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, ids

import streamparse
from streamparse import Message, Token, parse
from streamparse.registry import get_format

FMT = "apertus"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
OPEN, CLOSE = "<|tools_prefix|>", "<|tools_suffix|>"


def both_modes(text: str, **options: object) -> Message:
    """parse(), and 1-character streams in both emit modes, agree; the parsed message is returned."""
    return agreeing(text, FMT, **options)


def named(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def test_the_call_token_ends_unclosed_reasoning() -> None:
    # The template writes <|tools_prefix|> right after the reasoning text (its reasoning_tool_call render).
    msg = both_modes((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.content == ""
    assert named(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                          ("get_time", {"timezone": "Europe/Paris"})]


def test_reasoning_content_and_a_trailing_assistant_end() -> None:
    # Decision 29: a trailing <|assistant_end|> is framing.
    msg = both_modes((FIXTURES / FMT / "tool_result_answer.txt").read_text())
    assert msg.reasoning == "The tools returned 18°C, partly cloudy, and 14:05."
    assert msg.content == "It is 18°C and partly cloudy in Paris, where the local time is 14:05."


def test_a_real_render_reads_back_and_render_writes_it() -> None:
    text = ('<|inner_prefix|>I need live data.<|inner_suffix|>Let me check.<|tools_prefix|>[{"get_weather": '
            '{"location": "Paris, France"}}, {"get_time": {"timezone": "Europe/Paris"}}]<|tools_suffix|>')
    msg = both_modes(text, tools=TOOLS)
    assert (msg.reasoning, msg.content) == ("I need live data.", "Let me check.")
    assert streamparse.render(msg, FMT) == text


def test_each_element_has_exactly_one_member_with_an_object_value() -> None:
    # Decision 28, each element on its own; decision 3: a JSON string holding an object is accepted.
    text = OPEN + '[{"f": {"a": 1}, "g": {}}, {"g": 3}, {}, {"h": "{\\"b\\": 2}"}, {"k": {}}]' + CLOSE
    msg = both_modes(text)
    assert named(msg) == [("h", {"b": 2}), ("k", {})]
    assert [(r.status, r.name) for r in msg.rejected] == [("invalid_json", None), ("invalid_json", "g"),
                                                          ("invalid_json", None)]
    assert msg.rejected[0].errors[0].startswith("$[0]: a call object must have exactly one member")


def test_the_suffix_is_optional_at_the_end_once_the_list_is_complete() -> None:
    # Decisions 29 and 21.
    assert named(both_modes(OPEN + '[{"f": {}}]')) == [("f", {})]
    msg = both_modes(OPEN + '[{"f": {}}]<|assistant_end|>')
    assert named(msg) == [("f", {})] and msg.content == "" and msg.rejected == []
    msg = both_modes(OPEN + '[{"f": {}}, {"g": {"a": ')
    assert named(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["truncated"]


def test_a_closer_after_the_calls_is_content_verbatim() -> None:
    # Decision 12: reasoning ended at the call token for good; the later closer has no opener.
    msg = both_modes('<|inner_prefix|>plan <|tools_prefix|>[{"f": {}}]<|tools_suffix|> more<|inner_suffix|>Answer.')
    assert msg.reasoning == "plan" and named(msg) == [("f", {})]
    assert msg.content == "more<|inner_suffix|>Answer."


def test_forced_open_starts_inside_the_reasoning() -> None:
    # Decision 30.
    msg = both_modes("plan<|inner_suffix|>Answer.", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("plan", "Answer.")


def test_arguments_stream_per_element() -> None:
    text = OPEN + '[{"f": {"a": "x"}}, {"g": {"b": [1, 2]}}]' + CLOSE
    parser = streamparse.StreamParser(FMT, emit_calls="progressive", id_factory=ids)
    pieces = [p for ch in text[:text.index("[1, 2]")] for d in parser.feed(ch) for p in d.tool_calls]
    assert [(p.index, p.name) for p in pieces if p.name] == [(0, "f"), (1, "g")]
    assert "".join(p.arguments for p in pieces if p.index == 0) == '{"a": "x"}'


def test_special_tokens() -> None:
    assert set(get_format(FMT).special) == {"<|inner_prefix|>", "<|inner_suffix|>", OPEN, CLOSE, "<|assistant_end|>"}
    tokens = [Token(OPEN, special=True), Token('[{"f": {}}]'), Token(CLOSE, special=True), Token(f"Say {OPEN}.")]
    msg = parse(tokens, FMT, special_tokens="require")
    assert named(msg) == [("f", {})] and msg.content == f"Say {OPEN}."
