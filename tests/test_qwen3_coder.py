"""Qwen3-Coder / Qwen3.5 XML calls: the format, its typing by schema and its framing, by example."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FIXTURES, assert_every_mode_agrees, assert_stream_matches, fold, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st

import streamparse

FORMAT = "qwen3_coder"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text())


def parse(text: str, **kwargs: Any) -> streamparse.Message:
    return streamparse.parse(text, FORMAT, id_factory=ids, **kwargs)


def call(name: str, *params: tuple[str, str]) -> str:
    """A call as Qwen3-Coder's template writes it: each value between two framing newlines."""
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def one_value(text: str, **kwargs: Any) -> Any:
    """The single argument of the single accepted call in `text`."""
    msg = parse(text, **kwargs)
    assert msg.rejected == [], msg.rejected
    [(value,)] = [tuple(c.arguments.values()) for c in msg.tool_calls]
    return value


def progressive(text: str, chunks: list[str] | None = None, **kwargs: Any) -> list[streamparse.Delta]:
    parser = streamparse.StreamParser(FORMAT, emit_calls="progressive", id_factory=ids, **kwargs)
    out: list[streamparse.Delta] = []
    for chunk in chunks if chunks is not None else list(text):
        out += parser.feed(chunk)
    out += parser.close()
    assert_stream_matches(fold(out), parser.message)
    assert parser.message == parse(text, **kwargs)
    return out


def argument_fragments(deltas: list[streamparse.Delta]) -> list[str]:
    return [tc.arguments for d in deltas for tc in d.tool_calls if tc.arguments]


# ----------------------------------------------------------------- real outputs


def test_a_write_file_call_keeps_the_code_byte_exact() -> None:
    text = (FIXTURES / FORMAT / "write_file_python.txt").read_text()
    msg = parse(text, tools=TOOLS)
    assert msg.content == "I'll create the helper module with the parsing function."
    [written] = msg.tool_calls
    assert written.name == "write_file" and written.arguments["path"] == "src/util/parse.py"
    code = written.arguments["content"]
    assert code.startswith('def parse_pair(text: str) -> tuple[str, str]:\n    """Split "key=value"')
    assert "\n\n    >>> parse_pair(\"a=<b>\")\n    ('a', '<b>')\n" in code
    assert code.endswith("        raise ValueError(\"missing key\")\n    return key.strip(), value\n")
    assert json.loads(written.arguments_json) == written.arguments


def test_qwen35_forced_open_reasoning_then_an_edit_and_a_typed_call() -> None:
    text = (FIXTURES / FORMAT / "qwen35_reasoning_edit_and_test.txt").read_text()
    msg = parse(text, tools=TOOLS, thinking_forced_open=True)
    assert msg.reasoning.startswith("The failing assertion") and msg.reasoning.endswith("affected test files.")
    assert msg.content == "I'll fix the comparison and rerun the tests."
    edit, tests = msg.tool_calls
    assert edit.arguments == {
        "path": "src/util/compare.py",
        "old_str": "    if a < b:\n        return -1",
        "new_str": "    if a is not None and b is not None and a < b:\n        return -1",
    }
    assert tests.arguments == {"paths": ["tests/test_compare.py", "tests/test_util.py"], "timeout": 120,
                               "verbose": True}
    assert msg.rejected == []


# ----------------------------------------------------------------- framing and whitespace


@pytest.mark.parametrize(("written", "value"), [
    ("\nParis\n", "Paris"),  # the template's own framing
    ("Paris", "Paris"),  # no framing at all
    ("\n\nParis\n\n", "\nParis\n"),  # only one newline on each side is framing
    ("\n    return 1\n\n", "    return 1\n"),  # indentation and a trailing newline are payload
    ("\n\treturn 1  \n", "\treturn 1  "),  # tabs and trailing spaces too
    ("  Paris  ", "  Paris  "),  # spaces are never framing
    ("\n", ""),
    ("\n\n", ""),
    ("\n\n\n", "\n"),
    ("", ""),
    ("\r\nParis\r\n", "Paris"),  # \r\n counts as one newline
    ("\r\n\r\nParis\r\n\r\n", "\r\nParis\r\n"),
    ("\rParis\r", "\rParis\r"),  # a lone \r is not a newline
    ("\nline one\nline two\n", "line one\nline two"),
])
def test_exactly_one_newline_after_the_opening_and_before_the_closing_tag_is_framing(written: str, value: str) -> None:
    text = f"<tool_call>\n<function=lookup>\n<parameter=zip>{written}</parameter>\n</function>\n</tool_call>"
    assert one_value(text) == value
    assert one_value(text, tools=TOOLS) == value


