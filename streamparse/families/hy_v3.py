"""Tencent Hunyuan Hy3 ("HY V3"): `<tool_calls>` around `<tool_call>NAME<tool_sep>` calls with GLM's
`<arg_key>K</arg_key><arg_value>V</arg_value>` pairs.

The name ends at `<tool_sep>` (FORMATS.md, third wave, Decision 8); keys, values, typing by the
tool's schema and the last value of a repeated key are glm45's. The prompt ends `<think></think>`
(`no_think`) or `<think>` (`low`/`high`: forced open). Reading and streaming are
`bodies/tagged_params.py` (the `tagged_params` kind).
"""

from __future__ import annotations

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message
from .glm45 import ARG_TAGS, KEY_CLOSER, KEY_OPENER, THINK, VALUE_CLOSER, VALUE_OPENER, value_text

BLOCK_OPENER, BLOCK_CLOSER = "<tool_calls>", "</tool_calls>"
CALL_OPENER, CALL_CLOSER = "<tool_call>", "</tool_call>"
SEP = "<tool_sep>"

BODY = TaggedParams(
    grammar="hy_v3",
    param_open=KEY_OPENER,
    param_close=VALUE_CLOSER,
    framing_newline=False,
    call_tag=CALL_OPENER,
    call_close=CALL_CLOSER,
    wrapper_closers=(BLOCK_CLOSER,),
    head_ends=(SEP, *ARG_TAGS),  # the name ends at <tool_sep>; an argument tag before it rejects the call
    param_head_ends=(VALUE_OPENER, KEY_OPENER, VALUE_CLOSER),
    newline_before_next_element=True,
    end_tag_optional=True,
    repeated_key_last_wins=True,
    head_closer=SEP,
    head_form="{name}<tool_sep>",
    param_form="{key}</arg_key>{ws}<arg_value>",
)


def render(message: Message) -> str:
    """The message as the Hy3 template writes it after a `<think>` prompt (the opener written here too)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(
            f"{CALL_OPENER}{call.name}{SEP}\n"
            + "".join(f"{KEY_OPENER}{key}{KEY_CLOSER}\n{VALUE_OPENER}{value_text(value)}{VALUE_CLOSER}\n"
                      for key, value in call.arguments.items())
            + f"{CALL_CLOSER}\n"
            for call in message.tool_calls)
        out += f"{BLOCK_OPENER}\n{calls}{BLOCK_CLOSER}"
    return out


HY_V3 = FormatSpec(
    name="hy_v3",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    # Whitespace in the block is framing, other text content (third wave, Decision 2).
    wrappers=(WrapperSpec((BLOCK_OPENER,), (BLOCK_CLOSER,), empty_is_framing=True, text_is_content=True),),
    render=render,
    reserved=(*ARG_TAGS, SEP, CALL_CLOSER, BLOCK_CLOSER),  # a value holding one cannot be written back
    untyped_values=True,
    # Vocabulary tokens (SGLang resolves them by id); the plain spellings only (Decision 13).
    special=(*THINK, BLOCK_OPENER, BLOCK_CLOSER, CALL_OPENER, CALL_CLOSER, SEP, *ARG_TAGS),
    # More specific than glm45's rule, whose markers the Hy3 template also holds (Decision 24).
    detect=((SEP, KEY_OPENER, CALL_OPENER, VALUE_OPENER),),
)

FORMATS = (HY_V3,)
