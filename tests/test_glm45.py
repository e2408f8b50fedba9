"""GLM-4.5 / 4.6 / 4.7 (`glm45`, aliases `glm46`, `glm47`): the format, its typing and streaming, by example.

FORMATS.md, "glm45" and the second-wave decisions (7: a value without its closer loses one newline
before the next element; 8: a missing `</tool_call>` at the end is accepted when the last value is
closed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import (
    FIXTURES,
    SHARED,
    assert_every_mode_agrees,
    assert_stream_matches,
    ids,
    named_calls,
    run_stream,
    shared_cases,
)
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, Token, ToolCall

FORMAT = "glm45"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_new_families.json"


def parse(text: str, **kwargs: Any) -> streamparse.Message:
    return streamparse.parse(text, FORMAT, id_factory=ids, **kwargs)


def call(name: str, *pairs: tuple[str, str], sep: str = "\n") -> str:
    args = "".join(f"<arg_key>{k}</arg_key>{sep}<arg_value>{v}</arg_value>{sep}" for k, v in pairs)
    return f"<tool_call>{name}{sep}{args}</tool_call>"


calls_of = named_calls


def argument_fragments(deltas: list[streamparse.Delta]) -> list[str]:
    return [tc.arguments for d in deltas for tc in d.tool_calls if tc.arguments]


def real_cases() -> list[dict[str, Any]]:
    return shared_cases(FORMAT)  # type: ignore[return-value]


# ----------------------------------------------------------------- real outputs


def test_glm45_reasoning_content_and_two_calls() -> None:
    text = (FIXTURES / FORMAT / "glm45_reasoning_two_calls.txt").read_text()
    msg = parse(text, tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("the tags a list.")
    assert msg.content == "I'll look both up."
    assert calls_of(msg) == [
        ("get_weather", {"location": "Paris, France", "days": 3}),
        ("search", {"query": 'packing list | "rain" & <wind>',
                    "filters": {"folder": "travel", "year": 2025, "shared": False}, "tags": ["paris", "weather"]}),
    ]
    assert msg.rejected == []


def test_glm47_writes_no_newlines_and_its_prompt_opens_reasoning() -> None:
    text = (FIXTURES / FORMAT / "glm47_write_file.txt").read_text()
    prompt = (FIXTURES / FORMAT / "glm47_write_file.prompt").read_text()
    assert streamparse.thinking_forced_open(prompt, FORMAT)
    msg = parse(text, tools=TOOLS, prompt=prompt)
    assert msg.reasoning == "The file needs a main function that prints to stderr."
    assert msg.content == "Writing it now."
    [written] = msg.tool_calls
    # Values are byte-exact: the code's trailing newline is payload.
    assert written.arguments == {"path": "app/main.py", "content": (
        'import sys\n\n\ndef main() -> int:\n    print("<ok>", file=sys.stderr)\n    return 0\n')}


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("case", real_cases(), ids=lambda c: f'{c["template"]}:{c["case"]}:{c["template_kwargs"]}')
def test_every_real_render_parses_in_both_modes_and_one_character_chunks(case: dict[str, Any]) -> None:
    expected = case["expected"]
    forced = case["thinking_forced_open"]
    assert streamparse.thinking_forced_open(case["prompt_tail"], FORMAT) is forced
    msg = parse(case["output"], tools=case["tools"], thinking_forced_open=forced)
    assert msg.content == (expected["content"] or "").strip()
    assert msg.reasoning == (expected["reasoning"] or "").strip()
    assert calls_of(msg) == [(c["name"], c["arguments"]) for c in expected["tool_calls"] or []]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(case["output"]), format=FORMAT, tools=case["tools"],
                                      thinking_forced_open=forced, emit_calls=emit, id_factory=ids)
        assert streamed == msg
        assert_stream_matches(folded, msg)


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
def test_render_is_what_the_glm45_template_writes() -> None:
    """`render` writes the 4.5/4.6 template's turn; without reasoning it leaves out the empty
    `<think></think>` that the template writes into the output (or, `enable_thinking=false`, the prompt)."""
    checked = 0
    for case in real_cases():
        if case["template"] not in ("GLM-4.5.jinja", "GLM-4.6.jinja"):
            continue
        expected = case["expected"]
        message = Message(content=expected["content"] or "", reasoning=expected["reasoning"] or "", tool_calls=[
            ToolCall(f"id{i}", c["name"], c["arguments"], "") for i, c in enumerate(expected["tool_calls"] or [])])
        rendered = streamparse.render(message, FORMAT)
        empty_block = "\n<think></think>" if not message.reasoning and not case["template_kwargs"] else ""
        assert empty_block + rendered == case["output"], case["case"]
        checked += 1
    assert checked == 40


def test_aliases_name_the_same_format() -> None:
    text = call("get_weather", ("location", "Paris"), sep="")
    assert streamparse.parse(text, "glm47", id_factory=ids) == streamparse.parse(text, "glm46", id_factory=ids) == \
        parse(text)


# ----------------------------------------------------------------- names, keys, values


def test_the_name_runs_to_a_newline_or_the_first_arg_key_and_is_trimmed() -> None:
    args = "<arg_key>location</arg_key><arg_value>P</arg_value></tool_call>"
    assert calls_of(parse("<tool_call> get_weather \n" + args)) == [("get_weather", {"location": "P"})]
    assert calls_of(parse("<tool_call>get_weather" + args)) == [("get_weather", {"location": "P"})]


def test_spaces_between_elements_as_ik_llama_cpp_serves_glm_45_air() -> None:
    text = "<tool_call>ls <arg_key>dirPath</arg_key> <arg_value>backend</arg_value> </tool_call>"
    assert calls_of(parse(text)) == [("ls", {"dirPath": "backend"})]


def test_a_call_without_arguments_with_and_without_the_newline() -> None:
    assert calls_of(parse("<tool_call>list_calendars\n</tool_call>")) == [("list_calendars", {})]
    assert calls_of(parse("<tool_call>list_calendars</tool_call>")) == [("list_calendars", {})]


def test_keys_are_trimmed_and_values_are_byte_exact() -> None:
    text = call("f", ("  path\n", "  a.py  "), ("body", "\nline\n"))
    assert calls_of(parse(text)) == [("f", {"path": "  a.py  ", "body": "\nline\n"})]


def test_a_repeated_key_keeps_its_last_value() -> None:
    text = call("f", ("a", "1"), ("b", "2"), ("a", "3"), sep="")
    msg = parse(text)
    assert calls_of(msg) == [("f", {"a": "3", "b": "2"})]
    # Strict JSON, each key once (#12): the key where it first stood, with its last value.
    assert msg.tool_calls[0].arguments_json == '{"a": "3", "b": "2"}'
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(text), format=FORMAT, emit_calls=emit, id_factory=ids)
        assert streamed == msg
        assert_stream_matches(folded, msg)


def test_a_repeated_object_key_keeps_its_last_value_as_written() -> None:
    """Last value wins, each key once at its first place; an object written as strict JSON stays its
    own text in `arguments_json` (tagged_params), the dropped value leaves no trace."""
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"o": {"type": "object"}}}}]
    text = call("f", ("o", '{"old": 1}'), ("b", "2"), ("o", ' {"new":[1,2.50]} '))
    msg = parse(text, tools=tools)
    assert calls_of(msg) == [("f", {"o": {"new": [1, 2.5]}, "b": "2"})]
    assert msg.tool_calls[0].arguments_json == '{"o": {"new":[1,2.50]}, "b": "2"}'
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(text), format=FORMAT, tools=tools, emit_calls=emit, id_factory=ids)
        assert streamed == msg
        assert_stream_matches(folded, msg)


def test_progressive_mode_starts_a_call_at_its_name_and_sends_its_arguments_when_it_closes() -> None:
    # A repeated key may come at any point and would change text already sent.
    text = call("f", ("a", "1"), ("b", "2"))
    parser = streamparse.StreamParser(format=FORMAT, emit_calls="progressive", id_factory=ids)
    deltas = [delta for char in text[: text.index("</tool_call>")] for delta in parser.feed(char)]
    started = [d.tool_calls[0] for d in deltas if d.tool_calls]
    assert [(s.name, s.arguments) for s in started] == [("f", "")]
    closing = [d.tool_calls[0] for d in parser.feed("</tool_call>") + parser.close() if d.tool_calls]
    assert [(s.name, s.arguments) for s in closing] == [(None, '{"a": "1", "b": "2"}')]


def test_values_are_typed_by_the_schema_strings_stay_raw() -> None:
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {
        "zip": {"type": "string"}, "n": {"type": "integer"}, "ok": {"type": "boolean"}, "x": {"type": "number"},
        "none": {"type": ["string", "null"]}, "o": {"type": "object"}, "l": {"type": "array"}}}}]
    text = call("f", ("zip", "03106"), ("n", " 45 "), ("ok", "false"), ("x", "0.75"), ("none", "null"),
                ("o", '{"k": [1]}'), ("l", "[1, 2]"), ("other", "45"))
    assert calls_of(parse(text, tools=tools)) == [("f", {
        "zip": "03106", "n": 45, "ok": False, "x": 0.75, "none": None, "o": {"k": [1]}, "l": [1, 2], "other": "45"})]
    # Without tools every value stays a string.
    assert calls_of(parse(text))[0][1]["n"] == " 45 "


def test_a_value_without_its_closer_ends_at_the_next_key_or_the_call_end_and_loses_one_newline() -> None:
    text = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x\n\n<arg_key>b</arg_key>\n<arg_value>y\r\n</tool_call>"
    assert calls_of(parse(text)) == [("f", {"a": "x\n", "b": "y"})]
    # With its closer, the newline is payload.
    assert calls_of(parse(call("f", ("a", "x\n")))) == [("f", {"a": "x\n"})]


def test_xml_has_no_escaping_a_value_ends_at_the_first_closer() -> None:
    text = "<tool_call>f<arg_key>code</arg_key><arg_value>a </arg_value> b</arg_value></tool_call>"
    assert [r.status for r in parse(text).rejected] == ["invalid_json"]
    text = "<tool_call>f<arg_key>code</arg_key><arg_value>if a<b and c>d: </tool_call></arg_value></tool_call>"
    msg = parse(text)  # the call ends at the first </tool_call>; the rest is content
    assert calls_of(msg) == [("f", {"code": "if a<b and c>d: "})]
    assert msg.content == "</arg_value></tool_call>"


@pytest.mark.parametrize("body", [
    "f\n<arg_key>a</arg_key>\n</tool_call>",  # a key without its value
    "f\n<arg_key>a</arg_key>\n<arg_value>x</arg_value>\njunk\n</tool_call>",  # text between elements
    "f\n<arg_key>a</arg_key>\nzz<arg_value>x</arg_value></tool_call>",
    "f<arg_value>x</arg_value></tool_call>",  # a value without a key
    "\n<arg_key>a</arg_key><arg_value>x</arg_value></tool_call>",  # no name
    "</tool_call>",  # empty
])
def test_malformed_calls_are_invalid_json_with_their_raw_text(body: str) -> None:
    text = "Before. <tool_call>" + body + " After."
    msg = parse(text)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == "<tool_call>" + body
    assert msg.content == "Before.  After."


# ----------------------------------------------------------------- the end of the output


@pytest.mark.parametrize("text", [
    "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n",
    "<tool_call>get_weather<arg_key>location</arg_key><arg_value>Paris</arg_value>",
])
def test_a_complete_call_without_its_end_tag_at_the_end_is_accepted(text: str) -> None:
    assert calls_of(parse(text)) == [("get_weather", {"location": "Paris"})]
    assert calls_of(parse("<tool_call>list_calendars\n")) == [("list_calendars", {})]


@pytest.mark.parametrize("text", [
    "<tool_call>",
    "<tool_call>list_calendars",  # inside the name
    "<tool_call>get_weather\n<arg_key>loc",  # inside a key
    "<tool_call>get_weather\n<arg_key>location</arg_key>",  # a key with no value yet
    "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Par",  # inside a value
])
def test_a_call_cut_inside_a_name_key_or_value_is_truncated(text: str) -> None:
    msg = parse("Let me check. " + text)
    assert msg.content == "Let me check."
    assert [(r.status, r.raw) for r in msg.rejected] == [("truncated", text)]


# ----------------------------------------------------------------- reasoning


def test_reasoning_is_read_at_the_start_and_an_empty_block_is_no_reasoning() -> None:
    assert (parse("\n<think></think>\nHello.").reasoning, parse("\n<think></think>\nHello.").content) == ("", "Hello.")
    msg = parse("\n<think>Plan.</think>\nAnswer. <think>x</think>")
    assert (msg.reasoning, msg.content) == ("Plan.", "Answer. <think>x</think>")


def test_forced_open_glm47_and_a_stray_closer_without_it() -> None:
    assert (parse("Plan.</think>Answer.", thinking_forced_open=True).reasoning) == "Plan."
    assert parse("</think>Answer.").content == "</think>Answer."


def test_a_call_inside_reasoning_stays_reasoning() -> None:
    text = "<think>I could " + call("f", ("a", "1")) + " now.</think>Done."
    msg = parse(text)
    assert msg.tool_calls == [] and "<tool_call>f" in msg.reasoning and msg.content == "Done."


# ----------------------------------------------------------------- streaming


def test_string_values_are_sent_json_escaped_when_the_call_closes() -> None:
    text = call("write_file", ("path", "a.py"), ("content", 'print("hi")\n\tx = 1\n'))
    folded, streamed = run_stream(list(text), format=FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    parser = streamparse.StreamParser(FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    before = [delta for char in text[: text.index("</tool_call>")] for delta in parser.feed(char)]
    assert [(d.tool_calls[0].name, d.tool_calls[0].arguments) for d in before if d.tool_calls] == [("write_file", "")]
    after = parser.feed("</tool_call>") + parser.close()
    assert argument_fragments(after) == [streamed.tool_calls[0].arguments_json]
    assert '\\"hi\\"' in streamed.tool_calls[0].arguments_json and "\\t" in streamed.tool_calls[0].arguments_json
    assert streamed.tool_calls[0].arguments == {"path": "a.py", "content": 'print("hi")\n\tx = 1\n'}
    assert_stream_matches(folded, streamed)


def test_token_aware_mode_reads_the_glm_special_tokens() -> None:
    pieces = ["<tool_call>", "get_weather", "<arg_key>", "location", "</arg_key>", "<arg_value>", "Paris",
              "</arg_value>", "</tool_call>"]
    tokens = [Token(p, special=p.startswith("<")) for p in pieces]
    msg = streamparse.parse(tokens, FORMAT, special_tokens="require", id_factory=ids)
    assert calls_of(msg) == [("get_weather", {"location": "Paris"})]
    # The same text spelled by ordinary tokens is no call.
    plain = streamparse.parse([Token(p) for p in pieces], FORMAT, special_tokens="require")
    assert plain.tool_calls == [] and "get_weather" in plain.content


@given(data=st.data(), sep=st.sampled_from(["", "\n", " ", "\r\n"]),
       value=st.text(st.sampled_from(list("ab <>/\n\t\"\\é")), max_size=12))
def test_any_value_and_separator_in_both_modes(data: st.DataObject, sep: str, value: str) -> None:
    if any(tag in value for tag in ("</arg_value>", "<arg_key>")):
        return
    text = "Hi." + call("f", ("a", value), ("b", "2"), sep=sep)
    msg = assert_every_mode_agrees(data, text, FORMAT, None)
    assert calls_of(msg) == [("f", {"a": value, "b": "2"})]
