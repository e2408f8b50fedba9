"""GigaChat 3.5 "GCML": the format, by the real renders of its template (cases_wave4.json), the
FORMATS.md wire block, and the fourth wave's Decisions 1, 2, 10, 20, 21, 22."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import dsml
import pytest
from conftest import FIXTURES, SHARED, agreeing, assert_every_mode_agrees, named_calls, shared_cases
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse.families.gigachat3_5 import GCML

FORMAT = "gigachat3_5"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text(encoding="utf-8"))
G = "｜GCML｜"
WEATHER = dsml.WEATHER
CASES = shared_cases(FORMAT)
shared = pytest.mark.skipif(not CASES, reason="../shared/templates is not beside this checkout")


param, invoke, block = partial(dsml.param, GCML), partial(dsml.invoke, GCML), partial(dsml.block, GCML)


# ----------------------------------------------------------------- real outputs


def test_the_fixture_reads_reasoning_content_and_two_calls_and_drops_the_stop_token() -> None:
    text = (FIXTURES / FORMAT / "reasoning_two_calls.txt").read_text(encoding="utf-8")
    assert text.endswith("<|message_sep|>")
    msg = agreeing(text, FORMAT, sizes=(1, 5), tools=TOOLS)
    assert msg.reasoning.startswith("I need live data.") and msg.reasoning.endswith("get_time.")
    assert msg.content == "Let me check the current weather in Paris for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


@shared
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['case']}{':forced' if c['thinking_forced_open'] else ''}")
def test_every_real_render_reads_as_its_message(case: dict[str, Any]) -> None:
    forced = bool(case["thinking_forced_open"])
    assert streamparse.thinking_forced_open(case["prompt_tail"], FORMAT) is forced  # `<think>` ends the prompt
    for ending in ("", "<|message_sep|>", case["stop"]):  # the stop token or eos a server leaves in
        msg = streamparse.parse(case["output"] + ending, FORMAT, tools=case["tools"], thinking_forced_open=forced)
        expected = case["expected"]
        assert (msg.content, msg.reasoning) == (expected["content"] or "", expected["reasoning"] or "")
        assert [(c.name, c.arguments) for c in msg.tool_calls] == [
            (c["name"], json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"])
            for c in expected["tool_calls"]]
        assert msg.rejected == []


@shared
def test_render_writes_what_the_template_writes() -> None:
    for case in CASES:
        if case["thinking_forced_open"]:
            continue
        message = streamparse.parse(case["output"], FORMAT, tools=case["tools"])
        assert streamparse.render(message, FORMAT) == case["output"], case["case"]


def test_the_wire_block_of_formats_md() -> None:
    text = "The user wants the weather.</think>\n\nLet me check.\n\n" + dsml.wire_block(GCML)
    msg = agreeing(text, FORMAT, sizes=(1, 3), tools=WEATHER, thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("The user wants the weather.", "Let me check.")
    assert named_calls(msg) == dsml.WIRE_CALLS
    assert len({call.id for call in msg.tool_calls}) == 2  # no ids on the wire: generated, unique


# ----------------------------------------------------------------- Decision 10


@pytest.mark.parametrize("ending", ["<|message_sep|>", "<|message_sep|>\n\n", "</s>", "\n</s>\n"])
def test_a_trailing_stop_marker_is_framing(ending: str) -> None:
    msg = agreeing("It is 18°C." + ending, FORMAT, sizes=(1, 2))
    assert msg.content == "It is 18°C."


@pytest.mark.parametrize("marker", ["<|message_sep|>", "</s>"])
def test_a_stop_marker_followed_by_text_is_content(marker: str) -> None:
    text = f"Use {marker} to end a turn."
    assert agreeing(text, FORMAT, sizes=(1, 4)).content == text


def test_a_gcml_block_inside_unclosed_reasoning_stays_reasoning() -> None:
    text = "Let me call it.\n" + block(invoke("get_time", param("timezone", "UTC")))
    msg = agreeing(text, FORMAT, sizes=(1, 6), tools=WEATHER, thinking_forced_open=True)
    assert msg.reasoning == text.strip() and msg.content == "" and msg.tool_calls == []


def test_a_bare_invoke_outside_the_block_is_a_call() -> None:
    text = "Checking.\n" + invoke("get_time", param("timezone", "UTC")) + f"\n</{G}tool_calls>\nDone."
    msg = agreeing(text, FORMAT, sizes=(1, 5), tools=WEATHER)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"})]
    assert msg.content == "Checking.\n\n\nDone."  # the closer is the call's; the text around it is joined


@pytest.mark.parametrize(("key", "value", "string", "expected"), [
    ("location", "  Paris \n", "true", "  Paris \n"),  # string="true": the text, byte-exact
    ("location", "03106", "true", "03106"),
    ("days", "3", "false", 3),  # string="false": JSON (the template's `tojson`)
    ("days", "3", None, 3),  # no attribute: typed by the schema
    ("days", "3", "true", 3),  # string="true" typed by a schema that allows no string
    ("other", "42", "false", 42),  # not in the schema: string="false" values are parsed
    ("other", "42", "true", "42"),
])
def test_values_are_typed_as_deepseek_v3_2_types_them(key: str, value: str, string: str | None, expected: Any) -> None:
    given = param(key, value, string)
    params = (param("location", "Oslo"), given) if key != "location" else (given,)
    msg = streamparse.parse(block(invoke("get_weather", *params)), FORMAT, tools=WEATHER)
    assert msg.rejected == []
    got = msg.tool_calls[0].arguments[key]
    assert got == expected and type(got) is type(expected)


def test_the_unspaced_dsml_of_deepseek_is_text_here() -> None:
    text = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    msg = streamparse.parse(text, FORMAT, tools=WEATHER)
    assert (msg.content, msg.tool_calls, msg.rejected) == (text, [], [])


# ----------------------------------------------------------------- Decisions 1, 2, 20


@pytest.mark.parametrize("text", dsml.unclosed_at_the_end(GCML))
def test_closers_may_be_missing_at_the_end_of_a_complete_call(text: str) -> None:
    msg = agreeing(text, FORMAT, sizes=(1, 3), tools=WEATHER)
    assert named_calls(msg) == [("get_weather", {"location": "Oslo", "days": 2})] and msg.rejected == []


def test_a_call_cut_inside_a_value_is_truncated_and_the_calls_before_it_stand() -> None:
    tail = f'<{G}invoke name="get_weather">\n<{G}parameter name="location" string="true">Os'
    text = f"<{G}tool_calls>\n" + invoke("get_time", param("timezone", "UTC")) + "\n" + tail
    msg = agreeing(text, FORMAT, sizes=(1, 6), tools=WEATHER)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"})]
    assert [(r.status, r.raw) for r in msg.rejected] == [("truncated", tail)]


def test_text_between_calls_inside_the_block_is_content() -> None:
    text = f"<{G}tool_calls>\n" + invoke("get_time") + "\nand then\n" + invoke("get_time") + f"\n</{G}tool_calls>"
    msg = agreeing(text, FORMAT, sizes=(1, 7), tools=WEATHER)
    assert len(msg.tool_calls) == 2 and msg.content == "and then"


def test_an_empty_block_and_an_unknown_tool_are_rejected() -> None:
    empty = f"<{G}tool_calls>\n</{G}tool_calls>"
    assert [r.status for r in streamparse.parse(empty, FORMAT).rejected] == ["invalid_json"]
    msg = streamparse.parse(block(invoke("launch", param("target", "moon"))), FORMAT, tools=WEATHER)
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "launch")] and msg.tool_calls == []


# ----------------------------------------------------------------- detection (Decision 22), grammars


@pytest.mark.skipif(not (SHARED / "templates" / "GigaChat3.5.jinja").exists(), reason="no ../shared/templates")
def test_detection_tells_gigachat3_5_from_gigachat3() -> None:
    templates = SHARED / "templates"
    assert streamparse.detect_format(templates / "GigaChat3.5.jinja") == FORMAT
    assert streamparse.detect_format(templates / "GigaChat3-10B-A1.8B.jinja") == "gigachat3"
    assert streamparse.detect_format(templates / "GigaChat3.1-10B-A1.8B.jinja") == "gigachat3"


def test_grammars_take_the_calls_and_the_trailing_stop_marker() -> None:
    from grammar_engines import gbnf_accepts, structural_tag_accepts

    text = "Checking.\n\n" + block(invoke("get_time", param("timezone", "UTC"))) + "<|message_sep|>"
    tag = streamparse.grammar_for(FORMAT, WEATHER)
    gbnf = streamparse.grammar_for(FORMAT, WEATHER, syntax="gbnf")
    assert isinstance(tag, dict) and isinstance(gbnf, str)
    assert structural_tag_accepts(tag, text) and gbnf_accepts(gbnf, text)
    assert not gbnf_accepts(gbnf, text.replace("get_time", "get_tme"))


# ----------------------------------------------------------------- any chunking


@given(data=st.data())
def test_calls_stream_the_same_under_any_chunking(data: st.DataObject) -> None:
    text = dsml.drawn_block(data, GCML, ["location", "days", "other"], ["", "<think>Plan.</think>\n\n", "Looking.\n\n"],
                            ["", "<|message_sep|>", "</s>", "\nMore."])
    assert_every_mode_agrees(data, text, FORMAT, WEATHER)
