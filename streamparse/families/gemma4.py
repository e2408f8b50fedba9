"""Google Gemma 4: `<|channel>thought⏎R<channel|>` reasoning, then
`<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>` calls, then the content.

The arguments are the `object_literal` kind (`formats/gemma4.peg`: FORMATS.md third-wave Decision
3). Framing (Decision 4): the channel name and one newline after `<|channel>`; an empty thought
block later, a stray `<channel|>` and the turn's end tokens in content.
"""

from __future__ import annotations

from ..bodies.object_literal import ObjectLiteral
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

CHANNEL, CHANNEL_END = "<|channel>", "<channel|>"
CALL, CALL_END = "<|tool_call>", "<tool_call|>"
QUOTE = '<|"|>'
TOOL_RESPONSE, TURN_END = "<|tool_response>", "<turn|>"
THOUGHT = f"{CHANNEL}thought"
FRAMING = (TOOL_RESPONSE, TURN_END, CHANNEL_END, f"{THOUGHT}\n{CHANNEL_END}", f"{THOUGHT}{CHANNEL_END}")

BODY = ObjectLiteral("gemma4", QUOTE, CALL_END, stops=(CALL,), call_tag=f"{CALL}call:…")


def render(message: Message) -> str:
    """The message as the Gemma 4 template writes a turn: the thought block, the calls, the content."""
    out = f"{THOUGHT}\n{message.reasoning}{CHANNEL_END}" if message.reasoning else ""
    out += "".join(f"{CALL}{BODY.write_call(call.name, call.arguments)}{CALL_END}" for call in message.tool_calls)
    return out + message.content


GEMMA4 = FormatSpec(
    name="gemma4",
    aliases=("gemma",),
    reasoning=((CHANNEL, CHANNEL_END),),
    # The channel name and one newline after it are framing; so is a second opener right after the
    # first, before the name or after it with its own name (fourth-wave Decision 24).
    reasoning_lead=r"(?:<\|channel>)?thought\n?(?:<\|channel>(?:thought\n?)?)?",
    envelopes=(EnvelopeSpec(openers=(CALL,), body=BODY),),
    render=render,
    reserved=(QUOTE, CHANNEL),
    special=(CHANNEL, CHANNEL_END, CALL, CALL_END, TOOL_RESPONSE, TURN_END),
    framing=FRAMING,
    detect=((f"{CALL}call:", QUOTE),),
    stops=("<|tool_response>",),
)

FORMATS = (GEMMA4,)
