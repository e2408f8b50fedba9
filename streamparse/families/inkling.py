"""Thinking Machines Inkling: blocks `<|message_model|>` [header text] KIND BODY `<|end_message|>`, where the
content-kind marker KIND is the header's end and says what the body is (`MessageSpec.marker_headers`).

`<|content_thinking|>` is reasoning; `<|content_text|>`, `<|content_invoke_tool_text|>` and
`<|content_tool_error|>` are content; `<|content_invoke_tool_json|>` is a call whose body is one JSON object
`{"name": N, "args": {…}}` (the `json_call` kind, `arguments` read for `args`). The prompt ends with
`<|message_model|>`, so the output starts inside the first header (`opened_by_prompt`); text no kind marker
follows is content; header text before a marker is framing (peers put the tool's name there). A kind
marker or `<|message_model|>` inside a body ends it. No template exists: the wire is FORMATS.md's, from
vLLM's, SGLang's and llama.cpp's `inkling` parsers (section "inkling", fourth-wave Decisions 1, 16, 21).
"""

from __future__ import annotations

import json

from ..bodies.json_call import JsonCall
from ..spec import CALL, CONTENT, REASONING, FormatSpec, MessageLayout, MessageRoute, MessageSpec
from ..types import Message

MODEL, END, END_SAMPLING = "<|message_model|>", "<|end_message|>", "<|content_model_end_sampling|>"
THINKING, TEXT, INVOKE_JSON = "<|content_thinking|>", "<|content_text|>", "<|content_invoke_tool_json|>"
INVOKE_TEXT, TOOL_ERROR = "<|content_invoke_tool_text|>", "<|content_tool_error|>"
TERMINATORS = (END, END_SAMPLING)
# Each content kind and where its body goes.
KINDS = {THINKING: REASONING, TEXT: CONTENT, INVOKE_JSON: CALL, INVOKE_TEXT: CONTENT, TOOL_ERROR: CONTENT}

# A call block's body: one call object, ended by a terminator or by the next block's marker (left for
# the message readers, which read a terminator as the block's end).
CALL_BODY = JsonCall("inkling", closers=(), tag=INVOKE_JSON, stops=(*TERMINATORS, MODEL, *KINDS),
                     argument_keys=("args", "arguments"), extra_closing_braces=False)


def route(header: str, complete: bool) -> MessageRoute:
    """The kind marker that ends the header decides; text no marker ended is content."""
    for marker, region in KINDS.items():
        if complete and header.endswith(marker):
            return MessageRoute(region)
    return MessageRoute(CONTENT)


def call_body(name: str) -> JsonCall:
    """A call block's body kind (the call object names the tool)."""
    return CALL_BODY


def render(message: Message) -> str:
    """The blocks as the peers' fixtures write them after the prompt's `<|message_model|>`: reasoning,
    content, one call block per call (`{"name": …, "args": …}`, compact), each ended by `<|end_message|>`."""
    blocks = []
    if message.reasoning:
        blocks.append(f"{THINKING}{message.reasoning}{END}")
    if message.content or not (message.reasoning or message.tool_calls):
        blocks.append(f"{TEXT}{message.content}{END}")
    for call in message.tool_calls:
        body = json.dumps({"name": call.name, "args": call.arguments}, ensure_ascii=False, separators=(",", ":"))
        blocks.append(f"{INVOKE_JSON}{body}{END}")
    return MODEL.join(blocks)


INKLING = FormatSpec(
    name="inkling",
    aliases=(),
    # The reasoning block at its simplest (as the test oracles name it); `messages` reads every form.
    reasoning=((THINKING, END),),
    envelopes=(),
    render=render,
    messages=MessageSpec(
        openers=(MODEL,),
        header_end="",
        marker_headers=tuple(KINDS),
        terminators=TERMINATORS,
        route=route,
        call=call_body,
        opened_by_prompt=True,
        openers_end_bodies=True,
        forced_open_header=THINKING,
        layout=MessageLayout(
            reasoning=f"{MODEL}{THINKING}",
            content=f"{MODEL}{TEXT}",
            preamble=f"{MODEL}{TEXT}",
            call=f"{MODEL}{INVOKE_JSON}",
            prompt_wrote=MODEL,
            end=END,
            answer_stop=END,
            call_stop=END,
            many_calls=True,
        ),
    ),
    # Every marker is a single token (FORMATS.md); no chat template names them, so there is no detection.
    special=(MODEL, END, END_SAMPLING, *KINDS),
    # A kind marker inside an open block ends it: a call block ends unclosed reasoning (Decision 16).
    calls_end_reasoning=True,
)

FORMATS = (INKLING,)
