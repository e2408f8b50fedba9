"""DeepSeek V4.1 "spaced DSML": the format, by the examples of FORMATS.md and the peers' fixtures
(vLLM `deepseek_v41`, SGLang `deepseekv41`), and the fourth wave's Decisions 1, 3, 4, 20, 21, 22."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import dsml
import pytest
from conftest import FIXTURES, agreeing, assert_every_mode_agrees, named_calls
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse.families.deepseek_v4_1 import V4_1

FORMAT = "deepseek_v4_1"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text(encoding="utf-8"))
D = "｜DSML｜ "  # one ASCII space after the mark, in every tag
WEATHER = dsml.WEATHER


param, invoke, block = partial(dsml.param, V4_1), partial(dsml.invoke, V4_1), partial(dsml.block, V4_1)


# vLLM's tests/parser/test_deepseek_v41.py fixture (the model's wire, as its replay harness feeds it).
VLLM_CALLS = (
    '\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n'
    '<｜DSML｜ parameter name="city" string="true">杭州</｜DSML｜ parameter>\n'
    '<｜DSML｜ parameter name="count" string="false">42</｜DSML｜ parameter>\n'
    '</｜DSML｜ invoke>\n<｜DSML｜ invoke name="add">\n'
    '<｜DSML｜ parameter name="x" string="false">1.5</｜DSML｜ parameter>\n'
    '<｜DSML｜ parameter name="y" string="false">2.25</｜DSML｜ parameter>\n'
    "</｜DSML｜ invoke>\n</｜DSML｜ calls>"
)
VLLM_ARGUMENTS = [("get_weather", {"city": "杭州", "count": 42}), ("add", {"x": 1.5, "y": 2.25})]


# ----------------------------------------------------------------- real outputs


@pytest.mark.parametrize("thinking", [False, True])
def test_the_vllm_fixture_reads_as_two_calls_after_reasoning_and_content(thinking: bool) -> None:
    text = ("Plan.</think>" if thinking else "") + "Checking." + VLLM_CALLS
    msg = agreeing(text, FORMAT, sizes=(1, 7, 10_000), tools=TOOLS, thinking_forced_open=thinking)
    assert (msg.reasoning, msg.content) == ("Plan." if thinking else "", "Checking.")
    assert named_calls(msg) == VLLM_ARGUMENTS and msg.rejected == []


def test_the_wire_block_of_formats_md() -> None:
    text = "The user wants the weather.</think>Let me check.\n\n" + dsml.wire_block(V4_1)
    msg = agreeing(text, FORMAT, sizes=(1, 3), tools=WEATHER, thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("The user wants the weather.", "Let me check.")
    assert named_calls(msg) == dsml.WIRE_CALLS
    assert len({call.id for call in msg.tool_calls}) == 2  # no ids on the wire: generated, unique


def test_the_fixture_with_its_prompt_starts_inside_reasoning() -> None:
    text = (FIXTURES / FORMAT / "thinking_two_calls.txt").read_text(encoding="utf-8")
    prompt = (FIXTURES / FORMAT / "thinking_two_calls.prompt").read_text(encoding="utf-8")
    assert streamparse.thinking_forced_open(prompt, FORMAT)
    assert not streamparse.thinking_forced_open(prompt + "</think>", FORMAT)  # non-thinking prompts end so
    msg = streamparse.parse(text, FORMAT, tools=TOOLS, prompt=prompt)
    assert msg.reasoning.startswith("The user wants") and msg.content == "I'll check the weather and add the numbers."
    assert named_calls(msg) == VLLM_ARGUMENTS


@pytest.mark.parametrize(("prompt_end", "text", "reasoning", "content"), [
    ("</think>", "12", "", "12"),  # thinking off (`thinking=false`, `reasoning_effort="none"`): content
    ("<think>", "</think>12", "", "12"),  # thinking on, nothing thought
    ("<think>", "Plan.</think>12", "Plan.", "12"),
])
def test_reasoning_controls_as_vllm_reads_them(prompt_end: str, text: str, reasoning: str, content: str) -> None:
    prompt = "<｜User｜>Add.<｜Assistant｜>" + prompt_end
    msg = agreeing(text, FORMAT, sizes=(1,), prompt=prompt)
    assert (msg.reasoning, msg.content) == (reasoning, content)


# ----------------------------------------------------------------- Decision 3: the spelling


@pytest.mark.parametrize("block_text", [
    '<｜DSML｜calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜calls>',  # no space
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>',  # V4
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',  # V3.2
    '<｜DSML｜  calls>\n<｜DSML｜  invoke name="get_time">\n</｜DSML｜  invoke>\n</｜DSML｜  calls>',  # two spaces
    '<｜DSML｜\tcalls>\n<｜DSML｜\tinvoke name="get_time">\n</｜DSML｜\tinvoke>\n</｜DSML｜\tcalls>',  # a tab
])
def test_any_spelling_but_one_space_is_text(block_text: str) -> None:
    msg = agreeing("Done.\n" + block_text, FORMAT, tools=WEATHER)
    assert msg.tool_calls == [] and msg.rejected == []
    assert msg.content == "Done.\n" + block_text


def test_a_parameter_tag_with_another_spacing_is_part_of_the_value() -> None:
    value = '<｜DSML｜parameter name="x">1</｜DSML｜parameter>'
    msg = streamparse.parse(invoke("get_time", param("timezone", value)), FORMAT)
    assert named_calls(msg) == [("get_time", {"timezone": value})]


# ----------------------------------------------------------------- Decision 3: typing


@pytest.mark.parametrize(("key", "value", "string", "expected"), [
    ("location", "  Paris \n", "true", "  Paris \n"),  # string="true": the text, byte-exact
    ("location", "03106", "true", "03106"),
    ("days", "3", "false", 3),  # string="false": JSON
    ("days", "3", None, 3),  # no attribute: typed by the schema
    ("location", "3", None, "3"),
    ("days", "3", "true", 3),  # string="true" typed by a schema that allows no string
    ("other", "42", "false", 42),  # not in the schema: string="false" values are parsed,
    ("other", "42", "true", "42"),  # strings stay strings,
    ("other", "42", None, "42"),  # and so does a value without the attribute
])
def test_values_are_typed_as_deepseek_v3_2_types_them(key: str, value: str, string: str | None, expected: Any) -> None:
    text = invoke("get_weather", param("location", "Oslo"), param(key, value, string)) if key != "location" \
        else invoke("get_weather", param(key, value, string))
    msg = streamparse.parse(text, FORMAT, tools=WEATHER)
    assert msg.rejected == []
    got = msg.tool_calls[0].arguments[key]
    assert got == expected and type(got) is type(expected)


def test_a_json_number_for_a_string_parameter_is_a_schema_violation_not_a_string() -> None:
    # vLLM's Rust parser turns string="false" 42 into "42" for a string-typed parameter (conflict).
    msg = streamparse.parse(invoke("get_weather", param("location", "42", "false")), FORMAT, tools=WEATHER)
    assert msg.tool_calls == []
    assert [(r.status, r.errors) for r in msg.rejected] == [
        ("schema_violation", ["$.location: 42 is not of type 'string'"])]


def test_vllms_argument_conversion_fixture() -> None:
    # A string="false" value that is not JSON falls back to the typing rules: it stays the text.
    text = (f'<{D}invoke name="f">\n<{D}parameter name="object" string="false">{{"a": [true, null]}}</{D}parameter>'
            f'<{D}parameter name="bad" string="false">[broken</{D}parameter>'
            f'<{D}parameter name="text" string="true">  a<b</{D}parameter>\n</{D}invoke>')
    assert named_calls(streamparse.parse(text, FORMAT)) == [
        ("f", {"object": {"a": [True, None]}, "bad": "[broken", "text": "  a<b"})]


# ----------------------------------------------------------------- Decision 4: calls end reasoning


def test_a_calls_block_inside_open_reasoning_ends_it_and_a_later_closer_is_content() -> None:
    text = "I will call it now.\n\n" + block(invoke("get_time", param("timezone", "UTC"))) + "\n</think>Done."
    msg = agreeing(text, FORMAT, sizes=(1, 5), tools=WEATHER, thinking_forced_open=True)
    assert msg.reasoning == "I will call it now."
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"})]
    assert msg.content == "</think>Done."


def test_a_bare_invoke_inside_open_reasoning_ends_it_too() -> None:
    text = "Calling.\n" + invoke("get_time", param("timezone", "UTC"))
    msg = agreeing(text, FORMAT, sizes=(1, 4), tools=WEATHER, thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("Calling.", "")
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"})]


def test_reasoning_the_model_opened_is_ended_by_a_calls_block_as_well() -> None:
    msg = streamparse.parse("<think>Plan." + block(invoke("get_time")), FORMAT, tools=WEATHER)
    assert msg.reasoning == "Plan." and named_calls(msg) == [("get_time", {})]


# ----------------------------------------------------------------- Decision 1: the end of the output


@pytest.mark.parametrize("text", dsml.unclosed_at_the_end(V4_1))
def test_closers_may_be_missing_at_the_end_of_a_complete_call(text: str) -> None:
    msg = agreeing(text, FORMAT, sizes=(1, 3), tools=WEATHER)
    assert named_calls(msg) == [("get_weather", {"location": "Oslo", "days": 2})] and msg.rejected == []


def test_a_call_without_arguments_needs_only_its_head_at_the_end() -> None:
    msg = streamparse.parse(f'\n\n<{D}calls>\n<{D}invoke name="get_time">\n', FORMAT, tools=WEATHER)
    assert named_calls(msg) == [("get_time", {})] and msg.rejected == []


@pytest.mark.parametrize("tail", [
    f'<{D}invoke name="get_weather">\n<{D}parameter name="location" string="true">Os',  # inside a value
    f'<{D}invoke name="get_wea',  # inside the name
])
def test_a_call_cut_inside_is_truncated_and_the_calls_before_it_stand(tail: str) -> None:
    text = f"\n\n<{D}calls>\n" + invoke("get_time", param("timezone", "UTC")) + "\n" + tail
    msg = agreeing(text, FORMAT, sizes=(1, 6), tools=WEATHER)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"})]
    assert [(r.status, r.raw) for r in msg.rejected] == [("truncated", tail)]


# ----------------------------------------------------------------- Decisions 2 and 20


def test_text_between_calls_inside_the_block_is_content() -> None:
    text = block(invoke("get_time"), "and then", invoke("get_time")) + "\nBye."
    msg = agreeing(text, FORMAT, sizes=(1, 7), tools=WEATHER)
    assert len(msg.tool_calls) == 2 and msg.content == "and then\n\nBye."


def test_an_unknown_tool_is_rejected_with_its_raw_text() -> None:
    text = block(invoke("launch", param("target", "moon")))
    msg = streamparse.parse(text, FORMAT, tools=WEATHER)
    assert msg.tool_calls == []
    assert [(r.status, r.name, r.raw) for r in msg.rejected] == [
        ("unknown_tool", "launch", invoke("launch", param("target", "moon")))]


# ----------------------------------------------------------------- detection, rendering, grammars


def test_detection_prefers_the_spaced_mark_and_keeps_deepseek_v3_2_for_the_unspaced_one() -> None:
    v41 = "{% for c in calls %}{{ '<｜DSML｜ invoke name=\"' + c.name + '\">' }}{% endfor %}<｜DSML｜ calls>"
    v4 = "{% for c in calls %}{{ '<｜DSML｜invoke name=\"' + c.name + '\">' }}{% endfor %}<｜DSML｜tool_calls>"
    assert streamparse.detect_format(v41) == FORMAT
    assert streamparse.detect_format(v4) == "deepseek_v3_2"


def test_a_rendered_message_reads_back() -> None:
    message = streamparse.parse("Why.</think>Done." + VLLM_CALLS, FORMAT, tools=TOOLS, thinking_forced_open=True)
    text = streamparse.render(message, FORMAT)
    assert f"<{D}calls>" in text
    again = streamparse.parse(text, FORMAT, tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == ("Why.", "Done.", VLLM_ARGUMENTS)


@pytest.mark.parametrize("syntax", ["structural_tag", "gbnf"])
def test_grammars_take_calls_after_reasoning_or_ending_it_and_refuse_the_unspaced_tags(syntax: str) -> None:
    from grammar_engines import gbnf_accepts, structural_tag_accepts

    def accepts(text: str, **options: Any) -> bool:
        grammar = streamparse.grammar_for(FORMAT, WEATHER, syntax=syntax, thinking_forced_open=True, **options)
        return structural_tag_accepts(grammar, text) if isinstance(grammar, dict) else gbnf_accepts(grammar, text)

    calls = block(invoke("get_time", param("timezone", "UTC")))
    assert accepts("Plan.</think>Checking.\n\n" + calls)
    assert accepts("Plan.\n\n" + calls)  # the block ends the open reasoning (Decision 4)
    assert accepts("Plan.</think>" + calls, tool_choice="required")
    unspaced = calls.replace(D, "｜DSML｜")
    assert not accepts("Plan.</think>" + unspaced, tool_choice="required")


# ----------------------------------------------------------------- any chunking


@given(data=st.data())
def test_calls_stream_the_same_under_any_chunking(data: st.DataObject) -> None:
    text = dsml.drawn_block(data, V4_1, ["location", "days", "other"], ["", "Plan.</think>", "Looking.\n\n"],
                            ["", "\nMore."])
    assert_every_mode_agrees(data, text, FORMAT, WEATHER)
