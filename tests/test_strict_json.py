"""Arguments are strict JSON (RFC 8259) in every format: issue #12, item 3 and item 8.

NaN, Infinity, numbers that overflow a double, lone surrogates (escaped or raw, in names, keys and
values) and duplicate keys at any depth make the call `invalid_json`; nesting deeper than the
reader follows is `invalid_json` "nested too deeply". Nothing raises, `parse()` and every way of
streaming agree, every accepted call's `arguments_json` reads back with a strict reader, and the
CLI prints JSON (never a traceback).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import agreeing

import streamparse
from streamparse import Message, ToolCall
from streamparse.families import FAMILIES
from streamparse.grammar import strict_loads
from streamparse.strict_json import strict_value

_MARK = {"__raw_arguments__": 12345}
# Formats that carry the arguments as JSON text (pythonic writes Python literals: tests/test_pythonic.py).
JSON_FORMATS = [spec.name for spec in FAMILIES if not spec.untyped_values
                and json.dumps(_MARK) in spec.render(Message(tool_calls=[ToolCall("c", "f", dict(_MARK), "")]))]
XML_FORMATS = [spec.name for spec in FAMILIES if spec.untyped_values]

# Argument texts a model can write that are JSON to Python's lenient reader but not to RFC 8259.
BAD_ARGUMENTS = {
    "nan": ('{"a": NaN}', "NaN is not JSON"),
    "infinity": ('{"a": -Infinity}', "Infinity is not JSON"),
    "overflow": ('{"a": 1e999}', "too large for a double"),
    "escaped lone surrogate": ('{"a": "x\\ud800y"}', "lone surrogate"),
    "escaped lone low surrogate in a key": ('{"\\udc00": 1}', "lone surrogate"),
    "raw lone surrogate": ('{"a": "x\ud800"}', "lone surrogate"),
    "duplicate key": ('{"path": "a", "path": "b"}', "duplicate key 'path'"),
    "nested duplicate key": ('{"x": [{"k": 1, "k": 1}]}', "duplicate key 'k'"),
    "deep nesting": ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
}


def wire(fmt: str, arguments_text: str, name: str = "f") -> str:
    """The output text of one call to `name` whose arguments JSON is exactly `arguments_text`."""
    text = streamparse.render(Message(tool_calls=[ToolCall("call1", name, dict(_MARK), "")]), fmt)
    marker = json.dumps(_MARK)
    assert text.count(marker) == 1, text
    return text.replace(marker, arguments_text)


def outcomes(text: str, fmt: str, **options: Any) -> Message:
    """`parse()`, and streaming in 1-char chunks in both emit modes: all agree and none raises."""
    options.setdefault("id_factory", lambda k: f"call{k}")
    message = streamparse.parse(text, fmt, **options)
    for emit in ("validated", "progressive"):
        parser = streamparse.StreamParser(format=fmt, emit_calls=emit, **options)
        for chunk in text:
            parser.feed(chunk)
        parser.close()
        assert parser.message == message
    json.dumps(message.to_openai(), ensure_ascii=False).encode("utf-8")  # writable as UTF-8
    for call in message.tool_calls:
        assert strict_loads(call.arguments_json) == call.arguments
    return message


@pytest.mark.parametrize("fmt", JSON_FORMATS)
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_non_strict_arguments_are_invalid_json(fmt: str, case: str) -> None:
    arguments, reason = BAD_ARGUMENTS[case]
    message = outcomes(wire(fmt, arguments), fmt)
    assert message.tool_calls == []
    assert [r.status for r in message.rejected] == ["invalid_json"]
    if fmt in ("hermes", "mistral") or case == "deep nesting":  # formats whose readers report the decoder's words
        assert reason in " ".join(message.rejected[0].errors), message.rejected[0].errors


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_strict_arguments_are_accepted(fmt: str) -> None:
    arguments = '{"a": 1.5e300, "b": "\\ud83d\\ude00 ok", "c": {"k": 1}, "d": [{"k": 1}, {"k": 2}]}'
    message = outcomes(wire(fmt, arguments), fmt)
    assert [c.arguments for c in message.tool_calls] == [json.loads(arguments)]


@pytest.mark.parametrize("fmt", ["hermes", "mistral"])
@pytest.mark.parametrize("inner", ['{"a": NaN, "b": Infinity}', '{"p": 1, "p": 2}', '{"a": "\\ud800"}'])
def test_arguments_as_a_json_string_are_strict_too(fmt: str, inner: str) -> None:
    """Some models write the arguments as a JSON string holding the object: its content is held to
    the same rules (it used to be read with plain `json.loads`)."""
    text = wire(fmt, json.dumps(inner))
    if fmt == "mistral":
        text = "[TOOL_CALLS]" + json.dumps([{"name": "f", "arguments": "@"}]).replace('"@"', json.dumps(inner))
    message = outcomes(text, fmt)
    assert [r.status for r in message.rejected] == ["invalid_json"]


@pytest.mark.parametrize(("fmt", "text"), [
    ("hermes", '<tool_call>\n{"name": "f\\ud800", "arguments": {}}\n</tool_call>'),
    ("mistral", '[TOOL_CALLS][{"name": "f\\udbff", "arguments": {}}]'),
    ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {}, "id": "a\\ud800"}]'),
])
def test_lone_surrogate_in_a_json_name_or_id_is_invalid_json(fmt: str, text: str) -> None:
    """Where the name (or id) is a JSON string; formats that write the name as plain text take
    `\\ud800` as six characters."""
    message = outcomes(text, fmt)
    assert message.tool_calls == []
    assert [r.status for r in message.rejected] == ["invalid_json"]


XML_TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "o": {"type": "object"}, "n": {"type": "number"}}}}]


def xml_wire(fmt: str, key: str, value_text: str) -> str:
    text = streamparse.render(Message(tool_calls=[ToolCall("c", "f", {key: "@@VALUE@@"}, "")]), fmt)
    return text.replace("@@VALUE@@", value_text)


@pytest.mark.parametrize("fmt", XML_FORMATS)
@pytest.mark.parametrize("tools", [None, XML_TOOLS])
def test_xml_raw_lone_surrogate_is_invalid_json(fmt: str, tools: Any) -> None:
    message = outcomes(xml_wire(fmt, "s", "bad \ud800 text"), fmt, tools=tools)
    assert message.tool_calls == []
    assert [r.status for r in message.rejected] == ["invalid_json"]
    assert "lone surrogate" in message.rejected[0].errors[0]


@pytest.mark.parametrize("fmt", XML_FORMATS)
@pytest.mark.parametrize("value", ['{"a": NaN}', '{"a": 1e999}', '{"p": 1, "p": 2}', "{'p': 1, 'p': 2}",
                                   '{"a": "\\ud800"}'])
def test_xml_object_value_that_is_not_strict_json_does_not_type(fmt: str, value: str) -> None:
    """FORMATS.md, typing by schema: a value that fits no type stays text, and validation rejects it."""
    message = outcomes(xml_wire(fmt, "o", value), fmt, tools=XML_TOOLS)
    assert message.tool_calls == []
    assert [r.status for r in message.rejected] == ["schema_violation"]


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_xml_number_overflow_does_not_type(fmt: str) -> None:
    message = outcomes(xml_wire(fmt, "n", "1e999"), fmt, tools=XML_TOOLS)
    assert [r.status for r in message.rejected] == ["schema_violation"]


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_xml_deep_nesting_is_reported_as_such(fmt: str) -> None:
    message = outcomes(xml_wire(fmt, "o", '{"a": ' + "[" * 3000 + "]" * 3000 + "}"), fmt, tools=XML_TOOLS)
    assert [r.status for r in message.rejected] == ["invalid_json"]
    assert "nests too deeply" in message.rejected[0].errors[0]


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_xml_nesting_is_checked_exactly_at_its_limit(fmt: str) -> None:
    """200 levels are a value; 201 are "nested too deeply", also where brackets inside strings or
    wide levels would mislead a count (the limit is `schema_typing.MAX_DEPTH`)."""
    def nested(levels: int) -> str:  # `levels` containers deep, with bracket-laden strings on the way
        inner = '{"s": "]]}}[[", "w": [' + ", ".join(["[]"] * 50) + "]}"
        for level in range(levels - 3):
            inner = f'["x\\"]{level}", {inner}]' if level % 2 else f'{{"k\\\\": {inner}, "z": "}}"}}'
        return inner
    for levels, accepted in ((200, True), (201, False)):
        value = nested(levels)
        message = outcomes(xml_wire(fmt, "o", value), fmt, tools=XML_TOOLS)
        if accepted:
            assert [c.arguments for c in message.tool_calls] == [{"o": json.loads(value)}]
        else:
            assert [(r.status, r.errors) for r in message.rejected] == [
                ("invalid_json", ["$: a parameter value nests too deeply (more than 200 levels)"])]


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_xml_object_written_as_strict_json_is_kept_as_written_in_arguments_json(fmt: str) -> None:
    """Read once, not written again: an object or array parameter the model wrote as strict JSON is
    its own text in `arguments_json` (without the whitespace around it), as the JSON formats keep
    the model's arguments; the streamed fragments join to it in both emit modes."""
    written = '{"b":[1, 2.50,1e2],  "a" :{"\\u00e9": "\\"x\\""}, "c": "\\/"}'
    message = outcomes(xml_wire(fmt, "o", f"  {written}\n "), fmt, tools=XML_TOOLS)
    [accepted] = message.tool_calls
    assert accepted.arguments == {"o": {"b": [1, 2.5, 100.0], "a": {"é": '"x"'}, "c": "/"}}
    assert accepted.arguments_json == '{"o": ' + written + "}"
    agreeing(xml_wire(fmt, "o", written), fmt, sizes=(1, 3, 7), tools=XML_TOOLS)
    # A value read as a Python literal, or a scalar, is written by json.dumps as before.
    message = outcomes(xml_wire(fmt, "o", "{'k': None,'t': True}"), fmt, tools=XML_TOOLS)
    assert message.tool_calls[0].arguments_json == '{"o": {"k": null, "t": true}}'
    message = outcomes(xml_wire(fmt, "n", " 1e2 "), fmt, tools=XML_TOOLS)
    assert message.tool_calls[0].arguments_json == '{"n": 100.0}'


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_cli_prints_json_for_non_strict_arguments(fmt: str) -> None:
    text = "\n".join(wire(fmt, arguments) for arguments, _ in BAD_ARGUMENTS.values() if "\ud800" not in arguments)
    done = subprocess.run([sys.executable, "-m", "streamparse", "parse", "--format", fmt, "-"],
                          check=False, input=text, capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    json.loads(done.stdout)


def test_strict_decoder_rules() -> None:
    assert strict_loads('{"a": [1, 2.5, "\\ud83d\\ude00"]}') == {"a": [1, 2.5, "😀"]}
    for bad in ("NaN", "[Infinity]", "1e400", '"\\ud800"', '{"a": 1, "a": 1}', '"\udfff"', "[" * 100000):
        with pytest.raises(json.JSONDecodeError):
            strict_loads(bad)


@pytest.mark.parametrize("text", ['<tool_call>{"name": "f\\ud800", "arguments": {}}</tool_call>'])
def test_a_name_with_a_lone_surrogate_is_never_sent_in_progressive_mode(text: str) -> None:
    parser = streamparse.StreamParser("hermes", emit_calls="progressive")
    deltas = [d for ch in text for d in parser.feed(ch)] + parser.close()
    for delta in deltas:
        json.dumps(delta.to_openai(), ensure_ascii=False).encode("utf-8")  # never unencodable
    assert parser.message.tool_calls == [] and [r.status for r in parser.message.rejected] == ["invalid_json"]


@pytest.mark.parametrize("number", ["1e999", "-1E+400", "2.5e308", "1" * 400 + ".5", "1" * 250 + "e60", "1e0400",
                                    "9" * 210 + "e99", "0.5e+309"])
@pytest.mark.parametrize("where", ["short", "after many values", "in a long string-heavy value"])
def test_a_number_that_overflows_a_double_is_refused_wherever_it_is(number: str, where: str) -> None:
    """jiter reads `1e999` as infinity: the strict reader finds it by a walk or by the text, however
    much text or how many values surround it."""
    if where == "short":
        text = f'{{"a": {number}}}'
    elif where == "after many values":
        text = json.dumps({"rows": [{"id": i, "name": f"row {i}", "score": i / 7} for i in range(100)]})[:-1]
        text += f', "big": [{number}]}}'
    else:
        text = json.dumps({"code": "def f(e1, E2):\n    return 1.5e3 * e1 " * 200})[:-1] + f', "x": {number}}}'
    with pytest.raises(json.JSONDecodeError, match="too large for a double"):
        strict_loads(text)
    message = streamparse.parse(f'<tool_call>{{"name": "f", "arguments": {text}}}</tool_call>', "hermes")
    assert [r.status for r in message.rejected] == ["invalid_json"]
    assert "too large for a double" in message.rejected[0].errors[0]


def test_exponents_and_long_digit_runs_that_stay_finite_are_values() -> None:
    text = json.dumps({"code": "x = 1e5 + 2E-3  # e9 " * 300, "n": [1.5e300, -2e-400, 10**400, 1e2]})
    assert strict_loads(text) == json.loads(text)
    for number in ("9" * 150 + "e99", "1" * 300 + ".5e-10", "1e-0400", "1.7e308"):  # near the edge, finite
        assert strict_loads(f"[{number}]") == [float(number)]


@pytest.mark.parametrize("value", ['{"é": "ü"}', '{"a":\n  ["日本", 1],\n "b": "\\u00e9"}', "[1, 2]", '"x"'])
@pytest.mark.parametrize("after", ["", "  ", " then text", "\n\n{\"next\": 1}"])
def test_a_value_read_up_to_a_limit_ends_where_its_json_ends(value: str, after: str) -> None:
    """`strict_value` with the end a scanner expects: text after the value (other lines, non-ASCII
    characters before it) moves the end to where the value really ends, never past it."""
    text = "xx" + value + after
    assert strict_value(text, 2, len(text)) == (json.loads(value), 2 + len(value))
    assert strict_value(text, 2) == (json.loads(value), 2 + len(value))


@pytest.mark.parametrize("value", ['{"a": 1, "a": 2}', '[{"k": [NaN]}]', '{"x": "\\ud800"}', '{"n": 1e999}'])
def test_a_value_that_is_not_strict_is_refused_also_when_text_follows_it(value: str) -> None:
    text = value + ' and then {"other": 1}'
    with pytest.raises(json.JSONDecodeError):
        strict_value(text, 0, len(text))
