"""Command R7B (Cohere): a `<|START_THINKING|>` plan, `<|START_ACTION|>[…]<|END_ACTION|>` calls with
their `tool_call_id`, and the answer inside `<|START_RESPONSE|>…<|END_RESPONSE|>` (framing)."""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

THINK = ("<|START_THINKING|>", "<|END_THINKING|>")
OPENER, CLOSER = "<|START_ACTION|>", "<|END_ACTION|>"
RESPONSE = ("<|START_RESPONSE|>", "<|END_RESPONSE|>")


def render(message: Message) -> str:
    """The message as Command R7B writes it: the plan, the response, then the action list (laid out
    as its template lays it out; the template writes a turn's response or its action, and content
    goes before calls here as in every format). Before an action the template also writes an empty
    plan, `<|START_THINKING|><|END_THINKING|>`, which reads as no reasoning; it is left out here."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    if message.content:
        out += f"{RESPONSE[0]}{message.content}{RESPONSE[1]}"
    return out + action(message)


def action(message: Message) -> str:
    """The message's calls as the Cohere templates lay out an action list (none: empty)."""
    if not message.tool_calls:
        return ""
    items = ",\n".join(
        "    " + json.dumps({"tool_call_id": call.id or str(i), "tool_name": call.name,
                             "parameters": call.arguments}, ensure_ascii=False)
        for i, call in enumerate(message.tool_calls))
    return f"{OPENER}[\n{items}\n]{CLOSER}"


BODY = JsonCall("command_r7b", closers=(CLOSER,), tag=OPENER, call_list=True, name_keys=("tool_name",),
                id_keys=("tool_call_id",), numeric_ids=True)


COMMAND_R7B = FormatSpec(
    name="command_r7b",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(
        EnvelopeSpec(openers=(OPENER,), body=BODY),
    ),
    render=render,
    # All six markers are single tokens of the Command R7B vocabulary.
    special=(*THINK, OPENER, CLOSER, *RESPONSE),
    detect=((OPENER,),),
    framing=RESPONSE,
)

FORMATS = (COMMAND_R7B,)
