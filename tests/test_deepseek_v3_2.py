"""DeepSeek V3.2 DSML (and V4's `tool_calls` block): the format, its typing and streaming, by example."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FIXTURES, assert_every_mode_agrees, assert_stream_matches, fold, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st

import streamparse

FORMAT = "deepseek_v3_2"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text())
D = "｜DSML｜"


def parse(text: str, **kwargs: Any) -> streamparse.Message:
    return streamparse.parse(text, FORMAT, id_factory=ids, **kwargs)


def param(key: str, value: str, string: str | None = "true") -> str:
    attribute = f' string="{string}"' if string is not None else ""
    return f'<{D}parameter name="{key}"{attribute}>{value}</{D}parameter>\n'


def invoke(name: str, *params: str) -> str:
    return f'<{D}invoke name="{name}">\n' + "".join(params) + f"</{D}invoke>\n"


def block(*invokes: str, name: str = "function_calls") -> str:
    return f"\n\n<{D}{name}>\n" + "".join(invokes) + f"</{D}{name}>"


def one_value(text: str, **kwargs: Any) -> Any:
    msg = parse(text, **kwargs)
    assert msg.rejected == [], msg.rejected
    [(value,)] = [tuple(c.arguments.values()) for c in msg.tool_calls]
    return value


def argument_fragments(deltas: list[streamparse.Delta]) -> list[str]:
    return [tc.arguments for d in deltas for tc in d.tool_calls if tc.arguments]


# ----------------------------------------------------------------- real outputs


def test_reasoning_content_and_two_calls_in_one_block() -> None:
    text = (FIXTURES / FORMAT / "thinking_two_calls.txt").read_text()
    msg = parse(text, tools=TOOLS, thinking_forced_open=True)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("in one block.")
    assert msg.content == "I'll look both up."
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [
        ("get_weather", {"location": "Paris, France", "days": 3}),
        ("search", {"query": 'packing list | "rain" & <wind>',
                    "filters": {"folder": "travel", "year": 2025, "shared": False}, "tags": ["paris", "weather"]}),
    ]
    assert msg.rejected == []


def test_v4_names_the_block_tool_calls_and_values_are_byte_exact() -> None:
    text = (FIXTURES / FORMAT / "v4_write_file.txt").read_text()
    msg = parse(text, tools=TOOLS, thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("", "")
    [written] = msg.tool_calls
    assert written.arguments["path"] == "app/main.py"
    # No framing newline in DSML: the newline after the tag and the one before the closer are payload.
    assert written.arguments["content"] == (
        '\nimport sys\n\n\ndef main() -> int:\n    print("<ok>", file=sys.stderr)\n    return 0\n')


def test_the_real_v32_render_starts_with_the_closer_of_a_forced_open_think() -> None:
    text = "</think>\n\n" + block(invoke("get_weather", param("location", "Paris")))
    msg = parse(text, thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("", "")
    assert [c.arguments for c in msg.tool_calls] == [{"location": "Paris"}]
    # Without forced-open thinking a closing tag with no opener is content, verbatim.
    assert parse("</think>It is 18°C.").content == "</think>It is 18°C."


def test_markdown_tables_code_fences_and_angle_brackets_are_content() -> None:
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nif a < b > c:\n    pass\n```\n<b>bold</b> ｜ done"
    assert parse(text).content == text


# ----------------------------------------------------------------- values and typing


@pytest.mark.parametrize(("value", "string", "expected"), [
    ("Paris", "true", "Paris"),
    ("  Paris \n", "true", "  Paris \n"),  # byte-exact: no framing whitespace
    ("\n", "true", "\n"),
    ("", "true", ""),
    ("03106", "true", "03106"),  # string="true" is literal text
    ("null", "true", "null"),
    ("3", "false", 3),  # string="false" is JSON
    ("0.75", "false", 0.75),
    ("false", "false", False),
    ("null", "false", None),
    ('"quoted"', "false", "quoted"),
    ('{"a": [1, {"b": null}]}', "false", {"a": [1, {"b": None}]}),
    ("[1, 2]", "false", [1, 2]),
    ("123456789012345678901234567890", "false", 123456789012345678901234567890),  # exact
    ("{'a': True}", "false", {"a": True}),  # not JSON: a Python literal is accepted
    ("True", "false", True),
    ("not json", "false", "not json"),  # nothing fits: the text
    ("[1e999]", "false", "[1e999]"),  # infinity is not JSON data
])
def test_without_a_schema_the_string_attribute_decides(value: str, string: str, expected: Any) -> None:
    got = one_value(invoke("anything", param("k", value, string)))
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("key", "value", "string", "expected"), [
    ("limit", "5", "true", 5),  # string="true" typed by a schema that allows no string
    ("limit", "5.0", "true", 5),
    ("exact", "True", "true", True),
    ("tags", "['a', 'b']", "true", ["a", "b"]),
    ("limit_or_all", "5", "true", "5"),  # a string whenever the schema allows one
    ("limit_or_all", "5", "false", 5),
    ("limit_or_all", "all", "false", "all"),  # not JSON: the typing rules, then the text
    ("cursor", "null", "false", None),
    ("cursor", "null", "true", "null"),
    ("score", "1", "false", 1),
    ("filters", "{'x': None}", "false", {"x": None}),  # JSON failed: the Python literal fits the object
    ("exact", "True", "false", True),  # JSON failed: Python's spelling fits the boolean
    ("limit", "12", None, 12),  # no string attribute: typed by the schema as in qwen3_coder
    ("query", "12", None, "12"),
    ("unknown_param", "12", "true", "12"),  # not in the schema: strings stay strings,
    ("unknown_param", "12", "false", 12),  # and string="false" values are parsed
])
def test_values_are_typed_by_the_schema(key: str, value: str, string: str | None, expected: Any) -> None:
    text = invoke("search", param("query", "q"), param(key, value, string)) if key != "query" else \
        invoke("search", param(key, value, string))
    msg = parse(text, tools=TOOLS)
    assert msg.rejected == []
    got = msg.tool_calls[0].arguments[key]
    assert got == expected and type(got) is type(expected)
    assert json.loads(msg.tool_calls[0].arguments_json) == msg.tool_calls[0].arguments


@pytest.mark.parametrize(("key", "value", "string", "error"), [
    ("limit", "five", "true", "$.limit: 'five' is not of type 'integer'"),
    ("limit", '"5"', "false", "$.limit: '5' is not of type 'integer'"),
    ("query", "5", "false", "$.query: 5 is not of type 'string'"),
    ("exact", "yes", "false", "$.exact: 'yes' is not of type 'boolean'"),
])
def test_a_value_that_fits_no_type_is_a_schema_violation(key: str, value: str, string: str, error: str) -> None:
    text = invoke("search", param("query", "q"), param(key, value, string)) if key != "query" else \
        invoke("search", param(key, value, string))
    msg = parse(text, tools=TOOLS)
    assert [(r.status, r.errors) for r in msg.rejected] == [("schema_violation", [error])]


# ----------------------------------------------------------------- envelopes and blocks


def test_a_bare_invoke_is_a_call_and_a_block_closer_after_it_is_its_own() -> None:
    msg = parse("Checking." + invoke("get_weather", param("location", "Oslo")) + f"</{D}function_calls>\nOK.")
    assert [c.arguments for c in msg.tool_calls] == [{"location": "Oslo"}]
    assert msg.content == "Checking.\n\nOK."


def test_missing_closers_are_forgiven_where_the_next_tag_shows_the_end() -> None:
    # </｜DSML｜parameter> missing before the next parameter: the value runs to it, byte-exact.
    text = (f'<{D}function_calls>\n<{D}invoke name="get_weather">\n<{D}parameter name="location" string="true">'
            f'Oslo\n<{D}parameter name="days" string="false">2</{D}parameter>\n</{D}function_calls>')
    [weather] = parse(text, tools=TOOLS).tool_calls  # </｜DSML｜invoke> missing before the block closer
    assert weather.arguments == {"location": "Oslo\n", "days": 2}


def test_a_block_closer_inside_a_value_is_data() -> None:
    value = f"the block ends with </{D}function_calls> and </{D}tool_calls>"
    assert one_value(block(invoke("write_file", param("content", value)))) == value


def test_a_block_may_close_with_the_other_generation_s_name_only_as_content() -> None:
    text = f"<{D}tool_calls>\n" + invoke("get_weather", param("location", "Rome")) + f"</{D}function_calls>"
    msg = parse(text)
    assert [c.name for c in msg.tool_calls] == ["get_weather"]
    assert msg.content == f"</{D}function_calls>"


@pytest.mark.parametrize(("text", "status", "raw"), [
    (f"<{D}invoke>\n</{D}invoke>", "invalid_json", f"<{D}invoke>\n</{D}invoke>"),
    (f'<{D}invoke name="get_weather"\n{param("location", "x")}</{D}invoke>', "invalid_json",
     f'<{D}invoke name="get_weather"\n{param("location", "x")}</{D}invoke>'),
    (f'<{D}invoke name="">\n</{D}invoke>', "invalid_json", f'<{D}invoke name="">\n</{D}invoke>'),
    (invoke("f", param("a", "1", "maybe")), "invalid_json", invoke("f", param("a", "1", "maybe")).rstrip("\n")),
    (invoke("f", param("a", "1"), param("a", "2")), "invalid_json",
     invoke("f", param("a", "1"), param("a", "2")).rstrip("\n")),
    (invoke("f", "stray text\n", param("a", "1")), "invalid_json",
     invoke("f", "stray text\n", param("a", "1")).rstrip("\n")),
    (f'<{D}invoke name="f">\n<{D}parameter name="a" string="true">cut', "truncated",
     f'<{D}invoke name="f">\n<{D}parameter name="a" string="true">cut'),
    (f"<{D}function_calls>\n</{D}function_calls>", "invalid_json", f"<{D}function_calls>\n</{D}function_calls>"),
    (f"<{D}function_calls>\n", "truncated", f"<{D}function_calls>\n"),
])
def test_bad_calls_are_rejected_with_their_raw_text(text: str, status: str, raw: str) -> None:
    msg = parse(text)
    assert msg.tool_calls == []
    assert [(r.status, r.raw) for r in msg.rejected] == [(status, raw)]
    assert msg.rejected[0].errors and not any("internal error" in e for e in msg.rejected[0].errors)


def test_tools_check_names() -> None:
    msg = parse(block(invoke("launch", param("target", "moon"))), tools=TOOLS)
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "launch")]


# ----------------------------------------------------------------- progressive mode


def test_progressive_mode_streams_literal_strings_and_sends_json_values_when_they_close() -> None:
    parser = streamparse.StreamParser(FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    deltas = parser.feed(f'<{D}function_calls>\n<{D}invoke name="search">\n')
    assert [(tc.id, tc.name, tc.arguments) for d in deltas for tc in d.tool_calls] == [
        ("call_0", "search", ""), (None, None, "{")]
    assert argument_fragments(parser.feed(f'<{D}parameter name="query" string="true">rain in')) == [
        '"query": "', "rain in"]
    assert argument_fragments(parser.feed(" Oslo</")) == [" Oslo"]  # "</" could start the closer
    assert argument_fragments(parser.feed(f"{D}parameter>\n")) == ['"']
    assert argument_fragments(parser.feed(f'<{D}parameter name="limit" string="false">1')) == [', "limit": ']
    assert argument_fragments(parser.feed(f"0</{D}parameter>\n</{D}invoke>")) == ["10", "}"]
    deltas += parser.close()
    assert parser.message.tool_calls[0].arguments_json == '{"query": "rain in Oslo", "limit": 10}'


def test_progressive_mode_agrees_with_the_final_message_for_every_fixture() -> None:
    for name in ("thinking_two_calls.txt", "v4_write_file.txt"):
        text = (FIXTURES / FORMAT / name).read_text()
        for size in (1, 2, 7):
            chunks = [text[i:i + size] for i in range(0, len(text), size)]
            folded, message = run_stream(chunks, format=FORMAT, tools=TOOLS, thinking_forced_open=True,
                                         emit_calls="progressive", id_factory=ids)
            assert message == parse(text, tools=TOOLS, thinking_forced_open=True)
            assert_stream_matches(folded, message)
            assert len(message.tool_calls) >= 1


def test_progressive_mode_marks_a_started_call_rejected_later() -> None:
    text = block(invoke("get_weather", param("location", "Oslo"), param("days", "many", "false")))
    parser = streamparse.StreamParser(FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    deltas = [d for ch in text for d in parser.feed(ch)] + parser.close()
    calls = fold(deltas).calls
    assert calls[0]["name"] == "get_weather" and calls[0]["status"] == "schema_violation"


# ----------------------------------------------------------------- any chunking, with typed tools

_KEYS = ["query", "limit", "score", "exact", "filters", "tags", "limit_or_all", "cursor", "other"]
_VALUES = st.one_of(
    st.sampled_from(["5", "0.5", "true", "True", "null", "None", "[1]", "{'a': 1}", '{"a": "</"}', "", "\n",
                     "<｜DSML｜param", "</｜DSML｜parameter", "a < b", '"s"']),
    st.text(st.sampled_from(list("ab1 \n\t<>/=\"'\\{}[]｜é🚀\r")), max_size=10),
)


@given(data=st.data())
def test_typed_calls_stream_the_same_under_any_chunking(data: st.DataObject) -> None:
    params = ""
    for key in data.draw(st.lists(st.sampled_from(_KEYS), max_size=5, unique=True)):
        string = data.draw(st.sampled_from(["true", "false", None]))
        closing = data.draw(st.sampled_from([f"</{D}parameter>\n", f"</{D}parameter>", ""]))
        params += param(key, data.draw(_VALUES), string).removesuffix(f"</{D}parameter>\n") + closing
    closer = data.draw(st.sampled_from([f"</{D}invoke>\n</{D}function_calls>", f"</{D}tool_calls>", ""]))
    text = f'Looking.\n\n<{D}function_calls>\n<{D}invoke name="search">\n{params}{closer}'
    assert_every_mode_agrees(data, text, FORMAT, TOOLS)
