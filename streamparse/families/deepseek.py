"""DeepSeek R1 / V3 (fenced JSON calls) and V3.1 (`NAME<｜tool▁sep｜>{…}`): `<think>` reasoning.

Both formats wrap calls in `<｜tool▁calls▁begin｜>` … `<｜tool▁calls▁end｜>` (older spellings of
these outer markers included) around `<｜tool▁call▁begin｜>` … `<｜tool▁call▁end｜>` envelopes; they
differ only in the envelope body's grammar (`formats/deepseek_r1.peg`, `formats/deepseek_v3_1.peg`);
both bodies are the `header_json` kind (`bodies/header_json.py`). Real V3/R1-Distill templates omit
`<｜tool▁calls▁end｜>` after a single call and write it again after later calls; the engine's
wrapper rules (an unclosed wrapper ends with the output, a closer right after a bare call belongs
to that call) read both.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.header_json import HeaderJson
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec, reasoning_block
from ..types import Message

THINK = ("<think>", "</think>")
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
# Older spellings of the outer markers (early R1 releases and quantisations).
CALLS_OPENERS = (CALLS_BEGIN, "<｜tool_calls_begin｜>", "<｜tool calls begin｜>", "<｜tool▁calls｜>")
CALLS_CLOSERS = (CALLS_END, "<｜tool_calls_end｜>", "<｜tool calls end｜>")

# ----------------------------------------------------------------- writing a message back

def _arguments_text(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def render_r1(message: Message) -> str:
    """The message as DeepSeek R1 / V3 writes it (the V3-0324 template's layout)."""
    out = reasoning_block(message) + message.content
    if message.tool_calls:
        calls = "\n".join(
            f"{CALL_BEGIN}function{SEP}{call.name}\n```json\n{_arguments_text(call.arguments)}\n```{CALL_END}"
            for call in message.tool_calls
        )
        out += CALLS_BEGIN + calls + CALLS_END
    return out


def render_v3_1(message: Message) -> str:
    """The message as DeepSeek V3.1 writes it (with an explicit `<think>` where there is reasoning)."""
    out = f"<think>{message.reasoning}</think>" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(
            f"{CALL_BEGIN}{call.name}{SEP}{_arguments_text(call.arguments)}{CALL_END}" for call in message.tool_calls
        )
        out += CALLS_BEGIN + calls + CALLS_END
    return out


# ----------------------------------------------------------------- the formats

def _envelope(grammar: str, header_ends: tuple[str, ...], shape: str, layout: tuple[str, ...]) -> EnvelopeSpec:
    body = HeaderJson(grammar, header_ends, shape, closers=(CALL_END,), stops=(CALL_BEGIN, *CALLS_CLOSERS),
                      layout=layout)
    return EnvelopeSpec(openers=(CALL_BEGIN,), body=body)


_CALLS_BLOCK = WrapperSpec(openers=CALLS_OPENERS, closers=CALLS_CLOSERS)
# Added tokens of the DeepSeek V3 / R1 / V3.1 vocabulary (the older marker spellings are not).
_SPECIAL = (*THINK, CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END)

DEEPSEEK_R1 = FormatSpec(
    name="deepseek_r1",
    aliases=("deepseek_v3",),
    reasoning=(THINK,),
    envelopes=(_envelope("deepseek_r1", (SEP, "\n"), f"function{SEP}NAME and a newline",
                         (f"function{SEP}{{name}}\n```json\n{{arguments}}\n```",)),),
    wrappers=(_CALLS_BLOCK,),
    render=render_r1,
    special=_SPECIAL,
    detect=(("tool▁sep", "```json"),),
    detect_turns=("<｜Assistant｜>",),
)

DEEPSEEK_V3_1 = FormatSpec(
    name="deepseek_v3_1",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(_envelope("deepseek_v3_1", (SEP,), f"NAME{SEP}", (f"{{name}}{SEP}{{arguments}}",)),),
    wrappers=(_CALLS_BLOCK,),
    render=render_v3_1,
    special=_SPECIAL,
    detect=(("tool▁sep",),),
)

FORMATS = (DEEPSEEK_R1, DEEPSEEK_V3_1)
