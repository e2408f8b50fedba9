"""Grammars of the tagged, XML, object-literal and headed-message formats, checked with the real
engines in each syntax (xgrammar's structural tags, llguidance's Lark, llama.cpp's GBNF as llguidance
reads it; `grammar_engines.py`):

- every call of a real template render is accepted by its envelope's grammar (the kind's
  `call_grammar` inside `body_grammar`), and so is every whole real output of the headed-message
  formats, with "auto" and (its calls alone) "required";
- strings generated from a call grammar are accepted by both engines and parse into accepted calls,
  with no rejected call and nothing left over;
- mutated calls (a wrong name, a required key left out, a value of the wrong type, a broken closing
  tag) are refused;
- a name the format cannot write back is a clear `GrammarUnsupported`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

import pytest
from conftest import SHARED
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts, token_ids
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse.bodies.python_layout import INTEGER, NUMBER, REPR
from streamparse.constrain.assemble import mark_special
from streamparse.constrain.gbnf import gbnf
from streamparse.constrain.lark import lark
from streamparse.constrain.structural_tag import structural_tag
from streamparse.grammar_ir import (
    Alt,
    GrammarUnsupported,
    Json,
    Lit,
    Members,
    Node,
    Regex,
    Repeat,
    Seq,
    Special,
    Text,
    alt,
    seq,
)
from streamparse.registry import get_format
from streamparse.spec import EnvelopeSpec, FormatSpec

ENVELOPE_FORMATS = ("qwen3_coder", "glm45", "minimax_m2", "seed_oss", "deepseek_v3_2", "hy_v3", "mimo_v2", "step3",
                    "solar_open2", "kimi_k3", "minimax_m3", "gemma4", "deepseek_v4_1", "gigachat3_5",
                    "hy_v4", "iquest_q1", "ling3", "minicpm5",
                    "function_gemma")
MESSAGE_FORMATS = ("gpt_oss", "functionary_v3_2", "muse_glimmer")
CASE_FILES = ("cases.json", "cases_more.json", "cases_new_families.json", "cases_wave3.json", "cases_wave4.json")
CASE_FORMATS = {"deepseek_v3_2_dsml": "deepseek_v3_2"}



def _cases(formats: tuple[str, ...]) -> list[dict[str, Any]]:
    found = []
    for name in CASE_FILES:
        path = SHARED / "templates" / name
        if path.exists():
            for case in json.loads(path.read_text(encoding="utf-8")):
                case["format"] = CASE_FORMATS.get(case["format"], case["format"])
                if case["format"] in formats:
                    found.append(case)
    return found


def _case_id(case: dict[str, Any]) -> str:
    return f'{case["format"]}:{case["template"]}:{case["case"]}:{json.dumps(case["template_kwargs"], sort_keys=True)}'


def _parameters(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function", tool)
    return function.get("parameters") or {"type": "object"}


def _name(tool: Mapping[str, Any]) -> str:
    return str(tool.get("function", tool)["name"])


def envelope_grammar(spec: FormatSpec, envelope: EnvelopeSpec, tools: list[dict[str, Any]]) -> Node:
    """An envelope of the format holding calls of any of the tools, as the assembly writes one."""
    kind = envelope.body
    calls = alt(*(kind.call_grammar(_name(tool), _parameters(tool)) for tool in tools))  # type: ignore[attr-defined]
    return mark_special(seq(Lit(envelope.openers[0]), kind.body_grammar(calls, True)), spec.special)  # type: ignore[attr-defined]


ENGINES = ("structural_tag", "lark", "gbnf")


def accepts(engine: str, node: Node, text: str, spec: FormatSpec) -> bool:
    if engine == "structural_tag":
        return structural_tag_accepts(structural_tag(node), text)
    if engine == "gbnf":
        return gbnf_accepts(gbnf(node), text)
    return lark_accepts(lark(node, token_ids(tuple(spec.special))), text, tuple(spec.special))


def format_engines() -> list[Any]:
    return [pytest.param(fmt, engine, id=f"{fmt}-{engine}")
            for fmt in ENVELOPE_FORMATS for engine in ENGINES]


# ----------------------------------------------------------------- real renders


def _envelope_calls() -> list[Any]:
    params = []
    for case in _cases(ENVELOPE_FORMATS):
        message = streamparse.parse(case["output"], format=case["format"], tools=case["tools"],
                                    thinking_forced_open=case["thinking_forced_open"])
        for index, call in enumerate(message.tool_calls):
            for engine in ENGINES:
                params.append(pytest.param(engine, case["format"], call.raw, case["tools"],
                                           id=f"{engine}:{_case_id(case)}#{index}"))
    return params


@pytest.mark.parametrize(("engine", "fmt", "raw", "tools"), _envelope_calls())
def test_every_real_call_is_accepted_by_its_envelope_grammar(engine: str, fmt: str, raw: str,
                                                              tools: list[dict[str, Any]]) -> None:
    spec = get_format(fmt)
    envelope = next(e for e in spec.envelopes if raw.startswith(e.openers))
    assert accepts(engine, envelope_grammar(spec, envelope, tools), raw, spec)


def _message_outputs() -> list[Any]:
    params = []
    for case in _cases(MESSAGE_FORMATS):
        texts = [("auto", case["output"])]
        expected = case["expected"]
        if expected["tool_calls"]:  # "required": the calls alone (a content message left out)
            calls_only = case["output"]
            if expected["content"]:
                calls_only = calls_only.split(">>>", 1)[1] if case["format"] == "functionary_v3_2" \
                    else calls_only.replace(expected["content"], "", 1)
            texts.append(("required", calls_only))
        for choice, text in texts:
            for engine in ENGINES:
                params.append(pytest.param(case, choice, text, engine,
                                           id=f"{engine}:{_case_id(case)}:{choice}"))
    return params


@pytest.mark.parametrize(("case", "tool_choice", "text", "engine"), _message_outputs())
def test_every_real_message_output_is_accepted(case: dict[str, Any], tool_choice: str, text: str, engine: str) -> None:
    spec = get_format(case["format"])
    grammar = streamparse.grammar_for(case["format"], case["tools"], tool_choice=tool_choice, syntax=engine)
    if isinstance(grammar, dict):
        assert structural_tag_accepts(grammar, text)
    elif engine == "gbnf":
        assert gbnf_accepts(grammar, text)
    else:
        assert lark_accepts(grammar, text, tuple(spec.special))


def _whole_outputs() -> list[Any]:
    params = []
    for case in _cases(ENVELOPE_FORMATS):
        expected = case["expected"]
        texts = [("auto", case["output"])]
        if expected["tool_calls"]:  # "required": the calls alone, the content left out
            texts.append(("required", case["output"].replace(expected["content"], "", 1)
                          if expected["content"] else case["output"]))
        for choice, text in texts:
            params.append(pytest.param(case, choice, text, id=f"{_case_id(case)}:{choice}"))
    return params


@pytest.mark.parametrize(("case", "tool_choice", "text"), _whole_outputs())
def test_every_real_output_of_the_envelope_formats_is_accepted_whole(case: dict[str, Any], tool_choice: str,
                                                                     text: str) -> None:
    tag = streamparse.grammar_for(case["format"], case["tools"], tool_choice=tool_choice,
                                  thinking_forced_open=case["thinking_forced_open"])
    assert isinstance(tag, dict)
    assert structural_tag_accepts(tag, text)


def test_harmony_refuses_content_under_required_and_a_call_under_none() -> None:
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}]
    final = "<|channel|>final<|message|>It is noon."
    call = ' to=functions.get_time<|channel|>commentary json<|message|>{"timezone": "UTC"}'
    required = streamparse.grammar_for("gpt_oss", tools, tool_choice="required")
    none = streamparse.grammar_for("gpt_oss", tools, tool_choice="none")
    assert isinstance(required, dict) and isinstance(none, dict)
    assert structural_tag_accepts(required, call) and not structural_tag_accepts(required, final)
    assert structural_tag_accepts(none, final) and not structural_tag_accepts(none, call)


@pytest.mark.parametrize("engine", ENGINES)
def test_functionary_content_before_a_call_ends_at_the_first_opener(engine: str) -> None:
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    grammar = streamparse.grammar_for("functionary_v3_2", tools, syntax=engine)
    call = ">>>get_time\n{}"

    def takes(text: str) -> bool:
        if isinstance(grammar, dict):
            return structural_tag_accepts(grammar, text)
        return gbnf_accepts(grammar, text) if engine == "gbnf" \
            else lark_accepts(grammar, text, tuple(get_format("functionary_v3_2").special))

    assert takes("all\nIt is a > b, >> c." + call)
    assert not takes("all\nIt is a >" + call)  # read as the recipient `>get_time`
    assert not takes("all\nIt is >>> now" + call)


# ----------------------------------------------------------------- generated calls

TOOLS = [
    {"type": "function", "function": {"name": "create_event", "parameters": {"type": "object", "properties": {
        "title": {"type": "string"}, "duration": {"type": "integer"}, "all_day": {"type": "boolean"},
        "priority": {"type": ["number", "null"]}, "unit": {"type": "string", "enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "place": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                  "required": ["city"]},
        "mixed": {"type": ["string", "integer"]}}, "required": ["title", "duration"]}}},
    {"type": "function", "function": {"name": "list_calendars", "parameters": {"type": "object", "properties": {}}}},
]
_TEXTS = ["", "plain", "two\nlines\n", " spaced ", "a<b", "{x}: [y]", "café 🚀", "\\n \"q\""]
# Raw texts may also hold delimiters of other places (a raw value is data up to its own stop; a JSON
# string holding the call's closer would be cut there, see docs/grammars.md), unless the format
# declares them special tokens, which a model writes as tokens, not as text.
_RAW_TEXTS = [*_TEXTS, "</tool_call><tool_call> <function=f>", "<think>x</think>", "]<]minimax[>[", '<|"|>',
              "<|sep|>"]


def json_value(schema: Any, rng: random.Random) -> Any:
    """A value valid against the (small) schemas above."""
    if not isinstance(schema, Mapping) or not schema:
        return rng.choice([1, "s", None, True])
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kinds = schema.get("type")
    kind = rng.choice(kinds) if isinstance(kinds, list) else kinds
    if kind == "string":
        return rng.choice(_TEXTS)
    if kind == "integer":
        return rng.randint(-40, 40)
    if kind == "number":
        return rng.choice([0.75, -2, 1e-05])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        return [json_value(schema.get("items"), rng) for _ in range(rng.randint(schema.get("minItems", 0), 3))]
    properties = schema.get("properties", {})
    return {key: json_value(value, rng) for key, value in properties.items()
            if key in schema.get("required", []) or rng.random() < 0.5}


_PATTERN_SAMPLES = {r"\n?": ["", "\n"], r"[1-9][0-9]{0,3}": ["1", "27"], r"-?(0|[1-9][0-9]*)": ["0", "-7", "42"],
                    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?": ["0.75", "-3", "1e-05"],
                    r"[A-Za-z_][A-Za-z0-9_]{0,63}": ["k", "key_2"], r"[ \t\r\n]{0,16}": ["", "\n"]}
# Python reprs (`python_layout.REPR`): strings in either quote, with the escapes `repr` writes.
assert isinstance(REPR.strings, Alt)
_SINGLE, _DOUBLE = (option.pattern for option in REPR.strings.options if isinstance(option, Regex))
_PATTERN_SAMPLES.update({
    _SINGLE: ["''", "'plain'", "'it\\'s'", "'say \"hi\"'", "'tab\\there'", "'\\x1b[0m'", "'caf\\xe9 🚀'",
              "'C:\\\\temp'", "'a<b'"],
    _DOUBLE: ['""', '"it\'s"', '"two\\nlines"'],
    INTEGER: ["0", "-7", "42"], NUMBER: ["0.75", "-3", "1e-05", "-0.0015"]})


def sample(node: Node, rng: random.Random, special: tuple[str, ...] = ()) -> str:
    """A random text of the grammar `node` (every pattern the layouts write has its samples above);
    raw texts hold none of the `special` tokens."""
    if isinstance(node, (Lit, Special)):
        return node.text
    if isinstance(node, Json):
        return json.dumps(json_value(node.schema, rng), ensure_ascii=False)
    if isinstance(node, Text):
        return rng.choice([text for text in _RAW_TEXTS if not any(stop in text for stop in (*node.stops, *special))])
    if isinstance(node, Regex):
        return rng.choice(_PATTERN_SAMPLES[node.pattern]) if node.pattern in _PATTERN_SAMPLES \
            else rng.choice("abcxyz") if node.pattern.startswith("[^") else ""
    if isinstance(node, Seq):
        return "".join(sample(item, rng, special) for item in node.items)
    if isinstance(node, Alt):
        return sample(rng.choice(node.options), rng, special)
    if isinstance(node, Members):
        return sample(node.expanded(), rng, special)
    assert isinstance(node, Repeat)
    count = rng.randint(node.min, node.max if node.max is not None else node.min + 2)
    separator = "" if node.separator is None else sample(node.separator, rng, special)
    return separator.join(sample(node.item, rng, special) for _ in range(count))


@pytest.mark.parametrize(("fmt", "engine"), format_engines())
@given(rng=st.randoms(use_true_random=False))
def test_generated_calls_are_accepted_by_the_engines_and_the_parser(fmt: str, engine: str, rng: random.Random) -> None:
    spec = get_format(fmt)
    envelope = spec.envelopes[0]
    grammar = envelope_grammar(spec, envelope, TOOLS)
    text = sample(grammar, rng, tuple(spec.special))
    assert accepts(engine, grammar, text, spec), text
    message = streamparse.parse(text, format=fmt, tools=TOOLS)
    assert message.rejected == [] and message.tool_calls, text
    assert message.content == "" and message.reasoning == "", text


# ----------------------------------------------------------------- mutated calls


_ARGUMENTS = {"title": "Sync", "duration": 45, "all_day": False, "priority": 0.5, "unit": "c",
              "tags": ["a", "b c"], "place": {"city": "Oslo", "zip": None}, "mixed": "x"}


def _written_call(fmt: str, arguments: dict[str, Any]) -> str:
    """The envelope of a call of `create_event`, as the format's render writes it."""
    call = streamparse.ToolCall("call_1", "create_event", arguments, json.dumps(arguments))
    text = get_format(fmt).render(streamparse.Message(tool_calls=[call]))
    read = streamparse.parse(text, format=fmt)  # (no tools: a call missing a required key is still read)
    assert read.rejected == [] and len(read.tool_calls) == 1, text
    return read.tool_calls[0].raw


