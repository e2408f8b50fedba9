"""Xiaomi MiMo-V2-Flash: Qwen3-Coder's `<tool_call>⏎<function=N>⏎<parameter=K>V</parameter>…` without
the framing newline of values (seed_oss's values: byte-exact), typed by the tool's schema. No
template is stored: the wire is vLLM's `MimoV2FlashToolParser` tests and SGLang's `mimo_detector.py`.

A `<tool_call>` is one envelope whose head is its `<function=…>` tag (a `<parameter=…>` before it
rejects the call, Decision 12); a bare `<function=…>` is a call too. MiMo-VL and MiMo-7B are `hermes`.
"""

from __future__ import annotations

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .glm45 import value_text

THINK = ("<think>", "</think>")
CALL_OPENER, CALL_CLOSER = "<tool_call>", "</tool_call>"
FUNCTION_OPENER, FUNCTION_CLOSER = "<function=", "</function>"
PARAM_OPENER, PARAM_CLOSER = "<parameter=", "</parameter>"

_SHARED = {"param_open": PARAM_OPENER, "param_close": PARAM_CLOSER, "framing_newline": False,
           "newline_before_next_element": True, "end_tag_optional": True}
BODY = TaggedParams(grammar="mimo_v2", call_tag=CALL_OPENER, call_close=CALL_CLOSER, wrapper_closers=(),
                    head_ends=(">",), head_closer="<function=…>",
                    head_form="{ws}<function={name}>", tail_form="</function>{ws}", **_SHARED)  # type: ignore[arg-type]
BARE = TaggedParams(grammar="seed_oss", call_tag="<function=…>", call_close=FUNCTION_CLOSER,
                    wrapper_closers=(), **_SHARED)  # type: ignore[arg-type]


def render(message: Message) -> str:
    """The message as vLLM's MiMo-V2-Flash fixtures write it."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    for call in message.tool_calls:
        params = "".join(f"{PARAM_OPENER}{key}>{value_text(value)}{PARAM_CLOSER}\n"
                         for key, value in call.arguments.items())
        out += f"\n{CALL_OPENER}\n{FUNCTION_OPENER}{call.name}>\n{params}{FUNCTION_CLOSER}\n{CALL_CLOSER}"
    return out


MIMO_V2 = FormatSpec(
    name="mimo_v2",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY), EnvelopeSpec(openers=(FUNCTION_OPENER,), body=BARE)),
    render=render,
    reserved=(CALL_CLOSER, FUNCTION_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # As in Qwen3: `<think>` and the `<tool_call>` tags are single tokens; `<function=` is text.
    special=(*THINK, CALL_OPENER, CALL_CLOSER),
)

FORMATS = (MIMO_V2,)
