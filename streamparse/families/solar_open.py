"""Upstage Solar Open 100B: a sequence of messages after the prompt's `<|begin|>assistant`:
`<|think|>R<|end|>` (reasoning), `<|content|>C<|end|>`, `<|tool_calls|>CALLS<|calls|>`, each later one
opened by `<|begin|>assistant` again.

A call is `<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{…}<|tool_call:end|>`: the
`header_json` kind with the model's id kept as written (`formats/solar_open.peg`). The calls message
is a wrapper (whitespace inside it framing, other text content); `<|begin|>assistant`, `<|content|>`
and `<|end|>` are framing wherever they stand in content; a later `<|think|>` message is reasoning
again (`reasoning_reopens`), joined in output order (FORMATS.md, Decision 14).
"""

from __future__ import annotations

import json

from ..bodies.header_json import HeaderJson
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message

BEGIN, THINK, CONTENT, END = "<|begin|>assistant", "<|think|>", "<|content|>", "<|end|>"
TOOL_CALLS, CALLS_END = "<|tool_calls|>", "<|calls|>"
CALL_BEGIN, CALL_NAME, CALL_ARGS, CALL_END = ("<|tool_call:begin|>", "<|tool_call:name|>", "<|tool_call:args|>",
                                              "<|tool_call:end|>")


def render(message: Message) -> str:
    """The turn as the Solar Open template writes it after the prompt's `<|begin|>assistant`, each
    message ended by its stop token (the template drops the content of a turn with calls; it is
    written here as its own message, before the calls, so that it reads back)."""
    parts = []
    if message.reasoning:
        parts.append(f"{THINK}{message.reasoning}{END}")
    if message.content:
        parts.append(f"{CONTENT}{message.content}{END}")
    if message.tool_calls:
        calls = "".join(f"{CALL_BEGIN}{call.id}{CALL_NAME}{call.name}{CALL_ARGS}"
                        f"{json.dumps(call.arguments, ensure_ascii=False)}{CALL_END}" for call in message.tool_calls)
        parts.append(f"{TOOL_CALLS}{calls}{CALLS_END}")
    return BEGIN.join(parts)


SOLAR_OPEN_BODY = HeaderJson("solar_open", (CALL_NAME, CALL_ARGS), f"ID{CALL_NAME}NAME{CALL_ARGS}",
                             closers=(CALL_END,), stops=(CALL_BEGIN, CALLS_END),
                             layout=(f"{{id}}{CALL_NAME}{{name}}{CALL_ARGS}{{arguments}}",))

SOLAR_OPEN = FormatSpec(
    name="solar_open",
    aliases=(),
    reasoning=((THINK, END),),
    envelopes=(EnvelopeSpec(openers=(CALL_BEGIN,), body=SOLAR_OPEN_BODY),),
    wrappers=(WrapperSpec(openers=(TOOL_CALLS,), closers=(CALLS_END,), empty_is_framing=True,
                          text_is_content=True),),
    render=render,
    # `<|begin|>` and every other <|…|> marker are written as units by the template; `assistant` is
    # ordinary text after `<|begin|>`.
    special=(THINK, CONTENT, END, TOOL_CALLS, CALLS_END, CALL_BEGIN, CALL_NAME, CALL_ARGS, CALL_END),
    framing=(BEGIN, CONTENT, END, CALLS_END),
    reasoning_reopens=True,
    ignores_forced_open=True,
    detect=((CALL_BEGIN,),),
    stops=("<|calls|>",),
)

FORMATS = (SOLAR_OPEN,)
