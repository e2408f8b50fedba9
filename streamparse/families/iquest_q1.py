"""IQuest Q1: GLM-4.7's call body in its own envelope, `<iquest_tool_call>NAME<arg_key>K</arg_key>
<arg_value>V</arg_value>…</iquest_tool_call>`, one block per call; the turn ends `<|iquest_end|>`.

The body is glm45's (name up to the first `<arg_key>` or newline, trimmed; pairs with optional
whitespace; string values raw, others typed by the tool's schema; the last value of a repeated key).
The thinking prompt ends `<think>` (forced open) and a call may come before `</think>`: the call token
ends the reasoning (FORMATS.md, fourth wave, Decision 13). Reading and streaming are
`bodies/tagged_params.py` (the `tagged_params` kind).
"""

from __future__ import annotations

from dataclasses import replace

from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .glm45 import ARG_TAGS, BODY, KEY_CLOSER, KEY_OPENER, THINK, VALUE_CLOSER, VALUE_OPENER, value_text

CALL_OPENER, CALL_CLOSER = "<iquest_tool_call>", "</iquest_tool_call>"
END = "<|iquest_end|>"

BODY = replace(BODY, call_tag=CALL_OPENER, call_close=CALL_CLOSER)


def render(message: Message) -> str:
    """The message as IQuest Q1 writes it (no newline anywhere), the reasoning's opener written too."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    for call in message.tool_calls:
        args = "".join(f"{KEY_OPENER}{key}{KEY_CLOSER}{VALUE_OPENER}{value_text(value)}{VALUE_CLOSER}"
                       for key, value in call.arguments.items())
        out += f"{CALL_OPENER}{call.name}{args}{CALL_CLOSER}"
    return out


IQUEST_Q1 = FormatSpec(
    name="iquest_q1",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    render=render,
    reserved=(*ARG_TAGS, CALL_CLOSER),  # a value holding one cannot be written back
    untyped_values=True,
    # The call token ends unclosed reasoning ("adaptive thinking": vLLM's IQuest reasoning parser).
    calls_end_reasoning=True,
    trailing_framing=(END,),  # the stop token, left in by a server
    special=(*THINK, CALL_OPENER, CALL_CLOSER, *ARG_TAGS, END),
    detect=((CALL_OPENER, KEY_OPENER),),
    stops=("<|iquest_end|>",),
)

FORMATS = (IQUEST_Q1,)
