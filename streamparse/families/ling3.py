"""inclusionAI Ling 3.0 / Bailing V3: glm45's wire in `<role>ASSISTANT</role>` turns that end `<|role_end|>`.

The thinking prompt ends `<role>ASSISTANT</role>⏎<think>` (forced open); inside that reasoning a
`<tool_call>` ends it and is a call (llama.cpp treats `</think>` and `<tool_call>` alike there).
Reasoning the model opened itself keeps glm45's rule: a call in it stays reasoning (FORMATS.md,
fourth wave, Decision 17). An echoed `<role>ASSISTANT</role>` at the start and `<|role_end|>` at the
end are framing. Reading and streaming are glm45's (`bodies/tagged_params.py`).
"""

from __future__ import annotations

from ..spec import EnvelopeSpec, FormatSpec
from .glm45 import ARG_TAGS, BODY, CALL_CLOSER, CALL_OPENER, KEY_OPENER, THINK, VALUE_OPENER
from .glm45 import render as glm45_render

ROLE = "<role>ASSISTANT</role>"
END = "<|role_end|>"

LING3 = FormatSpec(
    name="ling3",
    aliases=("ling", "bailing3"),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    render=glm45_render,
    reserved=(*ARG_TAGS, CALL_CLOSER),  # a value holding one cannot be written back
    untyped_values=True,
    calls_end_forced_reasoning=True,
    leading_framing=(ROLE,),
    trailing_framing=(END,),
    special=(*THINK, CALL_OPENER, CALL_CLOSER, *ARG_TAGS),
    # glm45's markup in Ling's role turns (more specific than glm45's rule).
    detect=((ROLE, CALL_OPENER, KEY_OPENER, VALUE_OPENER),),
)

FORMATS = (LING3,)
