"""ByteDance Seed-OSS: `<seed:tool_call>⏎<function=N>⏎<parameter=K>V</parameter>⏎</function>⏎</seed:tool_call>`.

As Qwen3-Coder, but the value has no framing newline (byte-exact), and non-string values are written
with Python's `str()` (`True`, `None`, `{'k': None}`): the tool's schema types them (JSON first, then
Python literals). Reasoning is `<seed:think>…</seed:think>`, budget reflections inside it are
reasoning text. Reading and streaming are `bodies/tagged_params.py` (the `tagged_params` kind).
"""

from __future__ import annotations

from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message

THINK = ("<seed:think>", "</seed:think>")
BLOCK_OPENER, BLOCK_CLOSER = "<seed:tool_call>", "</seed:tool_call>"
FUNCTION_OPENER, FUNCTION_CLOSER = "<function=", "</function>"
PARAM_OPENER, PARAM_CLOSER = "<parameter=", "</parameter>"

BODY = TaggedParams(
    grammar="seed_oss",
    param_open=PARAM_OPENER,
    param_close=PARAM_CLOSER,
    framing_newline=False,
    call_tag="<function=…>",
    call_close=FUNCTION_CLOSER,
    wrapper_closers=(BLOCK_CLOSER,),
    newline_before_next_element=True,
    end_tag_optional=True,
    python_values=True,  # the template prints non-strings with Python's str()
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)  # the template's `| string`


def render(message: Message) -> str:
    """The message as Seed-OSS's chat template writes it after the generation prompt."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    if message.content:
        out += "\n" + message.content + ("\n" if message.tool_calls else "")
    for call in message.tool_calls:
        params = "".join(f"{PARAM_OPENER}{key}>{_text(value)}{PARAM_CLOSER}\n" for key, value in call.arguments.items())
        out += f"\n{BLOCK_OPENER}\n{FUNCTION_OPENER}{call.name}>\n{params}{FUNCTION_CLOSER}\n{BLOCK_CLOSER}"
    return out.removeprefix("\n")  # the generation prompt `<seed:bos>assistant⏎` holds the first newline


SEED_OSS = FormatSpec(
    name="seed_oss",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(FUNCTION_OPENER,), body=BODY),),
    # Several <function=…> in one block are several calls; text in the block outside them is content.
    wrappers=(WrapperSpec((BLOCK_OPENER,), (BLOCK_CLOSER,), empty_is_framing=True, text_is_content=True),),
    render=render,
    reserved=(FUNCTION_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # Added tokens of the Seed-OSS tokenizer; `<function=` and `<parameter=` are text, so in token-aware
    # mode a call counts only inside a block a special token opened.
    special=(*THINK, BLOCK_OPENER, BLOCK_CLOSER),
    # More markers than qwen3_coder's rule, whose markers the Seed template also holds.
    detect=((BLOCK_OPENER, FUNCTION_OPENER, PARAM_OPENER),),
)

FORMATS = (SEED_OSS,)
