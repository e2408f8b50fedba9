"""Command R7B: the format, and the Decisions of FORMATS.md for it, by example.

`<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}, …]
<|END_ACTION|>`, and the answer in `<|START_RESPONSE|>…<|END_RESPONSE|>` (framing)."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, ids

import streamparse
from streamparse import Message, Token, parse
from streamparse.registry import get_format

FMT = "command_r7b"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
# The template's render of a call turn without a plan (cases_more.json, tool_call_single).
SINGLE = ('<|START_THINKING|><|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
          '"parameters": {"location": "Paris, France", "unit": "celsius"}}\n]<|END_ACTION|>')


def action(*items: str) -> str:
    return "<|START_ACTION|>[\n    " + ",\n    ".join(items) + "\n]<|END_ACTION|>"


def both_modes(text: str, **options: object) -> Message:
    """parse(), and 1-character streams in both emit modes, agree; the parsed message is returned."""
    return agreeing(text, FMT, **options)


def test_a_plan_and_two_calls_keep_the_models_call_ids() -> None:
    msg = both_modes((FIXTURES / FMT / "plan_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("I will look up") and msg.content == ""
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [
        ("0", "get_weather", {"location": "Paris, France", "unit": "celsius"}),
        ("1", "get_time", {"timezone": "Europe/Paris"})]


def test_the_response_markers_are_framing() -> None:
    msg = both_modes((FIXTURES / FMT / "response_after_tool_results.txt").read_text())
    assert msg.content == "It is 18°C and partly cloudy in Paris, where the local time is 14:05."
    # Text outside any block is content too; a missing <|END_RESPONSE|> at the end is tolerated.
    assert both_modes("Hi. <|START_RESPONSE|>There.").content == "Hi. There."


def test_an_empty_plan_is_no_reasoning_and_render_writes_the_template_s_action() -> None:
    msg = both_modes(SINGLE)
    assert msg.reasoning == "" and [c.id for c in msg.tool_calls] == ["0"]
    # The template writes an empty plan before every action; render leaves it out (it reads as nothing).
    assert "<|START_THINKING|><|END_THINKING|>" + streamparse.render(msg, FMT) == SINGLE


def test_ids_missing_numeric_or_late() -> None:
    # Decision 26: a missing id is generated; a numeric one is kept as its JSON text.
    msg = both_modes(action('{"tool_name": "f", "parameters": {}}',
                            '{"tool_call_id": 7, "tool_name": "g", "parameters": {}}',
                            '{"tool_call_id": null, "tool_name": "h", "parameters": {}}'))
    assert [(c.name, c.id) for c in msg.tool_calls] == [("f", "call_0"), ("g", "7"), ("h", "call_2")]
    # An id after the parameters: the call starts (id and name sent) only once the id is read.
    text = action('{"tool_name": "f", "parameters": {"a": 1}, "tool_call_id": "late"}')
    parser = streamparse.StreamParser(FMT, emit_calls="progressive", id_factory=ids)
    before = [d for ch in text[:text.index('"late"')] for d in parser.feed(ch)]
    assert all(not d.tool_calls for d in before)
    after = [p for ch in text[text.index('"late"'):] for d in parser.feed(ch) for p in d.tool_calls]
    after += [p for d in parser.close() for p in d.tool_calls]
    assert (after[0].id, after[0].name, after[0].arguments) == ("late", "f", "")
    assert "".join(p.arguments for p in after) == '{"a": 1}'


def test_a_repeated_id_is_replaced_so_that_ids_stay_unique() -> None:
    msg = both_modes(action('{"tool_call_id": "0", "tool_name": "f", "parameters": {}}',
                            '{"tool_call_id": "0", "tool_name": "g", "parameters": {}}'))
    assert [c.id for c in msg.tool_calls] == ["0", "call_1"]


def test_each_element_is_checked_on_its_own() -> None:
    # Decision 26: an element without tool_name is invalid_json; the others stand.
    msg = both_modes(action('{"tool_call_id": "0", "name": "f", "parameters": {}}',
                            '{"tool_call_id": "1", "tool_name": "g", "arguments": {"x": 1}}'))
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [("1", "g", {"x": 1})]
    assert [(r.status, r.errors) for r in msg.rejected] == [
        ("invalid_json", ['$[0].tool_name: the call object has no "tool_name" string'])]


def test_a_missing_end_action_keeps_the_complete_calls_and_truncates_the_rest() -> None:
    # Decision 21.
    text = action('{"tool_call_id": "0", "tool_name": "f", "parameters": {}}', '{"tool_call_id": "1", "tool_name": "g"')
    msg = both_modes(text[:-len("\n]<|END_ACTION|>")])
    assert [c.name for c in msg.tool_calls] == ["f"] and [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes(SINGLE[:-len("]<|END_ACTION|>")])
    assert [c.name for c in msg.tool_calls] == ["get_weather"] and msg.rejected == []


def test_forced_open_starts_inside_the_plan() -> None:
    # Decision 30.
    msg = both_modes("plan<|END_THINKING|>" + action('{"tool_call_id": "0", "tool_name": "f", "parameters": {}}'),
                     thinking_forced_open=True)
    assert msg.reasoning == "plan" and [c.name for c in msg.tool_calls] == ["f"]


def test_all_six_markers_are_special_tokens() -> None:
    spec = get_format(FMT)
    assert set(spec.special) == {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", "<|END_ACTION|>",
                                 "<|START_RESPONSE|>", "<|END_RESPONSE|>"}
    tokens = [Token("<|START_RESPONSE|>", special=True), Token("Say <|START_ACTION|> please."),
              Token("<|END_RESPONSE|>", special=True)]
    assert parse(tokens, FMT, special_tokens="require").content == "Say <|START_ACTION|> please."


def test_the_template_is_detected_by_its_action_marker() -> None:
    template = (FIXTURES.parent.parent / "shared" / "templates" / "c4ai-command-r7b-12-2024-tool_use.jinja")
    if template.exists():
        assert streamparse.detect_format(template) == FMT
    assert streamparse.detect_format("{% if tools %}<|START_ACTION|>{% endif %}") == FMT
