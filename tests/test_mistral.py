"""Mistral (Nemo, Small 3.2, Devstral, Magistral, Ministral 3): the format, and the Decisions of
FORMATS.md, by example."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FIXTURES, agreeing, assert_stream_matches, fold, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Delta, Message, StreamParser, Token, ToolCall, ToolCallDelta, json_reader
from streamparse.families import mistral
from streamparse.families.mistral import render_call_id, render_nemo
from streamparse.registry import get_format
from streamparse.testing import messages, splittings, text_for

TOOLS = json.loads((FIXTURES / "mistral" / "tools.json").read_text())
MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
EMIT = ["validated", "progressive"]


def fixture(name: str) -> str:
    return (FIXTURES / "mistral" / name).read_text()


def parse(text: str, **kwargs: Any) -> Message:
    return streamparse.parse(text, "mistral", **kwargs)


def calls(message: Message) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def rejected(message: Message) -> list[tuple[str, str]]:
    return [(r.status, r.raw) for r in message.rejected]


def assert_streams_the_same(text: str, **kwargs: Any) -> Message:
    """Chunk by chunk, in both emit modes, the deltas add up to parse(text), and so does the message."""
    return agreeing(text, "mistral", sizes=(1, 2, 5, 13), **kwargs)


# ------------------------------------------------------------------ the three wire versions


def test_v11_magistral_reasoning_content_and_parallel_calls() -> None:
    msg = parse(fixture("magistral_reasoning_two_calls.txt"), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("in parallel.")
    assert msg.content == "Let me check both for you."
    assert calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                          ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []
    assert all(MISTRAL_ID.fullmatch(c.id) for c in msg.tool_calls)


def test_small_3_2_keeps_the_model_ids() -> None:
    msg = parse(fixture("small32_call_id.txt"), tools=TOOLS)
    assert [(c.id, c.name) for c in msg.tool_calls] == [("X7kP2mQ9z", "get_weather"), ("Hq3Lw8Rt5", "get_time")]
    assert msg.tool_calls[1].arguments == {"timezone": "Europe/Paris"}


def test_nemo_one_list_is_several_calls_with_their_ids() -> None:
    msg = parse(fixture("nemo_three_calls.txt"), tools=TOOLS)
    assert calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                          ("get_time", {"timezone": "Europe/Paris"}), ("get_weather", {"location": "Lyon"})]
    assert [c.id for c in msg.tool_calls][:2] == ["X7kP2mQ9z", "Hq3Lw8Rt5"]
    assert MISTRAL_ID.fullmatch(msg.tool_calls[2].id)  # no id written: one of Mistral's shape
    assert msg.content == "" and msg.rejected == []


def test_magistral_2506_think_tags_are_reasoning_too() -> None:
    msg = parse(fixture("magistral_2506_think_tags.txt"), tools=TOOLS)
    assert msg.reasoning.startswith("Okay, the user") and msg.reasoning.endswith("Asia/Tokyo.")
    assert msg.content == "I will look that up."
    assert calls(msg) == [("get_time", {"timezone": "Asia/Tokyo"})]


def test_the_version_is_decided_per_call() -> None:
    text = ('[TOOL_CALLS][{"name": "a", "arguments": {"n": 1}}][TOOL_CALLS]b[CALL_ID]Id0000000[ARGS]{"n": 2}'
            '[TOOL_CALLS]c[ARGS]{"n": 3}[TOOL_CALLS]d{"n": 4}')
    msg = assert_streams_the_same(text)
    assert calls(msg) == [("a", {"n": 1}), ("b", {"n": 2}), ("c", {"n": 3}), ("d", {"n": 4})]
    assert msg.tool_calls[1].id == "Id0000000"


def test_name_then_json_without_args_marker_is_a_call_and_head_whitespace_is_framing() -> None:
    msg = parse('[TOOL_CALLS] get_time {"timezone": "UTC"}[TOOL_CALLS]\nget_time [CALL_ID] abc [ARGS] {}')
    assert calls(msg) == [("get_time", {"timezone": "UTC"}), ("get_time", {})]
    assert msg.tool_calls[1].id == "abc"


def test_a_model_written_id_is_kept_whatever_its_shape() -> None:
    text = ('[TOOL_CALLS]f[CALL_ID]call_7-x.y[ARGS]{}'
            '[TOOL_CALLS][{"name": "g", "arguments": {}, "id": "toolu_01 ABC"}]')
    assert [c.id for c in parse(text).tool_calls] == ["call_7-x.y", "toolu_01 ABC"]


def test_an_empty_id_is_no_id() -> None:
    msg = parse('[TOOL_CALLS]f[CALL_ID][ARGS]{}[TOOL_CALLS][{"name": "g", "arguments": {}, "id": " "}]')
    assert all(MISTRAL_ID.fullmatch(c.id) for c in msg.tool_calls)


# ------------------------------------------------------------------ where the envelope ends


def test_the_arguments_end_where_the_json_value_ends_and_text_after_is_content() -> None:
    text = fixture("devstral_write_file.txt")
    msg = assert_streams_the_same(text, tools=TOOLS)
    assert msg.content == "I'll write the helper first. Done: `tags([1, 2])` returns `['[1]', '[2]']`."
    assert msg.tool_calls[0].arguments["content"].startswith('def tags(items):\n    """Wrap each item: [TOOL_CALLS]')
    assert msg.tool_calls[0].arguments_json.endswith('for i in items]\\n"}')


