"""GLM-4.5, 4.6 and 4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>`.

4.5/4.6 write a newline between elements, 4.7 none; both read alike. A string value is its raw text,
any other value JSON: the tool's schema types it. There is no outer wrapper and no end-of-turn
token. Reading and streaming are `bodies/tagged_params.py` (the `tagged_params` kind).

A repeated key keeps its last value (FORMATS.md) and `arguments_json` is that object, strict JSON
with each key once (a reader that kept the first of two names would run what was never validated);
so in progressive mode a call's arguments are sent whole when it closes, after its name.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

THINK = ("<think>", "</think>")
CALL_OPENER, CALL_CLOSER = "<tool_call>", "</tool_call>"
KEY_OPENER, KEY_CLOSER = "<arg_key>", "</arg_key>"
VALUE_OPENER, VALUE_CLOSER = "<arg_value>", "</arg_value>"
ARG_TAGS = (KEY_OPENER, KEY_CLOSER, VALUE_OPENER, VALUE_CLOSER)

BODY = TaggedParams(
    grammar="glm45",
    param_open=KEY_OPENER,
    param_close=VALUE_CLOSER,
    framing_newline=False,
    call_tag=CALL_OPENER,
    call_close=CALL_CLOSER,
    wrapper_closers=(),
    # The name ends at a newline or the first argument tag; a key header at its <arg_value>.
    head_ends=("\n", *ARG_TAGS),
    param_head_ends=(VALUE_OPENER, KEY_OPENER, VALUE_CLOSER),
    newline_before_next_element=True,
    end_tag_optional=True,
    repeated_key_last_wins=True,
    head_form="{name}",
    param_form="{key}</arg_key>{ws}<arg_value>",
)


def value_text(value: Any) -> str:
    """A value as the template writes it: a string raw, anything else JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(message: Message) -> str:
    """The message as the GLM-4.5/4.6 template writes it (4.7 writes the same without the newlines).

    Without reasoning the block is left out, as with `enable_thinking=false` (whose prompt holds the
    empty `<think></think>` the template writes otherwise)."""
    out = f"\n{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    if message.content:
        out += "\n" + message.content
    for call in message.tool_calls:
        args = "".join(f"{KEY_OPENER}{key}{KEY_CLOSER}\n{VALUE_OPENER}{value_text(value)}{VALUE_CLOSER}\n"
                       for key, value in call.arguments.items())
        out += f"\n{CALL_OPENER}{call.name}\n{args}{CALL_CLOSER}"
    return out


GLM45 = FormatSpec(
    name="glm45",
    aliases=("glm46", "glm47", "ring",
             # Fourth wave (Decision 19): Poolside Laguna, iFlytek Spark 2.5, GLM-5.x.
             "poolside_v1", "laguna", "spark25", "glm5"),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    render=render,
    reserved=(*ARG_TAGS, CALL_CLOSER),  # a value holding one cannot be written back (XML has no escaping)
    untyped_values=True,
    # Single added tokens of the GLM-4.5 vocabulary. The argument tags are read as text by the body
    # whatever their tokenization (FORMATS.md); declaring them only keeps look-alikes from the scanner.
    special=(*THINK, CALL_OPENER, CALL_CLOSER, *ARG_TAGS),
    detect=((CALL_OPENER, KEY_OPENER, VALUE_OPENER),),
)

FORMATS = (GLM45,)
