"""Liquid LFM2 and LFM2.5: `<think>` reasoning and `<|tool_call_start|>…<|tool_call_end|>` calls whose
body is a pythonic list (LFM2.5: `[get_weather(location='Paris')]`) or JSON call objects (LFM2:
`{"name": …, "arguments": {…}}`, or a list of them), told apart by the body's first characters."""

from __future__ import annotations

import json
from typing import Any

from ..bodies.first_character import FirstCharacter
from ..bodies.json_call import JsonCall
from ..bodies.pythonic import PythonicCalls
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

THINK = ("<think>", "</think>")
OPENER, CLOSER = "<|tool_call_start|>", "<|tool_call_end|>"

BODY = FirstCharacter(
    choices=(
        (r"\[[ \t\r\n]*\{", JsonCall("lfm2", closers=(CLOSER,), tag=OPENER, call_list=True)),
        (r"\{", JsonCall("lfm2", closers=(CLOSER,), tag=OPENER, call_list=True)),
        # `[NAME(`, and `[]` (no call: framing).
        (r"\[", PythonicCalls("lfm2", tag=OPENER, raw_single_quotes=True)),
    ),
    closers=(CLOSER,), stops=(OPENER,), tag=OPENER,
)


def _python(value: Any) -> str:
    """A value as the LFM2.5 template writes it inside a list (Python's `str()`), with strings in
    `'…'` unescaped; a string holding `'` (which the template would break) in JSON's double quotes."""
    if isinstance(value, str):
        return f"'{value}'" if "'" not in value else json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_python, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_python(k)}: {_python(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _argument(value: Any) -> str:
    """An argument value as the template's `format_arg_value` writes it: a dict as JSON."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else _python(value)


def render(message: Message) -> str:
    """The message as the LFM2.5 template writes it:
    `<think>R</think>C<|tool_call_start|>[f(k='v'), …]<|tool_call_end|>`."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = ", ".join(f"{call.name}({', '.join(f'{k}={_argument(v)}' for k, v in call.arguments.items())})"
                          for call in message.tool_calls)
        out += f"{OPENER}[{calls}]{CLOSER}"
    return out


LFM2 = FormatSpec(
    name="lfm2",
    aliases=("lfm2.5",),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=BODY, no_call_is_framing=True),),
    render=render,
    # The envelope ends at the first closer, or at the next opener when the closer is missing:
    # string values cannot hold them (they are special tokens).
    reserved=(OPENER, CLOSER),
    # Added tokens of the LFM2 tokenizer; `<think>` and `</think>` are read as text.
    special=(OPENER, CLOSER),
    detect=((OPENER,),),
)

FORMATS = (LFM2,)