_MUTATIONS = {
    "wrong name": lambda fmt: _written_call(fmt, _ARGUMENTS).replace("create_event", "create_evnt", 1),
    "required key missing": lambda fmt: _written_call(fmt, {k: v for k, v in _ARGUMENTS.items() if k != "title"}),
    "wrong type": lambda fmt: _written_call(fmt, _ARGUMENTS).replace("45", "forty-five", 1),
    "broken closing tag": lambda fmt: _without_char_after(_written_call(fmt, _ARGUMENTS), "Sync"),
}


def _without_char_after(raw: str, text: str) -> str:
    """`raw` less the character after `text` (the first of the closing tag, or of its framing newline)."""
    end = raw.index(text) + len(text)
    return raw[:end] + raw[end + 1:]


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
@pytest.mark.parametrize(("fmt", "engine"), format_engines())
def test_mutated_calls_are_refused(fmt: str, engine: str, mutation: str) -> None:
    spec = get_format(fmt)
    grammar = envelope_grammar(spec, spec.envelopes[0], TOOLS)
    raw = _written_call(fmt, _ARGUMENTS)
    assert accepts(engine, grammar, raw, spec), raw
    mutated = _MUTATIONS[mutation](fmt)
    assert mutated != raw
    assert not accepts(engine, grammar, mutated, spec), mutated


