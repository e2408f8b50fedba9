"""ai-sage GigaChat 3 / 3.1 (`gigachat3`): one JSON call object after `<|message_sep|>⏎⏎function
call<|role_sep|>⏎` (3) or `<|function_call|>` (3.1), ending where the object ends (Decision 18)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "gigachat3"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
WEATHER = ("get_weather", {"location": "Paris, France", "unit": "celsius"})
CALL_MESSAGE = "<|message_sep|>\n\nfunction call<|role_sep|>\n"


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


@pytest.mark.parametrize("name", ["gigachat3_call_message", "gigachat31_function_call"])
def test_the_real_renders_of_content_then_a_call(name: str) -> None:
    msg = both_modes((FIXTURES / FMT / f"{name}.txt").read_text(), tools=TOOLS)
    assert msg.content == "Let me check the current weather in Paris for you." and named_calls(msg) == [WEATHER]


def test_text_after_the_object_is_content_and_a_trailing_message_sep_is_framing() -> None:
    msg = both_modes('<|function_call|>{"name": "f", "arguments": {}} Then more.<|message_sep|>')
    assert (msg.content, named_calls(msg)) == ("Then more.", [("f", {})])
    msg = both_modes("Hello.<|message_sep|>\n\n")
    assert msg.content == "Hello." and msg.rejected == []
    # Anywhere else it is text: the start of the call message's opener cut off by the end, a lone token.
    for text in ("Hello.<|message_sep|>\n\nfunction call", "a <|message_sep|> b", "<|message_sep|>\n\nX"):
        msg = both_modes(text)
        assert msg.content == text and msg.tool_calls == [] and msg.rejected == []


def test_only_the_last_of_several_message_seps_is_trailing_so_one_at_most_is_held() -> None:
    # A separator followed by another is not at the end: it is content (only whitespace may follow a
    # trailing one), which keeps what the parser holds back bounded however many come.
    sep = "<|message_sep|>"
    assert both_modes(f"Hi{sep}{sep}").content == f"Hi{sep}"
    assert both_modes(f"Hi{sep}\n\n{sep}\n").content == f"Hi{sep}"
    msg = both_modes(f"{sep}{CALL_MESSAGE}" + '{"name": "f", "arguments": {}}')
    assert (msg.content, named_calls(msg)) == (sep, [("f", {})])
    parser = streamparse.StreamParser(FMT)
    held = []
    for _ in range(50):
        parser.feed(sep)
        held.append(parser.held_back)
    parser.close()
    assert max(held) == len(sep) and parser.message.content == sep * 49


def test_several_call_messages_are_several_calls_and_the_words_alone_are_content() -> None:
    text = (CALL_MESSAGE + '{"name": "f", "arguments": {"a": 1}}' + CALL_MESSAGE + '{"name": "g", "arguments": {}}')
    assert named_calls(both_modes(text)) == [("f", {"a": 1}), ("g", {})]
    msg = both_modes('function call\n{"name": "f", "arguments": {}}')
    assert msg.tool_calls == [] and msg.content.startswith("function call")


def test_cut_off_and_invalid_objects() -> None:
    msg = both_modes('<|function_call|>{"name": "f", "arguments": {"a": ')
    assert [r.status for r in msg.rejected] == ["truncated"]
    # Invalid before the output ends: invalid_json, though its brackets never balance.
    msg = both_modes('<|function_call|>{"name": "f", "arguments": {oops}')
    assert [(r.status, r.raw) for r in msg.rejected] == [
        ("invalid_json", '<|function_call|>{"name": "f", "arguments": {oops}')]


def test_render_reads_back_and_both_templates_are_detected() -> None:
    message = streamparse.parse((FIXTURES / FMT / "gigachat31_function_call.txt").read_text(), FMT)
    again = both_modes(streamparse.render(message, FMT))
    assert (again.content, named_calls(again)) == (message.content, named_calls(message))
    assert streamparse.detect_format("{{ 'assistant<|role_sep|>' }}{{ '<|function_call|>' }}") == FMT
    assert streamparse.detect_format("{{ 'assistant<|role_sep|>' }}{% set r = 'function call' %}") == FMT