def test_a_missing_closing_parameter_tag_is_tolerated_and_still_loses_one_framing_newline() -> None:
    text = ("<tool_call>\n<function=str_replace>\n<parameter=path>\na.py\n\n<parameter=old_str>\nx = 1\n"
            "<parameter=new_str>\n    x = 2\n\n</function>\n</tool_call>")
    [edit] = parse(text, tools=TOOLS).tool_calls
    assert edit.arguments == {"path": "a.py\n", "old_str": "x = 1", "new_str": "    x = 2\n"}


def test_a_value_ends_at_the_first_parameter_tag_or_function_closer() -> None:
    # XML has no escaping: a value that contains </function> is cut there.
    msg = parse("<tool_call>\n<function=write_file>\n<parameter=content>\nx </function> y\n</parameter>\n"
                "</function>\n</tool_call>")
    assert msg.tool_calls[0].arguments == {"content": "x "}
    assert msg.content == "y\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("near_miss", [
    "</parameter", "</parameter >", "< /parameter>", "<parameter", "<parameter =x>", "</PARAMETER>",
    "/parameter>", "<function", "</function", "if a<b and c>d:", "<tool_call",
])
def test_tag_near_misses_inside_a_value_are_data(near_miss: str) -> None:
    value = f"before {near_miss} after\n"
    assert one_value(call("write_file", ("content", value))) == value
    for chunks in (list(call("write_file", ("content", value))), None):
        deltas = progressive(call("write_file", ("content", value)), chunks)
        assert "".join(argument_fragments(deltas)) == json.dumps({"content": value}, ensure_ascii=False)


# ----------------------------------------------------------------- typing by the tool's schema

TYPED = [
    ("zip", "03106", "03106"),  # string stays literal
    ("zip", "true", "true"),
    ("count", "42", 42),
    ("count", " 42 ", 42),  # whitespace around a typed value is not part of it
    ("count", "5.0", 5),  # integral numbers written with a fraction are integers
    ("count", "1e3", 1000),
    ("count", "123456789012345678901234567890", 123456789012345678901234567890),  # exact
    ("count", "123456789012345678901234567890.0", 123456789012345678901234567890),  # still exact
    ("ratio", "0.75", 0.75),
    ("ratio", "-3", -3),
    ("flag", "true", True),
    ("flag", "False", False),  # Python spelling, as the template prints it
    ("nothing", "null", None),
    ("nothing", "None", None),
    ("options", '{"depth": 2, "tags": ["a"]}', {"depth": 2, "tags": ["a"]}),
    ("options", "{'depth': 2, 'ok': True, 'none': None}", {"depth": 2, "ok": True, "none": None}),  # Python literal
    ("items", "[1, 2.5, \"x\"]", [1, 2.5, "x"]),
    ("items", "['a', 'b']", ["a", "b"]),
    ("count_or_text", "7", 7),  # a union tries the non-string types first
    ("count_or_text", "seven", "seven"),  # and falls back to the string
    ("count_or_text", "03106", "03106"),  # a union that allows a string keeps the zeros
    ("count", "03106", 3106),  # typed integer, leading zeros read as the number (fourth wave, Decision 23)
    ("count", "-007", -7),
    ("ratio", "01.5", 1.5),
    ("maybe_count", "012", 12),  # anyOf of integer and null: no string to keep the zeros
    ("maybe_count", "None", None),  # anyOf
    ("maybe_count", "12", 12),
    ("level", "0.5", 0.5),  # oneOf
    ("level", "True", True),
    ("nullable_count", "null", None),  # OpenAPI nullable
    ("nullable_count", "3", 3),
    ("choice", "2", 2),  # enum values give the types
    ("word", "red", "red"),
    ("free", "42", "42"),  # a schema without a type keeps strings
    ("not_in_schema", "42", "42"),  # a parameter the schema does not name stays a string
]


@pytest.mark.parametrize(("key", "written", "value"), TYPED)
def test_values_are_typed_by_the_tool_schema(key: str, written: str, value: Any) -> None:
    text = call("lookup", (key, written))
    got = one_value(text, tools=TOOLS)
    assert got == value and type(got) is type(value)
    [accepted] = parse(text, tools=TOOLS).tool_calls
    assert accepted.arguments_json == json.dumps({key: value}, ensure_ascii=False)