@pytest.mark.parametrize(("tail", "content"), [
    ("}", "}"), ("]", "]"), (" }} and ]", "}} and ]"), ("\n\nDone.", "Done."), ('{"b": 2}', '{"b": 2}'),
])
def test_brackets_after_the_arguments_are_content(tail: str, content: str) -> None:
    msg = assert_streams_the_same('[TOOL_CALLS]f[ARGS]{"a": [1, {"b": "}"}]}' + tail)
    assert calls(msg) == [("f", {"a": [1, {"b": "}"}]})] and msg.content == content


def test_tool_calls_tokens_inside_json_strings_are_data() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"note": "say [TOOL_CALLS]g[ARGS]{} or [CALL_ID]"} after'
    msg = assert_streams_the_same(text)
    assert calls(msg) == [("f", {"note": "say [TOOL_CALLS]g[ARGS]{} or [CALL_ID]"})]
    assert msg.content == "after"


@pytest.mark.parametrize("text", [
    "[TOOL_CALLS]f[ARGS]{'city': 'Paris'} and more prose",
    '[TOOL_CALLS]f[ARGS]{"city": Paris} and more prose',
    '[TOOL_CALLS]f[ARGS]{"a": 1]] and more prose',
    '[TOOL_CALLS]f[ARGS]{"a": 01} and more prose',
    '[TOOL_CALLS]f[ARGS]{"a": "tab\there"} and more prose',
])
def test_arguments_that_are_not_json_make_a_call_that_runs_to_the_end(text: str) -> None:
    msg = assert_streams_the_same(text)
    assert msg.tool_calls == [] and msg.content == ""
    assert [(r.status, r.raw, r.name) for r in msg.rejected] == [("invalid_json", text, "f")]
    assert "not valid JSON" in msg.rejected[0].errors[0]


def test_arguments_that_are_not_json_run_to_the_next_tool_calls() -> None:
    text = "[TOOL_CALLS]f[ARGS]{'a': 1} oops [1][TOOL_CALLS]g[ARGS]{\"b\": 2}"
    msg = assert_streams_the_same(text)
    assert rejected(msg) == [("invalid_json", "[TOOL_CALLS]f[ARGS]{'a': 1} oops [1]")]
    assert calls(msg) == [("g", {"b": 2})] and msg.content == ""


def test_a_tool_calls_token_interrupts_a_call() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"a": [TOOL_CALLS]g[ARGS]{}[TOOL_CALLS]h[TOOL_CALLS]i[ARGS]{}'
    msg = assert_streams_the_same(text)
    assert rejected(msg) == [("invalid_json", '[TOOL_CALLS]f[ARGS]{"a": '), ("invalid_json", "[TOOL_CALLS]h")]
    assert [c.name for c in msg.tool_calls] == ["g", "i"]


def test_prose_after_tool_calls_is_a_rejected_call_not_a_cut_off_one() -> None:
    text = "Sure![TOOL_CALLS]Sorry, I cannot call tools here."
    msg = assert_streams_the_same(text)
    assert msg.content == "Sure!"
    assert rejected(msg) == [("invalid_json", "[TOOL_CALLS]Sorry, I cannot call tools here.")]
    assert "tool name 'Sorry'" in msg.rejected[0].errors[0]


