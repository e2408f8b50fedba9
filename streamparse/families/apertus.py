"""Apertus (Swiss AI): `<|inner_prefix|>` reasoning and `<|tools_prefix|>[{"NAME": {…}}, …]<|tools_suffix|>`
calls, each call object's one key naming the tool. `<|tools_prefix|>` ends unclosed reasoning (the
template writes it right after the reasoning text)."""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

THINK = ("<|inner_prefix|>", "<|inner_suffix|>")
OPENER, CLOSER = "<|tools_prefix|>", "<|tools_suffix|>"
END = "<|assistant_end|>"  # the end of the assistant turn, when a server leaves it in


def render(message: Message) -> str:
    """The message as Apertus writes it:
    `<|inner_prefix|>R<|inner_suffix|>C<|tools_prefix|>[{"NAME": {…}}, …]<|tools_suffix|>`."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = ", ".join("{" + json.dumps(call.name, ensure_ascii=False) + ": "
                          + json.dumps(call.arguments, ensure_ascii=False) + "}" for call in message.tool_calls)
        out += f"{OPENER}[{calls}]{CLOSER}"
    return out


APERTUS = FormatSpec(
    name="apertus",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(
        # <|tools_suffix|> may be missing at the end of the output once the list is complete; an
        # <|assistant_end|> there ends the list too, and is framing.
        EnvelopeSpec(openers=(OPENER,), body=JsonCall("apertus", closers=(CLOSER,), stops=(END,), tag=OPENER,
                                                      call_list=True, named_by_key=True)),
    ),
    render=render,
    # Added tokens of the Apertus tokenizer.
    special=(*THINK, OPENER, CLOSER, END),
    calls_end_reasoning=True,
    detect=((OPENER,),),
    framing=(END,),
)

FORMATS = (APERTUS,)
