"""ServiceNow Apriel 1.5 / 1.6 Thinker: reasoning with no opening tag up to `[BEGIN FINAL RESPONSE]`,
the answer, then `<tool_calls>[{"name", "arguments"}, …]</tool_calls>`.

The output always starts inside the reasoning, whatever `thinking_forced_open` says, and an output
that never writes `[BEGIN FINAL RESPONSE]` is the answer, held back until the end (FORMATS.md, third
wave, Decision 15). `[END FINAL RESPONSE]` (1.5) is framing; `<tool_calls>` inside the reasoning
ends it; an `"id"` member is the call id. The 1.6 prompt's prefill `Here are my reasoning steps:⏎`
is prompt text: read as the reasoning's opener, dropped if the model repeats it.
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_list

PREFILL, BEGIN_FINAL, END_FINAL = "Here are my reasoning steps:\n", "[BEGIN FINAL RESPONSE]", "[END FINAL RESPONSE]"
OPENER, CLOSER = "<tool_calls>", "</tool_calls>"


def render(message: Message) -> str:
    """The message as the Apriel 1.6 template writes it after its prompt."""
    out = f"{message.reasoning}\n{BEGIN_FINAL}\n" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        out += f"\n{OPENER}{call_list(message)}{CLOSER}"
    return out


APRIEL = FormatSpec(
    name="apriel",
    aliases=(),
    reasoning=((PREFILL, BEGIN_FINAL),),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=JsonCall("call_list", closers=(CLOSER,), tag=OPENER,
                                                             call_list=True, id_keys=("id",))),),
    render=render,
    # Plain-text markers; no Apriel tokenizer was checked.
    detect=((BEGIN_FINAL, OPENER),),
    framing=(END_FINAL,),
    calls_end_reasoning=True,
    forced_reasoning_needs_closer=True,
    reasoning_always_open=True,
)

FORMATS = (APRIEL,)