@pytest.mark.parametrize(("text", "status", "errors"), [
    ("[TOOL_CALLS]", "truncated", "right after [TOOL_CALLS]"),
    ("[TOOL_CALLS]  \n", "truncated", "right after [TOOL_CALLS]"),
    ("[TOOL_CALLS]get_weat", "truncated", "before the call's arguments"),
    ("[TOOL_CALLS]get_weather[AR", "truncated", "before the call's arguments"),
    ("[TOOL_CALLS]f[CALL_ID]abc", "truncated", "before the call's arguments"),
    ('[TOOL_CALLS]get_weather[ARGS]{"location": "Par', "truncated", "inside the arguments of 'get_weather'"),
    ('[TOOL_CALLS]f[ARGS]{"a": tr', "truncated", "inside the arguments"),
    ('[TOOL_CALLS]f[ARGS]{"a": 1.', "truncated", "inside the arguments"),
    ('[TOOL_CALLS]f[ARGS]{"a": "\\u12', "truncated", "inside the arguments"),
    ("[TOOL_CALLS][", "truncated", "inside the call list"),
    ("[TOOL_CALLS]f[ARGS]", "truncated", "inside the arguments"),
    ("[TOOL_CALLS]f[ARGS]{'a'", "invalid_json", "not valid JSON"),
    ("[TOOL_CALLS]f[ARGS]12", "invalid_json", "must be a JSON object, got int"),
    ("[TOOL_CALLS]get weather[ARGS]{}", "invalid_json", "expected [ARGS]"),
    ("[TOOL_CALLS][ARGS]{}", "invalid_json", "expected a tool name after [TOOL_CALLS]"),
    ("[TOOL_CALLS]f[CALL_ID]a[CALL_ID]b[ARGS]{}", "invalid_json", "after the call id"),
    ("[TOOL_CALLS][]", "invalid_json", "the call list is empty"),
])
def test_bad_calls_are_rejected_with_their_raw_text(text: str, status: str, errors: str) -> None:
    msg = assert_streams_the_same(text)
    assert msg.tool_calls == [] and msg.content == ""
    assert rejected(msg) == [(status, text)]
    assert errors in msg.rejected[0].errors[0]


def test_an_empty_envelope_is_invalid_json() -> None:
    msg = assert_streams_the_same("[TOOL_CALLS] [TOOL_CALLS]f[ARGS]{}")
    assert rejected(msg) == [("invalid_json", "[TOOL_CALLS] ")] and calls(msg) == [("f", {})]


def test_arguments_that_are_json_but_not_an_object_are_rejected_and_text_after_is_content() -> None:
    msg = assert_streams_the_same('[TOOL_CALLS]f[ARGS][1, 2] then [TOOL_CALLS]g[ARGS]"text" end')
    assert rejected(msg) == [("invalid_json", "[TOOL_CALLS]f[ARGS][1, 2]"),
                             ("invalid_json", '[TOOL_CALLS]g[ARGS]"text"')]
    assert msg.rejected[0].errors == ["[ARGS]: arguments must be a JSON object, got list"]
    assert msg.content == "then  end"


def test_arguments_as_a_json_string_holding_an_object_are_accepted() -> None:
    msg = assert_streams_the_same('[TOOL_CALLS]f[ARGS]"{\\"a\\": 1}"')
    assert [(c.arguments, c.arguments_json) for c in msg.tool_calls] == [({"a": 1}, '{"a": 1}')]


def test_arguments_json_is_the_text_the_model_wrote() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"b":2,  "a":[1,2]}[TOOL_CALLS][{"name":"g","arguments":{ "x" : 1.50 }}]'
    assert [c.arguments_json for c in parse(text).tool_calls] == ['{"b":2,  "a":[1,2]}', '{ "x" : 1.50 }']


# ------------------------------------------------------------------ Nemo lists


def test_a_nemo_list_cut_off_after_complete_elements_keeps_those_calls() -> None:
    text = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "argu'
    msg = assert_streams_the_same(text)
    assert calls(msg) == [("f", {"a": 1})]
    assert [(r.status, r.errors) for r in msg.rejected] == [
        ("truncated", ["$[1]: the output ended inside the call list"])]


def test_a_nemo_list_missing_only_its_closing_bracket_is_complete() -> None:
    msg = assert_streams_the_same('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}')
    assert calls(msg) == [("f", {"a": 1})] and msg.rejected == []
    cut_after_comma = assert_streams_the_same('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}},')
    assert calls(cut_after_comma) == [("f", {"a": 1})]
    assert [r.status for r in cut_after_comma.rejected] == ["truncated"]


