"""rednote dots.llm: `<dots_function_call>` blocks holding `<invoke name="N">` elements with
`<parameter name="K">V</parameter>` (minimax_m2's grammar: names double-, single- or un-quoted), or one
JSON call object `{"name", "arguments"}`; no template stored (vLLM `dots`, SGLang `DotsToolDetector`).

The block is the envelope; its body's first character chooses how it is read (`first_character`):
`<invoke name=` starts the invokes (`tagged_calls`: several per block, each typed by the tool's
schema; text other than whitespace between them makes a call `invalid_json`), `{` one JSON call
object (hermes's rules). Any other body, and an empty block, is `invalid_json`. Several blocks are
parallel calls; text around them is content. Reasoning `<think>…</think>` at the start (SGLang's
`dots` reasoning parser is Qwen3's; unconfirmed by a template). FORMATS.md, fourth-wave Decision 12.
"""

from __future__ import annotations

from ..bodies.first_character import FirstCharacter
from ..bodies.json_call import JsonCall
from ..bodies.tagged_calls import TaggedCalls
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from . import minimax_m2
from .minimax_m2 import INVOKE_CLOSER, INVOKE_OPENER, PARAM_CLOSER, PARAM_OPENER, THINK

OPENER, CLOSER = "<dots_function_call>", "</dots_function_call>"

BODY = FirstCharacter(
    choices=(
        (r"<invoke name=", TaggedCalls(minimax_m2.BODY, INVOKE_OPENER, (CLOSER,))),
        (r"\{", JsonCall("hermes", closers=(CLOSER,), tag=OPENER)),
    ),
    # A block whose closer is missing ends at the next block's opener.
    closers=(CLOSER,), stops=(OPENER,), tag=OPENER,
)


def render(message: Message) -> str:
    """The message as vLLM's dots fixtures write it: the calls as invokes in one block after the content."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        out += f"{OPENER}\n{minimax_m2.invokes(message.tool_calls)}{CLOSER}"
    return out


DOTS = FormatSpec(
    name="dots",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=BODY),),
    render=render,
    # The block ends at its first closer wherever it is; a value holding a tag cannot be written back.
    reserved=(CLOSER, INVOKE_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # No tokenizer was checked (no template stored): every delimiter is read as text.
    detect=((OPENER,),),
)

FORMATS = (DOTS,)
