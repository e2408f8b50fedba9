"""MiniMax M2: `<minimax:tool_call>` blocks of `<invoke name="N">` with `<parameter name="K">V</parameter>`.

Names are double-quoted, single-quoted or bare. A string value is its raw text, byte-exact, any other
value JSON: the tool's schema types it. The prompt ends inside `<think>` (forced open). Reading and
streaming are `bodies/tagged_params.py` (the `tagged_params` kind).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message, ToolCall

THINK = ("<think>", "</think>")
BLOCK_OPENER, BLOCK_CLOSER = "<minimax:tool_call>", "</minimax:tool_call>"
INVOKE_OPENER, INVOKE_CLOSER = "<invoke name=", "</invoke>"
PARAM_OPENER, PARAM_CLOSER = "<parameter name=", "</parameter>"

BODY = TaggedParams(
    grammar="minimax_m2",
    param_open=PARAM_OPENER,
    param_close=PARAM_CLOSER,
    framing_newline=False,
    call_tag="<invoke name=…>",
    call_close=INVOKE_CLOSER,
    wrapper_closers=(BLOCK_CLOSER,),
    newline_before_next_element=True,
    end_tag_optional=True,
    head_form='"{name}">',
    param_form='"{key}">',
)


def value_text(value: Any) -> str:
    """A value as the template writes it: a string raw, anything else JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def invokes(calls: Sequence[ToolCall]) -> str:
    """The calls as `<invoke>` elements, each and each of its parameters followed by a newline."""
    return "".join(f'{INVOKE_OPENER}"{call.name}">\n'
                   + "".join(f'{PARAM_OPENER}"{key}">{value_text(value)}{PARAM_CLOSER}\n'
                             for key, value in call.arguments.items())
                   + f"{INVOKE_CLOSER}\n" for call in calls)


def render(message: Message) -> str:
    """The message as MiniMax M2's chat template writes it (the generation prompt's `<think>⏎` included)."""
    out = f"{THINK[0]}\n{message.reasoning}\n{THINK[1]}\n\n" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        out += f"\n{BLOCK_OPENER}\n{invokes(message.tool_calls)}{BLOCK_CLOSER}"
    return out


MINIMAX_M2 = FormatSpec(
    name="minimax_m2",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(INVOKE_OPENER,), body=BODY),),
    # Text in the block outside an <invoke> is content (framing when whitespace).
    wrappers=(WrapperSpec((BLOCK_OPENER,), (BLOCK_CLOSER,), empty_is_framing=True, text_is_content=True),),
    render=render,
    reserved=(INVOKE_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # Added tokens of the MiniMax M2 tokenizer; `<invoke name=…>` and `<parameter name=…>` are text,
    # so in token-aware mode a call counts only inside a block a special token opened.
    special=(*THINK, BLOCK_OPENER, BLOCK_CLOSER),
    detect=((BLOCK_OPENER, INVOKE_OPENER),),
)

FORMATS = (MINIMAX_M2,)