def test_several_nemo_lists_are_several_sets_of_calls() -> None:
    text = ('[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]\n'
            '[TOOL_CALLS][{"name": "c", "arguments": {}}]')
    msg = assert_streams_the_same(text)
    assert [c.name for c in msg.tool_calls] == ["a", "b", "c"] and msg.content == ""


def test_a_broken_element_keeps_the_calls_before_it_and_the_rest_runs_to_the_next_tool_calls() -> None:
    text = ('[TOOL_CALLS][{"name": "a", "arguments": {}}, {\'name\': \'b\'}] Sure.'
            '[TOOL_CALLS][{"name": "c", "arguments": {}}] Done.')
    msg = assert_streams_the_same(text)
    assert [c.name for c in msg.tool_calls] == ["a", "c"]
    assert [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {'name': 'b'}] Sure."
    assert msg.rejected[0].errors[0].startswith("$[1]: not valid JSON")
    assert msg.content == "Done."


@pytest.mark.parametrize(("element", "error"), [
    ("5", "$[1]: a call must be a JSON object, got a number"),  # the json_call kind's wording
    ('{"arguments": {}}', '$[1].name: the call object has no "name" string'),
    ('{"name": "g", "arguments": [1]}', "$[1].arguments: arguments must be a JSON object, got list"),
    ('{"name": "g", "name": "h", "arguments": {}}', "$[1]: the call object has 'name' more than once"),
])
def test_an_element_that_is_not_a_call_is_rejected_and_the_others_are_kept(element: str, error: str) -> None:
    text = '[TOOL_CALLS][{"name": "f", "arguments": {}}, ' + element + ', {"name": "z", "arguments": {}}]'
    msg = assert_streams_the_same(text)
    assert [c.name for c in msg.tool_calls] == ["f", "z"]
    assert [(r.status, r.errors) for r in msg.rejected] == [("invalid_json", [error])]


def test_nemo_lenient_keys_parameters_and_no_arguments() -> None:
    text = ('[TOOL_CALLS][{"name": "f", "parameters": {"a": 1}}, {"name": "g"}, '
            '{"name": "h", "arguments": "{\\"b\\": 2}"}]')
    msg = assert_streams_the_same(text)
    assert [(c.name, c.arguments, c.arguments_json) for c in msg.tool_calls] == [
        ("f", {"a": 1}, '{"a": 1}'), ("g", {}, "{}"), ("h", {"b": 2}, '{"b": 2}')]
    # Both keys: which one holds the arguments is unclear (and a stream may have sent the first).
    both = parse('[TOOL_CALLS][{"name": "f", "parameters": {"p": 1}, "arguments": {"a": 2}}]')
    assert both.tool_calls == [] and [r.status for r in both.rejected] == ["invalid_json"]
    assert "both 'arguments' and 'parameters'" in both.rejected[0].errors[0]


def test_a_bare_call_object_after_tool_calls_is_one_call() -> None:
    msg = assert_streams_the_same('[TOOL_CALLS]{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"} ok')
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [("abcdefghi", "f", {"a": 1})]
    assert msg.content == "ok"


def test_a_list_after_a_nemo_list_without_its_own_tool_calls_is_content() -> None:
    msg = assert_streams_the_same('[TOOL_CALLS][{"name": "f", "arguments": {}}] [1, 2] are the inputs.')
    assert [c.name for c in msg.tool_calls] == ["f"] and msg.content == "[1, 2] are the inputs."


# ------------------------------------------------------------------ content, reasoning, look-alikes


@pytest.mark.parametrize("text", [
    "Arrays look like [1, 2] and maps like {a: b}]",
    "The [TOOL_ token is not a [TOOL_CALLS token, nor is [TOOL_CALLS ] one.",
    "Markers in prose: [ARGS], [CALL_ID]X, [/THINK] and a late [THINK]x[/THINK] stay content.",
    "a </think> b <think>c</think>",
])
def test_bracket_look_alikes_in_content_stay_content(text: str) -> None:
    msg = assert_streams_the_same(text)
    assert msg.content == text and msg.reasoning == "" and msg.tool_calls == [] and msg.rejected == []


def test_a_tag_prefix_is_held_back_then_released_as_content() -> None:
    parser = StreamParser("mistral")
    assert parser.feed("List [1] and [TOOL_") == [Delta(content="List [1] and")]
    assert parser.held_back == len(" [TOOL_")
    assert parser.feed("X]") == [Delta(content=" [TOOL_X]")]
    assert parser.close() == []