# ----------------------------------------------------------------- values printed by Python

# The formats whose templates print non-strings with Python's `str()` (Qwen3-Coder 2025-07-31,
# Seed-OSS): `True`, `None`, and lists and dicts as reprs; their grammars offer that beside JSON.
PYTHON_PRINTING = ("qwen3_coder", "seed_oss")


def _python_printed_call(fmt: str, arguments: dict[str, Any]) -> str:
    """The envelope of a call of `create_event` as those templates write it."""
    if fmt == "seed_oss":
        return _written_call(fmt, arguments)  # (its render is the template's: `str()` of each value)
    params = "".join(f"<parameter={key}>\n{value if isinstance(value, str) else repr(value)}\n</parameter>\n"
                     for key, value in arguments.items())
    return f"<function=create_event>\n{params}</function>"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmt", PYTHON_PRINTING)
@given(rng=st.randoms(use_true_random=False))
def test_values_printed_by_python_are_accepted_and_read_back_as_the_same_arguments(fmt: str, engine: str,
                                                                                   rng: random.Random) -> None:
    spec = get_format(fmt)
    arguments = json_value(_parameters(TOOLS[0]), rng)
    raw = _python_printed_call(fmt, arguments)
    assert accepts(engine, envelope_grammar(spec, spec.envelopes[0], TOOLS), raw, spec), raw
    message = streamparse.parse(raw, format=fmt, tools=TOOLS)
    assert message.rejected == [], raw
    assert [call.arguments for call in message.tool_calls] == [arguments], raw


