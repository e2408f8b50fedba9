"""Meituan LongCat-Flash Chat / Thinking: Hermes calls under other tag names.

`<longcat_think>` reasoning at the start (the thinking prompt opens it: `thinking_forced_open`), then
`<longcat_tool_call>⏎{"name", "arguments"}⏎</longcat_tool_call>` blocks, back to back for parallel
calls; the newlines inside the tags are optional. No ids.
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_object

THINK = ("<longcat_think>", "</longcat_think>")
OPENER, CLOSER = "<longcat_tool_call>", "</longcat_tool_call>"


def render(message: Message) -> str:
    """The message as the LongCat template writes it after ` ASSISTANT:` (the reasoning block as
    its thinking turns write it)."""
    out = f"\n{THINK[0]}\n{message.reasoning}\n{THINK[1]}\n" if message.reasoning else ""
    out += message.content
    return out + "".join(f"{OPENER}\n{call_object(call)}\n{CLOSER}" for call in message.tool_calls)


LONGCAT = FormatSpec(
    name="longcat",
    aliases=("longcat_flash",),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=JsonCall("hermes", closers=(CLOSER,), tag=OPENER)),),
    render=render,
    # No tokenizer of this wave was checked; the tags are read as text.
    detect=((OPENER,),),
)

FORMATS = (LONGCAT,)