def test_reasoning_tags_and_their_own_closers() -> None:
    assert (parse("[THINK]a[/THINK]b").reasoning, parse("[THINK]a[/THINK]b").content) == ("a", "b")
    assert (parse("  <think>\na\n</think>\n\nb").reasoning, parse("<think>a</think>b").content) == ("a", "b")
    # Each opener closes with its own closer; reasoning that never closes runs to the end.
    assert parse("[THINK]a</think>b").reasoning == "a</think>b"
    msg = parse('[THINK]plan: [TOOL_CALLS]f[ARGS]{"a": 1}')
    assert msg.reasoning == 'plan: [TOOL_CALLS]f[ARGS]{"a": 1}' and msg.tool_calls == []


def test_forced_open_reasoning_ends_at_either_closer() -> None:
    for closer in ("[/THINK]", "</think>"):
        msg = parse(f"I think.{closer}Answer.", thinking_forced_open=True)
        assert (msg.reasoning, msg.content) == ("I think.", "Answer.")
    msg = parse("[THINK]I think.[/THINK]Answer.", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("I think.", "Answer.")


def test_calls_in_reasoning_are_extracted_on_request() -> None:
    text = '[THINK]plan [TOOL_CALLS]f[ARGS]{"a": 1} check[/THINK]Done.'
    msg = parse(text, tool_calls_in_reasoning="extract")
    assert (msg.reasoning, msg.content, calls(msg)) == ("plan  check", "Done.", [("f", {"a": 1})])


def test_content_around_calls_is_joined_as_written() -> None:
    assert parse('A\n[TOOL_CALLS]f[ARGS]{}\nB').content == "A\n\nB"
    assert parse('Checking:[TOOL_CALLS]f[ARGS]{}Done.').content == "Checking:Done."


# ------------------------------------------------------------------ ids and tools


def test_generated_ids_are_nine_alphanumerics_and_unique() -> None:
    assert MISTRAL_ID.fullmatch(get_format("mistral").id_factory(0))
    text = "".join(f"[TOOL_CALLS]f[ARGS]{{\"i\": {i}}}" for i in range(200))
    made = [c.id for c in parse(text).tool_calls]
    assert all(MISTRAL_ID.fullmatch(i) for i in made) and len(set(made)) == 200
    assert [c.id for c in parse("[TOOL_CALLS]f[ARGS]{}", id_factory=lambda n: f"mine{n}").tool_calls] == ["mine0"]


@pytest.mark.parametrize("render", [streamparse.render, render_call_id, render_nemo])
def test_aliases_and_tools_check_every_version(render: Callable[..., str]) -> None:
    message = Message(tool_calls=[ToolCall("aaaaaaaa1", "nope", {}, ""),
                                  ToolCall("aaaaaaaa2", "get_weather", {"location": 3}, ""),
                                  ToolCall("aaaaaaaa3", "get_time", {"timezone": "UTC"}, "")])
    text = render(message, "mistral") if render is streamparse.render else render(message)
    for name in ("mistral", "magistral", "devstral"):
        msg = streamparse.parse(text, name, tools=TOOLS)
        assert [c.name for c in msg.tool_calls] == ["get_time"]
        assert [(r.status, r.name) for r in msg.rejected] == [
            ("unknown_tool", "nope"), ("schema_violation", "get_weather")]
        assert msg.rejected[1].errors == ["$.location: 3 is not of type 'string'"]


# ------------------------------------------------------------------ progressive streaming


def progressive(text: str, size: int = 3, **kwargs: Any) -> list[ToolCallDelta]:
    parser = StreamParser("mistral", emit_calls="progressive", id_factory=ids, **kwargs)
    deltas = [d for i in range(0, len(text), size) for d in parser.feed(text[i:i + size])] + parser.close()
    return [tc for d in deltas for tc in d.tool_calls]


def test_progressive_v11_sends_the_name_then_the_raw_argument_text_as_written() -> None:
    pieces = progressive('[TOOL_CALLS]get_time[ARGS]{"timezone":  "Europe/Paris"} ok')
    assert (pieces[0].index, pieces[0].id, pieces[0].name, pieces[0].arguments) == (0, "call_0", "get_time", "")
    assert len(pieces) > 5 and all(p.id is None for p in pieces[1:])
    assert "".join(p.arguments for p in pieces) == '{"timezone":  "Europe/Paris"}'


def test_progressive_small_3_2_sends_the_model_id_with_the_name() -> None:
    pieces = progressive('[TOOL_CALLS]get_time[CALL_ID]Hq3Lw8Rt5[ARGS]{"timezone": "UTC"}')
    assert (pieces[0].id, pieces[0].name) == ("Hq3Lw8Rt5", "get_time")


def test_progressive_nemo_starts_a_call_once_its_id_is_known() -> None:
    # Nemo writes the id after the arguments: the call starts at the id, its arguments follow at once.
    pieces = progressive('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "X7kP2mQ9z"}, '
                         '{"id": "Bn6Vc1Zx4", "name": "g", "arguments": {"b": [2, 3]}}, '
                         '{"name": "h", "arguments": {}}]')
    first = [(p.index, p.id, p.name) for p in pieces if p.name]
    assert first == [(0, "X7kP2mQ9z", "f"), (1, "Bn6Vc1Zx4", "g"), (2, "call_2", "h")]
    assert [p.arguments for p in pieces if p.index == 0] == ["", '{"a": 1}']
    assert len([p for p in pieces if p.index == 1 and p.arguments]) > 2  # id first: streamed as written
    folded = fold([Delta(tool_calls=pieces)])
    assert [(c["name"], c["arguments"]) for c in folded.calls.values()] == [
        ("f", '{"a": 1}'), ("g", '{"b": [2, 3]}'), ("h", "{}")]


def test_progressive_nemo_holds_parameters_until_the_object_closes() -> None:
    text = '[TOOL_CALLS][{"name": "f", "id": "abcdefghi", "parameters": {"p": 1}, "arguments": {"a": 2}}]'
    pieces = progressive(text, size=1)
    assert "".join(p.arguments for p in pieces) == '{"a": 2}'
    assert_streams_the_same(text)


def test_progressive_marks_a_started_call_rejected_later() -> None:
    pieces = progressive("[TOOL_CALLS]get_time[ARGS]{'timezone': 'UTC'} more")
    assert pieces[0].name == "get_time" and pieces[-1].status == "invalid_json"
    duplicate = progressive('[TOOL_CALLS][{"name": "f", "id": "abcdefghi", "name": "g", "arguments": {}}]')
    assert duplicate[0].name == "f" and duplicate[-1].status == "invalid_json"
    violation = progressive('[TOOL_CALLS]get_time[ARGS]{"timezone": 5}', tools=TOOLS)
    assert violation[0].name == "get_time" and violation[-1].status == "schema_violation"


def test_progressive_does_not_start_an_unknown_tool() -> None:
    folded, message = run_stream(list('[TOOL_CALLS]nope[ARGS]{"a": 1}'), format="mistral",
                                 emit_calls="progressive", tools=TOOLS)
    assert folded.calls == {} and message.rejected[0].status == "unknown_tool"


# ------------------------------------------------------------------ token-aware mode


def test_token_aware_mode_reads_special_tokens_and_keeps_quoted_look_alikes_as_data() -> None:
    tokens = [Token("[TOOL_CALLS]", special=True), Token('write_file[ARGS]{"path": "a.md", "content": "Use '),
              Token("[TOOL_CALLS]"), Token(' to call."}'), Token(" Then [TOOL_CALLS]f[ARGS]{} as text.")]
    msg = streamparse.parse(tokens, "mistral", special_tokens="require", tools=TOOLS)
    assert [c.arguments for c in msg.tool_calls] == [{"path": "a.md", "content": "Use [TOOL_CALLS] to call."}]
    assert msg.content == "Then [TOOL_CALLS]f[ARGS]{} as text."
    assert get_format("mistral").special == ("[THINK]", "[/THINK]", "[TOOL_CALLS]")


# ------------------------------------------------------------------ properties of this format


RENDERERS = {"v11": streamparse.render, "small_3_2": render_call_id, "nemo": render_nemo}
_IDS = st.from_regex(r"[a-zA-Z0-9]{9}", fullmatch=True)
_AFTER = text_for("mistral")


@pytest.mark.parametrize("emit", EMIT)
@pytest.mark.parametrize("version", sorted(RENDERERS))
@given(data=st.data())
def test_every_version_round_trips_with_text_after_each_call(version: str, emit: str, data: st.DataObject) -> None:
    message = data.draw(messages("mistral"))
    # Ids within a message are unique (a repeated model id is replaced: test_ids_are_unique_within_a_message).
    call_ids = data.draw(st.lists(_IDS, min_size=len(message.tool_calls), max_size=len(message.tool_calls),
                                  unique=True))
    message = Message(message.content, message.reasoning,
                      [ToolCall(i, c.name, c.arguments, "") for i, c in zip(call_ids, message.tool_calls, strict=True)])
    render = RENDERERS[version]
    text = render(message, "mistral") if version == "v11" else render(message)
    after = data.draw(_AFTER)
    text += (" " + after) if after and message.tool_calls else ""
    parsed = parse(text, id_factory=ids)
    assert calls(parsed) == [(c.name, c.arguments) for c in message.tool_calls] and parsed.rejected == []
    expected_content = (message.content + " " + after).strip() if after and message.tool_calls else message.content
    assert (parsed.content, parsed.reasoning) == (expected_content, message.reasoning)
    if version != "v11":
        assert [c.id for c in parsed.tool_calls] == [c.id for c in message.tool_calls]
    folded, streamed = run_stream(data.draw(splittings(text)), format="mistral", emit_calls=emit, id_factory=ids)
    assert streamed == parsed
    assert_stream_matches(folded, parsed)


def _json_texts() -> st.SearchStrategy[str]:
    values = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
                  st.floats(allow_nan=False, allow_infinity=False),
                  st.lists(st.sampled_from([*'ab"\\/\n\t\x01[]{}:,é🚀', "[TOOL_CALLS]", "[ARGS]"]), max_size=6)
                  .map("".join)),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
        max_leaves=12)
    layouts = st.sampled_from([{}, {"indent": 2}, {"separators": (",", ":")}, {"ensure_ascii": False}])
    return st.tuples(st.one_of(st.lists(values, max_size=4), st.dictionaries(st.text(max_size=4), values, max_size=4)),
                     layouts).map(lambda v: json.dumps(v[0], **v[1]))


