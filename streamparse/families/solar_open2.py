"""Upstage Solar Open 2: `<|tool_call:start|>NAME⏎` then `<|tool_arg:start|>K<|tool_arg:value|>V<|tool_arg:end|>`
pairs and `<|tool_call:end|>`; no wrapper, no ids; values raw text typed by the tool's schema, a
repeated key keeps its last value (third wave, Decision 14). Reasoning `<|think:start|>…<|think:end|>`.
No template is stored: the wire is vLLM's `solar_open2` parser tests.
"""

from __future__ import annotations

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .glm45 import value_text

THINK = ("<|think:start|>", "<|think:end|>")
CALL_OPENER, CALL_CLOSER = "<|tool_call:start|>", "<|tool_call:end|>"
ARG_OPENER, ARG_VALUE, ARG_CLOSER = "<|tool_arg:start|>", "<|tool_arg:value|>", "<|tool_arg:end|>"

BODY = TaggedParams(
    grammar="solar_open2",
    param_open=ARG_OPENER,
    param_close=ARG_CLOSER,
    framing_newline=False,
    call_tag=CALL_OPENER,
    call_close=CALL_CLOSER,
    wrapper_closers=(),
    head_ends=("\n", ARG_OPENER, ARG_VALUE, ARG_CLOSER),
    param_head_ends=(ARG_VALUE, ARG_OPENER, ARG_CLOSER),
    newline_before_next_element=True,
    end_tag_optional=True,
    repeated_key_last_wins=True,
    head_form="{name}\n",
    param_form="{key}<|tool_arg:value|>",
)


def render(message: Message) -> str:
    """The message as vLLM's Solar Open 2 fixtures write it."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    calls = ["".join([f"{CALL_OPENER}{call.name}\n",
                      *(f"{ARG_OPENER}{key}{ARG_VALUE}{value_text(value)}{ARG_CLOSER}\n"
                        for key, value in call.arguments.items()), CALL_CLOSER])
             for call in message.tool_calls]
    return out + message.content + "\n".join(calls)


SOLAR_OPEN2 = FormatSpec(
    name="solar_open2",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    render=render,
    reserved=(ARG_OPENER, ARG_VALUE, ARG_CLOSER, CALL_CLOSER),
    untyped_values=True,
    special=(*THINK, CALL_OPENER, CALL_CLOSER, ARG_OPENER, ARG_VALUE, ARG_CLOSER),
)

FORMATS = (SOLAR_OPEN2,)
