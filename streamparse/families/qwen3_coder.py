"""Qwen3-Coder, Qwen3.5 and the XML family: `<tool_call>⏎<function=NAME>⏎<parameter=K>⏎V⏎</parameter>…`.

Values are untyped text, typed by the tool's schema; exactly one newline after `<parameter=K>` and
one before `</parameter>` are framing. The reading and the streaming live in `bodies/tagged_params.py`,
shared with DeepSeek V3.2's DSML.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec, reasoning_block
from ..types import Message

THINK = ("<think>", "</think>")
WRAPPER_OPENER, WRAPPER_CLOSER = "<tool_call>", "</tool_call>"
FUNCTION_OPENER, FUNCTION_CLOSER = "<function=", "</function>"
PARAM_OPENER, PARAM_CLOSER = "<parameter=", "</parameter>"

BODY = TaggedParams(
    grammar="qwen3_coder",
    param_open=PARAM_OPENER,
    param_close=PARAM_CLOSER,
    framing_newline=True,
    call_tag="<function=…>",
    call_close=FUNCTION_CLOSER,
    wrapper_closers=(WRAPPER_CLOSER,),
    python_values=True,  # booleans and null printed with Python's str(), dicts and lists too (2025-07-31)
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(message: Message) -> str:
    """The message as Qwen3-Coder's chat template writes it (non-strings as JSON)."""
    out = reasoning_block(message) + message.content
    for call in message.tool_calls:
        params = "".join(f"{PARAM_OPENER}{key}>\n{_text(value)}\n{PARAM_CLOSER}\n"
                         for key, value in call.arguments.items())
        out += ("\n" if out else "") + (
            f"{WRAPPER_OPENER}\n{FUNCTION_OPENER}{call.name}>\n{params}{FUNCTION_CLOSER}\n{WRAPPER_CLOSER}")
    return out


QWEN3_CODER = FormatSpec(
    name="qwen3_coder",
    aliases=("nemotron3", "step3p5",
             # Fourth wave (Decision 19): Qwen3.6, Qwen3.8, NVIDIA Nemotron 3.5 Lightning.
             "qwen3_6", "qwen3_8", "nemotron3_5"),
    reasoning=(THINK,),
    envelopes=(
        EnvelopeSpec(
            openers=(FUNCTION_OPENER,),
            # Ends at </function>; a missing one is forgiven when </tool_call> follows a parameter.
            body=BODY,
        ),
    ),
    wrappers=(WrapperSpec((WRAPPER_OPENER,), (WRAPPER_CLOSER,)),),
    render=render,
    reserved=(FUNCTION_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # Added tokens of the Qwen3 vocabulary; `<function=` and `<parameter=` are ordinary text, so in
    # token-aware mode a call counts only inside a `<tool_call>` that arrived as a special token.
    special=(*THINK, WRAPPER_OPENER, WRAPPER_CLOSER),
    detect=((FUNCTION_OPENER, PARAM_OPENER),),
)

FORMATS = (QWEN3_CODER,)
