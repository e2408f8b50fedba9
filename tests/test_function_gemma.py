"""Google FunctionGemma (`function_gemma`): the format and its Decisions (FORMATS.md, fourth wave 1, 15, 21, 22),
by example.

Every example goes through `read`: `parse()` checked against streaming it in both emit modes, 1 and 4
characters at a time (chunk splits inside every `<…>` token and inside the `<escape>` quote token).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, SHARED, agreeing
from conftest import named_calls as named

import streamparse
from streamparse import Message, Token, parse

FMT = "function_gemma"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
E = "<escape>"
CASES = SHARED / "templates" / "cases_wave4.json"


def call(name: str, args: str, close: str = "<end_function_call>") -> str:
    return f"<start_function_call>call:{name}{args}{close}"


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 4), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def _cases() -> list[dict]:
    return [case for case in json.loads(CASES.read_text()) if case["format"] == FMT] if CASES.exists() else []


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["case"])
def test_every_real_render_reads_as_the_template_wrote_it(case: dict) -> None:
    message = read(case["output"], tools=case["tools"])
    expected = case["expected"]
    assert message.content == (expected["content"] or "").strip()
    assert message.reasoning == ""
    assert named(message) == [(c["name"], c["arguments"]) for c in expected["tool_calls"]]
    assert message.rejected == []


def test_the_wire_block_content_first_then_calls() -> None:
    text = ("Checking both." + call("get_weather", f"{{location:{E}Paris, France{E},unit:{E}celsius{E}}}")
            + call("get_time", f"{{timezone:{E}Europe/Paris{E}}}") + "<start_function_response>")
    message = read(text, tools=TOOLS)
    assert message.content == "Checking both."
    assert named(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                              ("get_time", {"timezone": "Europe/Paris"})]
    assert all(c.id.startswith("call_") for c in message.tool_calls)  # no ids on the wire: generated


def test_values_follow_gemma4s_rules_with_escape_as_the_quote() -> None:
    args = (f"{{s:{E}raw \\n \"q\" {{x}}, y:1 <b>{E},n:{E}42{E},t:true,f:false,a:None,b:null,i:-12,x:0.75,"
            f"e:1e-05,d:108.,l:[1,{E}two{E},[]],o:{{{E}quoted key{E}:{{}},nested:{{ratio:-0.0015}}}}}}")
    message = read(call("f", args))
    assert named(message) == [("f", {"s": 'raw \\n "q" {x}, y:1 <b>', "n": "42", "t": True, "f": False,
                                     "a": None, "b": None, "i": -12, "x": 0.75, "e": 1e-05, "d": 108.0,
                                     "l": [1, "two", []], "o": {"quoted key": {}, "nested": {"ratio": -0.0015}}})]
    # `<escape>42<escape>` stays the string "42": values are never retyped by the schema (vLLM: conflict).
    assert isinstance(message.tool_calls[0].arguments["n"], str)


def test_a_repeated_key_keeps_the_last_value_and_spaces_after_separators_are_read() -> None:
    message = read(call("get_weather", f"{{location:{E}A{E}, location:{E}B{E} }}"), tools=TOOLS)
    assert named(message) == [("get_weather", {"location": "B"})]


@pytest.mark.parametrize("args", [f"{{location:{E}Paris{E}unit:{E}celsius{E}}}", "{city:London}", "{n:NULL}",
                                  "{a:1 b:2}", "{a:}", "{:1}", "{a:[1,2}", "{a:01}"])
def test_malformed_arguments_are_invalid_json_and_the_next_call_stands(args: str) -> None:
    # The first: a missing `,` between a closing <escape> and the next key (vLLM reads it: conflict).
    message = read(call("f", args) + call("g", "{}"))
    assert statuses(message) == ["invalid_json"]
    assert named(message) == [("g", {})]


def test_llamadarts_fixture_reads_as_it_does() -> None:
    message = read(call("get_current_weather", f"{{location:{E}San Francisco, CA{E}}}"))
    assert named(message) == [("get_current_weather", {"location": "San Francisco, CA"})]


def test_the_body_must_start_call_name_brace() -> None:
    # `call NAME{` (accepted by llamadart) is not the wire.
    message = read("<start_function_call>call get_time{}<end_function_call>", tools=TOOLS)
    assert statuses(message) == ["invalid_json"] and message.tool_calls == []
    assert message.rejected[0].raw == "<start_function_call>call get_time{}<end_function_call>"


def test_a_call_cut_off_is_truncated_the_closer_is_not_optional() -> None:
    # Fourth-wave Decision 1: cut anywhere before `<end_function_call>` ends, even after its `}`.
    done = call("get_time", f"{{timezone:{E}UTC{E}}}")
    whole = call("get_weather", f"{{location:{E}Paris{E}}}")
    for cut in range(len("<start_function_call>") + 1, len(whole), 7):
        message = read(done + whole[:cut], tools=TOOLS)
        assert (named(message), statuses(message)) == ([("get_time", {"timezone": "UTC"})], ["truncated"])
        assert message.rejected[0].raw == whole[:cut]
    # An unclosed call followed by another call: invalid_json, the next one stands.
    message = read(whole.removesuffix("<end_function_call>") + done, tools=TOOLS)
    assert statuses(message) == ["invalid_json"] and named(message) == [("get_time", {"timezone": "UTC"})]


def test_the_closer_and_the_next_opener_inside_a_string_are_data() -> None:
    message = read(call("f", f"{{s:{E}<end_function_call> then <start_function_call>{E}}}"))
    assert named(message) == [("f", {"s": "<end_function_call> then <start_function_call>"})]


def test_turn_ends_are_framing_at_the_end_and_content_elsewhere() -> None:
    assert read("It is 18°C.<end_of_turn>").content == "It is 18°C."
    assert read("It is 18°C.<end_of_turn>\n").content == "It is 18°C."
    message = read(call("f", "{}") + "<start_function_response>")
    assert (named(message), message.content, message.rejected) == ([("f", {})], "", [])
    # Not at the end: text, as written.
    assert read("A<end_of_turn>B").content == "A<end_of_turn>B"
    assert read("A<start_function_response>B").content == "A<start_function_response>B"


def test_text_before_between_and_after_calls_is_content() -> None:
    message = read("Before " + call("f", "{}") + " between " + call("g", "{}") + " after")
    assert message.content == "Before  between  after"
    assert named(message) == [("f", {}), ("g", {})]


def test_no_reasoning_and_thinking_forced_open_is_ignored() -> None:
    message = read("<think>x</think>Hi", thinking_forced_open=True)
    assert (message.reasoning, message.content) == ("", "<think>x</think>Hi")


def test_unknown_tools_and_schema_violations_are_rejected() -> None:
    message = read(call("nope", "{}") + call("get_time", "{timezone:5}"), tools=TOOLS)
    assert statuses(message) == ["unknown_tool", "schema_violation"]


def test_progressive_mode_names_the_call_once_its_header_is_read() -> None:
    text = call("get_time", f"{{timezone:{E}UTC{E}}}")
    parser = streamparse.StreamParser(FMT, tools=TOOLS, emit_calls="progressive")
    first = next(end for end in range(1, len(text) + 1) if any(d.tool_calls for d in parser.feed(text[end - 1])))
    assert text[:first].endswith("call:get_time{")
    parser.feed(text[first:])
    parser.close()
    assert named(parser.message) == [("get_time", {"timezone": "UTC"})]


def test_token_aware_mode() -> None:
    tokens = [Token("Ok."), Token("<start_function_call>", special=True), Token("call:f{a:"),
              Token(E, special=True), Token("x"), Token(E, special=True), Token("}"),
              Token("<end_function_call>", special=True), Token("<start_function_response>", special=True)]
    message = parse(tokens, FMT, special_tokens="require")
    assert (message.content, named(message)) == ("Ok.", [("f", {"a": "x"})])
    plain = parse([Token("<start_function_call>call:f{}<end_function_call>")], FMT, special_tokens="require")
    assert plain.tool_calls == [] and plain.content == "<start_function_call>call:f{}<end_function_call>"


def test_render_writes_what_the_template_writes_and_reads_back() -> None:
    from streamparse import ToolCall
    message = Message(content=" Done. ", reasoning="", tool_calls=[
        ToolCall("c", "f", {"b": [1, None], "a": {"z": True, "y": "s"}, "k y": 0.75}, "")])
    text = streamparse.render(message, FMT)
    assert text == f"Done.<start_function_call>call:f{{a:{{y:{E}s{E},z:true}},b:[1,None],k y:0.75}}<end_function_call>"
    assert named(read(text)) == [("f", {"b": [1, None], "a": {"z": True, "y": "s"}, "k y": 0.75})]


def test_detection_from_the_template_and_its_markers() -> None:
    template = SHARED / "templates" / "functiongemma.jinja"
    if template.exists():
        assert streamparse.detect_format(template.read_text()) == FMT
    assert streamparse.detect_format("{{ '<start_function_declaration>' }}{{ messages }}") == FMT
    assert streamparse.detect_format("{% if x %}<start_function_call>{% endif %}") == FMT
    assert not streamparse.thinking_forced_open("<start_of_turn>model\n", FMT)