def _scan_all(body: str, cuts: list[int]) -> tuple[int | None, bool]:
    """Where a reader fed `body` in pieces ends it (None: it goes on), and whether it broke off."""
    reader, carry, done = mistral.BODY._value_scanner(), "", 0
    edges = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    for a, b in itertools.pairwise(edges):
        text = carry + body[a:b]
        result = reader.scan(text, 0)
        if result.end is not None:
            return done + result.end, reader.broken
        done += result.safe
        carry = text[result.safe:]
    return None, reader.broken


@given(value=_json_texts(), tail=st.sampled_from(["", " x", "}", "] y", "[TOOL_CALLS]"]), data=st.data())
def test_the_reader_ends_a_json_value_exactly_where_it_ends_under_any_chunking(value: str, tail: str,
                                                                              data: st.DataObject) -> None:
    for body in ("f[ARGS]" + value, value if value.startswith("[") else "g" + value):
        cuts = data.draw(st.lists(st.integers(0, len(body) + len(tail)), max_size=8))
        assert _scan_all(body + tail, cuts) == (len(body), False)


@given(value=_json_texts(), data=st.data())
def test_the_reader_decides_the_same_for_broken_json_under_any_chunking(value: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(value)))
    junk = data.draw(st.sampled_from(["'", "x", "01", "1.", ".5", "-", "tru", "\\q", "\\u12G", "\x02", ",]", "}",
                                      "e5"]))
    body = "f[ARGS]" + value[:at] + junk + value[at:] + " tail[TOOL_CALLS]g"
    whole = _scan_all(body, [])
    assert _scan_all(body, data.draw(st.lists(st.integers(0, len(body)), max_size=10))) == whole
    assert _scan_all(body, list(range(len(body)))) == whole


