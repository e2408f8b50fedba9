"""Tencent Hunyuan-A13B-Instruct: `<think>` reasoning, an `<answer>` block right after it (framing),
and `<tool_calls>[{"name", "arguments"}, …]</tool_calls>` (the June 2025 template; the current one
renders text only). No ids.
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_list

THINK = ("<think>", "</think>")
ANSWER = ("<answer>", "</answer>")
OPENER, CLOSER = "<tool_calls>", "</tool_calls>"


def render(message: Message) -> str:
    """The message as Hunyuan-A13B writes it: `<think>⏎R⏎</think>⏎<answer>⏎C⏎</answer>`, or the
    content then the call list."""
    if message.reasoning:
        out = f"{THINK[0]}\n{message.reasoning}\n{THINK[1]}\n"
        out += f"{ANSWER[0]}\n{message.content}\n{ANSWER[1]}" if message.content else ""
    else:
        out = message.content
    if message.tool_calls:
        out += f"{OPENER}{call_list(message)}{CLOSER}"
    return out


HUNYUAN_A13B = FormatSpec(
    name="hunyuan_a13b",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=JsonCall("call_list", closers=(CLOSER,), tag=OPENER,
                                                             call_list=True)),),
    render=render,
    # The current template names no call marker: the format is named explicitly (Decision 24).
    framing_after_reasoning=ANSWER,
)

FORMATS = (HUNYUAN_A13B,)
