"""Google FunctionGemma 270M: the content, then `<start_function_call>call:NAME{key:<escape>text<escape>}
<end_function_call>` calls; no reasoning, no ids.

The arguments are the `object_literal` kind with `<escape>` as the quote token (`formats/function_gemma.peg`:
FORMATS.md fourth-wave Decision 15, Gemma 4's values). `<end_function_call>` is not optional at the end (fourth-
wave Decision 1). A trailing `<start_function_response>` (the stop token of a calling turn) or `<end_of_turn>` is
framing.
"""

from __future__ import annotations

from ..bodies.object_literal import ObjectLiteral
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message

CALL, CALL_END = "<start_function_call>", "<end_function_call>"
QUOTE = "<escape>"
RESPONSE, TURN_END = "<start_function_response>", "<end_of_turn>"
DECLARATION = "<start_function_declaration>"

BODY = ObjectLiteral("function_gemma", QUOTE, CALL_END, stops=(CALL,), call_tag=f"{CALL}call:…")


def render(message: Message) -> str:
    """The message as the FunctionGemma template writes a turn: the content (trimmed), then the calls."""
    return message.content.strip() + "".join(
        f"{CALL}{BODY.write_call(call.name, call.arguments)}{CALL_END}" for call in message.tool_calls)


FUNCTION_GEMMA = FormatSpec(
    name="function_gemma",
    aliases=(),
    reasoning=(),
    envelopes=(EnvelopeSpec(openers=(CALL,), body=BODY),),
    render=render,
    reserved=(QUOTE,),
    special=(CALL, CALL_END, QUOTE, RESPONSE, TURN_END),
    trailing_framing=(RESPONSE, TURN_END),
    detect=((CALL,), (DECLARATION,)),
    stops=("<start_function_response>",),
)

FORMATS = (FUNCTION_GEMMA,)
