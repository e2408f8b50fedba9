"""Kimi K2 Instruct and K2 Thinking (`kimi_k2`): the format and its Decisions, by example.

Every example is checked in both emit modes and under 1-character chunks (`read`): the streamed
message is `parse()`'s, the deltas add up to it, and progressive ids are the model's ids.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import CASES, FIXTURES, agreeing, assert_stream_matches, fold, ids, run_stream

import streamparse
from streamparse import Message, StreamParser, Token, ToolCall, detect_format, parse, thinking_forced_open

FMT = "kimi_k2"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
BEGIN, ARGS, END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
NEW_FAMILIES = CASES.parent / "cases_new_families.json"


def call(call_id: str, arguments: str = "{}", end: str = END) -> str:
    """One call as the model writes it: its id, then its arguments."""
    return f"{BEGIN}{call_id}{ARGS}{arguments}{end}"


def read(text: str, **options: object) -> Message:
    """`parse(text)`, checked against streaming it in both emit modes, 1 and 5 characters at a time."""
    return agreeing(text, FMT, sizes=(1, 5), **options)


def calls_of(message: Message) -> list[tuple[str, str, dict[str, object]]]:
    return [(c.id, c.name, c.arguments) for c in message.tool_calls]


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


# ----------------------------------------------------------------- real outputs

def test_k2_thinking_reasoning_content_and_two_calls_numbered_across_the_conversation() -> None:
    text = (FIXTURES / FMT / "k2_thinking_reasoning_two_calls.txt").read_text()
    msg = read(text, tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("continue at :2 and :3.")
    assert msg.content == "I'll look up both at once."
    assert calls_of(msg) == [
        ("functions.get_weather:2", "get_weather", {"location": "Paris, France", "unit": "celsius"}),
        ("functions.get_time:3", "get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


def test_mcp_tool_names_whitespace_between_elements_and_a_marker_inside_a_json_string() -> None:
    text = (FIXTURES / FMT / "k2_tool_names_and_newlines.txt").read_text()
    msg = read(text, tools=TOOLS)
    assert msg.content.endswith('print("few results")\n```')
    assert [(c.id, c.name) for c in msg.tool_calls] == [
        ("functions.mcp__portal__search-documents:0", "mcp__portal__search-documents"),
        ("functions.write_file:1", "write_file")]
    assert msg.tool_calls[0].arguments_json == '{"query": "quarterly report", "limit": 5}'
    assert END in msg.tool_calls[1].arguments["content"]
    assert msg.rejected == []


def _kimi_cases() -> list[dict[str, object]]:
    if not NEW_FAMILIES.exists():
        return []
    return [case for case in json.loads(NEW_FAMILIES.read_text()) if case["format"] == FMT]


@pytest.mark.skipif(not NEW_FAMILIES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("case", _kimi_cases(), ids=lambda c: f"{c['template']}:{c['case']}")
def test_render_writes_what_the_real_templates_write(case: dict[str, object]) -> None:
    expected = case["expected"]
    assert isinstance(expected, dict)
    calls = [ToolCall(c["id"], c["name"], c["arguments"], "") for c in expected["tool_calls"]]
    message = Message(content=expected["content"] or "", reasoning=expected["reasoning"] or "", tool_calls=calls)
    output = str(case["output"])
    if not message.reasoning:  # K2 Thinking writes an empty block; render writes none (K2 Instruct's form)
        output = output.removeprefix("<think></think>")
    assert streamparse.render(message, FMT) == output


def test_render_writes_a_kimi_id_for_a_call_whose_id_does_not_name_it() -> None:
    message = Message(tool_calls=[ToolCall("call_abc", "get_time", {"timezone": "UTC"}, ""),
                                  ToolCall("functions.get_time:7", "get_time", {}, ""),
                                  ToolCall(f"functions.x:0{END}", "x", {}, "")])
    text = streamparse.render(message, FMT)
    assert [c.id for c in read(text).tool_calls] == ["functions.get_time:0", "functions.get_time:7", "functions.x:2"]


# ----------------------------------------------------------------- ids and names

@pytest.mark.parametrize(("written", "name"), [
    ("functions.get_weather:0", "get_weather"),
    ("get_weather:0", "get_weather"),                       # no namespace
    ("functions.get_weather", "get_weather"),               # no index
    ("get_weather", "get_weather"),
    ("functions.mcp__portal__search-documents:12", "mcp__portal__search-documents"),
    ("functions.a:b:3", "a:b"),                             # only the last :DIGITS is the index
    ("functions.functions.f:1", "functions.f"),             # only one leading namespace
    ("tool.get_weather:0", "tool.get_weather"),             # another prefix is part of the name
])
def test_the_id_is_kept_as_written_and_the_name_is_read_from_it(written: str, name: str) -> None:
    msg = read(SECTION + call(written) + SECTION_END)
    assert [(c.id, c.name) for c in msg.tool_calls] == [(written, name)]


def test_whitespace_around_the_id_and_the_arguments_is_framing() -> None:
    msg = read(SECTION + call(" \n functions.get_time:0 \n", '\r\n {"timezone": "UTC"} \n') + SECTION_END)
    assert [(c.id, c.name, c.arguments_json) for c in msg.tool_calls] == [
        ("functions.get_time:0", "get_time", '{"timezone": "UTC"}')]


def test_a_repeated_id_in_one_message_is_replaced_by_a_generated_one() -> None:
    msg = read(SECTION + call("functions.f:0") + call("functions.f:0") + SECTION_END)
    assert [c.id for c in msg.tool_calls] == ["functions.f:0", "call_1"]


@pytest.mark.parametrize("written", ["functions.:0", "functions.", ":0", "", "  "])
def test_an_id_that_leaves_no_name_is_an_empty_envelope(written: str) -> None:
    msg = read(SECTION + call(written) + SECTION_END)
    assert msg.tool_calls == [] and statuses(msg) == ["invalid_json"]
    assert msg.rejected[0].raw == call(written)


def test_a_rejected_call_spends_its_id_in_both_modes() -> None:
    text = SECTION + call("functions.f:0", '{"a": }') + call("functions.f:0") + SECTION_END
    msg = read(text)
    assert statuses(msg) == ["invalid_json"] and msg.rejected[0].name == "f"
    assert [c.id for c in msg.tool_calls] == ["call_1"]
    unknown = read(SECTION + call("functions.nope:0") + call("functions.get_time:0", '{"timezone": "UTC"}')
                   + call("functions.nope:0", "{}") + SECTION_END, tools=TOOLS)
    assert statuses(unknown) == ["unknown_tool", "unknown_tool"]
    assert [c.id for c in unknown.tool_calls] == ["functions.get_time:0"]


def test_a_runaway_call_does_not_spend_its_id_in_either_mode() -> None:
    """Validated mode never reads a runaway envelope, so the id it streamed in progressive mode is freed."""
    text = SECTION + call("functions.f:0", json.dumps({"q": "x" * 300})) + call("functions.f:0") + SECTION_END
    msg = read(text, max_call_chars=100)
    assert statuses(msg) == ["too_long"] and [c.id for c in msg.tool_calls] == ["functions.f:0"]


def test_progressive_mode_sends_the_models_id_with_the_name_then_argument_fragments() -> None:
    text = SECTION + call("functions.get_weather:4", '{"location": "Paris, France"}') + SECTION_END
    parser = StreamParser(FMT, TOOLS, emit_calls="progressive")
    deltas = [d for ch in text for d in parser.feed(ch)] + parser.close()
    pieces = [p for d in deltas for p in d.tool_calls]
    assert (pieces[0].id, pieces[0].name) == ("functions.get_weather:4", "get_weather")
    assert len([p for p in pieces if p.arguments]) > 5  # the arguments arrive as the model writes them
    assert fold(deltas).accepted() == [("functions.get_weather:4", "get_weather", '{"location": "Paris, France"}')]


# ----------------------------------------------------------------- the arguments

def test_the_arguments_json_is_the_object_as_the_model_wrote_it() -> None:
    msg = read(SECTION + call("functions.f:0", '{"b":2,  "a":[1, {"c": null}]}') + SECTION_END)
    assert msg.tool_calls[0].arguments_json == '{"b":2,  "a":[1, {"c": null}]}'


def test_a_json_string_holding_the_object_is_accepted() -> None:
    msg = read(SECTION + call("functions.get_time:0", json.dumps('{"timezone": "UTC"}')) + SECTION_END, tools=TOOLS)
    assert [(c.arguments, c.arguments_json) for c in msg.tool_calls] == [({"timezone": "UTC"}, '{"timezone": "UTC"}')]


@pytest.mark.parametrize("arguments", [
    "[1, 2]", "42", "null", '"not an object"', json.dumps("[1]"),  # not one object (Decision 3)
    '{"a": 1} trailing', '{"a": 1}{"b": 2}', "{'a': 1}", '{"a": NaN}', "",
])
def test_arguments_that_are_not_one_json_object_are_invalid_json(arguments: str) -> None:
    msg = read(SECTION + call("functions.f:0", arguments) + SECTION_END)
    assert msg.tool_calls == [] and statuses(msg) == ["invalid_json"]
    assert msg.rejected[0].raw == call("functions.f:0", arguments)


def test_arguments_are_validated_against_the_tool_schema() -> None:
    msg = read(SECTION + call("functions.get_weather:0", '{"unit": "kelvin"}') + SECTION_END, tools=TOOLS)
    assert statuses(msg) == ["schema_violation"] and msg.rejected[0].name == "get_weather"


# ----------------------------------------------------------------- the section and bare calls

def test_the_call_end_is_optional_before_the_next_call_and_before_the_section_end() -> None:
    text = SECTION + call("functions.a:0", '{"x": 1}', end="") + call("functions.b:1", end="") + SECTION_END
    msg = read(text + " Done.")
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("a", {"x": 1}), ("b", {})]
    assert (msg.content, msg.rejected) == ("Done.", [])


def test_the_section_end_is_optional_at_the_end_of_the_output() -> None:
    msg = read("Checking." + SECTION + call("functions.a:0") + call("functions.b:1"))
    assert [c.name for c in msg.tool_calls] == ["a", "b"] and msg.content == "Checking."
    unclosed_call = read(SECTION + call("functions.a:0", '{"x": 1}', end=""))
    assert [c.arguments for c in unclosed_call.tool_calls] == [{"x": 1}]


def test_a_bare_call_is_a_call_and_a_section_end_right_after_it_is_its_own() -> None:
    msg = read("Before " + call("functions.a:0") + " \n" + SECTION_END + " after")
    assert [c.name for c in msg.tool_calls] == ["a"]
    assert (msg.content, msg.rejected) == ("Before  \n after", [])


def test_an_empty_section_is_framing() -> None:
    for inner in ("", "  ", "\n"):
        msg = read("A" + SECTION + inner + SECTION_END + "B")
        assert (msg.content, msg.tool_calls, msg.rejected) == ("AB", [], [])


def test_text_inside_the_section_is_content_and_whitespace_there_is_framing() -> None:
    text = ("Let me check." + SECTION + "\n I will call two tools:" + call("functions.a:0") + "\n\n"
            + call("functions.b:1") + " and that is all. " + SECTION_END + "\nDone.")
    msg = read(text)
    assert [c.name for c in msg.tool_calls] == ["a", "b"]
    assert msg.content == "Let me check.\n I will call two tools: and that is all. \nDone."
    assert msg.rejected == []
    only_text = read(SECTION + "no call after all" + SECTION_END + " ok")
    assert (only_text.content, only_text.rejected) == ("no call after all ok", [])


def test_a_section_cut_off_before_any_call_is_truncated() -> None:
    msg = read("Checking." + SECTION + "\n")
    assert msg.content == "Checking." and statuses(msg) == ["truncated"]


@pytest.mark.parametrize("stray", [SECTION_END, END, ARGS])
def test_a_closer_with_no_opener_is_content_verbatim(stray: str) -> None:
    msg = read(f"a {stray} b")
    assert (msg.content, msg.tool_calls, msg.rejected) == (f"a {stray} b", [], [])


@pytest.mark.parametrize(("text", "status"), [
    (SECTION + BEGIN, "truncated"),
    (SECTION + BEGIN + "functions.get_wea", "truncated"),
    (SECTION + BEGIN + "functions.get_weather:0" + ARGS + '{"location": "Par', "truncated"),
    (SECTION + BEGIN + "functions.get_weather:0" + END, "invalid_json"),  # no arguments marker
])
def test_cut_off_and_incomplete_calls(text: str, status: str) -> None:
    msg = read(text)
    assert msg.tool_calls == [] and statuses(msg) == [status]


def test_markers_inside_json_strings_are_data() -> None:
    value = f"x {END} {SECTION_END} {BEGIN} {ARGS} y"
    msg = read(SECTION + call("functions.write_file:0", json.dumps({"path": "a", "content": value})) + " after")
    assert msg.tool_calls[0].arguments["content"] == value and msg.content == "after"


# ----------------------------------------------------------------- reasoning

def test_k2_thinking_empty_reasoning_block_is_no_reasoning() -> None:
    msg = read("<think></think>Hello.")
    assert (msg.reasoning, msg.content) == ("", "Hello.")


def test_a_reasoning_block_closed_before_the_section_is_unaffected() -> None:
    msg = read("<think>plan</think>" + SECTION + call("functions.a:0") + SECTION_END)
    assert (msg.reasoning, msg.content, [c.name for c in msg.tool_calls]) == ("plan", "", ["a"])


@pytest.mark.parametrize("opener", [SECTION, ""])
def test_a_call_token_inside_unclosed_reasoning_ends_it(opener: str) -> None:
    # Kimi's exception to "a call inside reasoning stays reasoning": the section token, or a bare
    # call token, ends the reasoning for good (K2 Thinking does this; llama.cpp, vLLM, SGLang agree).
    text = "<think>I should check the weather. " + opener + call("functions.get_weather:0", '{"location": "Oslo"}')
    msg = read(text + (SECTION_END if opener else ""), tools=TOOLS)
    assert msg.reasoning == "I should check the weather."
    assert [(c.id, c.name) for c in msg.tool_calls] == [("functions.get_weather:0", "get_weather")]
    assert msg.content == ""


def test_after_a_call_token_ended_the_reasoning_a_later_closer_is_content_verbatim() -> None:
    text = "<think>plan " + SECTION + call("functions.a:0") + SECTION_END + " more thoughts</think>Answer."
    msg = read(text)
    assert (msg.reasoning, msg.content) == ("plan", "more thoughts</think>Answer.")
    assert [c.name for c in msg.tool_calls] == ["a"]


def test_with_thinking_forced_open_a_call_token_ends_the_reasoning_too() -> None:
    msg = read("plan " + call("functions.a:0") + "</think>Answer.", thinking_forced_open=True)
    assert (msg.reasoning, msg.content, [c.name for c in msg.tool_calls]) == ("plan", "</think>Answer.", ["a"])


# ----------------------------------------------------------------- token-aware mode

def _tokens(text: str) -> list[Token]:
    """Every <|…|> marker as one special token; everything else (the id included) is ordinary text."""
    out: list[Token] = []
    pos = 0
    for match in re.finditer(r"<\|[a-z_]+\|>", text):
        if match.start() > pos:
            out.append(Token(text[pos:match.start()]))
        out.append(Token(match.group(), special=True))
        pos = match.end()
    if pos < len(text):
        out.append(Token(text[pos:]))
    return out


@pytest.mark.parametrize("emit", ["validated", "progressive"])
def test_token_aware_mode_reads_the_special_tokens_and_keeps_look_alikes_as_text(emit: str) -> None:
    text = "<think>plan</think>Hi." + SECTION + call("functions.get_time:0", '{"timezone": "UTC"}') + SECTION_END
    real = parse(_tokens(text), FMT, TOOLS, special_tokens="require", id_factory=ids)
    assert real == parse(text, FMT, TOOLS, id_factory=ids)
    folded, streamed = run_stream(_tokens(text), format=FMT, tools=TOOLS, special_tokens="require", emit_calls=emit,
                                  id_factory=ids)
    assert streamed == real
    assert_stream_matches(folded, real)
    look_alike = parse(text, FMT, TOOLS, special_tokens="require")  # the markers spelled by ordinary tokens
    assert (look_alike.tool_calls, look_alike.rejected) == ([], [])
    assert look_alike.content.endswith(SECTION_END) and look_alike.reasoning == "plan"


def test_token_aware_mode_a_marker_look_alike_inside_the_arguments_does_not_end_the_call() -> None:
    arguments = '{"q": "' + END + ' then ' + SECTION_END + '"}'
    tokens = [Token(SECTION, True), Token(BEGIN, True), Token("functions.f:0"), Token(ARGS, True),
              Token(arguments), Token(END, True), Token(SECTION_END, True)]
    msg = parse(tokens, FMT, special_tokens="require")
    assert [c.arguments_json for c in msg.tool_calls] == [arguments]


# ----------------------------------------------------------------- templates and prompts

@pytest.mark.skipif(not NEW_FAMILIES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("template", ["Kimi-K2-Instruct.jinja", "Kimi-K2-Thinking.jinja"])
def test_both_kimi_templates_are_detected_and_their_prompts_leave_no_reasoning_open(template: str) -> None:
    assert detect_format(NEW_FAMILIES.parent / template) == FMT
    assert not thinking_forced_open("<|im_assistant|>assistant<|im_middle|>", FMT)
    assert thinking_forced_open("<|im_assistant|>assistant<|im_middle|><think>", FMT)


def test_token_aware_mode_a_call_token_ends_unclosed_reasoning_only_as_a_special_token() -> None:
    tokens = [Token("<think>"), Token("plan "), Token(SECTION, True), Token(BEGIN, True), Token("functions.f:0"),
              Token(ARGS, True), Token("{}"), Token(END, True), Token(SECTION_END, True), Token(" after</think>x")]
    msg = parse(tokens, FMT, special_tokens="require")
    assert (msg.reasoning, msg.content, [c.id for c in msg.tool_calls]) == ("plan", "after</think>x", ["functions.f:0"])
    spelled = [Token("<think>"), Token("plan " + SECTION + call("functions.f:0")), Token("</think>x")]
    msg = parse(spelled, FMT, special_tokens="require")
    assert (msg.reasoning, msg.content, msg.tool_calls) == ("plan " + SECTION + call("functions.f:0"), "x", [])
