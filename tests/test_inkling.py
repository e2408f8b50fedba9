"""Thinking Machines Inkling (`inkling`): blocks `<|message_model|>` [header text] KIND BODY `<|end_message|>`, by
example (no chat template exists: the wire is FORMATS.md's, section "inkling", and fourth-wave Decisions 1,
16, 20-22).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, assert_every_mode_agrees, assert_nothing_lost, named_calls
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, Token, parse
from streamparse.registry import get_format

FMT = "inkling"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
MODEL, END, END_SAMPLING = "<|message_model|>", "<|end_message|>", "<|content_model_end_sampling|>"
THINKING, TEXT, INVOKE = "<|content_thinking|>", "<|content_text|>", "<|content_invoke_tool_json|>"
WEATHER = '{"name":"get_weather","args":{"location":"Paris, France"}}'
TIME = '{"name":"get_time","args":{"timezone":"Europe/Paris"}}'
WIRE = (f"{THINKING}reasoning{END}{MODEL}{TEXT}content{END}{MODEL}{INVOKE}{WEATHER}{END}"
        f"{MODEL}{INVOKE}{TIME}{END}")  # FORMATS.md's wire block


def check(text: str, tools: object = TOOLS, **options: object) -> Message:
    """`parse(text)`, which 1- and 5-character chunks in both emit modes must add up to exactly."""
    message = agreeing(text, FMT, sizes=(1, 5), tools=tools, **options)
    assert_nothing_lost(text, message, FMT)
    return message


def rejected(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


# ----------------------------------------------------------------- the wire (FORMATS.md and fixtures)

def test_the_wire_block_of_formats_md() -> None:
    message = check(WIRE)
    assert (message.reasoning, message.content) == ("reasoning", "content")
    assert named_calls(message) == [("get_weather", {"location": "Paris, France"}),
                                    ("get_time", {"timezone": "Europe/Paris"})]
    assert message.tool_calls[0].id != message.tool_calls[1].id and message.rejected == []  # ids generated
    assert message.tool_calls[0].arguments_json == '{"location":"Paris, France"}'  # as written


@pytest.mark.parametrize("name", ["reasoning_text_two_calls.txt", "named_header_call.txt", "text_answer.txt"])
def test_the_fixtures_read_and_render_back(name: str) -> None:
    text = (FIXTURES / FMT / name).read_text()
    message = check(text)
    assert message.rejected == []
    again = parse(get_format(FMT).render(message), FMT, tools=TOOLS)
    assert (again.content, again.reasoning, named_calls(again)) == (message.content, message.reasoning,
                                                                     named_calls(message))


def test_header_text_before_a_kind_marker_is_framing() -> None:
    message = check((FIXTURES / FMT / "named_header_call.txt").read_text())
    assert message.reasoning == "I will write the file." and message.content == ""
    assert named_calls(message) == [("write_file", {"path": "src/a.py", "content": 'def f():\n    return "<b>" & 1\n'})]


def test_render_writes_the_blocks_after_the_prompts_opener() -> None:
    message = parse(WIRE, FMT)
    assert get_format(FMT).render(message) == WIRE


def test_no_detection_and_forced_open_from_the_prompt() -> None:
    assert streamparse.detect_format("{{ '<|message_model|><|content_invoke_tool_json|>' }}") is None
    assert streamparse.thinking_forced_open(f"<|message_user|>hi{END}{MODEL}{THINKING}", FMT)
    assert not streamparse.thinking_forced_open(f"<|message_user|>hi{END}{MODEL}{TEXT}", FMT)
    assert not streamparse.thinking_forced_open(f"<|message_user|>hi{END}{MODEL}", FMT)


# ----------------------------------------------------------------- kinds and blocks (Decision 16)

@pytest.mark.parametrize(("text", "content", "reasoning"), [
    (f"{TEXT}Hi.{END}", "Hi.", ""),
    ("Bare text.", "Bare text.", ""),  # no kind marker: content
    (f"Bare text.{END}{MODEL}{TEXT}More", "Bare text.More", ""),
    (f"{MODEL}runs to the end{END_SAMPLING}", "runs to the end", ""),
    (f"{THINKING}A{END}{MODEL}{THINKING}B{END}{MODEL}{TEXT}C{END}{MODEL}{TEXT}D", "CD", "AB"),  # joined in order
    (f"{TEXT}C{END}{MODEL}{THINKING}R", "C", "R"),  # blocks in any order; reasoning cut off is reasoning
    (f"{TEXT}A{TEXT}B{END}", "AB", ""),  # a second text marker inside a text block is framing
    (f"{THINKING}R{TEXT}C", "C", "R"),  # a kind marker ends the open block
    (f"{MODEL}<|content_invoke_tool_text|>get_weather(location='Paris'){END}", "get_weather(location='Paris')", ""),
    (f"{MODEL}<|content_tool_error|>no such tool{END}", "no such tool", ""),
    (f"{TEXT}A{END}\n\n{END}{MODEL}{TEXT}B", "AB", ""),  # whitespace and stray terminators between blocks
])
def test_the_kind_marker_decides_reasoning_and_content(text: str, content: str, reasoning: str) -> None:
    message = check(text)
    assert (message.content, message.reasoning) == (content, reasoning)
    assert message.tool_calls == [] and message.rejected == []


def test_a_call_block_ends_unclosed_reasoning() -> None:
    message = check(f"{THINKING}Let me look it up.{INVOKE}{WEATHER}{END}")
    assert message.reasoning == "Let me look it up."
    assert named_calls(message) == [("get_weather", {"location": "Paris, France"})]


@pytest.mark.parametrize(("body", "arguments"), [
    ('{"name": "get_time", "args": {"timezone": "UTC"}}', {"timezone": "UTC"}),
    ('{"name": "get_time", "arguments": {"timezone": "UTC"}}', {"timezone": "UTC"}),  # lenient key
    ('{"name": "get_time"}', {}),  # no args: {}
    ('{"name": "get_time", "args": {"timezone": "UTC"}, "id": "x1", "meta": 1}', {"timezone": "UTC"}),  # ignored
    ('\n {"name": "get_time", "args": "{\\"timezone\\": \\"UTC\\"}"} \n', {"timezone": "UTC"}),  # a JSON string
])
def test_a_call_body_is_one_object_with_a_string_name_and_object_args(body: str, arguments: object) -> None:
    message = check(f"{MODEL}{INVOKE}{body}{END}", tools=None)
    assert named_calls(message) == [("get_time", arguments)] and message.rejected == []


@pytest.mark.parametrize("body", [
    "", "get_time", '{"args": {}}', '{"name": 3, "args": {}}', '{"name": "get_time", "args": [1]}',
    '{"name": "get_time", "args": {}} trailing', '[{"name": "get_time", "args": {}}]',
    '{"name": "get_time", "args": {}, "arguments": {}}', '{"name": "get_time", "args": {}}}',
])
def test_anything_else_in_a_call_block_is_invalid_json(body: str) -> None:
    message = check(f"{MODEL}{INVOKE}{body}{END}{MODEL}{TEXT}After")
    assert rejected(message) == ["invalid_json"] and message.tool_calls == [] and message.content == "After"


def test_unknown_tools_are_rejected() -> None:
    message = check(f"{MODEL}{INVOKE}" + '{"name": "python", "args": {"code": "1"}}')
    assert rejected(message) == ["unknown_tool"] and message.rejected[0].name == "python"


# ----------------------------------------------------------------- cut off (Decision 1)

@pytest.mark.parametrize(("text", "status"), [
    (f"{MODEL}{INVOKE}{TIME}", None),  # `<|end_message|>` is optional when the object is complete
    (f"{MODEL}{INVOKE}{TIME[:-5]}", "truncated"),
    (f"{MODEL}{INVOKE}", "truncated"),
    (f"{MODEL}{INVOKE}  ", "truncated"),
])
def test_a_call_block_cut_off(text: str, status: str | None) -> None:
    message = check(text)
    if status is None:
        assert named_calls(message) == [("get_time", {"timezone": "Europe/Paris"})] and message.rejected == []
    else:
        assert rejected(message) == [status] and message.tool_calls == []


@pytest.mark.parametrize("cut", [MODEL, f"{MODEL}get_time", "get_time"])
def test_header_text_cut_off_by_the_end_is_content(cut: str) -> None:
    assert check(cut).content == cut.removeprefix(MODEL)


# ----------------------------------------------------------------- forced open (Decision 21), streaming

def test_thinking_forced_open_starts_inside_reasoning() -> None:
    text = f"Still thinking.{END}{MODEL}{TEXT}Answer."
    assert (check(text, thinking_forced_open=True).reasoning, check(text).reasoning) == ("Still thinking.", "")
    assert check(text, thinking_forced_open=True).content == "Answer."
    # A thinking marker the model repeats at the start changes nothing.
    assert check(THINKING + text, thinking_forced_open=True).reasoning == "Still thinking."
    prompt = f"<|message_user|>hi{END}{MODEL}{THINKING}"
    assert parse(text, FMT, prompt=prompt).reasoning == "Still thinking."


def test_reasoning_and_content_stream_before_their_terminators() -> None:
    parser = streamparse.StreamParser(format=FMT)
    assert "".join(d.reasoning for d in parser.feed(f"{THINKING}Thinking hard")) == "Thinking hard"
    assert "".join(d.content for d in parser.feed(f"{END}{MODEL}{TEXT}The answer")) == "The answer"


def test_token_aware_mode_takes_look_alikes_as_text() -> None:
    tokens = [Token(THINKING, special=True), Token("R"), Token(END, special=True), Token(MODEL, special=True),
              Token(TEXT, special=True), Token(f"a {INVOKE} b"), Token(END, special=True)]
    parser = streamparse.StreamParser(format=FMT, tools=TOOLS, special_tokens="require")
    for token in tokens:
        parser.feed(token)
    parser.close()
    assert (parser.message.reasoning, parser.message.content) == ("R", f"a {INVOKE} b")
    assert parser.message.tool_calls == []


@given(st.data())
def test_any_chunking_of_the_decisions_agrees(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from([
        WIRE,
        f"Bare{END}{MODEL}get_weather{INVOKE}{WEATHER}{MODEL}{TEXT}A{TEXT}B",
        f"{THINKING}R{INVOKE}" + '{"name": "get_time", "args": [1]}' + f"{END}{MODEL}{INVOKE}{TIME[:-4]}",
    ]))
    assert_every_mode_agrees(data, text, FMT, TOOLS)


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
def test_the_grammars_accept_the_wire_and_refuse_an_unknown_tool(syntax: str) -> None:
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {key: {"type": "string"}}, "required": [key]}}}
        for name, key in (("get_weather", "location"), ("get_time", "timezone"))]
    grammar = streamparse.grammar_for(FMT, tools, syntax=syntax)  # type: ignore[arg-type]
    other = WIRE.replace("get_time", "get_date")

    def accepts(text: str) -> bool:
        if isinstance(grammar, dict):
            return structural_tag_accepts(grammar, text)
        if syntax == "gbnf":
            return gbnf_accepts(grammar, text)
        return lark_accepts(grammar, text, tuple(get_format(FMT).special))

    assert accepts(WIRE) and not accepts(other)
    # A prompt ending `<|content_thinking|>`: the output starts inside the reasoning.
    grammar = streamparse.grammar_for(FMT, tools, syntax=syntax, thinking_forced_open=True)  # type: ignore[arg-type]
    assert accepts(WIRE.removeprefix(THINKING)) and not accepts(WIRE)
