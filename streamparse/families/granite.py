"""Granite 3.x: `<think>` reasoning, a `<response>` answer block after it, `<|tool_call|>[…]` calls.

Granite 4 writes Hermes calls (`<tool_call>{…}</tool_call>`): it is `hermes`, alias `granite4`.
"""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

THINK = ("<think>", "</think>")
RESPONSE = ("<response>", "</response>")
OPENER = "<|tool_call|>"


def render(message: Message) -> str:
    """The message as a Granite 3 model writes it: `<think>R</think><response>C</response>` (with
    the thinking system prompt; plain content otherwise), then `<|tool_call|>[{"name", "arguments"}, …]`."""
    if message.reasoning:
        out = f"{THINK[0]}{message.reasoning}{THINK[1]}"
        out += f"{RESPONSE[0]}{message.content}{RESPONSE[1]}" if message.content else ""
    else:
        out = message.content
    if message.tool_calls:
        calls = [{"name": call.name, "arguments": call.arguments} for call in message.tool_calls]
        out += OPENER + json.dumps(calls, ensure_ascii=False)
    return out


GRANITE = FormatSpec(
    name="granite",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(
        # No closing token: the list runs to where its JSON value ends; text after it is content.
        EnvelopeSpec(openers=(OPENER,), body=JsonCall("granite", closers=(), tag=OPENER, end_at_value=True,
                                                      call_list=True)),
    ),
    render=render,
    # `<|tool_call|>` is one token; `<think>` and `<response>` are read as text.
    special=(OPENER,),
    detect=((OPENER,),),
    framing_after_reasoning=RESPONSE,
)

FORMATS = (GRANITE,)