def test_without_tools_every_value_is_a_string() -> None:
    msg = parse(call("lookup", ("count", "42"), ("flag", "True"), ("options", "{}")))
    assert msg.tool_calls[0].arguments == {"count": "42", "flag": "True", "options": "{}"}


@pytest.mark.parametrize(("key", "written", "error"), [
    ("count", "0x1f", "$.count: '0x1f' is not of type 'integer'"),  # only decimal digits (Decision 23)
    ("count", "4.5", "$.count: '4.5' is not of type 'integer'"),
    ("flag", "yes", "$.flag: 'yes' is not of type 'boolean'"),
    ("nothing", "NULL", "$.nothing: 'NULL' is not of type 'null'"),  # spellings are case-sensitive
    ("ratio", "NaN", "$.ratio: 'NaN' is not of type 'number'"),
    ("ratio", "1e999", "$.ratio: '1e999' is not of type 'number'"),
    ("items", "[1, 2", "$.items: '[1, 2' is not of type 'array'"),
    ("items", "(1, 2)", "$.items: '(1, 2)' is not of type 'array'"),  # a tuple is no JSON array
    ("options", "{1: 'a'}", "$.options: \"{1: 'a'}\" is not of type 'object'"),  # nor non-string keys
    ("choice", "4", "$.choice: 4 is not one of [1, 2, 3]"),
])
def test_a_value_that_fits_no_type_stays_a_string_and_is_a_schema_violation(key: str, written: str,
                                                                            error: str) -> None:
    text = call("lookup", (key, written))
    msg = parse(text, tools=TOOLS)
    assert msg.tool_calls == []
    [rejected] = msg.rejected
    assert (rejected.status, rejected.name, rejected.errors) == ("schema_violation", "lookup", [error])
    assert rejected.raw == text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")


def test_parameters_come_in_any_order() -> None:
    first = parse(call("run_tests", ("timeout", "30"), ("paths", '["a"]')), tools=TOOLS).tool_calls[0]
    second = parse(call("run_tests", ("paths", '["a"]'), ("timeout", "30")), tools=TOOLS).tool_calls[0]
    assert first.arguments == second.arguments == {"paths": ["a"], "timeout": 30}
    assert first.arguments_json == '{"timeout": 30, "paths": ["a"]}'  # the order the model wrote


# ----------------------------------------------------------------- envelopes and wrappers


def test_several_functions_inside_one_tool_call_are_several_calls() -> None:
    text = ("<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\nx\n"
            "</parameter>\n</function>\n<function=run_tests>\n<parameter=paths>\n[]\n</parameter>\n</function>\n"
            "</tool_call>")
    msg = parse(text, tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [
        ("call_0", "write_file", {"path": "a", "content": "x"}), ("call_1", "run_tests", {"paths": []})]


def test_a_call_without_its_tool_call_wrapper_is_a_call_and_a_later_closer_is_its_own() -> None:
    msg = parse("Writing it.\n<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\n"
                "x\n</parameter>\n</function>\n</tool_call>\nDone.")
    assert [c.name for c in msg.tool_calls] == ["write_file"]
    assert msg.content == "Writing it.\n\n\nDone."


def test_a_missing_function_closer_is_forgiven_when_the_tool_call_closer_follows() -> None:
    msg = parse("<tool_call>\n<function=run_tests>\n<parameter=paths>\n[\"t\"]\n</parameter>\n</tool_call>after",
                tools=TOOLS)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("run_tests", {"paths": ["t"]})]
    assert msg.content == "after"
    bare = parse("<function=run_tests>\n<parameter=paths>\n[]\n</parameter></tool_call>", tools=TOOLS)
    assert [(c.name, c.arguments) for c in bare.tool_calls] == [("run_tests", {"paths": []})]
    assert bare.content == ""


def test_a_tool_call_closer_inside_a_value_is_data() -> None:
    # Values end only at </parameter>, <parameter= or </function>: code about this format survives.
    code = 'if text.endswith("</tool_call>"):\n    return True\n'
    assert one_value(call("write_file", ("content", code))) == code
    # So with both </parameter> and </function> missing, </tool_call> is still inside the value.
    msg = parse("<tool_call>\n<function=write_file>\n<parameter=content>\nx\n</tool_call>")
    assert [r.status for r in msg.rejected] == ["truncated"]


def test_a_call_with_no_parameters_has_empty_arguments() -> None:
    [listed] = parse("<tool_call>\n<function=list_calendars>\n</function>\n</tool_call>").tool_calls
    assert (listed.arguments, listed.arguments_json) == ({}, "{}")


