"""Tencent Hunyuan Hy3 (`hy_v3`): the format, and the third-wave Decisions for it, by example.

`<tool_calls>` around `<tool_call>NAME<tool_sep>` calls with GLM's `<arg_key>`/`<arg_value>` pairs;
the prompt ends `<think>` (reasoning_effort low/high: forced open) or `<think></think>`."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, SHARED, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "hy_v3"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
SHARED_TEMPLATE = SHARED / "templates" / "Hy3-preview.jinja"
TYPED = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "days": {"type": "integer"}, "city": {"type": "string"}, "tags": {"type": "array"}}}}}]


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 3 and 7 characters in both emit modes, agree (splits fall inside
    every delimiter); the parsed message is returned."""
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_the_real_render_forced_open_reasoning_content_and_two_calls() -> None:
    text = (FIXTURES / FMT / "hy3_reasoning_two_calls.txt").read_text()
    prompt = (FIXTURES / FMT / "hy3_reasoning_two_calls.prompt").read_text()
    msg = both_modes(text, tools=TOOLS, prompt=prompt)
    assert msg.reasoning.startswith("I need live data.") and msg.reasoning.endswith("get_time.")
    assert msg.content == "Let me check the current weather in Paris for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]


@pytest.mark.parametrize(("prompt", "forced"), [("<｜hy_Assistant｜><think>", True),
                                                ("<｜hy_Assistant｜><think></think>", False)])
def test_low_and_high_effort_prompts_leave_reasoning_open_no_think_does_not(prompt: str, forced: bool) -> None:
    assert streamparse.thinking_forced_open(prompt, FMT) is forced


def test_without_newlines_values_typed_by_the_schema_and_the_last_repeated_key_wins() -> None:
    text = ("<tool_calls><tool_call>f<tool_sep><arg_key>days</arg_key><arg_value>3</arg_value>"
            "<arg_key>city</arg_key><arg_value>03106</arg_value><arg_key>tags</arg_key><arg_value>[\"a\"]"
            "</arg_value><arg_key>days</arg_key><arg_value>4</arg_value></tool_call></tool_calls>")
    msg = both_modes(text, tools=TYPED)
    assert named_calls(msg) == [("f", {"days": 4, "city": "03106", "tags": ["a"]})] and msg.rejected == []


def test_a_call_without_tool_sep_before_its_arguments_is_invalid_json() -> None:
    # Decision 8.
    text = "<tool_calls>\n<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n</tool_calls>"
    msg = both_modes(text)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == text[len("<tool_calls>\n"):-len("\n</tool_calls>")] and msg.content == ""


def test_cut_off_calls_are_truncated_the_ones_before_stand_and_closers_are_optional_at_the_end() -> None:
    # Decision 1: `</tool_calls>` (and `</tool_call>` after a closed value) is optional at the end.
    head = "<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n"
    msg = both_modes(head)
    assert named_calls(msg) == [("f", {"a": "1"})] and msg.rejected == []
    msg = both_modes(head + "</tool_call>\n<tool_call>g<tool_sep>\n<arg_key>b</arg_key>\n<arg_value>Par")
    assert named_calls(msg) == [("f", {"a": "1"})] and [r.status for r in msg.rejected] == ["truncated"]
    assert msg.rejected[0].raw == "<tool_call>g<tool_sep>\n<arg_key>b</arg_key>\n<arg_value>Par"
    msg = both_modes("Checking.<tool_calls>\n<tool_call>get_ti")
    assert msg.content == "Checking." and [r.status for r in msg.rejected] == ["truncated"]


def test_text_in_the_block_is_content_whitespace_is_framing_and_a_bare_call_is_a_call() -> None:
    # Decision 2; "calls without their wrapper are calls".
    msg = both_modes("A<tool_calls>\n<tool_call>f<tool_sep>\n</tool_call>\nnote\n</tool_calls>B")
    assert named_calls(msg) == [("f", {})] and msg.content == "A\nnote\nB"
    msg = both_modes("<tool_call>f<tool_sep><arg_key>k</arg_key><arg_value>v</arg_value></tool_call> done")
    assert named_calls(msg) == [("f", {"k": "v"})] and msg.content == "done"


