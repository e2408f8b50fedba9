"""Property: what a grammar lets a model write, the parser reads as accepted calls, none rejected.

Hypothesis drives llguidance's matcher over a Lark grammar: at each step it picks one of the tokens
the grammar allows (the real tokenizer's pieces, the format's delimiters as special tokens), and
after a budget it steers to an end (the end of output where allowed, else closing punctuation).
The text then parses with `streamparse.parse` into calls the tools check accepts, with no rejected
call and nothing lost."""

from __future__ import annotations

from typing import Any

import llguidance
import llguidance.numpy
import numpy
from grammar_engines import tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamparse
from streamparse.constrain import grammar_for
from streamparse.registry import get_format

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "maxLength": 12},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                       "days": {"type": "integer"}},
        "required": ["location"]}}},
    {"type": "function", "function": {"name": "list_calendars", "parameters": {"type": "object", "properties": {}}}},
]
# One format per JSON-bodied layout: call objects, call lists, a header, a choice of kinds, pythonic.
FORMATS = ("hermes", "nemotron", "deepseek_v3_1", "kimi_k2", "lfm2", "command_r7b")
_BUDGET = 48  # free steps before steering to an end
_STEER = ('"', "'", "}", "]", ")", ">", "\n")


def _allowed(matcher: Any, vocab: int) -> list[int]:
    mask = llguidance.numpy.allocate_token_bitmask(1, vocab)
    llguidance.numpy.fill_next_token_bitmask(matcher, mask)
    bits = numpy.unpackbits(mask[0].view(numpy.uint8), bitorder="little")[:vocab]
    return [int(token) for token in numpy.flatnonzero(bits)]


def generate(fmt: str, tool_choice: Any, data: st.DataObject, tools: list[dict[str, Any]] = TOOLS) -> str | None:
    """A text the format's Lark grammar allows, token by token; None if it did not end in time."""
    special = tuple(get_format(fmt).special)
    hf, lltok = tokenizer(special)
    ids = {text: hf.token_to_id(text) for text in special}
    grammar = grammar_for(fmt, tools, tool_choice=tool_choice, syntax="lark", token_ids=ids)
    assert isinstance(grammar, str)
    matcher = llguidance.LLMatcher(lltok, llguidance.grammar_from("lark", grammar), log_level=0)
    eos, vocab = lltok.eos_token, lltok.vocab_size
    pieces: list[int] = []
    for step in range(_BUDGET + 160):
        allowed = _allowed(matcher, vocab)
        assert allowed, matcher.get_error()
        if step >= _BUDGET:
            if eos in allowed or matcher.is_accepting():
                break
            text_of = {token: hf.decode([token], skip_special_tokens=False) for token in allowed[:4096]}
            steered = [token for token, text in text_of.items() if text.strip() and text.strip()[0] in _STEER]
            allowed = steered or allowed
        token = data.draw(st.sampled_from(allowed[:4096]))
        if token == eos:
            break
        assert matcher.consume_token(token), matcher.get_error()
        pieces.append(token)
    else:
        return None
    return str(hf.decode(pieces, skip_special_tokens=False))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(fmt=st.sampled_from(FORMATS), required=st.booleans(), data=st.data())
def test_generated_text_parses_into_accepted_calls(fmt: str, required: bool, data: st.DataObject) -> None:
    _parses_into_accepted_calls(fmt, required, data)


def _parses_into_accepted_calls(fmt: str, required: bool, data: st.DataObject) -> None:
    text = generate(fmt, "required" if required else "auto", data)
    if text is None:
        return
    message = streamparse.parse(text, format=fmt, tools=TOOLS)
    assert message.rejected == [], (text, message.rejected)
    if required:
        assert message.tool_calls, text
    for call in message.tool_calls:
        assert call.name in {"get_weather", "list_calendars"}


# The tagged formats whose templates print lists and dicts with Python's `str()` (Qwen3-Coder
# 2025-07-31, Seed-OSS): their grammars offer the repr beside JSON. (String values carry no length
# bound: a raw or repr string is not bounded by the grammar, docs/grammars.md.)
PYTHON_PRINTING = ("qwen3_coder", "seed_oss")
NESTED_TOOLS = [
    {"type": "function", "function": {"name": "plan", "parameters": {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                       "place": {"type": "object", "properties": {"city": {"type": "string"},
                                                                  "zip": {"type": ["integer", "null"]}},
                                 "required": ["city"]},
                       "steps": {"type": "array", "items": {"type": "object", "properties": {
                           "done": {"type": "boolean"}, "cost": {"type": "number"}}}}},
        "required": ["tags", "place"]}}},
]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(fmt=st.sampled_from(PYTHON_PRINTING), data=st.data())
def test_generated_nested_values_parse_into_accepted_calls(fmt: str, data: st.DataObject) -> None:
    text = generate(fmt, "required", data, NESTED_TOOLS)
    if text is None:
        return
    message = streamparse.parse(text, format=fmt, tools=NESTED_TOOLS)
    assert message.rejected == [], (text, message.rejected)
    assert message.tool_calls, text
    for call in message.tool_calls:
        assert isinstance(call.arguments["tags"], list) and isinstance(call.arguments["place"], dict), text


# The DSML dialects: tagged parameters whose `string` attribute says how a value is read, in a calls
# block (every block a format reads is in its grammar), after forced-open reasoning where a prompt opens it.
DSML_FORMATS = ("deepseek_v3_2", "deepseek_v4_1", "gigachat3_5")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(fmt=st.sampled_from(DSML_FORMATS), required=st.booleans(), data=st.data())
def test_generated_dsml_text_parses_into_accepted_calls(fmt: str, required: bool, data: st.DataObject) -> None:
    _parses_into_accepted_calls(fmt, required, data)