_PRINTED = {"title": "Sync", "duration": 45, "tags": ["a"], "place": {"city": "Oslo", "zip": None}}
_PYTHON_MUTATIONS = {
    "required key missing": lambda fmt: _python_printed_call(fmt, {**_PRINTED, "place": {"zip": None}}),
    "wrong item type": lambda fmt: _python_printed_call(fmt, {**_PRINTED, "tags": ["a", 1]}),
    "too few items": lambda fmt: _python_printed_call(fmt, {**_PRINTED, "tags": []}),
    "key not in the schema": lambda fmt: _python_printed_call(fmt, {**_PRINTED, "place": {"city": "O", "x": 1}}),
    "a tuple": lambda fmt: _python_printed_call(fmt, {**_PRINTED, "tags": ("a",)}),
    "a JSON word in a repr": lambda fmt: _python_printed_call(fmt, _PRINTED).replace("None}", "null}"),
    "JSON and Python quotes mixed": lambda fmt: _python_printed_call(fmt, _PRINTED).replace("'Oslo'", "\"Oslo'"),
}


@pytest.mark.parametrize("mutation", sorted(_PYTHON_MUTATIONS))
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmt", PYTHON_PRINTING)
def test_mutated_python_printed_values_are_refused(fmt: str, engine: str, mutation: str) -> None:
    spec = get_format(fmt)
    grammar = envelope_grammar(spec, spec.envelopes[0], TOOLS)
    raw = _python_printed_call(fmt, _PRINTED)
    assert "{'city': 'Oslo', 'zip': None}" in raw and accepts(engine, grammar, raw, spec), raw
    mutated = _PYTHON_MUTATIONS[mutation](fmt)
    assert mutated != raw
    assert not accepts(engine, grammar, mutated, spec), mutated