SUFFIXED = ("<think:opensource>R</think:opensource>A<tool_calls:opensource>\n<tool_call:opensource>f"
            "<tool_sep:opensource>\n<arg_key:opensource>days</arg_key:opensource>\n<arg_value:opensource>3"
            "</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>")


def test_suffixed_spellings_are_content_when_nothing_names_the_suffix() -> None:
    # Third-wave Decision 13, as fourth-wave Decision 8 keeps it: a suffix is never learned from a Hy3 output.
    text = "<tool_calls:opensource>\n<tool_call:opensource>f<tool_sep:opensource>\n</tool_calls:opensource>"
    msg = both_modes(text)
    assert msg.tool_calls == [] and msg.rejected == [] and msg.content == text
    assert both_modes(SUFFIXED).content == SUFFIXED


@pytest.mark.parametrize("source", [{"marker_suffix": ":opensource"},
                                    {"prompt": "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>"}])
def test_the_suffix_named_by_the_option_or_the_prompt_spells_every_marker(source: dict[str, str]) -> None:
    # Fourth-wave Decision 8: (a) the option, (d) the rendered prompt's last suffixed token.
    msg = both_modes(SUFFIXED, tools=TYPED, **source)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("R", "A", [("f", {"days": 3})])
    # The plain spellings are text then.
    plain = both_modes("<tool_calls><tool_call>f<tool_sep></tool_call></tool_calls>", **source)
    assert plain.tool_calls == [] and plain.content == "<tool_calls><tool_call>f<tool_sep></tool_call></tool_calls>"


def test_a_suffixed_prompt_says_whether_reasoning_is_open() -> None:
    assert streamparse.thinking_forced_open("<｜hy_Assistant:opensource｜><think:opensource>", FMT)
    assert not streamparse.thinking_forced_open("<｜hy_Assistant:opensource｜><think:opensource></think:opensource>",
                                                FMT)
    msg = both_modes(SUFFIXED.removeprefix("<think:opensource>"),
                     prompt="<｜hy_Assistant:opensource｜><think:opensource>")
    assert (msg.reasoning, msg.content) == ("R", "A")


def test_the_suffix_from_the_tokenizer_or_the_template() -> None:
    # Fourth-wave Decision 7 (b), (c): the added token `<tool_calls:SUF>`, a `<tool_calls:SUF>` literal, the
    # HYTK switch of the Hy3-preview b53bd705 template.
    template = (SHARED_TEMPLATE.read_text() if SHARED_TEMPLATE.exists() else
                "{% set t = '<tool_calls>' %}{{ '<tool_call>' + n + '<tool_sep>' + '<arg_key>' + '<arg_value>' }}")
    assert streamparse.detect_format(template) == FMT and streamparse.detect_marker_suffix(template, FMT) is None
    switched = "{%- set HYTK = 'opensource' %}" + template
    assert streamparse.detect_marker_suffix(switched, FMT) == ":opensource"
    assert streamparse.detect_marker_suffix(template.replace("<tool_calls>", "<tool_calls:opensource>"),
                                            FMT) == ":opensource"
    config = {"chat_template": template, "added_tokens_decoder": {"7": {"content": "<tool_calls:opensource>"}}}
    assert streamparse.detect_format(config) == FMT and streamparse.detect_marker_suffix(config, FMT) == ":opensource"
    # Two different suffixes in one vocabulary: ambiguous, not detected.
    config["added_tokens_decoder"]["8"] = {"content": "<tool_calls:6124c78e>"}
    assert streamparse.detect_format(config) is None and streamparse.detect_marker_suffix(config, FMT) is None


def test_an_unknown_tool_is_rejected_by_name() -> None:
    msg = both_modes("<tool_calls>\n<tool_call>nope<tool_sep>\n</tool_call>\n</tool_calls>", tools=TOOLS)
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "nope")]


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "hy3_reasoning_two_calls.txt").read_text(), FMT,
                                thinking_forced_open=True)
    again = both_modes(streamparse.render(message, FMT))
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))


def test_hy3_markers_are_not_taken_for_glm45() -> None:
    template = "{% for m in messages %}<tool_calls><tool_call>{{ n }}<tool_sep><arg_key>k</arg_key>" \
               "<arg_value>v</arg_value></tool_call>{% endfor %}"
    assert streamparse.detect_format(template) == FMT
