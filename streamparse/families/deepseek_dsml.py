"""DeepSeek V3.2 "DSML" (and V4's `tool_calls` block name):

    <｜DSML｜function_calls>⏎<｜DSML｜invoke name="N">⏎<｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>⏎…

`string="true"`: the value is the literal text (typed by the schema only when the schema allows no
string); `string="false"`: the value is JSON, falling back to the typing rules. Values are
byte-exact: no framing newline. Reading and streaming are `bodies/tagged_params.py`, shared with qwen3_coder.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..schema_typing import Typed, schema_types, typed, typed_json
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message

DSML = "｜DSML｜"
THINK = ("<think>", "</think>")
BLOCKS = ("function_calls", "tool_calls")  # V3.2, V4
BLOCK_CLOSERS = tuple(f"</{DSML}{block}>" for block in BLOCKS)
INVOKE_OPENER, INVOKE_CLOSER = f"<{DSML}invoke", f"</{DSML}invoke>"
PARAM_OPENER, PARAM_CLOSER = f"<{DSML}parameter", f"</{DSML}parameter>"


def dsml_value(text: str, flag: str | None, schema: Any) -> Typed:
    """FORMATS.md, "Typing by schema", DSML: `string="false"` is JSON; `string="true"` is a string
    whenever the schema allows one; without the attribute the text is typed as in qwen3_coder."""
    if flag == "false":
        return typed_json(text, schema)
    if flag == "true":
        types = schema_types(schema)
        if not types or "string" in types:
            return text, None
    return typed(text, schema)


def dsml_is_string(flag: str | None, schema: Any) -> bool:
    """Whether `dsml_value` gives the text itself whatever it is (then the value streams)."""
    if flag == "false":
        return False
    types = schema_types(schema)
    return (flag == "true" and "string" in types) or not types - {"string"}


BODY = TaggedParams(
    grammar="deepseek_v3_2",
    param_open=PARAM_OPENER,
    param_close=PARAM_CLOSER,
    framing_newline=False,
    call_tag=f"<{DSML}invoke …>",
    call_close=INVOKE_CLOSER,
    wrapper_closers=BLOCK_CLOSERS,
    value_of=dsml_value,
    is_string=dsml_is_string,
    head_form=' name="{name}">',
    param_form=' name="{key}" string="{type}">',
    type_words=(("string", "true"), ("json", "false")),
)


def _param(key: str, value: Any) -> str:
    if isinstance(value, str):
        return f'{PARAM_OPENER} name="{key}" string="true">{value}{PARAM_CLOSER}\n'
    return f'{PARAM_OPENER} name="{key}" string="false">{json.dumps(value, ensure_ascii=False)}{PARAM_CLOSER}\n'


def render(message: Message) -> str:
    """The message as DeepSeek V3.2's encoder writes it (thinking mode, reasoning tags included)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        invokes = "".join(
            f'{INVOKE_OPENER} name="{call.name}">\n'
            + "".join(_param(key, value) for key, value in call.arguments.items())
            + f"{INVOKE_CLOSER}\n"
            for call in message.tool_calls
        )
        out += f"\n\n<{DSML}{BLOCKS[0]}>\n{invokes}</{DSML}{BLOCKS[0]}>"
    return out


DEEPSEEK_V3_2 = FormatSpec(
    name="deepseek_v3_2",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(
        EnvelopeSpec(
            openers=(INVOKE_OPENER,),
            # Ends at </｜DSML｜invoke>; a missing one is forgiven when the block closes after a parameter.
            body=BODY,
        ),
    ),
    wrappers=tuple(WrapperSpec((f"<{DSML}{block}>",), (f"</{DSML}{block}>",)) for block in BLOCKS),
    render=render,
    reserved=(INVOKE_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    detect=((DSML,),),
)

FORMATS = (DEEPSEEK_V3_2,)
