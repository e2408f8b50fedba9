"""Kimi K2 Instruct and K2 Thinking: `<|tool_calls_section_begin|>` around
`<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}<|tool_call_end|>` calls.

The header of a call is the model's own id (`functions.NAME:IDX`), kept as written; the name is
read from it by the grammar (`formats/kimi_k2.peg`); the body is the `header_json` kind. K2
Thinking writes `<think>R</think>` before the content. The call tokens are special tokens the model
emits only to call, so one inside unclosed reasoning ends the reasoning (`calls_end_reasoning`).
Inside the section, whitespace is framing and other text is content; an empty section is framing.
"""

from __future__ import annotations

import json

from ..bodies.header_json import HeaderJson
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message, ToolCall

THINK = ("<think>", "</think>")
SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_end|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
_MARKERS = (SECTION_BEGIN, SECTION_END, CALL_BEGIN, CALL_END, ARGUMENT_BEGIN)


def _written_id(call: ToolCall, position: int) -> str:
    """The id as the template writes it: the message's id, when it reads back as itself and names
    the call (Kimi's ids do); else the `functions.NAME:IDX` the model is trained on."""
    if not any(marker in call.id for marker in _MARKERS):
        header = KIMI_K2_BODY.read_header(call.id + ARGUMENT_BEGIN)
        if header is not None and header == (call.name, call.id):
            return call.id
    return f"functions.{call.name}:{position}"


def render(message: Message) -> str:
    """The message as the Kimi K2 templates write it (K2 Thinking's `<think>` when there is reasoning)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(
            f"{CALL_BEGIN}{_written_id(call, i)}{ARGUMENT_BEGIN}{json.dumps(call.arguments, ensure_ascii=False)}"
            f"{CALL_END}"
            for i, call in enumerate(message.tool_calls)
        )
        out += SECTION_BEGIN + calls + SECTION_END
    return out


KIMI_K2_BODY = HeaderJson("kimi_k2", (ARGUMENT_BEGIN,), f"functions.NAME:IDX{ARGUMENT_BEGIN}",
                          closers=(CALL_END,), stops=(CALL_BEGIN, SECTION_END),
                          layout=(f"functions.{{name}}:{{index}}{ARGUMENT_BEGIN}{{arguments}}",))

KIMI_K2 = FormatSpec(
    name="kimi_k2",
    aliases=("kimi",),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_BEGIN,), body=KIMI_K2_BODY),),
    wrappers=(WrapperSpec(openers=(SECTION_BEGIN,), closers=(SECTION_END,), empty_is_framing=True,
                          text_is_content=True),),
    render=render,
    # Every <|…|> marker is one token of Kimi's vocabulary; the id is ordinary text, and so is
    # `<think>` as far as the checked vocabulary goes. The header end (<|tool_call_argument_begin|>)
    # is read by the body kind, as text, in either mode.
    special=_MARKERS,
    calls_end_reasoning=True,
    detect=((SECTION_BEGIN, ARGUMENT_BEGIN),),
)

FORMATS = (KIMI_K2,)
