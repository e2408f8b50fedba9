"""Meta Muse Glimmer (`muse_glimmer`): headed messages ` to=RECIPIENT<|message|>BODY` whose tool messages hold
one ATEM block, by example.

Recipient `self` is reasoning, `user` (or none) content, any other a tool message whose calls are named by
their `<atem:invoke name=…>` (FORMATS.md, section "muse_glimmer"; fourth-wave Decisions 1, 5, 6, 20-22).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, SHARED, agreeing, assert_every_mode_agrees, assert_nothing_lost, ids, named_calls
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, Token, parse
from streamparse.registry import get_format

FMT = "muse_glimmer"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_wave4.json"
NEXT = "<|eom|><|start|>assistant"


def invoke(name: str, **arguments: str) -> str:
    parameters = "".join(f'<atem:parameter name="{key}">{value}</atem:parameter>\n' for key, value in arguments.items())
    return f'<atem:invoke name="{name}">\n{parameters}</atem:invoke>\n'


def block(*invokes: str) -> str:
    return "<atem:function_calls>\n" + "".join(invokes) + "</atem:function_calls>"


WEATHER = block(invoke("get_weather", location="Paris, France", unit="celsius"))
TIME = block(invoke("get_time", timezone="Europe/Paris"))


def check(text: str, tools: object = TOOLS) -> Message:
    """`parse(text)`, which 1- and 3-character chunks in both emit modes must add up to exactly."""
    message = agreeing(text, FMT, sizes=(1, 3), tools=tools)
    assert_nothing_lost(text, message, FMT)
    return message


def rejected(message: Message) -> list[tuple[str, str | None]]:
    return [(r.status, r.name) for r in message.rejected]


# ----------------------------------------------------------------- real outputs

def test_reasoning_then_two_tool_messages() -> None:
    message = check((FIXTURES / FMT / "reasoning_two_calls.txt").read_text())
    assert message.reasoning.startswith("The user wants") and message.reasoning.endswith("Europe/Paris.")
    assert message.content == ""
    assert named_calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                    ("get_time", {"timezone": "Europe/Paris"})]
    assert message.tool_calls[0].id != message.tool_calls[1].id  # no ids on the wire: generated
    assert message.tool_calls[1].raw.startswith("<|start|>assistant to=get_time<|message|><atem:function_calls>")


def test_a_code_value_is_byte_exact() -> None:
    message = check((FIXTURES / FMT / "code_argument.txt").read_text())
    code = 'def f():\n    return "<b>" & 1\n\n'
    assert named_calls(message) == [("write_file", {"path": "src/a.py", "content": code})]


def test_the_answer_after_a_tool_result() -> None:
    message = check((FIXTURES / FMT / "tool_result_answer.txt").read_text())
    assert (message.reasoning, message.content) == ("The tool said 18°C, partly cloudy.",
                                                    "It is 18°C and partly cloudy in Paris.")


@pytest.mark.skipif(not CASES.exists(), reason="cases_wave4.json is not in ../shared/templates")
def test_every_real_render_and_the_render_function_agree() -> None:
    cases = [case for case in json.loads(CASES.read_text()) if case["format"] == FMT]
    assert len(cases) == 10
    for case in cases:
        message = check(case["output"], case["tools"])
        expected = case["expected"]
        assert (message.content or None, message.reasoning or None) == (expected["content"], expected["reasoning"])
        assert named_calls(message) == [(c["name"], c["arguments"]) for c in expected["tool_calls"]]
        assert message.rejected == []
        # The template's own rendering, as the family writes it back (the prompt's `<|start|>assistant` off).
        assert get_format(FMT).render(message) == case["output"]


def test_detection_and_forced_open_is_ignored() -> None:
    template = (SHARED / "templates" / "muse_glimmer_training.jinja")
    if template.exists():
        assert streamparse.detect_format(template.read_text()) == FMT
    assert streamparse.detect_format("{{ '<atem:function_calls>' }}") is None  # needs `<|eom|>` too
    assert not streamparse.thinking_forced_open("<|start|>assistant", FMT)
    text = " to=user<|message|>Hello."
    assert parse(text, FMT, thinking_forced_open=True) == parse(text, FMT)


# ----------------------------------------------------------------- recipients (Decision 5)

@pytest.mark.parametrize(("text", "content", "reasoning"), [
    (" to=user<|message|>Hi.", "Hi.", ""),
    ("<|message|>Hi.", "Hi.", ""),  # no recipient: content
    (" to=self<|message|>Think.", "", "Think."),
    (f" to=self<|message|>A{NEXT} to=self<|message|>B", "", "AB"),  # joined with nothing between
    (f" to=user<|message|>A{NEXT} to=self<|message|>R{NEXT}<|message|>B", "AB", "R"),
    ("Plain text, no header.", "Plain text, no header.", ""),  # text before the first header is content
    (f"Before {NEXT} to=user<|message|>After", "Before After", ""),
    ("Hi to=<b><|message|>x", "Hi to=<b><|message|>x", ""),  # no recipient after ` to=`: no header, text
    (" to=<|message|>x", "to=<|message|>x", ""),
])
def test_the_recipient_decides_reasoning_and_content(text: str, content: str, reasoning: str) -> None:
    message = check(text)
    assert (message.content, message.reasoning) == (content, reasoning)
    assert message.tool_calls == [] and message.rejected == []


def test_a_leading_prompt_whitespace_and_stray_terminators_are_framing() -> None:
    text = "<|start|>assistant to=self<|message|>R<|eom|>\n\n<|eot|><|eom|><|start|>assistant to=user<|message|>C"
    message = check(text)
    assert (message.content, message.reasoning) == ("C", "R")


def test_a_header_after_text_outside_messages_opens_a_message() -> None:
    message = check(f"Checking. to=get_time<|message|>{TIME}")
    assert message.content == "Checking." and named_calls(message) == [("get_time", {"timezone": "Europe/Paris"})]
    assert check("Go to=the shop now.").content == "Go to=the shop now."  # no header: prose


def test_prose_to_inside_a_body_is_text() -> None:
    message = check(" to=user<|message|>Send it to=you later, and to=me.")
    assert message.content == "Send it to=you later, and to=me."
    assert message.tool_calls == [] and message.rejected == []


def test_a_tool_header_inside_unterminated_reasoning_ends_it() -> None:
    message = check(f" to=self<|message|>I will call it. to=get_weather<|message|>{WEATHER}")
    assert message.reasoning == "I will call it."
    assert named_calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]


@pytest.mark.parametrize("inner", [" to=user<|message|>", " to=self<|message|>", " to=get_weather", " to=get weather"])
def test_a_header_in_reasoning_that_is_no_complete_tool_header_is_reasoning(inner: str) -> None:
    message = check(f" to=self<|message|>Think{inner} more")
    assert message.reasoning == f"Think{inner} more"
    assert message.tool_calls == [] and message.rejected == []


def test_a_tool_header_inside_a_content_body_is_content() -> None:
    message = check(f" to=user<|message|>Text to=get_weather<|message|>{WEATHER}")
    assert message.content == f"Text to=get_weather<|message|>{WEATHER}"
    assert message.tool_calls == []


def test_start_inside_a_body_ends_it() -> None:
    message = check(" to=self<|message|>R<|start|>assistant to=user<|message|>C")
    assert (message.content, message.reasoning) == ("C", "R")
    message = check(f" to=get_time<|message|>{TIME}<|start|>assistant to=user<|message|>Done.")
    assert named_calls(message) == [("get_time", {"timezone": "Europe/Paris"})] and message.content == "Done."


def test_a_reasoning_body_cut_off_is_reasoning_and_atem_markup_there_is_text() -> None:
    message = check(f" to=self<|message|>Maybe {WEATHER}")
    assert message.reasoning == f"Maybe {WEATHER}" and message.tool_calls == []


# ----------------------------------------------------------------- tool messages (Decision 6)

def test_the_invoke_names_the_call_whatever_the_recipient() -> None:
    message = check(f" to=functions.weather<|message|>{WEATHER}")
    assert named_calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]


def test_several_invokes_in_one_block_are_several_calls() -> None:
    text = " to=get_weather<|message|>" + block(invoke("get_weather", location="Paris"),
                                                invoke("get_time", timezone="UTC"))
    message = check(text)
    assert named_calls(message) == [("get_weather", {"location": "Paris"}), ("get_time", {"timezone": "UTC"})]


def test_a_doubled_dotted_name_is_kept_as_written() -> None:
    text = " to=get_weather.get_weather<|message|>" + block(invoke("get_weather.get_weather", location="Paris"))
    assert rejected(check(text)) == [("unknown_tool", "get_weather.get_weather")]
    assert named_calls(check(text, tools=None)) == [("get_weather.get_weather", {"location": "Paris"})]


def test_values_are_typed_by_the_schema_and_strings_stay_raw() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "ok": {"type": "boolean"}, "tags": {"type": "array"}, "zip": {"type": "string"},
        "none": {"type": ["string", "null"]}, "json": {"type": "string"}}}}}]
    text = " to=f<|message|>" + block(invoke("f", n="18", ok="true", tags='["a", 1]', zip="03106", none="null",
                                             json='{"a": 1}'))
    assert named_calls(check(text, tools)) == [("f", {"n": 18, "ok": True, "tags": ["a", 1], "zip": "03106",
                                                      "none": None, "json": '{"a": 1}'})]


def test_a_repeated_parameter_keeps_the_last_value() -> None:
    text = ' to=get_time<|message|><atem:function_calls>\n<atem:invoke name="get_time">\n' \
        '<atem:parameter name="timezone">UTC</atem:parameter>\n<atem:parameter name="timezone">Europe/Paris' \
        '</atem:parameter>\n</atem:invoke>\n</atem:function_calls>'
    assert named_calls(check(text)) == [("get_time", {"timezone": "Europe/Paris"})]


@pytest.mark.parametrize("body", [
    "",
    "Paris, France",
    '{"location": "Paris"}',
    f"Sure. {WEATHER}",
    f"{WEATHER} and more",
    "<atem:function_calls>\n</atem:function_calls>",
    "<atem:function_calls>no invoke</atem:function_calls>",
])
def test_a_tool_message_that_is_not_one_block_of_invokes_is_invalid_json(body: str) -> None:
    text = f" to=get_weather<|message|>{body}<|eom|><|start|>assistant to=user<|message|>After."
    message = check(text)
    assert rejected(message) == [("invalid_json", None)]
    assert message.content == "After." and message.tool_calls == []
    assert message.rejected[0].raw == f" to=get_weather<|message|>{body}<|eom|>"


def test_text_between_invokes_inside_the_block_is_content() -> None:
    text = " to=get_weather<|message|><atem:function_calls>\n" + invoke("get_time", timezone="UTC") \
        + "</atem:invoke>\n" + invoke("get_weather", location="Paris") + " and so on \n</atem:function_calls>"
    message = check(f" to=user<|message|>Before.{NEXT}{text}{NEXT} to=user<|message|>After.")
    assert named_calls(message) == [("get_time", {"timezone": "UTC"}), ("get_weather", {"location": "Paris"})]
    assert message.content == "Before.</atem:invoke>and so onAfter." and message.rejected == []


def test_whitespace_around_the_block_is_framing() -> None:
    message = check(f" to=get_time<|message|>\n  {TIME}\n\n")
    assert named_calls(message) == [("get_time", {"timezone": "Europe/Paris"})] and message.rejected == []


# ----------------------------------------------------------------- cut off (Decision 1)

@pytest.mark.parametrize(("cut", "status"), [
    (' to=get_time<|message|><atem:function_calls>\n<atem:invoke name="get_time">\n'
     '<atem:parameter name="timezone">Europe/Paris</atem:parameter>\n', None),  # closers optional at the end
    (' to=get_time<|message|><atem:function_calls>\n<atem:invoke name="get_time">\n'
     '<atem:parameter name="timezone">Europe/Paris</atem:parameter>\n</atem:invoke>\n', None),
    (' to=get_time<|message|><atem:function_calls>\n<atem:invoke name="get_time">\n'
     '<atem:parameter name="timezone">Europe/Pa', "truncated"),
    (' to=get_time<|message|><atem:function_calls>\n<atem:invoke name="get_ti', "truncated"),
    (" to=get_time<|message|><atem:func", "truncated"),
    (f" to=get_time<|message|>{TIME[:-len('</atem:function_calls>')]}</atem:fun", None),  # the block's closer cut

    (" to=get_time<|message|>", "truncated"),
    (" to=get_time", "truncated"),  # a tool header cut off
])
def test_a_tool_message_cut_off(cut: str, status: str | None) -> None:
    message = check(cut)
    if status is None:
        assert named_calls(message) == [("get_time", {"timezone": "Europe/Paris"})] and message.rejected == []
    else:
        assert [s for s, _ in rejected(message)] == [status] and message.tool_calls == []


def test_calls_completed_before_a_cut_element_stand() -> None:
    text = " to=get_time<|message|><atem:function_calls>\n" + invoke("get_time", timezone="UTC") + "<atem:inv"
    message = check(text)
    assert named_calls(message) == [("get_time", {"timezone": "UTC"})] and rejected(message) == [("truncated", None)]


@pytest.mark.parametrize("cut", [" to=", " to=se", " to=us", "<|start|>assistant"])
def test_a_header_that_could_still_become_self_or_user_is_framing_when_cut(cut: str) -> None:
    message = check(cut)
    assert message == Message(content="", reasoning="", tool_calls=[], rejected=[])


# ----------------------------------------------------------------- streaming

def test_content_and_reasoning_stream_before_their_terminators() -> None:
    parser = streamparse.StreamParser(format=FMT)
    deltas = parser.feed(" to=self<|message|>Thinking hard")
    assert "".join(d.reasoning for d in deltas) == "Thinking hard"
    deltas = parser.feed("<|eom|><|start|>assistant to=user<|message|>The answer")
    assert "".join(d.content for d in deltas) == "The answer"


def test_token_aware_mode_reads_the_special_tokens_and_takes_look_alikes_as_text() -> None:
    tokens = [Token(" to=self"), Token("<|message|>", special=True), Token("R <|eom|> r"),
              Token("<|eom|>", special=True), Token("<|start|>", special=True), Token("assistant to=get_time"),
              Token("<|message|>", special=True), Token(TIME)]
    parser = streamparse.StreamParser(format=FMT, tools=TOOLS, id_factory=ids, special_tokens="require")
    for token in tokens:
        parser.feed(token)
    parser.close()
    assert parser.message.reasoning == "R <|eom|> r"
    assert named_calls(parser.message) == [("get_time", {"timezone": "Europe/Paris"})]
    assert parser.message.tool_calls[0].id == "call_0"


@given(st.data())
def test_any_chunking_of_the_decisions_agrees(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from([
        f" to=self<|message|>I will call it. to=get_weather<|message|>{WEATHER}{NEXT} to=get_time<|message|>{TIME}",
        f" to=self<|message|>Think to=user<|message|> more{NEXT} to=user<|message|>Done",
        f" to=get_weather<|message|>Sure. {WEATHER}{NEXT} to=user<|message|>After",
        f"<|message|>Hi{NEXT} to=get_time<|message|>" + TIME[:-30],
    ]))
    assert_every_mode_agrees(data, text, FMT, TOOLS)