@pytest.mark.parametrize("fmt", ("qwen3_coder", "seed_oss", "glm45", "minimax_m2"))
def test_an_optional_parameter_whose_schema_has_no_null_is_left_out_not_written_null(fmt: str) -> None:
    # (The tools check forgives a null for an optional property, but these dialects type a value's
    # text by the tool's schema, which reads `null` there as the text "null".)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "m": {"type": ["integer", "null"]}}}}}]
    grammar = streamparse.grammar_for(fmt, tools, tool_choice="required")
    assert isinstance(grammar, dict)
    for key, accepted in (("n", False), ("m", True)):
        call = streamparse.ToolCall("call_1", "f", {key: None}, json.dumps({key: None}))
        text = get_format(fmt).render(streamparse.Message(tool_calls=[call]))
        assert structural_tag_accepts(grammar, text) is accepted, text
        assert (streamparse.parse(text, format=fmt, tools=tools).rejected == []) is accepted, text


# ----------------------------------------------------------------- what cannot be written


@pytest.mark.parametrize(("fmt", "name"), [("qwen3_coder", "get>weather"), ("glm45", "get\nweather"),
                                           ("deepseek_v3_2", 'say"hi'), ("gemma4", "f{x}"),
                                           ("minimax_m3", "a<b"), ("gpt_oss", "two words")])
def test_a_tool_name_the_format_cannot_write_is_refused_with_the_reason(fmt: str, name: str) -> None:
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}]
    with pytest.raises(GrammarUnsupported, match="rename it"):
        streamparse.grammar_for(fmt, tools, tool_choice="required")


def test_a_parameter_name_holding_the_closing_tag_is_refused() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a>b": {"type": "string"}}}}}]
    with pytest.raises(GrammarUnsupported, match="parameter name 'a>b'"):
        streamparse.grammar_for("qwen3_coder", tools)


def test_a_top_level_union_of_parameter_shapes_has_no_xml_layout() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}}}]
    with pytest.raises(GrammarUnsupported, match="top-level 'anyOf'"):
        streamparse.grammar_for("glm45", tools)


@pytest.mark.parametrize(("fmt", "empty", "invented"), [
    ("gemma4", "<|tool_call>call:ping{}<tool_call|>", '<|tool_call>call:ping{a:<|"|>x<|"|>}<tool_call|>'),
    ("qwen3_coder", "<function=ping>\n</function>", "<function=ping>\n<parameter=a>\nx\n</parameter>\n</function>"),
])
def test_a_tool_whose_schema_names_no_properties_is_called_with_no_arguments(fmt: str, empty: str,
                                                                            invented: str) -> None:
    spec = get_format(fmt)
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    grammar = envelope_grammar(spec, spec.envelopes[0], tools)
    assert accepts("structural_tag", grammar, empty, spec)
    assert not accepts("structural_tag", grammar, invented, spec)


def test_harmony_may_write_the_stop_token_that_ends_the_output() -> None:
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    tag = streamparse.grammar_for("gpt_oss", tools)
    assert isinstance(tag, dict)
    call = " to=functions.get_time<|channel|>commentary json<|message|>{}"
    assert structural_tag_accepts(tag, call) and structural_tag_accepts(tag, call + "<|call|>")
    assert not structural_tag_accepts(tag, call + "<|return|>")
