"""Nemotron Nano v2 (NVIDIA): `<think>` reasoning, forced open by its prompts, and
`<TOOLCALL>[…]</TOOLCALL>` calls, written as plain text.

Nemotron 3 Nano writes Qwen3-Coder calls: it is `qwen3_coder`, alias `nemotron3`.
"""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec, reasoning_block
from ..types import Message

THINK = ("<think>", "</think>")
OPENER, CLOSER = "<TOOLCALL>", "</TOOLCALL>"


def render(message: Message) -> str:
    """The message as a Nemotron Nano v2 model writes it (with its `<think>` opener, which thinking
    prompts put in the prompt instead): content, then `<TOOLCALL>[{"name", "arguments"}, …]</TOOLCALL>`."""
    out = reasoning_block(message) + message.content
    if message.tool_calls:
        calls = ", ".join(json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
                          for call in message.tool_calls)
        out += ("\n" if message.content else "") + f"{OPENER}[{calls}]{CLOSER}"
    return out


NEMOTRON = FormatSpec(
    name="nemotron",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(
        # Ends at the first </TOOLCALL> outside a JSON string; a complete list at the end of the
        # output without it is accepted.
        EnvelopeSpec(openers=(OPENER,), body=JsonCall("nemotron", closers=(CLOSER,), tag=OPENER, call_list=True)),
    ),
    render=render,
    # No special tokens: `<TOOLCALL>` and `</TOOLCALL>` are plain text (FORMATS.md), and no
    # tokenizer of this model ships in a package to say otherwise of `<think>`.
    detect=((OPENER,),),
    # Its template writes a turn without reasoning as bare text after the `<think>⏎` prompt.
    forced_reasoning_needs_closer=True,
)

FORMATS = (NEMOTRON,)