def _mistral_noise() -> st.SearchStrategy[str]:
    pieces = st.one_of(
        st.sampled_from(["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "<think>", "</think>",
                         "[TOOL_", "[AR", "[CALL", "get_time", "f", " ", "\n", "abc123XYZ",
                         '{"a": 1}', '{"a": [1, {"b": "[TOOL_CALLS]"}]}', "{", "}", "[", "]", ",", '"', "\\",
                         '[{"name": "f", "arguments": {"x": 1}}', ', {"name": "g", "id": "abcdefghi", "arguments": {}}',
                         '"id": "X7kP2mQ9z"', '"arguments": ', '"parameters": {"p": 2}', "1.5e3", "tr", "ue", "-"]),
        st.text(st.sampled_from(list('ab {}[]":,\n\\é🚀')), max_size=6),
    )
    return st.lists(pieces, max_size=20).map("".join)


def _nonspace(text: str) -> Counter[str]:
    return Counter(c for c in text if not c.isspace())


@given(text=_mistral_noise(), data=st.data())
def test_any_mistral_like_text_parses_the_same_under_any_chunking_and_loses_nothing(text: str,
                                                                                    data: st.DataObject) -> None:
    options = {"thinking_forced_open": data.draw(st.booleans()),
               "tools": data.draw(st.sampled_from([None, [{"name": "f", "parameters": {"type": "object"}}]]))}
    whole = parse(text, id_factory=ids, **options)
    out = whole.content + whole.reasoning + "".join(c.raw for c in whole.tool_calls)
    out += "".join(r.raw for r in whole.rejected)
    allowed: Counter[str] = Counter()
    for delimiter in get_format("mistral").delimiters:
        for char, count in _nonspace(delimiter).items():
            allowed[char] += count * text.count(delimiter)
    assert not (_nonspace(text) - _nonspace(out)) - allowed
    for emit in EMIT:
        folded, streamed = run_stream(data.draw(splittings(text)), format="mistral", emit_calls=emit,
                                      id_factory=ids, **options)
        assert streamed == whole
        assert_stream_matches(folded, whole)
    assert not any("internal error" in e for r in whole.rejected for e in r.errors)


