"""Moonshot Kimi K3 "XTML": every element is `<|open|>TAG ATTRS<|sep|>` … `<|close|>TAG<|sep|>`.

    R<|close|>think<|sep|><|open|>response<|sep|>C<|close|>response<|sep|><|open|>tools<|sep|>
    <|open|>call tool="N" index="1"<|sep|><|open|>argument key="K" type="string"<|sep|>V<|close|>argument<|sep|>…
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

The think channel is the reasoning (the thinking prompt opens it: `thinking_forced_open`), the
response channel's tags and the message's end are framing, the tools channel is a wrapper of
`call` elements: the `tagged_params` kind with a typing attribute (`type`: "string" is the text,
any other word JSON; FORMATS.md third-wave Decision 5), attribute unescaping, and the `json`
element holding the whole arguments object. A call token ends unclosed reasoning.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.tagged_params import TaggedParams, untyped_is_string, untyped_value
from ..schema_typing import Typed, json_or_text, schema_types, typed
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message

OPEN, CLOSE, SEP, END = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"


def open_tag(tag: str) -> str:
    return f"{OPEN}{tag}{SEP}"


def close_tag(tag: str) -> str:
    return f"{CLOSE}{tag}{SEP}"


THINK = (open_tag("think"), close_tag("think"))
TOOLS_OPEN, TOOLS_CLOSE = open_tag("tools"), close_tag("tools")
CALL_OPEN, CALL_CLOSE = f"{OPEN}call", close_tag("call")
FRAMING = (open_tag("response"), close_tag("response"), close_tag("message"), END)


def k3_value(text: str, kind: str | None, schema: Any) -> Typed:
    """Decision 5: `type="string"` is the text (typed by the schema only when it allows no string);
    any other type is JSON, else the text; no type: typed by the schema."""
    if kind is None:
        return untyped_value(text, kind, schema)
    if kind == "string":
        types = schema_types(schema)
        return (text, None) if not types or "string" in types else typed(text, schema)
    return json_or_text(text)


def k3_is_string(kind: str | None, schema: Any) -> bool:
    """Whether `k3_value` gives the text itself whatever it is."""
    if kind is None:
        return untyped_is_string(kind, schema)
    types = schema_types(schema)
    return kind == "string" and (not types or "string" in types)


# The `type` attribute's word per JSON type, as the template's `_type` writes it (a grammar writes it).
K3_TYPE_WORDS = (("string", "string"), ("integer", "number"), ("number", "number"), ("boolean", "boolean"),
                 ("null", "null"), ("object", "object"), ("array", "array"))

BODY = TaggedParams(
    grammar="kimi_k3",
    param_open=f"{OPEN}argument",
    param_close=close_tag("argument"),
    framing_newline=False,
    call_tag=f"{CALL_OPEN} …{SEP}",
    call_close=CALL_CLOSE,
    wrapper_closers=(TOOLS_CLOSE,),
    value_of=k3_value,
    is_string=k3_is_string,
    head_ends=(SEP,),
    param_head_ends=(SEP,),
    end_tag_optional=True,
    repeated_key_last_wins=True,
    unescape_attributes=True,
    json_element=(f"{OPEN}json", close_tag("json")),
    head_form=' tool="{name}" index="{index}"' + SEP,
    param_form=' key="{key}" type="{type}"' + SEP,
    type_words=K3_TYPE_WORDS,
    json_form=' type="object"' + SEP,
)


def _attribute(value: object) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def _argument(key: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'{OPEN}argument key="{_attribute(key)}" type="{_type(value)}"{SEP}{text}{close_tag("argument")}'


def render(message: Message) -> str:
    """The message as the Kimi K3 template writes it (the think channel, which the thinking prompt
    opens, written whole when there is reasoning)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += f"{open_tag('response')}{message.content}{close_tag('response')}"
    if message.tool_calls:
        out += TOOLS_OPEN + "".join(
            f'{CALL_OPEN} tool="{_attribute(call.name)}" index="{i}"{SEP}'
            + "".join(_argument(key, value) for key, value in call.arguments.items()) + CALL_CLOSE
            for i, call in enumerate(message.tool_calls, 1)) + TOOLS_CLOSE
    return out + close_tag("message")


KIMI_K3 = FormatSpec(
    name="kimi_k3",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPEN,), body=BODY),),
    wrappers=(WrapperSpec(openers=(TOOLS_OPEN,), closers=(TOOLS_CLOSE,), empty_is_framing=True,
                          text_is_content=True),),
    render=render,
    reserved=(OPEN, CLOSE, SEP),
    special=(*THINK, TOOLS_OPEN, TOOLS_CLOSE, CALL_OPEN, CALL_CLOSE, *FRAMING),
    untyped_values=True,
    calls_end_reasoning=True,
    framing=FRAMING,
    framing_in_reasoning=True,
    detect=((OPEN, SEP),),
    stops=("<|end_of_msg|>",),
)

FORMATS = (KIMI_K3,)
