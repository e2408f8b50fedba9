"""llama.cpp's generic JSON envelope (`generic`; Gemma 3's prompt-engineered calls: `gemma3`): after
optional `<think>` reasoning, the whole output is one JSON object whose only key says what it is:
`{"tool_calls": [CALL, …]}`, `{"tool_call": CALL}` or `{"response": TEXT}`, CALL `{"name", "arguments", "id"?}`.

Anything else is content, verbatim (FORMATS.md fourth-wave Decision 18): an anchor at the start of the
content (`json_call` with `one_key`) that must end the output. A model-written `id` is kept.

Hold-back bound: before the first key is known the text is held back, at most `_HELD` characters (the
lead: `{`, up to 64 whitespace characters, the longest key `"tool_calls"`, up to 64 more and `:`); once
the key is read the object is an envelope (envelopes are read whole: in progressive mode too, its calls
are sent when it is settled, as an answer must end the output), and text past it decides it.
"""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall, OneKeyEnvelope
from ..spec import AnchorSpec, FormatSpec, reasoning_block
from ..types import Message

THINK = ("<think>", "</think>")
KEYS = OneKeyEnvelope(calls="tool_calls", call="tool_call", answer="response")
_WS = "[ \\t\\r\\n]{0,64}"
LEAD = rf'\{{{_WS}"(?:tool_calls|tool_call|response)"{_WS}:'
_HELD = 1 + 64 + len('"tool_calls"') + 64 + 1

ENVELOPE = AnchorSpec(
    lead=LEAD,
    body=JsonCall("call_list", closers=(), tag="the JSON envelope", end_at_value=True, id_keys=("id",),
                  one_key=KEYS),
    at_start=True, must_end_output=True,
)


def render(message: Message) -> str:
    """The message as the generic grammar makes a model write it: the calls, or the answer."""
    calls = [{"name": c.name, "arguments": c.arguments, "id": c.id} for c in message.tool_calls]
    if len(calls) == 1:
        envelope: dict[str, object] = {KEYS.call: {"name": calls[0]["name"], "arguments": calls[0]["arguments"]}}
    elif calls:
        envelope = {KEYS.calls: calls}
    else:
        envelope = {KEYS.answer: message.content}
    written = json.dumps(envelope, ensure_ascii=False) if calls or message.content else ""
    return reasoning_block(message, THINK) + written


GENERIC = FormatSpec(
    name="generic",
    aliases=("gemma3",),
    reasoning=(THINK,),
    envelopes=(),
    render=render,
    anchors=(ENVELOPE,),
    # No template renders it: name it explicitly (Decision 22). No prompt ends inside reasoning (Decision 21).
    ignores_forced_open=True,
    # The output is the calls or the answer, never both.
    content_or_calls=True,
)

FORMATS = (GENERIC,)
