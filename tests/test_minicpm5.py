"""OpenBMB MiniCPM5 (`minicpm5`): the format, and the fourth-wave Decisions for it, by example.

`<function name="N"><param name="K">V</param></function>` calls with no wrapper; a value is raw text or
a CDATA section (FORMATS.md "minicpm5"; fourth-wave Decisions 1, 2, 14, 21, 22)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from conftest import FIXTURES, SHARED, agreeing, named_calls

import streamparse
from streamparse import Message
from streamparse.bodies.tagged_params import XmlCallStreamer, parse_call
from streamparse.families.minicpm5 import BODY, FUNCTION_OPENER
from streamparse.spec import ArgumentsFragment, Envelope, ParsedCall
from streamparse.validation import ToolSet

FMT = "minicpm5"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_wave4.json"
TYPED = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "n": {"type": "integer"}, "s": {"type": "string"}, "tags": {"type": "array"}}}}}]


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 2, 3 and 7 characters in both emit modes, agree (splits fall inside
    every tag and every CDATA bracket); the parsed message is returned."""
    return agreeing(text, FMT, sizes=(1, 2, 3, 7), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def real_cases() -> list[dict[str, Any]]:
    if not CASES.exists():
        return []
    return [case for case in json.loads(CASES.read_text()) if case["format"] == FMT]


# ----------------------------------------------------------------- real outputs


def test_the_real_render_reasoning_content_and_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "minicpm5_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("I need live data.") and msg.reasoning.endswith("get_time.")
    assert msg.content == "Let me check the current weather in Paris for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


def test_the_real_render_with_python_values_and_a_cdata_string() -> None:
    msg = both_modes((FIXTURES / FMT / "minicpm5_cdata_call.txt").read_text(), tools=TOOLS)
    assert msg.rejected == [] and msg.content == ""
    (name, arguments), = named_calls(msg)
    assert name == "create_event"
    assert arguments["duration_minutes"] == 45 and arguments["all_day"] is False and arguments["location"] is None
    assert arguments["attendees"][1] == {"name": "李雷", "email": None, "optional": True}
    assert arguments["notes"] == ('Agenda:\n1. Review "KPIs" & {budget}\n2. Path C:\\temp\\plan.txt\n'
                                  "\tIndented line\nEmoji: 🚀")


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("case", real_cases(), ids=lambda c: c["case"] + ":forced" * c["thinking_forced_open"])
def test_every_real_render_parses_in_both_modes(case: dict[str, Any]) -> None:
    assert streamparse.thinking_forced_open(case["prompt_tail"], FMT) is case["thinking_forced_open"]
    msg = agreeing(case["output"], FMT, sizes=(1, 5), tools=case["tools"], prompt=case["prompt_tail"])
    expected = case["expected"]
    assert msg.content == (expected["content"] or "") and msg.reasoning == (expected["reasoning"] or "")
    assert named_calls(msg) == [(call["name"], call["arguments"]) for call in expected["tool_calls"]]
    assert msg.rejected == []


@pytest.mark.parametrize(("prompt", "forced"), [("<|im_start|>assistant\n<think>\n", True),
                                                ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
                                                ("<|im_start|>assistant\n", False)])
def test_only_the_enable_thinking_prompt_leaves_reasoning_open(prompt: str, forced: bool) -> None:
    # Decision 21.
    assert streamparse.thinking_forced_open(prompt, FMT) is forced


# ----------------------------------------------------------------- CDATA values (Decision 14)


def test_a_cdata_value_is_its_inner_text_byte_exact_whatever_tags_it_holds() -> None:
    inner = ' <param name="x">1</param>\n</function> & <![CDATA[ ]] > ]]'
    msg = both_modes(f'<function name="f"><param name="s"><![CDATA[{inner}]]></param></function>')
    assert named_calls(msg) == [("f", {"s": inner})] and msg.rejected == [] and msg.content == ""


def test_whitespace_between_the_cdata_end_and_the_param_closer_is_tolerated() -> None:
    msg = both_modes('<function name="f"><param name="s"><![CDATA[a]]> \n</param><param name="t">b</param></function>')
    assert named_calls(msg) == [("f", {"s": "a", "t": "b"})]


@pytest.mark.parametrize("after", ["x</param></function>", '<param name="t">b</param></function>', "</function>"])
def test_anything_but_whitespace_and_the_param_closer_after_the_cdata_end_is_invalid_json(after: str) -> None:
    text = f'<function name="f"><param name="s"><![CDATA[a]]>{after}'
    msg = both_modes(f"{text}\nDone.")
    assert msg.tool_calls == [] and statuses(msg) == ["invalid_json"] and msg.content == "Done."


def test_cdata_not_right_after_the_head_is_ordinary_text() -> None:
    msg = both_modes('<function name="f"><param name="s"> <![CDATA[a]]></param></function>')
    assert named_calls(msg) == [("f", {"s": " <![CDATA[a]]>"})]


def test_a_cdata_value_is_typed_by_the_schema_like_any_other() -> None:
    msg = both_modes('<function name="f"><param name="n"><![CDATA[42]]></param>'
                     '<param name="tags"><![CDATA[["a",\n "b"]]]></param></function>', tools=TYPED)
    assert named_calls(msg) == [("f", {"n": 42, "tags": ["a", "b"]})]


def test_a_cut_off_cdata_section_is_truncated_even_past_tags_that_would_close_the_call() -> None:
    # Decision 1: the call is not complete while its last value is open.
    text = 'Checking.\n<function name="f"><param name="s"><![CDATA[a</param></function>\nmore'
    msg = both_modes(text)
    assert msg.tool_calls == [] and statuses(msg) == ["truncated"] and msg.content == "Checking."
    assert msg.rejected[0].raw == text[len("Checking.\n"):]


# ----------------------------------------------------------------- plain values and calls (Decision 14)


def test_plain_values_are_byte_exact_and_typed_by_the_schema() -> None:
    msg = both_modes('<function name="f"><param name="s"> 03106 </param><param name="n">7</param>'
                     "<param name='tags'>['x', None]</param></function>", tools=TYPED)
    assert named_calls(msg) == [("f", {"s": " 03106 ", "n": 7, "tags": ["x", None]})]


def test_single_quoted_names_and_a_call_without_parameters() -> None:
    msg = both_modes("<function name='f'></function>\n<function name=\"g\">\n</function>")
    assert named_calls(msg) == [("f", {}), ("g", {})] and msg.content == ""


def test_a_repeated_parameter_keeps_the_last_value() -> None:
    msg = both_modes('<function name="f"><param name="s">a</param><param name="s">b</param></function>')
    assert named_calls(msg) == [("f", {"s": "b"})] and msg.rejected == []


def test_a_param_without_a_name_is_invalid_json() -> None:
    msg = both_modes('<function name="f"><param>a</param></function>')
    assert msg.tool_calls == [] and statuses(msg) == ["invalid_json"]


def test_a_parameter_the_schema_does_not_name_stays_a_string_and_validation_decides() -> None:
    msg = both_modes('<function name="get_time"><param name="timezone">UTC</param><param name="n">3</param></function>',
                     tools=TOOLS)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC", "n": "3"})]
    strict = [{"type": "function", "function": {"name": "g", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": False}}}]
    msg = both_modes('<function name="g"><param name="n">3</param></function>', tools=strict)
    assert statuses(msg) == ["schema_violation"]


def test_an_unknown_tool_is_rejected_by_name_and_names_are_never_remapped() -> None:
    msg = both_modes('<function name="get_weather_now"><param name="location">Paris</param></function>', tools=TOOLS)
    assert msg.tool_calls == [] and [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "get_weather_now")]


def test_a_single_arguments_parameter_is_an_ordinary_parameter() -> None:
    msg = both_modes('<function name="f"><param name="arguments">{"a": 1}</param></function>')
    assert named_calls(msg) == [("f", {"arguments": '{"a": 1}'})]


def test_tokenizer_artefacts_are_content() -> None:
    text = '<functionname="f"><param name="a">1</param></function>'
    msg = both_modes(text)
    assert msg.tool_calls == [] and msg.rejected == [] and msg.content == text


# ----------------------------------------------------------------- around calls (Decisions 1, 2)


def test_text_between_and_after_calls_is_content() -> None:
    msg = both_modes('A\n<function name="f"></function>\nB\n<function name="g"></function> C')
    assert named_calls(msg) == [("f", {}), ("g", {})] and msg.content == "A\n\nB\n C"


def test_the_function_closer_is_optional_at_the_end_once_the_last_value_is_closed() -> None:
    msg = both_modes('<function name="f"><param name="s">a</param>\n')
    assert named_calls(msg) == [("f", {"s": "a"})] and msg.rejected == []
    msg = both_modes('<function name="f"><param name="s"><![CDATA[a\nb]]></param>')
    assert named_calls(msg) == [("f", {"s": "a\nb"})] and msg.rejected == []
    msg = both_modes('<function name="f"></function><function name="g"><param name="s">Par')
    assert named_calls(msg) == [("f", {})] and statuses(msg) == ["truncated"]
    assert msg.rejected[0].raw == '<function name="g"><param name="s">Par'


def test_a_call_inside_reasoning_stays_reasoning() -> None:
    text = '<think>\nmaybe <function name="f"></function>\n</think>\n\nNo call.'
    msg = both_modes(text)
    assert msg.tool_calls == [] and msg.content == "No call."
    assert msg.reasoning == 'maybe <function name="f"></function>'


# ----------------------------------------------------------------- render, detection


def test_render_reads_back_with_cdata_where_the_template_writes_it() -> None:
    message = Message(content="Checking.", reasoning="Think.", tool_calls=[
        streamparse.ToolCall("a", "f", {"code": "if a < b:\n    x = '&'\n", "plain": " spaced "}, ""),
        streamparse.ToolCall("b", "g", {}, "")])
    text = streamparse.render(message, FMT)
    assert text == ('<think>\nThink.\n</think>\n\nChecking.\n<function name="f"><param name="code"><![CDATA[if a < b:\n'
                    "    x = '&'\n]]></param><param name=\"plain\"> spaced </param></function>\n"
                    '<function name="g"></function>')
    again = both_modes(text)
    assert (again.reasoning, again.content, named_calls(again)) == ("Think.", "Checking.", [
        ("f", {"code": "if a < b:\n    x = '&'\n", "plain": " spaced "}), ("g", {})])


def test_the_markup_rule_wins_over_the_chatml_turn_rule() -> None:
    # Decision 22.
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
                '{{ \'<function name="\' ~ c.name ~ \'"><param name="\' ~ k ~ \'">\' }}')
    assert streamparse.detect_format(template) == FMT


@pytest.mark.parametrize("size", [1, 2, 3, 5, 64])
def test_a_bracketed_value_streams_as_the_parse_reads_it_where_the_dialect_streams_values(size: int) -> None:
    # minicpm5 sends a call's arguments whole at its close (the last repeated key wins); a dialect with
    # the same bracket that streams its values sends what the parse will produce, piece by piece.
    dialect = dataclasses.replace(BODY, repeated_key_last_wins=False)
    tools = ToolSet([{"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}])
    body = ('"f"><param name="s"><![CDATA[a</param>]]\n<param name="x">]]> \n</param>'
            '<param name="n"><![CDATA[42]]></param><param name="t">plain</param>')
    (call,) = parse_call(dialect, Envelope(FUNCTION_OPENER, body, "</function>", True, False), tools)
    assert isinstance(call, ParsedCall)
    assert call.arguments == {"s": 'a</param>]]\n<param name="x">', "n": 42, "t": "plain"}
    streamer = XmlCallStreamer(dialect, tools)
    sent = "".join(event.text for at in range(0, len(body), size) for event in streamer.feed(body[at:at + size])
                   if isinstance(event, ArgumentsFragment))
    assert sent + "}" == call.arguments_json