@pytest.mark.parametrize(("text", "status", "raw"), [
    # A header never closed by ">" is a rejected call, not a call with a garbage name.
    ("<tool_call>\n<function=write_file\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>",
     "invalid_json", "<function=write_file\n<parameter=path>\na\n</parameter>\n</function>"),
    ("<tool_call>\n<function=>\n</function>\n</tool_call>", "invalid_json", "<function=>\n</function>"),
    ("<tool_call>\n<function=f>\nlet me think\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call>",
     "invalid_json", "<function=f>\nlet me think\n<parameter=a>\nx\n</parameter>\n</function>"),
    ("<tool_call>\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>\n</tool_call>",
     "invalid_json", "<function=f>\n<parameter=>\nx\n</parameter>\n</function>"),
    ("<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n<parameter=a>\ny\n</parameter>\n</function>",
     "invalid_json", "<function=f>\n<parameter=a>\nx\n</parameter>\n<parameter=a>\ny\n</parameter>\n</function>"),
    ("<tool_call>\n<function=f>\n<parameter=a>\nx\n", "truncated", "<function=f>\n<parameter=a>\nx\n"),
    ("<function=", "truncated", "<function="),
    ("<tool_call>\nI will call it.\n<function=f>\n</function>\n</tool_call>",
     "invalid_json", "<tool_call>\nI will call it.\n"),
    ("<tool_call>\n</tool_call>", "invalid_json", "<tool_call>\n</tool_call>"),
    ("<tool_call>\n", "truncated", "<tool_call>\n"),
])
def test_bad_calls_are_rejected_with_their_raw_text(text: str, status: str, raw: str) -> None:
    msg = parse(text)
    assert [(r.status, r.raw) for r in msg.rejected][:1] == [(status, raw)]
    assert msg.rejected[0].errors
    assert not any("internal error" in e for r in msg.rejected for e in r.errors)


def test_a_duplicated_parameter_rejects_the_call_and_says_which() -> None:
    msg = parse(call("write_file", ("path", "a"), ("path", "b"), ("content", "x")), tools=TOOLS)
    assert msg.tool_calls == [] and msg.rejected[0].errors == ["$.path: the parameter is given twice"]
    assert msg.rejected[0].name == "write_file"


def test_tools_check_names_and_required_parameters() -> None:
    msg = parse(call("delete_everything") + call("write_file", ("path", "a")), tools=TOOLS)
    assert [r.status for r in msg.rejected] == ["unknown_tool", "schema_violation"]
    assert msg.rejected[1].errors == ["$: 'content' is a required property"]


# ----------------------------------------------------------------- reasoning and content


def test_reasoning_opens_with_think_and_content_surrounds_calls() -> None:
    text = "<think>\nNeed the file.\n</think>\n\nReading it." + call("write_file", ("path", "a"), ("content", "b"))
    text += "\nThat is all."
    msg = parse(text)
    assert (msg.reasoning, msg.content) == ("Need the file.", "Reading it.\nThat is all.")


def test_a_call_written_inside_reasoning_stays_reasoning_text() -> None:
    msg = parse("<think>\nI could " + call("run_tests", ("paths", "[]")) + "\n</think>\nNo call needed.")
    assert msg.tool_calls == [] and msg.reasoning.startswith("I could <tool_call>\n<function=run_tests>")
    assert msg.content == "No call needed."


def test_markup_and_stray_closing_tags_in_content_are_content() -> None:
    text = "Use `<parameter=name>` tags; a </parameter> or </function> alone is text, and a < b > c."
    assert parse(text).content == text


# ----------------------------------------------------------------- progressive mode


def test_progressive_mode_names_the_call_first_then_streams_strings_as_written() -> None:
    text = call("write_file", ("path", "a.py"), ("content", 'print("hi")\n    x = 1\n'))
    deltas = progressive(text, tools=TOOLS)
    calls = [tc for d in deltas for tc in d.tool_calls]
    assert (calls[0].id, calls[0].name, calls[0].arguments) == ("call_0", "write_file", "")
    fragments = argument_fragments(deltas)
    assert fragments[:3] == ["{", '"path": "', "a"]
    assert "".join(fragments) == '{"path": "a.py", "content": "print(\\"hi\\")\\n    x = 1\\n"}'
    assert len(fragments) > 20  # streamed while the model writes, not in one burst


