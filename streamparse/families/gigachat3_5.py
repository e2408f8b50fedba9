"""ai-sage GigaChat 3.5 "GCML": DeepSeek V3.2's DSML spelled `｜GCML｜`, in a `tool_calls` block
(FORMATS.md, "gigachat3_5"):

    reasoning</think>⏎⏎content⏎⏎<｜GCML｜tool_calls>⏎<｜GCML｜invoke name="N">⏎
    <｜GCML｜parameter name="K" string="true">V</｜GCML｜parameter>⏎</｜GCML｜invoke>⏎</｜GCML｜tool_calls>

Typing is deepseek_v3_2's (`dsml_value`); no ids. The template joins the reasoning block, the content
and the calls block with `⏎⏎` (framing) and ends the turn with `<|message_sep|>` (the model's stop
token) or `</s>` (eos): both are framing at the end of the output (fourth wave, Decision 10). The
prompt ends `<think>` when the template's `reasoning` switch is on (forced open); a GCML block inside
unclosed reasoning stays reasoning. `</｜GCML｜invoke>` and `</｜GCML｜tool_calls>` may be missing at the
end of a complete call (Decision 1).
"""

from __future__ import annotations

from ..spec import FormatSpec
from ..types import Message
from .deepseek_dsml import THINK, Dialect
from .gigachat3 import MESSAGE_SEP, ROLE_SEP

GCML = Dialect("｜GCML｜", ("tool_calls",), "gigachat3_5", end_tag_optional=True, text_is_content=True)
EOS = "</s>"


def render(message: Message) -> str:
    """The turn as the GigaChat 3.5 template writes it, up to its end marker: `<think>R</think>`, the
    content and the calls block, the non-empty ones joined by `⏎⏎`."""
    blocks = [f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else "", message.content,
              GCML.block(message.tool_calls) if message.tool_calls else ""]
    return "\n\n".join(block for block in blocks if block)


GIGACHAT3_5 = FormatSpec(
    name="gigachat3_5",
    aliases=(),
    reasoning=(THINK,),
    envelopes=GCML.envelopes(),
    wrappers=GCML.wrappers(),
    render=render,
    reserved=GCML.reserved(),
    untyped_values=True,
    # The GCML tags are plain text (the template's comment); the role and turn markers and the think
    # tags are special tokens.
    special=(*THINK, MESSAGE_SEP),
    # Three markers: GigaChat 3.5's template also holds gigachat3's (`<|role_sep|>`, "function call").
    detect=((f"<{GCML.mark}tool_calls>", f"<{GCML.mark}invoke", ROLE_SEP),),
    trailing_framing=(MESSAGE_SEP, EOS),
    stops=(MESSAGE_SEP,),
)

FORMATS = (GIGACHAT3_5,)
