"""Llama 3.1 / 3.2 / 3.3 and Llama 4 JSON calls (`llama3_json`), and pythonic call lists (`pythonic`).

Neither has a delimiter that opens a call: a Llama 3 call is a JSON object `{"name": …,
"parameters": {…}}` where the output starts (or right after `<|python_tag|>` / Llama 4's
`<|python_end|>`), and a pythonic call list is `[NAME(…), …]` that runs to the end of the output.
Both are declared as anchors (`spec.AnchorSpec`, read by `engine/anchors.py`); their bodies are the
`json_call`, `pythonic` and `code_call` kinds.
"""

from __future__ import annotations

import json
from typing import Any

from ..bodies.json_call import JsonCall
from ..bodies.pythonic import CodeCall, PythonicCalls
from ..spec import AnchorSpec, FormatSpec
from ..types import Message, ToolCall

PYTHON_TAG = "<|python_tag|>"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"
# Stop tokens (servers cut them; dropped if they are left in): Llama 3.x, then Llama 4.
TURN_ENDS = ("<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|eom|>")

_WS = r"[ \t\r\n]{0,64}"
# A call object's first key is "name" (or "type" then "name") with a string value: the held-back lead.
JSON_LEAD = (rf'\{{{_WS}(?:"type"{_WS}:{_WS}"function"{_WS},{_WS})?"name"{_WS}:{_WS}"')
NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
BUILTIN_LEAD = rf"{NAME}{_WS}\.{_WS}call{_WS}\("
PYTHONIC_LEAD = rf"\[{_WS}{NAME}(?:[ \t]{{0,8}}\.[ \t]{{0,8}}{NAME}){{0,8}}{_WS}\("
# What may follow a `[` that starts PYTHONIC_LEAD: spaces, then a name's first letter or the text's end.
PYTHONIC_NEXT = rf"{_WS}(?:[A-Za-z_]|\Z)"

JSON_CALLS = AnchorSpec(
    lead=JSON_LEAD,
    body=JsonCall("llama3_json", closers=(), tag="the call object", end_at_value=True,
                  call_keys=("type", "name", "parameters", "arguments")),
    at_start=True, after=(PYTHON_TAG, PYTHON_END), separator=";", may_be_content=True,
)
BUILTIN_CALL = AnchorSpec(
    lead=BUILTIN_LEAD, body=PythonicCalls("pythonic", tag="the built-in call", listed=False, name_suffix=".call"),
    after=(PYTHON_TAG,),
)
PYTHON_CODE = AnchorSpec(lead=r"\S", body=CodeCall("python", "code"), after=(PYTHON_TAG,))


def render_llama3_json(message: Message) -> str:
    """Llama 3.x writes a call object alone (`; ` between several); with content, the Llama 4
    template's `<|python_start|>content<|python_end|>` then the objects back to back."""
    calls = [json.dumps({"name": c.name, "parameters": c.arguments}, ensure_ascii=False) for c in message.tool_calls]
    if not calls:
        return message.content
    if message.content:
        return f"{PYTHON_START}{message.content}{PYTHON_END}" + "".join(calls)
    return "; ".join(calls)


LLAMA3_JSON = FormatSpec(
    name="llama3_json",
    aliases=("llama3", "llama4_json"),
    reasoning=(),
    envelopes=(),
    render=render_llama3_json,
    special=(PYTHON_TAG, PYTHON_START, PYTHON_END, *TURN_ENDS),
    detect=(("<|start_header_id|>", '"parameters"'), ("<|header_start|>", '"parameters"')),
    detect_turns=("<|start_header_id|>", "<|header_start|>"),
    framing=(PYTHON_START, *TURN_ENDS),
    anchors=(JSON_CALLS, BUILTIN_CALL, PYTHON_CODE),
    stops=("<|eom_id|>",),  # Llama 3.1: ends a turn that called a tool (the tokenizer's EOS is <|eot_id|>)
)


def _literal(value: Any) -> str:
    """A value as Python writes it (strings and numbers in their JSON spelling, which Python reads alike)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def python_call(call: ToolCall) -> str:
    """A call as Python writes it: `NAME(k=literal, …)`."""
    return f"{call.name}({', '.join(f'{k}={_literal(v)}' for k, v in call.arguments.items())})"


def render_pythonic(message: Message) -> str:
    """Content, then the calls as one Python list at the end of the output."""
    if not message.tool_calls:
        return message.content
    calls = ", ".join(map(python_call, message.tool_calls))
    return (message.content + "\n" if message.content else "") + f"[{calls}]"


PYTHONIC = FormatSpec(
    name="pythonic",
    aliases=(),
    reasoning=(),
    envelopes=(),
    render=render_pythonic,
    # Llama 4 may wrap the list in <|python_start|>…<|python_end|>: framing, dropped.
    special=(PYTHON_START, PYTHON_END),
    framing=(PYTHON_START, PYTHON_END),
    anchors=(AnchorSpec(lead=PYTHONIC_LEAD, body=PythonicCalls("pythonic"), trigger="[", trigger_next=PYTHONIC_NEXT,
                       must_end_output=True),),
)

FORMATS = (LLAMA3_JSON, PYTHONIC)