# ------------------------------------------------------------------ linear work


def test_the_json_decoder_reads_each_character_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole containers are skimmed by the C decoder; failed tries stop once they cost twice the piece."""
    looked = [0]
    real = json_reader.DECODER

    class Counting:
        def raw_decode(self, text: str, pos: int) -> tuple[Any, int]:
            try:
                value, end = real.raw_decode(text, pos)
            except (ValueError, RecursionError):
                looked[0] += len(text) - pos
                raise
            looked[0] += end - pos
            return value, end

    monkeypatch.setattr(json_reader, "DECODER", Counting())
    deep = "[" * 3000 + "]" * 3000
    rows = json.dumps([{"id": i, "tags": [[1], [2]], "s": "x" * (i % 7)} for i in range(600)])
    for value in (deep, rows, '{"a": ' + deep + "}"):
        text = "[TOOL_CALLS]f[ARGS]" + value + " after"
        for size in (1, 7, 64, 1000, len(text)):
            looked[0] = 0
            parser = StreamParser("mistral")
            for i in range(0, len(text), size):
                parser.feed(text[i:i + size])
            parser.close()
            assert parser.message.content == "after"
            assert looked[0] <= 4 * (len(text) + 12 * (len(text) // size + 1)), (size, looked[0])


def test_the_calls_of_one_nemo_list_share_one_raw_text() -> None:
    """Built once per envelope: a list of N calls costs linear, not N times the list, to report."""
    text = "[TOOL_CALLS][" + ", ".join(f'{{"name": "f", "arguments": {{"i": {i}}}}}' for i in range(50)) + "]"
    msg = parse(text)
    assert len(msg.tool_calls) == 50 and msg.tool_calls[0].raw == text
    assert all(call.raw is msg.tool_calls[0].raw for call in msg.tool_calls)


def test_rejected_calls_of_one_nemo_list_go_back_into_content_once() -> None:
    tools = [{"name": "known", "parameters": {"type": "object"}}]
    text = 'Hi [TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]'
    message = streamparse.parse(text, "mistral", tools=tools, on_rejected="content")
    assert [r.status for r in message.rejected] == ["unknown_tool", "unknown_tool"]
    assert message.content == text


@pytest.mark.parametrize("emit", EMIT)
def test_ids_are_unique_within_a_message(emit: str) -> None:
    """A model-written id that repeats an earlier one (whatever became of that call) gets a generated id."""
    text = ('[TOOL_CALLS][{"name": "f", "arguments": {}, "id": "abcdefghi"}, {"name": "g", "arguments": {}, '
            '"id": "abcdefghi"}][TOOL_CALLS]h[CALL_ID]abcdefghi[ARGS]{}[TOOL_CALLS]k[CALL_ID]call_3[ARGS]{}')
    parsed = parse(text, id_factory=ids)
    assert [(c.name, c.id) for c in parsed.tool_calls] == [("f", "abcdefghi"), ("g", "call_1"), ("h", "call_2"),
                                                           ("k", "call_3")]
    folded, streamed = run_stream(list(text), format="mistral", emit_calls=emit, id_factory=ids)
    assert streamed == parsed
    assert_stream_matches(folded, parsed)
    # A generated id never repeats a model-written one: call_0 is taken by the model here.
    taken = parse('[TOOL_CALLS]f[CALL_ID]x[ARGS]{}[TOOL_CALLS]g[ARGS]{}', id_factory=lambda n: "x")
    assert len({c.id for c in taken.tool_calls}) == 2
