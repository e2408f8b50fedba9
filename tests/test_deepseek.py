"""DeepSeek R1 / V3 (`deepseek_r1`) and V3.1 (`deepseek_v3_1`): the formats and the Decisions, by example."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, assert_stream_matches, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st
from test_properties import assert_nothing_lost

import streamparse
from streamparse import parse
from streamparse.registry import get_format
from streamparse.testing import splittings

TOOLS = json.loads((FIXTURES / "deepseek_r1" / "tools.json").read_text())
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
FORMATS = ["deepseek_r1", "deepseek_v3_1"]


def r1_call(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}function{SEP}{name}\n```json\n{arguments}\n```{CALL_END}"


def v31_call(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{arguments}{CALL_END}"


def call(fmt: str, name: str, arguments: str = "{}") -> str:
    """One call envelope as the format writes it."""
    return r1_call(name, arguments) if fmt == "deepseek_r1" else v31_call(name, arguments)


def calls_of(message: streamparse.Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def statuses(message: streamparse.Message) -> list[tuple[str, str]]:
    return [(r.status, r.raw) for r in message.rejected]


# ----------------------------------------------------------------- real outputs

def test_r1_reasoning_markdown_content_and_two_calls() -> None:
    text = (FIXTURES / "deepseek_r1" / "r1_0528_reasoning_markdown_two_calls.txt").read_text()
    msg = parse(text, "deepseek_r1", TOOLS, thinking_forced_open=True)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("in parallel.")
    assert msg.content.startswith("Here is what I will look up:\n\n| tool | argument |\n|---|---|\n")
    assert msg.content.endswith('```python\nif 15 < temp > 10:\n    print("<mild>")\n```')
    assert calls_of(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                             ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.rejected == []


def test_v3_template_layout_with_the_calls_end_marker_repeated_after_a_later_call() -> None:
    text = (FIXTURES / "deepseek_r1" / "v3_three_calls_repeated_end.txt").read_text()
    msg = parse(text, "deepseek_v3", TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_weather", "get_time", "write_file"]
    assert msg.tool_calls[2].arguments["content"] == "# Paris\n\n```\nweather: pending\n```\n"
    assert (msg.content, msg.rejected) == ("", [])


def test_v3_template_omits_the_calls_end_marker_after_a_single_call() -> None:
    text = CALLS_BEGIN + r1_call("get_weather", '{"location": "Paris, France"}')
    msg = parse(text, "deepseek_r1", TOOLS)
    assert calls_of(msg) == [("get_weather", {"location": "Paris, France"})]
    assert (msg.content, msg.rejected) == ("", [])


def test_v31_thinking_mode_output_with_a_marker_inside_a_json_string() -> None:
    text = (FIXTURES / "deepseek_v3_1" / "thinking_content_two_calls.txt").read_text()
    msg = parse(text, "deepseek_v3_1", TOOLS, thinking_forced_open=True)
    assert msg.reasoning.startswith("The user asked") and msg.reasoning.endswith("inside the JSON string.")
    assert msg.content == "I'll fetch the forecast and save it.\n\n```bash\ncat notes/paris.md | head -n 3\n```"
    assert calls_of(msg) == [("get_weather", {"location": "Paris, France"}),
                             ("write_file", {"path": "notes/paris.md", "content": f"```\nmarker: {CALL_END}\n```"})]


def test_v31_non_thinking_output_is_content_from_the_start() -> None:
    text = "Sure.</think> No reasoning here." + CALLS_BEGIN + v31_call("get_time", '{"timezone": "UTC"}') + CALLS_END
    msg = parse(text, "deepseek_v3_1")
    assert (msg.reasoning, msg.content) == ("", "Sure.</think> No reasoning here.")
    assert calls_of(msg) == [("get_time", {"timezone": "UTC"})]


# ----------------------------------------------------------------- the envelope body

def test_arguments_json_is_the_json_text_the_model_wrote() -> None:
    r1 = parse(CALLS_BEGIN + r1_call("f", ' {"b":2,  "a":[1, 2]}\n') + CALLS_END, "deepseek_r1")
    v31 = parse(CALLS_BEGIN + v31_call("f", '\n{"b":2,  "a":[1, 2]} ') + CALLS_END, "deepseek_v3_1")
    assert r1.tool_calls[0].arguments_json == v31.tool_calls[0].arguments_json == '{"b":2,  "a":[1, 2]}'


@pytest.mark.parametrize("body", [
    "function<｜tool▁sep｜>get_weather\n```json\n{}\n```",      # as the templates write it
    "function<｜tool▁sep｜>get_weather\n{}",                     # no fence
    "function<｜tool▁sep｜>get_weather\n```\n{}\n```\n",          # fence without a language
    "function<｜tool▁sep｜> get_weather \r\n```json\r\n{}\r\n```",  # \r\n, spaces around the name
    "\nfunction <｜tool▁sep｜>get_weather\n\n```json\n{}```",
])
def test_r1_body_is_function_sep_name_line_and_fenced_json(body: str) -> None:
    msg = parse(CALL_BEGIN + body + CALL_END, "deepseek_r1")
    assert [(c.name, c.arguments_json) for c in msg.tool_calls] == [("get_weather", "{}")]


@pytest.mark.parametrize("body", ["get_weather<｜tool▁sep｜>{}", " get_weather <｜tool▁sep｜>\n{}\n"])
def test_v31_body_is_name_sep_json(body: str) -> None:
    msg = parse(CALL_BEGIN + body + CALL_END, "deepseek_v3_1")
    assert [(c.name, c.arguments_json) for c in msg.tool_calls] == [("get_weather", "{}")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_markers_and_fences_inside_json_strings_are_data(fmt: str) -> None:
    value = f"x {CALL_END} {CALLS_END} {CALL_BEGIN} ```\n``` y"
    msg = parse(CALLS_BEGIN + call(fmt, "write_file", json.dumps({"path": "a", "content": value})) + " after", fmt)
    assert msg.tool_calls[0].arguments["content"] == value
    assert msg.content == "after"


def test_the_call_type_word_and_the_fence_belong_to_r1_only() -> None:
    fenced = CALLS_BEGIN + r1_call("get_weather", "{}") + CALLS_END
    msg = parse(fenced, "deepseek_v3_1")  # the name before the separator would be "function"
    assert msg.tool_calls == [] and msg.rejected[0].status == "invalid_json"
    bare = CALLS_BEGIN + v31_call("get_weather", "{}") + CALLS_END
    msg = parse(bare, "deepseek_r1")
    assert msg.tool_calls == [] and msg.rejected[0].status == "invalid_json"
    assert "does not start with function<｜tool▁sep｜>NAME" in msg.rejected[0].errors[0]


# ----------------------------------------------------------------- wrappers and bare calls

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("opener", "closer"), [
    ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"),
    ("<｜tool calls begin｜>", "<｜tool calls end｜>"),
    ("<｜tool▁calls｜>", "<｜tool▁calls▁end｜>"),
])
def test_older_spellings_of_the_outer_markers(fmt: str, opener: str, closer: str) -> None:
    msg = parse("Checking." + opener + call(fmt, "a") + "\n" + call(fmt, "b") + closer + "\nDone.", fmt)
    assert [c.name for c in msg.tool_calls] == ["a", "b"]
    assert (msg.content, msg.rejected) == ("Checking.\nDone.", [])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_bare_call_is_a_call_and_a_calls_end_right_after_it_is_its_own(fmt: str) -> None:
    msg = parse("Before " + call(fmt, "a") + " \n" + CALLS_END + " after", fmt)
    assert [c.name for c in msg.tool_calls] == ["a"]
    assert msg.content == "Before  \n after"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_calls_end_marker_with_no_call_before_it_is_content(fmt: str) -> None:
    assert parse("a " + CALLS_END + " b", fmt).content == "a " + CALLS_END + " b"
    # The block is closed after the first marker: a doubled one has no opener left.
    msg = parse(CALLS_BEGIN + call(fmt, "a") + CALLS_END + CALLS_END, fmt)
    assert [c.name for c in msg.tool_calls] == ["a"] and msg.content == CALLS_END


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_after_the_calls_without_a_closer_ends_the_block(fmt: str) -> None:
    msg = parse(CALLS_BEGIN + call(fmt, "a") + "\n\nAll done.", fmt)
    assert [c.name for c in msg.tool_calls] == ["a"] and msg.content == "All done."


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_call_without_its_end_marker_ends_at_the_next_call_or_the_block_end(fmt: str) -> None:
    unclosed = call(fmt, "a", '{"x": 1}').removesuffix(CALL_END)
    msg = parse(CALLS_BEGIN + unclosed + call(fmt, "b") + CALLS_END + "ok", fmt)
    assert calls_of(msg) == [("a", {"x": 1}), ("b", {})] and msg.content == "ok"
    msg = parse(CALLS_BEGIN + call(fmt, "b") + unclosed + CALLS_END + "ok", fmt)
    assert calls_of(msg) == [("b", {}), ("a", {"x": 1})] and msg.content == "ok"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_complete_call_cut_by_the_end_of_output_is_accepted(fmt: str) -> None:
    whole = call(fmt, "a", '{"x": 1}')
    for cut in (CALL_END, "\n```" + CALL_END):
        if whole.endswith(cut):
            msg = parse(CALLS_BEGIN + whole.removesuffix(cut), fmt)
            assert calls_of(msg) == [("a", {"x": 1})] and msg.rejected == []


# ----------------------------------------------------------------- rejections

@pytest.mark.parametrize("fmt", FORMATS)
def test_a_call_cut_by_the_end_of_output_is_truncated(fmt: str) -> None:
    whole = call(fmt, "a", '{"x": 1}')
    for text in (CALL_BEGIN, whole[: whole.index("{") + 4], whole[: whole.index(SEP) + 3]):
        msg = parse("Hi " + CALLS_BEGIN + text, fmt)
        assert msg.content == "Hi" and statuses(msg) == [("truncated", text)]
    msg = parse(CALLS_BEGIN + "\n", fmt)
    assert statuses(msg) == [("truncated", CALLS_BEGIN + "\n")]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("body", "error"), [
    ("", "empty tool call"),
    (" \n", "empty tool call"),
    ("{'x': 1}", "not valid JSON"),
    ('{"x": 1,}', "not valid JSON"),
    ('{"x": tru}', "not valid JSON"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('"text"', "must be a JSON object, got str"),
    ('{"x": 1} and more', "unexpected text after the arguments"),
    ("{}{}", "unexpected text after the arguments"),
])
def test_bad_arguments_are_invalid_json_with_the_raw_envelope(fmt: str, body: str, error: str) -> None:
    envelope = call(fmt, "a", body) if body.strip() else CALL_BEGIN + body + CALL_END
    msg = parse("A" + CALLS_BEGIN + envelope + CALLS_END + "B", fmt)
    assert msg.tool_calls == [] and msg.content == "AB"
    assert statuses(msg) == [("invalid_json", envelope)]
    assert error in msg.rejected[0].errors[0]


@pytest.mark.parametrize(("fmt", "body"), [
    ("deepseek_r1", "function<｜tool▁sep｜>\n```json\n{}\n```"),
    ("deepseek_r1", "function<｜tool▁sep｜>  \n{}"),
    ("deepseek_v3_1", "<｜tool▁sep｜>{}"),
    ("deepseek_v3_1", " <｜tool▁sep｜>{}"),
])
def test_a_call_without_a_name_is_invalid_json(fmt: str, body: str) -> None:
    msg = parse(CALL_BEGIN + body + CALL_END, fmt)
    assert msg.rejected[0].status == "invalid_json" and "no function name" in msg.rejected[0].errors[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_empty_calls_block_and_text_before_its_first_call_are_invalid_json(fmt: str) -> None:
    assert statuses(parse(CALLS_BEGIN + " " + CALLS_END, fmt)) == [("invalid_json", CALLS_BEGIN + " " + CALLS_END)]
    msg = parse(CALLS_BEGIN + "junk" + call(fmt, "a") + CALLS_END, fmt)
    assert statuses(msg) == [("invalid_json", CALLS_BEGIN + "junk")] and [c.name for c in msg.tool_calls] == ["a"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_tools_check_names_and_schemas(fmt: str) -> None:
    text = CALLS_BEGIN + call(fmt, "nope") + call(fmt, "get_weather", '{"location": 3}')
    text += call(fmt, "get_time", '{"timezone": "UTC"}') + CALLS_END
    msg = parse(text, fmt, TOOLS)
    assert [c.name for c in msg.tool_calls] == ["get_time"]
    assert [r.status for r in msg.rejected] == ["unknown_tool", "schema_violation"]
    assert msg.rejected[1].errors == ["$.location: 3 is not of type 'string'"]


# ----------------------------------------------------------------- reasoning and content

@pytest.mark.parametrize("fmt", FORMATS)
def test_reasoning_opens_only_at_the_start(fmt: str) -> None:
    msg = parse("\n<think>\nplan\n</think>\n\nAnswer <think>x</think>", fmt)
    assert (msg.reasoning, msg.content) == ("plan", "Answer <think>x</think>")
    assert parse("a </think> b", fmt).content == "a </think> b"


@pytest.mark.parametrize("fmt", FORMATS)
def test_forced_open_reasoning_drops_a_repeated_opener(fmt: str) -> None:
    for text in ("Plan.\n</think>\n\nAnswer.", "<think>\nPlan.\n</think>\n\nAnswer.", " \n<think>Plan.</think>Answer."):
        msg = parse(text, fmt, thinking_forced_open=True)
        assert (msg.reasoning, msg.content) == ("Plan.", "Answer.")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_call_inside_reasoning_stays_reasoning_unless_extracted(fmt: str) -> None:
    text = "<think>plan " + CALLS_BEGIN + call(fmt, "a") + CALLS_END + " more"
    msg = parse(text, fmt)
    assert msg.tool_calls == [] and msg.reasoning == text.removeprefix("<think>")
    text += "</think>ok"
    msg = parse(text, fmt, tool_calls_in_reasoning="extract")
    assert [c.name for c in msg.tool_calls] == ["a"] and (msg.reasoning, msg.content) == ("plan  more", "ok")


MARKDOWN = (
    "Use this:\n\n```json\n{\"name\": \"value\", \"n\": [1, 2]}\n```\n\n"
    "| a | b |\n|---|---|\n| <b>x</b> | 1 > 0 |\n\n```\n<｜tool▁sep｜> and `function` here are text\n```"
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_markdown_code_fences_tables_and_angle_brackets_are_content(fmt: str) -> None:
    msg = parse(MARKDOWN, fmt)
    assert (msg.content, msg.tool_calls, msg.rejected) == (MARKDOWN, [], [])
    folded, _ = run_stream(list(MARKDOWN), format=fmt)
    assert folded.content == MARKDOWN


@pytest.mark.parametrize("fmt", FORMATS)
def test_content_around_calls_is_joined_as_written_then_stripped(fmt: str) -> None:
    assert parse("A\n" + call(fmt, "a") + "\nB", fmt).content == "A\n\nB"
    assert parse(" Checking:" + CALLS_BEGIN + call(fmt, "a") + CALLS_END + "Done. \n", fmt).content == "Checking:Done."


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_marker_prefix_is_held_back_then_released_as_content(fmt: str) -> None:
    parser = streamparse.StreamParser(fmt)
    assert parser.feed("a <｜tool▁ca") == [streamparse.Delta(content="a")]
    assert parser.held_back == len(" <｜tool▁ca")
    assert parser.feed("ll me") == [streamparse.Delta(content=" <｜tool▁call me")]
    assert parser.close() == []


# ----------------------------------------------------------------- progressive mode

def _progressive_trace(fmt: str, text: str, tools: list[dict[str, object]] | None = None) -> list[tuple[int, str, str]]:
    """(characters fed, 'start' or 'args', name or fragment) for each call delta, feeding one character at a time."""
    parser = streamparse.StreamParser(fmt, tools, emit_calls="progressive", id_factory=ids)
    trace = []
    for fed in range(1, len(text) + 1):
        for delta in parser.feed(text[fed - 1]):
            for piece in delta.tool_calls:
                if piece.name is not None:
                    trace.append((fed, "start", piece.name))
                if piece.arguments:
                    trace.append((fed, "args", piece.arguments))
    return trace


@pytest.mark.parametrize(("fmt", "name_ends"), [("deepseek_r1", "get_time\n"), ("deepseek_v3_1", SEP)])
def test_progressive_sends_the_name_when_complete_then_the_arguments_as_written(fmt: str, name_ends: str) -> None:
    arguments = '{"timezone": "Europe/Paris",\n "x": [1, {"y": "a\\"}"}]}'
    text = CALLS_BEGIN + call(fmt, "get_time", arguments) + CALLS_END
    trace = _progressive_trace(fmt, text)
    assert trace[0] == (text.index(name_ends) + len(name_ends), "start", "get_time")
    fragments = [fragment for _, kind, fragment in trace if kind == "args"]
    assert len(fragments) > 10 and "".join(fragments) == arguments
    assert trace[-1][0] == text.index(arguments) + len(arguments)  # all sent when the object closed


@pytest.mark.parametrize("fmt", FORMATS)
def test_progressive_fragments_hold_back_trailing_whitespace_and_the_fence(fmt: str) -> None:
    parser = streamparse.StreamParser(fmt, emit_calls="progressive", id_factory=ids)
    if fmt == "deepseek_r1":
        head, tail = f"{CALL_BEGIN}function{SEP}f\n```json\n", "\n```"
    else:
        head, tail = f"{CALL_BEGIN}f{SEP}", "\n"
    sent = []
    for piece in [head, '{"a": 1, ', '\n', ' "b": "x ', ' y"  ', '}', tail, CALL_END]:
        sent += [tc.arguments for d in parser.feed(piece) for tc in d.tool_calls if tc.arguments]
    sent += [tc.arguments for d in parser.close() for tc in d.tool_calls if tc.arguments]
    assert sent == ['{"a": 1,', ' \n "b": "x', '  y"', "  }"]
    assert parser.message.tool_calls[0].arguments_json == "".join(sent)


@pytest.mark.parametrize("fmt", FORMATS)
def test_progressive_marks_a_started_call_that_is_rejected_later(fmt: str) -> None:
    text = CALLS_BEGIN + call(fmt, "get_weather", '{"location": "Paris"} trailing') + call(fmt, "get_time", "{}")
    folded, message = run_stream(list(text), format=fmt, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    assert folded.calls[0]["status"] == "invalid_json" and folded.calls[0]["arguments"] == '{"location": "Paris"}'
    assert folded.calls[1]["status"] == "schema_violation" and folded.calls[1]["name"] == "get_time"
    assert message.tool_calls == [] and [r.status for r in message.rejected] == ["invalid_json", "schema_violation"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_progressive_does_not_start_an_unknown_tool_or_a_malformed_header(fmt: str) -> None:
    text = CALLS_BEGIN + call(fmt, "nope") + CALL_BEGIN + "get<time" + SEP + "\n{}" + CALL_END
    folded, message = run_stream(list(text), format=fmt, tools=TOOLS, emit_calls="progressive")
    assert folded.calls == {}
    assert [r.status for r in message.rejected] == ["unknown_tool", "invalid_json"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_progressive_and_validated_streams_add_up_to_the_parse_of_the_fixtures(fmt: str) -> None:
    name = "r1_0528_reasoning_markdown_two_calls.txt" if fmt == "deepseek_r1" else "thinking_content_two_calls.txt"
    text = (FIXTURES / fmt / name).read_text()
    for emit in ("validated", "progressive"):
        for size in (1, 3, 17):
            chunks = [text[i:i + size] for i in range(0, len(text), size)]
            folded, message = run_stream(chunks, format=fmt, tools=TOOLS, thinking_forced_open=True,
                                         emit_calls=emit, id_factory=ids)
            assert message == parse(text, fmt, TOOLS, thinking_forced_open=True, id_factory=ids)
            assert_stream_matches(folded, message)
            assert len(message.tool_calls) == 2


# ----------------------------------------------------------------- any text, any chunking

def _envelope_noise(fmt: str) -> st.SearchStrategy[str]:
    """Text built from the format's markers — the envelope's end and separator included — and JSON pieces."""
    markers = [*get_format(fmt).delimiters, CALL_END, SEP, "function", "```json\n", "\n```", "get_time"]
    pieces = st.one_of(
        st.sampled_from(markers),
        st.sampled_from([m[:cut] for m in markers for cut in range(1, len(m))]),
        st.text(st.sampled_from(list('ab {}[]":,\n\r\t\\`<>|｜▁')), max_size=6),
        st.sampled_from(['{"timezone": "UTC"}', '{"a": "' + CALL_END + '"}', "{}", '"', "\\", "\n\n"]),
    )
    return st.lists(pieces, max_size=16).map("".join)


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_marker_noise_parses_the_same_under_any_chunking_and_loses_nothing(fmt: str, data: st.DataObject) -> None:
    text = data.draw(_envelope_noise(fmt))
    forced = data.draw(st.booleans())
    tools = data.draw(st.sampled_from([None, TOOLS]))
    parsed = parse(text, fmt, tools, thinking_forced_open=forced, id_factory=ids)
    assert_nothing_lost(text, parsed, fmt)
    assert not any("internal error" in error for r in parsed.rejected for error in r.errors)
    for emit in ("validated", "progressive"):
        chunks = data.draw(splittings(text))
        folded, streamed = run_stream(chunks, format=fmt, tools=tools, thinking_forced_open=forced,
                                      emit_calls=emit, id_factory=ids)
        assert streamed == parsed
        assert_stream_matches(folded, parsed)
