"""MBZUAI IFM K2 Horizon / K2-V3: `<ifm|tool_calls>` around `<ifm|tool_call>` calls whose body is glm45's
layout with `ifm|` tags and an optional type element, or JSON; no template stored (llama.cpp
`k2-horizon`, SGLang `K2V3Detector`, vLLM `k2_horizon`).

    <ifm|think>⏎R</ifm|think>C<ifm|tool_calls><ifm|tool_call>get_weather⏎<ifm|arg_key>days</ifm|arg_key>
    <ifm|arg_type>integer</ifm|arg_type><ifm|arg_value>3</ifm|arg_value></ifm|tool_call></ifm|tool_calls>

A call body is chosen by its first character (`first_character`, fourth-wave Decision 11): `{` or `[` is
JSON (one call object or a list of them, each element checked on its own, values never retyped), anything
else glm45's layout (`tagged_params`): the name up to a newline or the first argument tag, then
`<ifm|arg_key>K</ifm|arg_key>`, an optional `<ifm|arg_type>T</ifm|arg_type>` read like Kimi K3's `type`
attribute, `<ifm|arg_value>V</ifm|arg_value>`; the last repeated key wins. Whichever `tool_call_format` the
request named, both are read. The model opens its reasoning itself with `<ifm|think>`, `<ifm|think_fast>` or
`<ifm|think_faster>`, closed by its own closer or by `</ifm|think>`; no prompt ends inside it
(`thinking_forced_open` is ignored).
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.first_character import FirstCharacter
from ..bodies.json_call import JsonCall
from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message
from .glm45 import value_text
from .kimi_k3 import k3_is_string, k3_value


def _tag(name: str) -> tuple[str, str]:
    return f"<ifm|{name}>", f"</ifm|{name}>"


THINK, THINK_FAST, THINK_FASTER = _tag("think"), _tag("think_fast"), _tag("think_faster")
# Each opener closes at its own closer or at `</ifm|think>` (the 3.7B closes every kind with it).
REASONING = (THINK, THINK_FAST, (THINK_FAST[0], THINK[1]), THINK_FASTER, (THINK_FASTER[0], THINK[1]))
BLOCK_OPENER, BLOCK_CLOSER = _tag("tool_calls")
CALL_OPENER, CALL_CLOSER = _tag("tool_call")
KEY_OPENER, KEY_CLOSER = _tag("arg_key")
TYPE_OPENER, TYPE_CLOSER = _tag("arg_type")
VALUE_OPENER, VALUE_CLOSER = _tag("arg_value")
ARG_TAGS = (KEY_OPENER, KEY_CLOSER, TYPE_OPENER, TYPE_CLOSER, VALUE_OPENER, VALUE_CLOSER)

XML_BODY = TaggedParams(
    grammar="k2_horizon",
    param_open=KEY_OPENER,
    param_close=VALUE_CLOSER,
    framing_newline=False,
    call_tag=CALL_OPENER,
    call_close=CALL_CLOSER,
    wrapper_closers=(BLOCK_CLOSER,),
    value_of=k3_value,  # Decision 11: the type element is read like Kimi K3's `type` attribute
    is_string=k3_is_string,
    # The name ends at a newline or the first argument tag; a key header (with its type) at <ifm|arg_value>.
    head_ends=("\n", *ARG_TAGS),
    param_head_ends=(VALUE_OPENER, KEY_OPENER, VALUE_CLOSER),
    newline_before_next_element=True,
    end_tag_optional=True,
    repeated_key_last_wins=True,
    head_form="{name}\n",
    param_form="{key}</ifm|arg_key><ifm|arg_value>",
)

BODY = FirstCharacter(
    choices=(
        (r"[\{\[]", JsonCall("call_list", closers=(CALL_CLOSER,), tag=CALL_OPENER, call_list=True)),
        (r"[^\{\[]", XML_BODY),
    ),
    # A call without its closer ends at the next call or at the block's end (special tokens).
    closers=(CALL_CLOSER,), stops=(CALL_OPENER, BLOCK_CLOSER), tag=CALL_OPENER,
)


def _argument(key: str, value: Any) -> str:
    return f"{KEY_OPENER}{key}{KEY_CLOSER}{VALUE_OPENER}{value_text(value)}{VALUE_CLOSER}"


def render(message: Message) -> str:
    """The message as peers' fixtures write it in the default `xml` layout: the reasoning block the model
    opens (`<ifm|think>⏎`), the content, then one block of calls joined by newlines."""
    out = f"{THINK[0]}\n{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "\n".join(f"{CALL_OPENER}{call.name}\n" + "".join(_argument(k, v) for k, v in call.arguments.items())
                          + CALL_CLOSER for call in message.tool_calls)
        out += f"{BLOCK_OPENER}{calls}{BLOCK_CLOSER}"
    return out


def json_call(name: str, arguments: dict[str, Any]) -> str:
    """A call in the `json` layout (`tool_call_format="json"`)."""
    return f"{CALL_OPENER}{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}{CALL_CLOSER}"


K2_HORIZON = FormatSpec(
    name="k2_horizon",
    aliases=(),
    reasoning=REASONING,
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY),),
    # Whitespace in the block is framing, other text content; an empty block is framing (Decisions 2, 11).
    wrappers=(WrapperSpec((BLOCK_OPENER,), (BLOCK_CLOSER,), empty_is_framing=True, text_is_content=True),),
    render=render,
    reserved=(*ARG_TAGS, CALL_CLOSER),  # a value holding one cannot be written back
    untyped_values=True,
    # Every `<ifm|…>` marker is a preserved token in llama.cpp's handler.
    special=(*THINK, *THINK_FAST, *THINK_FASTER, BLOCK_OPENER, BLOCK_CLOSER, CALL_OPENER, CALL_CLOSER, *ARG_TAGS),
    ignores_forced_open=True,
    detect=((CALL_OPENER,),),
)

FORMATS = (K2_HORIZON,)