def test_progressive_mode_holds_a_possible_framing_newline_until_the_next_text() -> None:
    parser = streamparse.StreamParser(FORMAT, emit_calls="progressive", id_factory=ids)
    parser.feed("<tool_call>\n<function=write_file>\n<parameter=content>\nline one\n")
    assert "".join(argument_fragments(parser.feed("</para"))) == ""
    assert argument_fragments(parser.feed("graph")) == ["\\n</paragraph"]  # not a closer: payload
    assert argument_fragments(parser.feed("\r")) == []  # may become \r\n, a framing newline
    assert argument_fragments(parser.feed("\n</parameter>")) == ['"']
    assert argument_fragments(parser.feed("\n</function>")) == ["}"]
    parser.close()
    assert parser.message.tool_calls[0].arguments == {"content": "line one\n</paragraph"}


def test_progressive_mode_sends_typed_values_when_their_parameter_closes() -> None:
    parser = streamparse.StreamParser(FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    head = argument_fragments(parser.feed("<tool_call>\n<function=run_tests>\n<parameter=timeout>\n12"))
    assert head == ["{", '"timeout": ']
    assert argument_fragments(parser.feed("0\n</parameter>\n")) == ["120"]
    assert argument_fragments(parser.feed("<parameter=verbose>\nTrue\n</parameter>")) == [', "verbose": ', "true"]
    parser.feed("<parameter=paths>\n[]\n</parameter>\n</function>\n</tool_call>")
    parser.close()
    assert parser.message.tool_calls[0].arguments_json == '{"timeout": 120, "verbose": true, "paths": []}'


def test_progressive_mode_marks_a_started_call_rejected_later() -> None:
    text = call("run_tests", ("paths", "['a'"), ("timeout", "soon"))
    folded, message = run_stream(list(text), format=FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    assert folded.calls[0]["name"] == "run_tests" and folded.calls[0]["status"] == "schema_violation"
    assert message.rejected[0].status == "schema_violation"
    dup = call("write_file", ("path", "a"), ("path", "b"))
    folded, message = run_stream(list(dup), format=FORMAT, emit_calls="progressive", id_factory=ids)
    assert folded.calls[0]["status"] == "invalid_json" and folded.calls[0]["arguments"] == '{"path": "a"'


# ----------------------------------------------------------------- any chunking, with typed tools

_KEYS = ["zip", "count", "ratio", "flag", "options", "items", "count_or_text", "maybe_count", "free", "other"]
_FITTING = {"count": ["42", " 7 ", "5.0"], "ratio": ["0.75", "-1"], "flag": ["True", "false"],
            "options": ["{'a': 1}", '{"b": [1]}'], "items": ["[1, 2]", "[]"], "maybe_count": ["None", "3"]}
_TEXT = st.one_of(
    st.sampled_from(["03106", "yes", "", "\n", "x\r", "<b>", "</parameter", "a\n\n", "\r\n", "  if a<b:\n"]),
    st.text(st.sampled_from(list("ab1 \n\t<>/=\"'\\{}[]é🚀\r")), max_size=10),
)


@given(data=st.data())
def test_typed_calls_stream_the_same_under_any_chunking(data: st.DataObject) -> None:
    params = ""
    for key in data.draw(st.lists(st.sampled_from(_KEYS), max_size=5, unique=True)):
        fitting = _FITTING.get(key)
        written = data.draw(st.sampled_from(fitting) if fitting and data.draw(st.booleans()) else _TEXT)
        closing = data.draw(st.sampled_from(["\n</parameter>", "</parameter>", ""]))
        params += f"<parameter={key}>\n{written}{closing}{data.draw(st.sampled_from(['', chr(10), ' ']))}"
    closer = data.draw(st.sampled_from(["</function>\n</tool_call>", "</function>\n</tool_call>", "</tool_call>", ""]))
    text = f"Calling.\n<tool_call>\n<function=lookup>\n{params}{closer}"
    assert_every_mode_agrees(data, text, FORMAT, TOOLS)


def test_a_call_of_another_format_says_no_call_of_this_format_was_found() -> None:
    """Hermes output read as qwen3_coder: the block holds text, so the error names the format and
    points at `streamparse detect`, instead of calling a non-empty block empty."""
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    (rejected,) = streamparse.parse(text, format="qwen3_coder").rejected
    assert rejected.errors[0].startswith("no qwen3_coder call found in the call block")
    assert rejected.raw == text
    (empty,) = streamparse.parse("<tool_call></tool_call>", format="qwen3_coder").rejected
    assert empty.errors == ["the call block is empty: no call inside it"]
