"""Hermes 2 Pro / 3, Qwen 2.5, QwQ, Qwen3: `<think>` reasoning and `<tool_call>{json}</tool_call>`."""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec, reasoning_block
from ..types import Message, ToolCall

THINK = ("<think>", "</think>")
OPENER, CLOSER = "<tool_call>", "</tool_call>"


def render(message: Message) -> str:
    """The message as a Hermes/Qwen model writes it."""
    out = reasoning_block(message) + message.content
    for call in message.tool_calls:
        out += ("\n" if out else "") + f"{OPENER}\n{call_object(call)}\n{CLOSER}"
    return out


def call_object(call: ToolCall) -> str:
    """A call as the JSON object `{"name", "arguments"}` Hermes-style templates write."""
    return json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)


def call_list(message: Message) -> str:
    """The message's calls as one JSON list of `{"name", "arguments"}` objects (Apriel, Phi-4-mini, …)."""
    return "[" + ", ".join(map(call_object, message.tool_calls)) + "]"


HERMES = FormatSpec(
    name="hermes",
    aliases=("qwen2_5", "qwen3", "hermes2_pro", "granite4", "ernie45", "mimo_vl", "reka_edge",
             # Fourth wave (Decision 19): LG EXAONE 4.0, K-EXAONE, Arcee Trinity, MiroThinker v1.
             "exaone4", "exaone_moe", "trinity", "mirothinker"),
    reasoning=(THINK,),
    envelopes=(
        EnvelopeSpec(openers=(OPENER,), body=JsonCall("hermes", closers=(CLOSER,), tag=OPENER)),
    ),
    render=render,
    # Added tokens in Qwen 2.5 / QwQ / Qwen3 and Hermes 2 Pro / 3 vocabularies.
    special=(*THINK, OPENER, CLOSER),
    detect=((OPENER,),),
    detect_turns=("<|im_start|>",),
)

FORMATS = (HERMES,)
