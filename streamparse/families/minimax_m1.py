"""MiniMax M1: `<think>` reasoning, then `<tool_calls>` holding `{"name", "arguments"}` objects
separated by whitespace (one per line in its prompt; pretty-printed ones are read too), each checked
on its own (third wave, Decision 17). No template is stored: the wire is vLLM's `minimax` parser
tests. No ids.
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_object

THINK = ("<think>", "</think>")
OPENER, CLOSER = "<tool_calls>", "</tool_calls>"


def render(message: Message) -> str:
    """The message as vLLM's MiniMax M1 fixtures write it: one call object per line."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}\n" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        out += f" {OPENER}\n" + "".join(call_object(call) + "\n" for call in message.tool_calls) + CLOSER
    return out


END_OF_SENTENCE = "<end_of_sentence>"

MINIMAX_M1 = FormatSpec(
    name="minimax_m1",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=JsonCall("hermes", closers=(CLOSER,), tag=OPENER,
                                                             separated=True)),),
    render=render,
    # No MiniMax M1 tokenizer was checked: the tags are read as text.
    # MiniMax's end of turn (`<end_of_sentence>`, the stop llama.cpp adds for it): cut off by an engine that
    # stops at it, framing at the end of the output where one leaves it in.
    trailing_framing=(END_OF_SENTENCE,),
    stops=(END_OF_SENTENCE,),
)

FORMATS = (MINIMAX_M1,)
