"""MiniMax M3: `NS<tool_call>` blocks of `NS<invoke name="N">` calls whose parameters are nested tags
(`NS<KEY>…NS</KEY>`, array items `NS<item>`), NS being `]<]minimax[>[`: the `tagged_tree` kind
(`formats/minimax_m3.peg`). No template is stored: the wire is SGLang's `minimax_m3.py` and vLLM's
tests' (FORMATS.md, minimax_m3; Decision 7). `<think>…</think>` at the start.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.tagged_tree import TaggedTree
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

NS = "]<]minimax[>["
THINK = ("<think>", "</think>")
# Whitespace between NS and `<` is framing: the block's tags as the model writes them, with or without it.
BLOCKS = tuple(f"{NS}{space}<tool_call>" for space in ("", "\n", " "))
BLOCK_ENDS = tuple(f"{NS}{space}</tool_call>" for space in ("", "\n", " "))


def _element(key: str, value: Any) -> str:
    """One parameter as nested tags: objects by key, arrays as `item`s, leaves as text (strings raw)."""
    if isinstance(value, dict):
        inner = "".join(_element(k, v) for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(_element("item", v) for v in value)
    else:
        inner = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def render(message: Message) -> str:
    """Reasoning, content, then one block of the calls (SGLang's layout: newlines after the block tags)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(f'{NS}<invoke name="{call.name}">' + "".join(_element(k, v) for k, v in call.arguments.items())
                        + f"{NS}</invoke>\n" for call in message.tool_calls)
        out += f"\n{BLOCKS[0]}\n{calls}{BLOCK_ENDS[0]}"
    return out


MINIMAX_M3 = FormatSpec(
    name="minimax_m3",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=BLOCKS, body=TaggedTree("minimax_m3", closers=BLOCK_ENDS, prefix=NS)),),
    render=render,
    reserved=(NS,),
    untyped_values=True,
    detect=((NS, "<invoke name="),),
)

FORMATS = (MINIMAX_M3,)
